#!/usr/bin/env bash
#
# pg_tenure's demo, in one command.  As root on a fresh Debian 12 machine,
# from a checkout:
#
#   bash demo/run.sh
#
# It installs PostgreSQL (PG_MAJOR, default: the major this Debian ships; see
# test/pg_major.sh) and the build tools (TENURE_SKIP_APT=1 skips
# that), builds and installs pg_tenure (TENURE_SKIP_INSTALL=1 uses the
# installed one), builds the example clients in examples/, and starts a
# throwaway cluster in a temporary directory (unix socket only, run by the
# unprivileged user "tenure", created if missing).  Then:
#
#  1. Singleton job.  Three examples/singleton_job workers campaign for the
#     lease "nightly-job" (ttl 2 s); the leader records each run of its job
#     in job_runs.  The leader's process is killed with SIGKILL; its backend
#     sees the socket close and exits, which ends its session-bound tenure,
#     and a follower waiting inside tenure.acquire() takes over.  The demo
#     measures the failover.
#
#     Hold-off: 0 (TENURE_DEMO_HOLDOFF=auto for the automatic one).  The
#     job's only effect is a write to job_runs, which the lease fences: a
#     run by a stale leader cannot commit, so safety does not depend on
#     timing and the successor may lead at once.  With the automatic
#     hold-off the successor would lead only from the old leader's last
#     renewal + ttl (up to 2 s later), which is what protects a job whose
#     effects are not fenced writes.
#
#  2. Singleton writer.  examples/singleton_writer A writes rows to the
#     fenced table orders through a pool of connections and freezes before
#     a COMMIT.  Writer B refuses to start (exit 3, the message names A).
#     A's tenure ends (its control backend is terminated), B starts and
#     writes, A wakes up and its COMMIT fails with TN002 (exit 4).
#
# It prints a timeline (ms since the workers started), checks its
# invariants in the database (job runs never overlap; every run belongs to
# its holder's tenure; no row of A's epoch committed after B's epoch was
# issued; B's rows landed) and exits non-zero if any fails.  Everything it
# started is stopped and removed on exit (TENURE_DEMO_KEEP=1 keeps the
# directory).
set -euo pipefail

DEMO_USER=${DEMO_USER:-tenure}
HOLDOFF=${TENURE_DEMO_HOLDOFF:-0}
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/test/pg_major.sh"

if [ "$(id -u)" != 0 ]; then
	echo "demo/run.sh: run as root (it installs packages and the extension)" >&2
	exit 2
fi
case $HOLDOFF in
	0) holdoff_sql="'0'" ;;
	auto) holdoff_sql=NULL ;;
	*) echo "demo/run.sh: TENURE_DEMO_HOLDOFF must be 0 or auto" >&2; exit 2 ;;
esac

now_ms() { date +%s%3N; }
iso_now() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
as_user() { runuser -u "$DEMO_USER" -- "$@"; }
say() { printf '%s\n' "$*"; }

#
# Setup
#
if [ -z "${TENURE_SKIP_APT:-}" ]; then
	say "== installing packages"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libpq-dev build-essential >/dev/null
fi
id "$DEMO_USER" >/dev/null 2>&1 || useradd -m "$DEMO_USER"

work=$(mktemp -d /tmp/pg_tenure-demo.XXXXXX)
chmod 755 "$work"
# the checkout may sit where the demo user cannot read (under /root)
cd "$work"
pids=()
status=1

cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	if [ -f "$work/data/postmaster.pid" ]; then
		as_user "$PG_BIN/pg_ctl" -D "$work/data" -m immediate stop >/dev/null 2>&1 || true
	fi
	if [ "$status" != 0 ]; then
		for f in "$work"/logs/*.log "$work"/postgres.log; do
			[ -f "$f" ] || continue
			echo "==== $f (last 40 lines)"
			tail -n 40 "$f"
		done
	fi
	if [ -n "${TENURE_DEMO_KEEP:-}" ]; then
		echo "demo directory kept: $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	say "FAIL: $*" >&2
	exit 1
}

# wait_for SECONDS WHAT COMMAND...: run COMMAND every 50 ms until it succeeds
wait_for() {
	local deadline=$(( $(now_ms) + $1 * 1000 )) what=$2
	shift 2
	until "$@"; do
		[ "$(now_ms)" -lt "$deadline" ] || fail "timed out waiting for $what"
		sleep 0.05
	done
}

say "== building pg_tenure and the examples (in $work)"
mkdir "$work/src" "$work/logs"
cp -a "$src"/. "$work/src"/
rm -rf "$work"/src/tmp_check* "$work"/src/results "$work"/src/output_iso
chown -R "$DEMO_USER": "$work"
if [ -z "${TENURE_SKIP_INSTALL:-}" ]; then
	as_user make -s -C "$work/src" PG_CONFIG=$PG_CONFIG with_llvm=no clean >/dev/null
	as_user make -s -C "$work/src" PG_CONFIG=$PG_CONFIG with_llvm=no all
	make -s -C "$work/src" PG_CONFIG=$PG_CONFIG with_llvm=no install >/dev/null
fi
as_user make -s -C "$work/src/examples" PG_CONFIG=$PG_CONFIG clean all >/dev/null
job_bin=$work/src/examples/singleton_job
writer_bin=$work/src/examples/singleton_writer

say "== starting a throwaway PostgreSQL $PG_MAJOR cluster (unix socket in $work)"
as_user "$PG_BIN/initdb" -D "$work/data" -U "$DEMO_USER" -A trust -N >/dev/null
cat >>"$work/data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$work'
shared_preload_libraries = 'pg_tenure'
track_commit_timestamp = on    # the demo checks when rows committed
EOF
as_user "$PG_BIN/pg_ctl" -D "$work/data" -l "$work/postgres.log" -w start >/dev/null

conn="host=$work user=$DEMO_USER dbname=postgres"
q() { psql "$conn" -XAtq -v ON_ERROR_STOP=1 -c "$1"; }

psql "$conn" -Xq -v ON_ERROR_STOP=1 >/dev/null <<EOF
CREATE EXTENSION pg_tenure;
SELECT tenure.create_lease('nightly-job', ttl => '2 s', holdoff => $holdoff_sql);
CREATE TABLE job_runs (id bigserial PRIMARY KEY, holder text NOT NULL, epoch bigint NOT NULL,
                       started timestamptz NOT NULL, finished timestamptz NOT NULL);
SELECT tenure.fence_table('job_runs', 'nightly-job');
SELECT tenure.create_lease('orders-writer', ttl => '10 s', holdoff => '0');
CREATE TABLE orders (writer text NOT NULL, epoch bigint NOT NULL, seq bigint NOT NULL);
SELECT tenure.fence_table('orders', 'orders-writer');
CREATE TABLE demo_log (n serial, line text);
EOF

# The demo's own events go to the timeline too.
mark() {
	printf '%s demo %s\n' "$(iso_now)" "$*" >>"$work/logs/demo.log"
	say "   $*"
}
log_has() { grep -q -- "$2" "$work/logs/$1.log" 2>/dev/null; }
# running PID: whether the process exists and is not a zombie
running() {
	local state
	state=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) && [ "$state" != Z ]
}
# reap PID VAR: wait (bounded) for a child to exit and put its status in VAR
reap() {
	local _status=0
	wait_for 10 "process $1 to exit" eval "! running $1"
	wait "$1" || _status=$?
	printf -v "$2" '%s' "$_status"
}

#
# 1. Singleton job
#
say
if [ "$HOLDOFF" = 0 ]; then
	say "== 1. singleton job: three workers, lease \"nightly-job\" (ttl 2 s, hold-off 0, job_runs fenced)"
else
	say "== 1. singleton job: three workers, lease \"nightly-job\" (ttl 2 s, automatic hold-off, job_runs fenced)"
fi
declare -A job_pid
mark "starting workers job-1, job-2, job-3"
for n in 1 2 3; do
	"$job_bin" --holder "job-$n" --job-ms 100 "$conn" >"$work/logs/job-$n.log" 2>&1 &
	job_pid[job-$n]=$!
	pids+=($!)
done

# the live tenure of nightly-job: "holder epoch", or nothing
tenure_now() { q "SELECT holder || ' ' || epoch FROM tenure.leases WHERE lease = 'nightly-job' AND holder IS NOT NULL"; }
# leads_since EPOCH: someone leads at a newer epoch and has run the job twice
leads_since() {
	local t holder epoch
	t=$(tenure_now) && [ -n "$t" ] || return 1
	read -r holder epoch <<<"$t"
	[ "$epoch" -gt "$1" ] && log_has "$holder" "became leader epoch=$epoch" &&
		[ "$(q "SELECT count(*) FROM job_runs WHERE epoch = $epoch")" -ge 2 ] &&
		leader=$holder leader_epoch=$epoch
}

# Kill the leader twice; each time a waiting follower takes over.
leader_epoch=0
wait_for 20 "a leader" leads_since 0
say "   $leader leads at epoch $leader_epoch"
failovers=()
moves=()
for _ in 1 2; do
	old=$leader old_epoch=$leader_epoch
	mark "SIGKILL $old (pid ${job_pid[$old]}), the leader, after $(q "SELECT count(*) FROM job_runs WHERE epoch = $old_epoch") job runs"
	disown "${job_pid[$old]}"	# no "Killed" notice from bash
	kill_ms=$(now_ms)
	kill -KILL "${job_pid[$old]}"
	unset "job_pid[$old]"

	wait_for 20 "a successor to $old" leads_since "$old_epoch"
	became_ms=$(date -d "$(grep -m1 "became leader epoch=$leader_epoch" "$work/logs/$leader.log" | cut -d' ' -f1)" +%s%3N)
	history_ms=$(q "SELECT (extract(epoch FROM started) * 1000)::bigint FROM tenure.history
	                WHERE lease = 'nightly-job' AND epoch = $leader_epoch")
	failovers+=("$(( became_ms - kill_ms )) ms")
	moves+=("$old@$old_epoch->$leader@$leader_epoch")
	say "   $leader became leader at epoch $leader_epoch: $(( became_ms - kill_ms )) ms after the SIGKILL" \
		"($(( history_ms - kill_ms )) ms to its tenure's start in tenure.history)"
done

#
# 2. Singleton writer
#
say
say "== 2. singleton writer: lease \"orders-writer\" (ttl 10 s, hold-off 0) fences table orders"
"$writer_bin" --holder writer-a --pool 3 --interval-ms 100 \
	--pause-at-row 4 --pause-before-commit-ms 30000 "$conn" >"$work/logs/writer-a.log" 2>&1 &
a_pid=$!
pids+=("$a_pid")
mark "writer-a started (pid $a_pid): 3 rows, then it freezes before the COMMIT of row 4"
wait_for 10 "writer-a to pause" log_has writer-a "paused before COMMIT"
a_epoch=$(q "SELECT epoch FROM tenure.leases WHERE lease = 'orders-writer' AND holder = 'writer-a'")
[ -n "$a_epoch" ] || fail "writer-a does not hold orders-writer"

mark "writer-b tries to start while writer-a holds the lease"
b_refused=0 a_status='' b_status='' rc=''
"$writer_bin" --holder writer-b "$conn" >"$work/logs/writer-b-refused.log" 2>&1 || b_refused=$?
say "   writer-b exited with status $b_refused: $(cut -d' ' -f3- "$work/logs/writer-b-refused.log")"

[ "$(q "SELECT pg_terminate_backend(holder_pid) FROM tenure.leases
        WHERE lease = 'orders-writer' AND holder = 'writer-a'")" = t ] ||
	fail "could not terminate writer-a's control backend"
mark "pg_terminate_backend(writer-a's control connection): its session-bound tenure ends"
writer_lease_free() { [ -z "$(q "SELECT holder FROM tenure.leases WHERE lease = 'orders-writer'")" ]; }
wait_for 10 "writer-a's tenure to end" writer_lease_free

"$writer_bin" --holder writer-b --pool 3 --interval-ms 100 "$conn" >"$work/logs/writer-b.log" 2>&1 &
b_pid=$!
pids+=("$b_pid")
mark "writer-b started again (pid $b_pid)"
rows_of() { [ "$(grep -c "wrote row" "$work/logs/$1.log")" -ge "$2" ]; }
wait_for 10 "writer-b to write 3 rows" rows_of writer-b 3
b_epoch=$(q "SELECT epoch FROM tenure.leases WHERE lease = 'orders-writer' AND holder = 'writer-b'")

mark "writer-a wakes up (SIGUSR1) and commits row 4"
kill -USR1 "$a_pid"
reap "$a_pid" a_status
say "   writer-a exited with status $a_status: $(grep -m1 "fenced" "$work/logs/writer-a.log" | cut -d' ' -f3-)"
b_rows_then=$(grep -c "wrote row" "$work/logs/writer-b.log")
wait_for 10 "writer-b to keep writing" rows_of writer-b $(( b_rows_then + 2 ))
mark "SIGTERM writer-b"
kill -TERM "$b_pid"
reap "$b_pid" b_status

mark "SIGTERM the job worker left"
jobs_ok=yes
for h in "${!job_pid[@]}"; do
	kill -TERM "${job_pid[$h]}"
	reap "${job_pid[$h]}" rc
	[ "$rc" = 0 ] || jobs_ok=no
done

#
# Timeline: every log line, in time order, in ms since the workers started;
# runs of routine lines (job runs, rows written) are shortened.
#
say
say "== timeline (ms since the workers started)"
cat "$work"/logs/*.log | grep -E '^[0-9]{4}-' |
	psql "$conn" -XAtq -v ON_ERROR_STOP=1 -c "\\copy demo_log (line) FROM pstdin"
q "WITH l AS (
     SELECT n, split_part(line, ' ', 1)::timestamptz AS ts, split_part(line, ' ', 2) AS who,
            substr(line, strpos(substr(line, 26), ' ') + 26) AS msg
       FROM demo_log),
   k AS (
     SELECT *, (msg LIKE 'job run epoch=%' OR msg LIKE 'wrote row %') AS routine,
            min(ts) OVER () AS t0
       FROM l),
   g AS (
     SELECT *, row_number() OVER (PARTITION BY who ORDER BY ts, n)
               - row_number() OVER (PARTITION BY who, routine ORDER BY ts, n) AS island
       FROM k),
   r AS (
     SELECT *, row_number() OVER w AS i, count(*) OVER (PARTITION BY who, routine, island) AS cnt
       FROM g WINDOW w AS (PARTITION BY who, routine, island ORDER BY ts, n))
   SELECT format('%7s  %-8s  %s', (extract(epoch FROM ts - t0) * 1000)::bigint, who,
                 CASE WHEN routine AND cnt > 2 AND i = cnt
                      THEN msg || format('   [%s lines like this, first and last shown]', cnt) ELSE msg END)
     FROM r
    WHERE NOT routine OR i = 1 OR i = cnt
    ORDER BY ts, n"

say
say "== tenure.history"
psql "$conn" -Xq -c "SELECT lease, epoch, holder, session_bound AS sb,
                            to_char(started, 'HH24:MI:SS.MS') AS started,
                            to_char(ended, 'HH24:MI:SS.MS') AS ended, end_reason
                       FROM tenure.history ORDER BY lease, epoch" | sed '/^$/d; s/^/   /'

#
# Checks
#
say
say "== checks"
failures=0
check() {
	local what=$1
	shift
	if "$@"; then
		say "   ok    $what"
	else
		say "   FAIL  $what"
		failures=$(( failures + 1 ))
	fi
}
zero() { [ "$(q "$1")" = 0 ]; }
equal() { [ "$1" = "$2" ]; }

check "leadership moved at each SIGKILL, to a newer epoch (${moves[*]})" \
	test "${#moves[@]}" = 2
check "the killed leaders' tenures ended with their sessions" \
	zero "SELECT count(*) FROM tenure.history WHERE lease = 'nightly-job'
	       AND holder IN ($(printf "'%s'," "${moves[@]%%@*}" | sed 's/,$//'))
	       AND end_reason IS DISTINCT FROM 'session ended'"
check "no two job runs overlap in time ($(q "SELECT count(*) FROM job_runs") runs)" \
	zero "SELECT count(*) FROM job_runs a JOIN job_runs b
	        ON a.id < b.id AND tstzrange(a.started, a.finished) && tstzrange(b.started, b.finished)"
check "every job run lies within a tenure of its holder at its epoch (tenure.history)" \
	zero "SELECT count(*) FROM job_runs j
	       WHERE NOT EXISTS (SELECT FROM tenure.history h
	                          WHERE h.lease = 'nightly-job' AND h.epoch = j.epoch AND h.holder = j.holder
	                            AND j.started >= h.started AND (h.ended IS NULL OR j.finished <= h.ended))"
check "writer-b refused to start while writer-a held the lease (exit 3, message names writer-a)" \
	test "$b_refused" = 3 -a -n "$(grep -l 'is held by "writer-a"' "$work/logs/writer-b-refused.log")"
check "writer-a was fenced at COMMIT (exit 4)" \
	test "$a_status" = 4 -a -n "$(grep -l 'fenced at commit: ' "$work/logs/writer-a.log")"
# history.started is taken inside the acquiring transaction, before it
# commits, so this is slightly stricter than the guarantee
check "no row of writer-a's epoch committed after writer-b's epoch was issued" \
	zero "SELECT count(*) FROM orders o JOIN tenure.history h
	        ON h.lease = 'orders-writer' AND h.epoch > o.epoch
	     WHERE o.epoch = $a_epoch AND pg_xact_commit_timestamp(o.xmin) >= h.started"
check "writer-a's committed rows are exactly the 3 it reported" \
	equal "$(q "SELECT count(*) FROM orders WHERE epoch = $a_epoch")" 3
check "writer-b's rows landed ($(grep -c "wrote row" "$work/logs/writer-b.log") reported, all at epoch $b_epoch)" \
	equal "$(q "SELECT count(*) FILTER (WHERE epoch = $b_epoch) || '/' || count(*) FROM orders WHERE writer = 'writer-b'")" \
	"$(grep -c "wrote row" "$work/logs/writer-b.log")/$(grep -c "wrote row" "$work/logs/writer-b.log")"
check "writer-b and the surviving job workers exited cleanly on SIGTERM" \
	test "$b_status" = 0 -a "$jobs_ok" = yes

say
say "failover: ${failovers[0]} and ${failovers[1]} from the SIGKILL of the leader to its successor's \"became leader\""
if [ "$failures" != 0 ]; then
	say "FAILED: $failures check(s)"
	exit 1
fi
say "PASS"
status=0
