#!/usr/bin/env bash
#
# pg_tenure benchmarks: pg_tenure against the approaches users build today,
# on this machine, in one run, with pgbench (prepared statements).
#
#   bash bench/run.sh            # full run: writes bench/results/ (about 24 minutes on 2 cores)
#   bash bench/run.sh --smoke    # every section briefly, results in a temp dir
#
# Sections, in this order (SECTIONS picks some, e.g. SECTIONS="scale";
# bench/README.md describes each):
#   fsync        pg_test_fsync: the disk's flush cost (fsync.txt)
#   scenarios    every scenario in separate runs (raw.csv, latest.csv)
#   interleaved  each scenario and its reference in the same runs (interleaved.csv)
#   pairs        fenced INSERT, paired runs (fenced_pairs.csv)
#   failover     bench/failover.c (failover.csv)
#   scale        SCALE_MAX live leases (scale.csv, scale_raw.csv, scale_costs.csv)
#   ddl          bench/ddl.sh: what the event triggers cost DDL outside
#                every fenced tree (ddl.md, ddl.csv)
#   profile      bench/profile.sh: perf profile of acquire + release (profile.txt)
#   peer         bench/peer.py: pg_tenure beside etcd, Python clients (peer.csv, peer.md)
# and latest.md (every table) and latest.png (the chart) from what ran.
#
# Environment (full run defaults; --smoke shortens them): DURATION (seconds
# per run, 4), REPEATS (3), CLIENTS ("1 8"), FSYNC_SECONDS (pg_test_fsync -s,
# 2; 0 skips), MIXES and MIX_SECONDS (interleaved runs, 5 of 3 s per group
# and client count), PAIRS and PAIR_SECONDS (6 of 3 s), FAILOVER_TRIALS
# (200), FAILOVER_TTL_MS (500), DEFAULTS_TRIALS (20), DEFAULTS_TTL_MS
# (1500), TODAY_TRIALS (30), FLOOR_TRIALS (150), FAILOVER_HUGE (1), FIRST_TRIALS (40), SCALE_MAX (100000), SCALE_FEW (10),
# SCALE_PAIRS (5), SCALE_SECONDS (6), SCALE_TOLERANCE (0.05),
# SCALE_ACQUIRE_BATCH (1000), SCALE_LOOP (1000), SCALE_LOCK_HEADROOM
# (1000), KEEPER_IDLE_SECONDS (20), KEEPER_RENEW_RATE (100), PROFILE_SECONDS
# (10), PROFILE_CLIENTS ("1 8"), DDL_SECONDS (5), DDL_RUNS (3),
# DDL_CHILDREN (5000), SECTIONS, OUT (results directory, kept),
# TENURE_SKIP_APT, TENURE_SKIP_INSTALL.
# The peer section: PEER_WINDOWS (15 rounds) and PEER_SECONDS (1 per window).
#
# Runs as root: installs what it needs, builds and installs pg_tenure, and
# starts a throwaway cluster owned by the user "tenure".  PG_MAJOR picks
# the PostgreSQL major (test/pg_major.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"

bench_require_root
smoke=
[ "${1:-}" = --smoke ] && smoke=1
# full | smoke
dflt() { if [ -n "$smoke" ]; then echo "$2"; else echo "$1"; fi; }
DURATION=${DURATION:-$(dflt 4 2)}
REPEATS=${REPEATS:-$(dflt 3 1)}
CLIENTS=${CLIENTS:-"1 8"}
all_sections="fsync scenarios interleaved pairs failover scale ddl profile peer"
SECTIONS=${SECTIONS:-$all_sections}
want() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }
# OUT: the results stay there; a smoke run's go to a temp dir that is
# removed, a partial run's (SECTIONS) to a temp dir that is kept
keep=1
if [ -n "${OUT:-}" ]; then
	out=$OUT
elif [ -n "$smoke" ]; then
	out=$(mktemp -d /tmp/pg_tenure-bench-smoke.XXXXXX)
	keep=
elif [ "$SECTIONS" != "$all_sections" ]; then
	out=$(mktemp -d /tmp/pg_tenure-bench-results.XXXXXX)
else
	out=$here/results
fi
mkdir -p "$out"

t_start=$(date +%s)
t_phase=$t_start
timings=()
phase_done() {
	local now
	now=$(date +%s)
	timings+=("$1 $((now - t_phase)) s")
	t_phase=$now
}

peer_packages=(etcd-server python3-etcd3 python3-psycopg)
bench_prepare gnuplot-nox linux-perf "${peer_packages[@]}"
# the peer section runs last: find out now if what it needs is missing
if want peer; then
	bench_require_packages "${peer_packages[@]}"
fi
bench_cluster_start 54329
# the scale section raises it (and max_locks_per_transaction)
max_leases0=$BENCH_MAX_LEASES
epoch=$(psql_q -c "SELECT tenure.current_epoch('bench-writer')")
# report fragments, one per section, joined into latest.md at the end
parts=$dir/parts
mkdir -p "$parts"

phase_done setup

pgb() {
	# pgb CLIENTS SECONDS PGOPTIONS pgbench-arguments...
	local c=$1 t=$2 opts=$3
	shift 3
	as_user env PGHOST=$dir PGPORT=$port PGOPTIONS="$opts" $PG_BIN/pgbench -n -M prepared \
		-c "$c" -j "$((c < 2 ? 1 : 2))" -T "$t" -D epoch="$epoch" "$@" postgres
}
tps_of() { awk '/^tps = .*without initial connection time/ {print $3}'; }

# Scenarios: id | reference id | script | extra PGOPTIONS | description
scenarios=(
	"select1|select1|select1.sql||SELECT 1 (floor)"
	"leader_is|select1|leader_is.sql||is-leader: tenure.leader_is"
	"leader_row|select1|leader_row.sql||is-leader today: SELECT on a lease row with expiry"
	"renew|select1|renew.sql||renew: tenure.renew, a lease per client"
	"renew_row|select1|renew_row.sql||renew today: UPDATE of a lease row"
	"cycle|cycle_advisory|cycle.sql||acquire + release: tenure.acquire / tenure.release"
	"cycle_listened|cycle_advisory|cycle.sql||acquire + release while a session listens on channel tenure (each commit sends NOTIFY, under its cluster-wide lock)"
	"cycle_sql|cycle_advisory|cycle_sql.sql||the rows acquire + release write, by plain SQL: lease row UPDATE, history INSERT; COMMIT; history UPDATE (no checks)"
	"cycle_advisory|cycle_advisory|cycle_advisory.sql||acquire + release today: pg_try_advisory_lock / pg_advisory_unlock"
	"insert_plain|insert_plain|insert_plain.sql||INSERT into a plain table (reference)"
	"insert_trigger|insert_plain|insert_trigger.sql|-c app.epoch=$epoch|fenced INSERT today: PL/pgSQL trigger vs epoch row (not linearizable)"
	"insert_for_share|insert_plain|insert_for_share.sql||fenced INSERT today: epoch row FOR SHARE in the transaction"
	"insert_plain_local|insert_plain_local|insert_plain_local.sql||BEGIN; set_config(local); INSERT; COMMIT (reference)"
	"insert_fenced_local|insert_plain_local|insert_fenced_local.sql||fenced INSERT: pg_tenure, token presented in the transaction (set_config local)"
)
# scen ID FIELD: ref, script, opts or desc of a scenario
scen() {
	local s id ref script opts desc
	for s in "${scenarios[@]}"; do
		IFS='|' read -r id ref script opts desc <<<"$s"
		if [ "$id" = "$1" ]; then
			case $2 in
				ref) echo "$ref" ;;
				script) echo "$script" ;;
				opts) echo "$opts" ;;
				desc) echo "$desc" ;;
			esac
			return 0
		fi
	done
	return 1
}

echo "pg_tenure bench: sections: $SECTIONS; results in $out"

# ---------------------------------------------------------------- fsync
# The disk's flush cost, with the wal_sync_method the cluster uses: what
# every flushed commit (and every acquisition that flushes) pays at least.
fsync_s=${FSYNC_SECONDS:-2}
fsync_method=$(psql_q -c "SHOW wal_sync_method")
fsync_ops= fsync_us=
if want fsync && [ "$fsync_s" != 0 ]; then
	echo "flush cost: pg_test_fsync -s $fsync_s"
	ftxt=$dir/fsync.txt
	if [ -n "$smoke" ]; then
		# only the first test group, 1 s per test
		as_user $PG_BIN/pg_test_fsync -s 1 -f "$dir/fsync_test" >"$ftxt" 2>&1 &
		fpid=$!
		for _ in $(seq 200); do
			grep -q "^ *$fsync_method  .*usecs/op" "$ftxt" && break
			kill -0 "$fpid" 2>/dev/null || break
			sleep 0.1
		done
		kill "$fpid" 2>/dev/null || true
		wait "$fpid" 2>/dev/null || true
		fsync_s=1
	else
		as_user $PG_BIN/pg_test_fsync -s "$fsync_s" -f "$dir/fsync_test" >"$ftxt" 2>&1
	fi
	rm -f "$dir/fsync_test"
	# the first group: one 8 kB write per flush, as a commit's WAL flush
	read -r fsync_ops fsync_us < <(awk -v m="$fsync_method" '
		/using one 8kB write/ {g = 1; next}
		/^Compare/ {g = 0}
		g && $1 == m && $3 == "ops/sec" {print $2, $4; exit}' "$ftxt") || true
	if [ -z "$fsync_ops" ]; then
		echo "bench: pg_test_fsync reported no figure for $fsync_method" >&2
		cat "$ftxt" >&2
		exit 1
	fi
	cp "$ftxt" "$out/fsync.txt"
	echo "  $fsync_method: $fsync_ops ops/sec, $fsync_us usecs/op"
	phase_done fsync
fi

# ---------------------------------------------------------------- scenarios
raw=$out/raw.csv
# A session that has run LISTEN tenure, asleep: from then on every
# acquisition and release of the database sends its NOTIFY.
listener_start() {
	as_user env PGHOST=$dir PGPORT=$port PGAPPNAME=bench_listener $PG_BIN/psql -X -q -d postgres \
		-c "LISTEN tenure" -c "SELECT pg_sleep(86400)" >/dev/null 2>&1 &
	for _ in $(seq 300); do
		[ "$(psql_q -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'bench_listener' AND query LIKE 'SELECT pg_sleep%'")" = 1 ] && return 0
		sleep 0.1
	done
	echo "bench: the listener did not start" >&2
	return 1
}
listener_stop() {
	psql_q -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'bench_listener'" >/dev/null
	wait
}

run_one() {
	local id=$1 script=$2 opts=$3 clients=$4 rep=$5
	local lsn0 lsn1 log tps n wal
	if [ "$id" = cycle_listened ]; then listener_start || return 1; fi
	lsn0=$(psql_q -c "SELECT pg_current_wal_insert_lsn()")
	log=$(pgb "$clients" "$DURATION" "$opts" -f "$dir/scripts/$script" 2>&1) || { echo "$log" >&2; return 1; }
	if [ "$id" = cycle_listened ]; then listener_stop; fi
	lsn1=$(psql_q -c "SELECT pg_current_wal_insert_lsn()")
	tps=$(echo "$log" | tps_of)
	n=$(echo "$log" | awk '/number of transactions actually processed/ {print $NF}')
	n=${n%%/*}
	wal=$(psql_q -c "SELECT pg_wal_lsn_diff('$lsn1', '$lsn0')")
	if [ -z "$tps" ] || [ -z "$n" ] || [ "$n" = 0 ]; then
		echo "bench: scenario $id with $clients clients processed no transactions" >&2
		echo "$log" >&2
		return 1
	fi
	echo "$id,$clients,$rep,$tps,$n,$wal" >>"$raw"
	printf '  %-22s c=%s r=%s tps=%s\n' "$id" "$clients" "$rep" "$tps"
}

if want scenarios; then
	echo "scenarios: ${DURATION}s per run, $REPEATS repeats, clients: $CLIENTS"
	echo "scenario,clients,repeat,tps,transactions,wal_bytes" >"$raw"
	for rep in $(seq "$REPEATS"); do
		for c in $CLIENTS; do
			for s in "${scenarios[@]}"; do
				IFS='|' read -r id ref script opts desc <<<"$s"
				run_one "$id" "$script" "$opts" "$c" "$rep"
			done
		done
	done
	phase_done scenarios
fi

# ---------------------------------------------------------------- interleaved
# Each scenario and its reference in the same pgbench runs: every client
# picks one of the group's scripts at random for each transaction, so all
# see exactly the same machine.  Mean latencies come from pgbench's
# per-transaction log; at a fixed number of clients TPS is inversely
# proportional to latency, so reference mean latency / scenario mean
# latency is the TPS ratio.  Groups: name | ids, the reference first.
groups=(
	"is-leader|select1 leader_is leader_row"
	"renew|select1 renew renew_row"
	"acquire + release|cycle_advisory cycle cycle_sql"
	"fenced INSERT today|insert_plain insert_trigger insert_for_share"
	"fenced INSERT|insert_plain_local insert_fenced_local"
)
# pg_tenure | today's approach, in the same group
versus=("is-leader|leader_is|leader_row" "renew|renew|renew_row" "acquire + release|cycle|cycle_advisory")
mixes=${MIXES:-$(dflt 5 1)}
mix_s=${MIX_SECONDS:-$(dflt 3 1)}
ilv=$out/interleaved.csv
if want interleaved; then
	echo "interleaved: $mixes runs of ${mix_s}s per group and client count"
	echo "group,clients,run,scenario,transactions,mean_latency_us,reference,ratio" >"$ilv"
	for i in $(seq "$mixes"); do
		for c in $CLIENTS; do
			for g in "${groups[@]}"; do
				IFS='|' read -r gname ids <<<"$g"
				args=()
				opts=
				for id in $ids; do
					args+=(-f "$dir/scripts/$(scen "$id" script)@1")
					o=$(scen "$id" opts)
					[ -n "$o" ] && opts="$opts $o"
				done
				rm -f "$dir"/mix_log*
				log=$(pgb "$c" "$mix_s" "$opts" -l --log-prefix="$dir/mix_log" "${args[@]}" 2>&1) ||
					{ echo "$log" >&2; echo "bench: interleaved $gname with $c clients failed" >&2; exit 1; }
				# log lines: client transaction latency_us script epoch_s epoch_us
				cat "$dir"/mix_log* | awk -v ids="$ids" -v g="$gname" -v c="$c" -v i="$i" '
					BEGIN { n = split(ids, id, " ") }
					{ k[$4]++; t[$4] += $3 }
					END {
						for (s = 0; s < n; s++) if (k[s] == 0) exit 1
						ref = t[0] / k[0]
						for (s = 0; s < n; s++)
							printf "%s,%d,%d,%s,%d,%.2f,%s,%.4f\n", g, c, i, id[s + 1], k[s], t[s] / k[s], id[1], ref / (t[s] / k[s])
					}' >>"$ilv" || { echo "bench: interleaved $gname with $c clients logged no transactions of a script" >&2; exit 1; }
				printf '  %-20s c=%s r=%s %s\n' "$gname" "$c" "$i" \
					"$(awk -F, -v g="$gname" -v c="$c" -v i="$i" '$1==g && $2==c && $3==i && $4!=$7 {printf "%s %s  ", $4, $8}' "$ilv")"
			done
		done
	done
	rm -f "$dir"/mix_log*
	phase_done interleaved
fi
# ilv_stats ID CLIENTS: "median min max" of the scenario's interleaved ratios
ilv_stats() {
	[ -f "$ilv" ] || return 0
	local v
	v=$(awk -F, -v s="$1" -v c="$2" '$4==s && $2==c && $4!=$7 {print $8}' "$ilv" | sort -g)
	[ -n "$v" ] || return 0
	echo "$(echo "$v" | bench_median) $(echo "$v" | head -1) $(echo "$v" | tail -1)"
}
# vs_stats GROUP TENURE TODAY CLIENTS: the same for today / pg_tenure mean latency, run by run
vs_stats() {
	[ -f "$ilv" ] || return 0
	local v
	v=$(awk -F, -v g="$1" -v a="$2" -v b="$3" -v c="$4" '
		$1==g && $2==c && $4==a {x[$3]=$6} $1==g && $2==c && $4==b {y[$3]=$6}
		END {for (r in x) if (r in y) printf "%.4f\n", y[r] / x[r]}' "$ilv" | sort -g)
	[ -n "$v" ] || return 0
	echo "$(echo "$v" | bench_median) $(echo "$v" | head -1) $(echo "$v" | tail -1)"
}
if [ -f "$ilv" ] && want interleaved; then
	{
		echo "## Interleaved: each scenario and its reference in the same runs"
		echo
		echo "$mixes runs of $mix_s s per group and client count, the groups and client counts taking turns. In each run every client"
		echo "picks one of the group's scripts at random for every transaction (\`pgbench -f a.sql@1 -f b.sql@1 ... -l\`), so all"
		echo "see exactly the same machine state; mean latencies come from pgbench's per-transaction log, and at a fixed number"
		echo "of clients TPS is inversely proportional to latency, so the TPS ratio of a run is reference mean latency / scenario"
		echo "mean latency (\`interleaved.csv\`, every run). Median of the runs (min..max): a difference outside the range is not noise."
		echo
		echo "| group | scenario | against | clients | interleaved ratio | separate runs ratio |"
		echo "| --- | --- | --- | ---: | ---: | ---: |"
		for g in "${groups[@]}"; do
			IFS='|' read -r gname ids <<<"$g"
			ref=${ids%% *}
			for id in ${ids#* }; do
				for c in $CLIENTS; do
					read -r m lo hi <<<"$(ilv_stats "$id" "$c")"
					sep=
					[ -f "$raw" ] && sep=$(awk -F, -v s="$id" -v c="$c" '$1==s && $2==c {print $4}' "$raw" | bench_median)
					sepr=
					if [ -n "$sep" ]; then
						sref=$(awk -F, -v s="$ref" -v c="$c" '$1==s && $2==c {print $4}' "$raw" | bench_median)
						sepr=$(awk -v a="$sep" -v b="$sref" 'BEGIN {printf "%.3f", a/b}')
					fi
					printf '| %s | %s | %s | %s | **%.3f** (%.3f..%.3f) | %s |\n' "$gname" "$id" "$ref" "$c" "$m" "$lo" "$hi" "$sepr"
				done
			done
		done
		echo
		echo "pg_tenure against today's approach in the same runs (today's mean latency / pg_tenure's, run by run):"
		echo
		echo "| operation | pg_tenure | today | clients | ratio |"
		echo "| --- | --- | --- | ---: | ---: |"
		for v in "${versus[@]}"; do
			IFS='|' read -r gname a b <<<"$v"
			for c in $CLIENTS; do
				read -r m lo hi <<<"$(vs_stats "$gname" "$a" "$b" "$c")"
				printf '| %s | %s | %s | %s | **%.3f** (%.3f..%.3f) |\n' "$gname" "$a" "$b" "$c" "$m" "$lo" "$hi"
			done
		done
		echo
	} >"$parts/30_interleaved.md"
fi

# ---------------------------------------------------------------- pairs
# Fenced INSERT, paired: alternate short plain and fenced runs and take the
# median of the per-pair ratios.
if want pairs; then
	pairs=${PAIRS:-$(dflt 6 1)}
	pair_s=${PAIR_SECONDS:-$(dflt 3 1)}
	echo "fenced INSERT, $pairs paired runs of ${pair_s}s, 8 clients"
	echo "pair,plain_tps,fenced_tps,ratio" >"$out/fenced_pairs.csv"
	for i in $(seq "$pairs"); do
		pt() { pgb 8 "$pair_s" "" -f "$dir/scripts/$1" 2>&1 | tps_of; }
		# alternate which runs first, so that drift favours neither
		if [ $((i % 2)) = 1 ]; then
			a=$(pt insert_plain_local.sql)
			b=$(pt insert_fenced_local.sql)
		else
			b=$(pt insert_fenced_local.sql)
			a=$(pt insert_plain_local.sql)
		fi
		[ -n "$a" ] && [ -n "$b" ] || { echo "bench: paired fenced INSERT failed" >&2; exit 1; }
		echo "$i,$a,$b,$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.4f", b/a}')" >>"$out/fenced_pairs.csv"
	done
	pair_median=$(tail -n +2 "$out/fenced_pairs.csv" | cut -d, -f4 | bench_median)
	pair_min=$(tail -n +2 "$out/fenced_pairs.csv" | cut -d, -f4 | sort -g | head -1)
	pair_max=$(tail -n +2 "$out/fenced_pairs.csv" | cut -d, -f4 | sort -g | tail -1)
	echo "  fenced/plain: median $pair_median ($pair_min..$pair_max)"
	{
		echo "## Fenced INSERT, paired runs"
		echo
		echo "$pairs pairs of ${pair_s}-second runs, plain and fenced in alternating order, 8 clients (\`fenced_pairs.csv\`):"
		echo "fenced/plain TPS ratio median **$pair_median** (min $pair_min, max $pair_max)."
		echo
	} >"$parts/40_pairs.md"
	phase_done pairs
fi

# ---------------------------------------------------------------- failover
# The holder's backend exits while a candidate waits.
if want failover; then
	bench_settle
	cc -O2 -Wall -Wextra -Werror -I"$($PG_CONFIG --includedir)" -o "$dir/failover" \
		"$here/failover.c" -L"$($PG_CONFIG --libdir)" -lpq
	chmod 755 "$dir/failover"
	failover_trials=${FAILOVER_TRIALS:-$(dflt 200 10)}
	failover_ttl=${FAILOVER_TTL_MS:-500}
	today_trials=${TODAY_TRIALS:-$(dflt 30 3)}
	# the defaults (automatic hold-off, renewed every ttl/3) at 1/10 of the
	# default ttl of 15 s: every trial takes up to a ttl
	defaults_trials=${DEFAULTS_TRIALS:-$(dflt 20 3)}
	defaults_ttl=${DEFAULTS_TTL_MS:-1500}
	# rounds of PostgreSQL's floor beside holdoff0 (three trials each), and
	# new connections' first calls
	floor_trials=${FLOOR_TRIALS:-$(dflt 150 10)}
	first_trials=${FIRST_TRIALS:-$(dflt 40 5)}
	echo "failover: $failover_trials trials each"
	# fo LINES MODE ARGS...: the summary lines of a failover run
	fo() {
		local n=$1
		shift
		as_user env PGHOST=$dir PGPORT=$port PGDATABASE=postgres "$dir/failover" "$@" | tail -"$n"
	}
	f_h0=$(fo 1 holdoff0 "$failover_trials")
	f_auto=$(fo 1 automatic "$failover_trials" "$failover_ttl")
	f_defaults=$(fo 1 defaults "$defaults_trials" "$defaults_ttl")
	f_today=$(fo 1 today "$today_trials")
	f_first=$(fo 7 first "$first_trials")
	# the floor in the shared memory's pages of the other sections (4 kB
	# unless the machine has reserved huge pages), then in 2 MB pages: the
	# candidate's writes touch pages of shared buffers that every process
	# translates anew after a switch (doc/performance.md); each pass right
	# after a restart
	fo_pages="4 kB"
	[ "$(cat /proc/sys/vm/nr_hugepages)" = 0 ] ||
		fo_pages="4 kB or 2 MB (\`huge_pages = try\`, $(cat /proc/sys/vm/nr_hugepages) huge pages reserved on the machine)"
	bench_cluster_restart
	f_floor=$(fo 3 floor "$floor_trials")
	f_floor_huge=
	floor_huge_note="not run (FAILOVER_HUGE=0)"
	if [ "${FAILOVER_HUGE:-1}" = 1 ]; then
		if bench_huge_on; then
			floor_huge_note=
			f_floor_huge=$(fo 3 floor "$floor_trials" | sed 's/^floor /floor_huge /')
			bench_huge_off
		else
			floor_huge_note=$bench_huge_note
		fi
	fi
	echo "  $f_h0"; echo "  $f_auto"; echo "  $f_defaults"; echo "  $f_today"
	echo "$f_floor" | sed 's/^/  /'
	[ -z "$f_floor_huge" ] || echo "$f_floor_huge" | sed 's/^/  /'
	[ -z "$floor_huge_note" ] || echo "  floor in 2 MB pages: $floor_huge_note"
	echo "$f_first" | sed 's/^/  /'
	field() { echo "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1==k {print $2}'; }
	# floor KIND / first STEP: that line of the floor or first run
	floor_line() { echo "$f_floor"$'\n'"$f_floor_huge" | awk -v k="$1" -v p="${2:-floor}" '$1==p && $2==k'; }
	first_line() { echo "$f_first" | awk -v k="$1" '$2==k'; }
	{
		echo "mode,trials,p50_ms,p99_ms,max_ms"
		for r in "$f_h0" "$f_auto" "$f_defaults" "$f_today"; do
			echo "$(echo "$r" | cut -d' ' -f1),$(field "$r" n),$(field "$r" p50),$(field "$r" p99),$(field "$r" max)"
		done
		# floor_advisory, floor_tenure_off, ...; first_connect, first_first_acquire, ...
		echo "$f_floor"$'\n'"$f_floor_huge"$'\n'"$f_first" | grep . | while read -r r; do
			echo "$(echo "$r" | cut -d' ' -f1-2 | tr ' ' _),$(field "$r" n),$(field "$r" p50),$(field "$r" p99),$(field "$r" max)"
		done
	} >"$out/failover.csv"
	{
		echo "## Failover"
		echo
		echo "The holder's backend is terminated while a candidate waits in \`tenure.acquire(wait => '30 s')\`"
		echo "(\`bench/failover.c\`, milliseconds, client-side monotonic clock)."
		echo
		echo "| design | trials | p50 | p99 | max | measured from |"
		echo "| --- | ---: | ---: | ---: | ---: | --- |"
		echo "| pg_tenure, holdoff 0 | $(field "$f_h0" n) | $(field "$f_h0" p50) | $(field "$f_h0" p99) | $(field "$f_h0" max) | holder terminated -> candidate leads |"
		echo "| pg_tenure, automatic hold-off, ttl $failover_ttl ms | $(field "$f_auto" n) | $(field "$f_auto" p50) | $(field "$f_auto" p99) | $(field "$f_auto" max) | predecessor's last renewal + ttl -> candidate leads |"
		echo "| pg_tenure, the defaults (automatic hold-off), ttl $defaults_ttl ms, renewed every ttl/3, holder killed at a random point | $(field "$f_defaults" n) | $(field "$f_defaults" p50) | $(field "$f_defaults" p99) | $(field "$f_defaults" max) | holder terminated -> candidate's await_active returns; at the default ttl of 15 s x10 |"
		echo "| today: advisory lock polled every 50 ms + fixed 300 ms hold-off (1/100 scale) | $(field "$f_today" n) | $(field "$f_today" p50) | $(field "$f_today" p99) | $(field "$f_today" max) | holder terminated -> candidate leads; at full scale (5 s, 30 s) x100 |"
		echo
		echo "Against PostgreSQL's own floor, in the same run (\`failover floor\`): a candidate blocked in"
		echo "\`pg_advisory_lock(k)\` while the holder's backend, which holds k, is terminated, taking turns trial by trial"
		echo "with pg_tenure's holdoff 0 under synchronous_commit off and on (the order rotated every round); from"
		echo "terminating the holder to the candidate's call returning. Ratio: pg_tenure's percentile / the floor's."
		echo
		echo "Each pass right after a restart: the server's shared memory in pages of $fo_pages, as in the other sections,"
		echo "then in pages of 2 MB (\`huge_pages = on\`, the bench reserving \`vm.nr_hugepages\` for the pass)${floor_huge_note:+: $floor_huge_note}."
		echo
		echo "| pages | candidate | trials | p50 | p99 | max | p50 / floor | p99 / floor |"
		echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
		for pg in floor floor_huge; do
			[ "$pg" = floor ] || [ -n "$f_floor_huge" ] || continue
			pgn="2 MB"
			if [ "$pg" = floor ]; then
				pgn="4 kB"
				[ "$fo_pages" = "4 kB" ] || pgn="\`try\`"
			fi
			for k in advisory tenure_off tenure_on; do
				r=$(floor_line "$k" "$pg")
				case $k in
					advisory) name="\`pg_advisory_lock(k)\` waiter (the floor)" ;;
					tenure_off) name="pg_tenure, holdoff 0, synchronous_commit off" ;;
					tenure_on) name="pg_tenure, holdoff 0, synchronous_commit on" ;;
				esac
				echo "| $pgn | $name | $(field "$r" n) | $(field "$r" p50) | $(field "$r" p99) | $(field "$r" max) | $(field "$r" p50_ratio) | $(field "$r" p99_ratio) |"
			done
		done
		echo
		echo "A new connection's first call (\`failover first\`): each trial connects, times its first"
		echo "\`tenure.acquire\` and \`tenure.release\` and a second acquire, then an acquire on a connection kept"
		echo "across trials (not session-bound, synchronous_commit off). PostgreSQL's floor, in the same trials (before or after,"
		echo "alternately): another new connection's first and second statement writing an acquisition's rows by plain SQL"
		echo "(\`setup.sql\`'s \`bench_cycle_row\` and \`bench_cycle_history\`: the row's epoch raised, the open history row"
		echo "closed, a new one inserted, in one statement)."
		echo
		echo "| step | trials | p50 | p99 | max |"
		echo "| --- | ---: | ---: | ---: | ---: |"
		for k in connect first_acquire first_release second_acquire warm_acquire first_sql second_sql; do
			r=$(first_line "$k")
			echo "| $k | $(field "$r" n) | $(field "$r" p50) | $(field "$r" p99) | $(field "$r" max) |"
		done
		echo
		fa=$(field "$(first_line first_acquire)" p50)
		fs=$(field "$(first_line first_sql)" p50)
		echo "A new connection's first acquire / its first plain-SQL acquisition, p50: **$(awk -v a="$fa" -v b="$fs" 'BEGIN {printf "%.2f", a / b}')x**."
		echo
	} >"$parts/50_failover.md"
	phase_done failover
fi

# ---------------------------------------------------------------- scale
# SCALE_FEW and then SCALE_MAX live leases, every one created, acquired
# (held, ttl 1 day) and renewed or checked by random clients.  The cluster
# restarts first with tenure.max_leases and max_locks_per_transaction large
# enough, computed below; the sections above ran with the bench's settings.
if want scale; then
	scale_max=${SCALE_MAX:-$(dflt 100000 2000)}
	scale_few=${SCALE_FEW:-10}
	# the figure: SCALE_PAIRS alternating pairs of separate runs of
	# SCALE_SECONDS, valid only if the control reads 1 +/- SCALE_TOLERANCE
	scale_pairs=${SCALE_PAIRS:-$(dflt 5 2)}
	scale_s=${SCALE_SECONDS:-$(dflt 6 1)}
	scale_tol=${SCALE_TOLERANCE:-0.05}
	scale_loop=${SCALE_LOOP:-$(dflt 1000 100)}
	acq_batch=${SCALE_ACQUIRE_BATCH:-1000}
	headroom=${SCALE_LOCK_HEADROOM:-1000}
	idle_s=${KEEPER_IDLE_SECONDS:-$(dflt 20 2)}
	renew_rate=${KEEPER_RENEW_RATE:-100}
	costs=$out/scale_costs.csv
	echo "metric,value,unit" >"$costs"
	cost() { echo "$1,$2,$3" >>"$costs"; }

	# the settings: tenure.max_leases >= the leases, and a lock table with
	# room for one keeper lock per live tenure plus headroom for every
	# other lock, by the rule of the README's Setup section:
	# max_locks_per_transaction * (max_connections + autovacuum_max_workers
	# + 1 + max_worker_processes + max_wal_senders + max_prepared_transactions)
	shm0=$(psql_q -c "SELECT tenure.shared_memory_bytes()")
	slots=$(psql_q -c "SELECT current_setting('max_connections')::int + current_setting('autovacuum_max_workers')::int + 1 +
		current_setting('max_worker_processes')::int + current_setting('max_wal_senders')::int +
		current_setting('max_prepared_transactions')::int")
	# the many, the few, the control's few and the bench's own
	scale_leases=$((scale_max + 2 * scale_few + 1024))
	scale_locks=$(((scale_max + headroom + slots - 1) / slots))
	[ "$scale_locks" -lt 64 ] && scale_locks=64
	capacity=$((scale_locks * slots))
	# Check of the rule: at max_locks_per_transaction = 64 (PostgreSQL's
	# default), acquire leases one at a time until the lock table is full
	probe=${SCALE_LOCK_PROBE:-$(dflt 1 0)}
	probe_held= probe_err=
	if [ "$probe" = 1 ]; then
		probe_cap=$((64 * slots))
		probe_n=$((probe_cap * 3))
		echo "scale: lock table check: max_locks_per_transaction = 64 (rule: $probe_cap locks), acquiring up to $probe_n leases"
		psql_q -c "ALTER SYSTEM SET tenure.max_leases = $((probe_n + 1024))" -c "ALTER SYSTEM SET max_locks_per_transaction = 64"
		bench_cluster_restart
		psql_q -c "SELECT count(*) FROM (SELECT tenure.create_lease('probe-' || i, '1 day', holdoff => '0')
			FROM generate_series(1, $probe_n) i) s" >/dev/null
		{
			echo '\set VERBOSITY verbose'
			seq "$probe_n" | awk '{printf "SELECT tenure.acquire('"'"'probe-%d'"'"', '"'"'h'"'"');\n", $1}'
		} >"$dir/probe.sql"
		chmod 644 "$dir/probe.sql"
		kpid=$(bench_keeper_pid)
		psql_q -f "$dir/probe.sql" >/dev/null 2>"$dir/probe.err" || true
		# (with the table full, even pg_stat_activity cannot be read: it
		# locks shared catalogs)
		probe_held=$(bench_keeper_locks "$kpid")
		probe_err=$(grep -m1 'ERROR' "$dir/probe.err" | sed 's/^.*ERROR: *//' || true)
		echo "  the keeper held $probe_held locks when acquire failed: ${probe_err:-no error}"
		cost probe_max_locks_per_transaction 64 locks
		cost probe_rule_capacity "$probe_cap" locks
		cost probe_tenures_held "$probe_held" locks
		# a full lock table refuses even new sessions' catalog locks: the
		# locks go with the keeper
		bench_cluster_restart
	fi

	echo "scale: $scale_few and $scale_max live leases; restart with tenure.max_leases = $scale_leases, max_locks_per_transaction = $scale_locks"
	# 4 kB pages first, whatever the machine has reserved (huge_pages'
	# default, try, would take 2 MB pages where some are reserved)
	psql_q -c "ALTER SYSTEM SET tenure.max_leases = $scale_leases" -c "ALTER SYSTEM SET max_locks_per_transaction = $scale_locks" \
		-c "ALTER SYSTEM SET huge_pages = off"
	bench_cluster_restart
	if [ "$probe" = 1 ]; then
		psql_q -c "SELECT count(tenure.drop_lease('probe-' || i)) FROM generate_series(1, $probe_n) i" >/dev/null
	fi
	shm1=$(psql_q -c "SELECT tenure.shared_memory_bytes()")
	per_slot=$(awk -v a="$shm0" -v b="$shm1" -v x="$max_leases0" -v y="$scale_leases" 'BEGIN {printf "%.1f", (b - a) / (y - x)}')
	# the formula, larger setting first
	if [ "$scale_leases" -gt "$max_leases0" ]; then
		slot_formula="(shared_memory_bytes() at $scale_leases slots - at $max_leases0) / $((scale_leases - max_leases0))"
	else
		slot_formula="(shared_memory_bytes() at $max_leases0 slots - at $scale_leases) / $((max_leases0 - scale_leases))"
	fi
	cost max_leases_base "$max_leases0" slots
	cost shared_memory_base "$shm0" bytes
	cost max_leases_scale "$scale_leases" slots
	cost shared_memory_scale "$shm1" bytes
	cost shared_memory_per_slot "$per_slot" bytes
	cost max_locks_per_transaction "$scale_locks" locks
	cost lock_table_slots "$slots" backends
	cost lock_table_capacity "$capacity" locks
	echo "  shared memory: $shm0 bytes at $max_leases0 slots, $shm1 at $scale_leases: $per_slot bytes per slot"

	timed() {
		# timed SQL: milliseconds of the statement, by psql's \timing
		psql_q -c '\timing on' -c "$1" | awk '/^Time: / {print $2}'
	}
	scale_script() {
		# scale_script SET N PREFIX: SET's leader_is and renew scripts, each
		# call on one of the N leases PREFIX1..PREFIXN at random
		local set=$1 n=$2 p=$3
		printf '\\set k random(1, %s)\nSELECT tenure.leader_is('"'"'%s'"'"' || :k, '"'"'h'"'"');\n' "$n" "$p" >"$dir/scale_leader_$set.sql"
		printf '\\set k random(1, %s)\nSELECT tenure.renew('"'"'%s'"'"' || :k, '"'"'h'"'"');\n' "$n" "$p" >"$dir/scale_renew_$set.sql"
		chmod 644 "$dir"/scale_*_"$set".sql
	}
	scale_script few "$scale_few" few-
	scale_script ctl "$scale_few" ctl-
	scale_script many "$scale_max" scale-
	# PostgreSQL's own floor for the same lookup: the narrowest table a
	# lease service could keep, a name and its holder, read by primary key
	# from shared buffers; SCALE_MAX rows against SCALE_FEW, measured in the
	# same pairs (sets rfew and rmany, with leader_is)
	for set in rfew rmany; do
		n=$scale_few p=few-
		[ "$set" = rmany ] && n=$scale_max p=scale-
		psql_q -c "CREATE TABLE bench_floor_$set (k text PRIMARY KEY, h text NOT NULL)" \
			-c "INSERT INTO bench_floor_$set SELECT '$p' || i, 'h' FROM generate_series(1, $n) i" -c "VACUUM ANALYZE bench_floor_$set" >/dev/null
		printf '\\set k random(1, %s)\nSELECT h = '"'"'h'"'"' FROM bench_floor_%s WHERE k = '"'"'%s'"'"' || :k;\n' "$n" "$set" "$p" >"$dir/scale_leader_$set.sql"
		chmod 644 "$dir/scale_leader_$set.sql"
	done
	floor_pages=$(psql_q -c "SELECT (pg_relation_size('bench_floor_rmany') + pg_relation_size('bench_floor_rmany_pkey')) / 4096")

	# scale_acquire_all: the few, the control and the many acquired again
	# after a restart ended their tenures; returns once the history shows
	# every earlier tenure closed (the history writer idle again)
	scale_acquire_all() {
		local live=$((scale_max + 2 * scale_few)) open
		psql_q -c "SELECT count(*) FROM (SELECT tenure.acquire(p || i, 'h') FROM generate_series(1, $scale_few) i,
			(VALUES ('few-'), ('ctl-')) v(p)) s" >/dev/null
		psql_q -f "$dir/acquire.sql" >/dev/null
		[ "$(bench_keeper_locks)" -ge "$live" ] ||
			{ echo "bench: scale: $live leases acquired again, but the keeper holds only $(bench_keeper_locks) locks" >&2; exit 1; }
		for _ in $(seq 1200); do
			open=$(psql_q -c "SELECT count(*) FROM tenure.history WHERE ended IS NULL")
			[ "$open" -le "$live" ] && return 0
			sleep 0.1
		done
		echo "bench: scale: $open tenures still open in tenure.history, $live live" >&2
		exit 1
	}

	# the few, and as many again for the control ('ctl-'): both sets stay
	# live while the many are measured, and the many while they are
	psql_q -c "SELECT count(*) FROM (SELECT tenure.create_lease(p || i, '1 day', holdoff => '0'),
		tenure.acquire(p || i, 'h') FROM generate_series(1, $scale_few) i, (VALUES ('few-'), ('ctl-')) v(p)) s" >/dev/null
	live_few=$(bench_keeper_locks)
	live_base=$live_few

	# SCALE_MAX leases, created in one statement
	ms_create=$(timed "SELECT count(*) FROM (SELECT tenure.create_lease('scale-' || i, '1 day', holdoff => '0')
		FROM generate_series(1, $scale_max) i) s")
	# acquired SCALE_ACQUIRE_BATCH per statement: a transaction's
	# acquisitions cost more the more it has made
	for ((lo = 1; lo <= scale_max; lo += acq_batch)); do
		hi=$((lo + acq_batch - 1 < scale_max ? lo + acq_batch - 1 : scale_max))
		echo "SELECT count(tenure.acquire('scale-' || i, 'h')) FROM generate_series($lo, $hi) i;"
	done >"$dir/acquire.sql"
	chmod 644 "$dir/acquire.sql"
	psql_q -c '\timing on' -f "$dir/acquire.sql" | awk '/^Time: / {print $2}' >"$dir/acquire.ms"
	ms_acquire=$(awk '{t += $1} END {printf "%.3f", t}' "$dir/acquire.ms")
	ms_acq_first=$(head -1 "$dir/acquire.ms")
	ms_acq_last=$(tail -1 "$dir/acquire.ms")
	live_max=$(bench_keeper_locks)
	echo "  created $scale_max leases in $ms_create ms, acquired them in $ms_acquire ms ($acq_batch per statement: first $ms_acq_first ms, last $ms_acq_last ms); keeper locks: $live_max"
	cost leases "$scale_max" leases
	cost create_one_statement "$ms_create" ms
	cost acquire_batch "$acq_batch" leases
	cost acquire_all_batches "$ms_acquire" ms
	cost acquire_first_batch "$ms_acq_first" ms
	cost acquire_last_batch "$ms_acq_last" ms
	cost keeper_locks_few "$live_few" locks
	cost keeper_locks_max "$live_max" locks
	if [ "$live_max" -lt "$scale_max" ]; then
		echo "bench: $scale_max leases acquired, but the keeper holds only $live_max locks" >&2
		exit 1
	fi

	# The figure.  Separate pgbench runs, each with its own new backends,
	# as a client that connects and calls sees the server: the few, the
	# many and the control in turn, the order reversed every pair (few,
	# many, ctl; then ctl, many, few), so that a drift of the machine's
	# speed during the section weighs on every set alike.  Ratio: the
	# median TPS of the many / that of the few; the control, two sets of
	# SCALE_FEW alike, ctl / few, must read 1 +/- SCALE_TOLERANCE, or the
	# machine was too unsteady for the figure, which is then reported as
	# invalid.
	# scale_pass PAGES: the pairs, with the shared memory in PAGES (4k or
	# huge) pages
	echo "pages,set,leases,clients,op,pair,position,tps" >"$out/scale_raw.csv"
	scale_pass() {
		local pages=$1 pair order c op pos set n t opts
		# the acquisitions' dead rows vacuumed before the clock
		bench_settle
		# the floor's tables in shared buffers: every leaf and heap page read
		psql_q -c "SET enable_seqscan = off" -c "SET enable_bitmapscan = off" \
			-c "SELECT count(h) FROM bench_floor_rfew WHERE k > ''" -c "SELECT count(h) FROM bench_floor_rmany WHERE k > ''" >/dev/null
		for ((pair = 1; pair <= scale_pairs; pair++)); do
			if ((pair % 2)); then order="few many ctl rfew rmany"; else order="rmany rfew ctl many few"; fi
			for c in $CLIENTS; do
				for op in leader renew; do
					pos=0
					for set in $order; do
						[ "$op" = renew ] && [ "${set#r}" != "$set" ] && continue
						pos=$((pos + 1))
						n=$scale_few
						[ "$set" = many ] || [ "$set" = rmany ] && n=$scale_max
						# the floor's sets by index, as the many's is: the
						# planner would scan the 10 rows' single page instead
						opts=
						[ "${set#r}" != "$set" ] && opts="-c enable_seqscan=off -c enable_bitmapscan=off"
						t=$(pgb "$c" "$scale_s" "$opts" -f "$dir/scale_${op}_$set.sql" 2>&1 | tps_of)
						[ -n "$t" ] || { echo "bench: scale $op $set with $c clients failed" >&2; exit 1; }
						echo "$pages,$set,$n,$c,$op,$pair,$pos,$t" >>"$out/scale_raw.csv"
						printf '  %-4s %-6s %-4s leases=%-6s c=%s pair=%s tps=%s\n' "$pages" "$op" "$set" "$n" "$c" "$pair" "$t"
					done
				done
			done
		done
	}
	scale_pages=4k
	scale_pass 4k

	# The same with the shared memory in 2 MB pages (huge_pages = on), if
	# the kernel can reserve them (SCALE_HUGE=0: not at all): the calls
	# touch the lease table at random, about 24,000 pages of 4 kB at
	# 100,000 leases, and every backend translates each anew (performance.md)
	hp_note="not run (SCALE_HUGE=0)"
	if [ "${SCALE_HUGE:-1}" = 1 ]; then
		if bench_huge_on; then
			hp_note=
			echo "scale: the leases acquired again"
			scale_acquire_all
			scale_pass huge
			scale_pages="4k huge"
			bench_huge_off
			scale_acquire_all
		else
			hp_note=$bench_huge_note
		fi
		[ -z "$hp_note" ] || echo "  huge pages: $hp_note"
	fi

	# Both at once, as the interleaved section does: every client picks the
	# few or the many at random for each call; the ratio of a run is the
	# few's mean latency / the many's.  Not the figure: the two scripts
	# share the backends and the caches, and with more clients than cores a
	# call's latency is mostly the wait for a core, which both scripts
	# share, so the ratio hides a cost of the many.
	echo "clients,op,run,few_latency_ms,latency_ms,ratio" >"$out/scale_interleaved.csv"
	for i in $(seq "$mixes"); do
		for c in $CLIENTS; do
			for op in leader renew; do
				log=$(pgb "$c" "$mix_s" "" -f "$dir/scale_${op}_few.sql@1" \
					-f "$dir/scale_${op}_many.sql@1" 2>&1) || { echo "$log" >&2; exit 1; }
				read -r lat_few lat_many < <(echo "$log" | awk '/^ - latency average = / {printf "%s ", $5} END {print ""}')
				if [ -z "$lat_many" ]; then
					echo "bench: scale interleaved $op with $c clients: no per-script latency" >&2
					echo "$log" >&2
					exit 1
				fi
				echo "$c,$op,$i,$lat_few,$lat_many,$(awk -v a="$lat_few" -v b="$lat_many" 'BEGIN {printf "%.4f", a / b}')" >>"$out/scale_interleaved.csv"
			done
		done
	done
	psql_q -c "SELECT count(tenure.drop_lease(p || i)) FROM generate_series(1, $scale_few) i, (VALUES ('few-'), ('ctl-')) v(p)" >/dev/null
	psql_q -c "DROP TABLE bench_floor_rfew, bench_floor_rmany" >/dev/null

	# the keeper's CPU with every lease held: idle, then with a slow renew
	# loop over random leases
	clk=$(getconf CLK_TCK)
	kpid=$(bench_keeper_pid)
	ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
	k0=$(ticks "$kpid")
	sleep "$idle_s"
	k1=$(ticks "$kpid")
	pgb 1 "$idle_s" "" -R "$renew_rate" -f "$dir/scale_renew_many.sql" >/dev/null 2>&1 ||
		{ echo "bench: scale renew loop failed" >&2; exit 1; }
	k2=$(ticks "$kpid")
	[ "$(bench_keeper_pid)" = "$kpid" ] || { echo "bench: the keeper restarted during the idle period" >&2; exit 1; }
	idle_pct=$(awk -v t=$((k1 - k0)) -v c="$clk" -v s="$idle_s" 'BEGIN {printf "%.3f", 100 * t / c / s}')
	renew_pct=$(awk -v t=$((k2 - k1)) -v c="$clk" -v s="$idle_s" 'BEGIN {printf "%.3f", 100 * t / c / s}')
	echo "  keeper CPU, $scale_max leases held: idle $((k1 - k0)) ticks in $idle_s s ($idle_pct%), renewed at $renew_rate/s $((k2 - k1)) ticks ($renew_pct%)"
	cost keeper_idle_seconds "$idle_s" s
	cost clock_ticks_per_second "$clk" ticks
	cost keeper_idle_ticks $((k1 - k0)) ticks
	cost keeper_idle_cpu "$idle_pct" percent
	cost keeper_renew_rate "$renew_rate" renewals/s
	cost keeper_renew_ticks $((k2 - k1)) ticks
	cost keeper_renew_cpu "$renew_pct" percent

	# single calls, one statement (and transaction) each, with the leases live
	seq "$scale_loop" | awk '{printf "SELECT tenure.create_lease('"'"'loop-%d'"'"', '"'"'1 day'"'"', holdoff => '"'"'0'"'"');\n", $1}' >"$dir/loop_create.sql"
	seq "$scale_loop" | awk '{printf "SELECT tenure.drop_lease('"'"'loop-%d'"'"');\n", $1}' >"$dir/loop_drop.sql"
	chmod 644 "$dir"/loop_*.sql
	loop_us() {
		# mean of psql's \timing over the calls: each its own round trip and commit
		psql_q -c '\timing on' -f "$1" | awk '/^Time: / {t += $2; n++} END {printf "%.1f", t * 1000 / n}'
	}
	us_create_loop=$(loop_us "$dir/loop_create.sql")
	us_drop_loop=$(loop_us "$dir/loop_drop.sql")
	cost create_loop_calls "$scale_loop" calls
	cost create_loop_per_call "$us_create_loop" us
	cost drop_loop_per_call "$us_drop_loop" us

	ms_drop=$(timed "SELECT count(tenure.drop_lease('scale-' || i)) FROM generate_series(1, $scale_max) i")
	# the keeper lets the dropped tenures' locks go after the commit
	t0=$(date +%s%N)
	live_after=$(bench_keeper_locks)
	live_drop=$live_after
	for _ in $(seq 1200); do
		[ "$live_after" -le "$live_base" ] && break
		sleep 0.1
		live_after=$(bench_keeper_locks)
	done
	ms_release=$((($(date +%s%N) - t0) / 1000000))
	cost drop_one_statement "$ms_drop" ms
	cost keeper_locks_right_after_drop "$live_drop" locks
	cost keeper_locks_after_drop "$live_after" locks
	cost keeper_release_after_drop "$ms_release" ms
	echo "  single calls: create $us_create_loop us, drop $us_drop_loop us; dropped $scale_max in $ms_drop ms"
	echo "  keeper locks: $live_drop right after the drop, $live_after after $ms_release ms (before the leases: $live_base)"
	if [ "$live_after" -gt "$live_base" ]; then
		echo "bench: the keeper still holds $live_after locks $ms_release ms after the leases were dropped" >&2
	fi

	# scale.csv: per client count and op, the median TPS of each set, the
	# figure and the control beside it
	echo "pages,clients,op,pairs,seconds,tps_few,tps_many,ratio,tps_control,control_ratio,valid,tps_floor_few,tps_floor_many,floor_ratio,ratio_vs_floor" >"$out/scale.csv"
	scale_valid=1
	for pg in $scale_pages; do
		for c in $CLIENTS; do
			for op in leader renew; do
				# med_of SET [OP]: the median TPS of SET's runs
				med_of() { awk -F, -v p="$pg" -v s="$1" -v c="$c" -v op="${2:-$op}" 'NR > 1 && $1==p && $2==s && $4==c && $5==op {print $8}' "$out/scale_raw.csv" | bench_median; }
				f=$(med_of few)
				m=$(med_of many)
				k=$(med_of ctl)
				rf=$(med_of rfew leader)
				rm=$(med_of rmany leader)
				r=$(awk -v a="$m" -v b="$f" 'BEGIN {printf "%.3f", a / b}')
				q=$(awk -v a="$k" -v b="$f" 'BEGIN {printf "%.3f", a / b}')
				rr=$(awk -v a="$rm" -v b="$rf" 'BEGIN {printf "%.3f", a / b}')
				rv=$(awk -v m="$m" -v f="$f" -v a="$rm" -v b="$rf" 'BEGIN {printf "%.3f", (m / f) / (a / b)}')
				v=$(awk -v q="$q" -v t="$scale_tol" 'BEGIN {d = q - 1; if (d < 0) d = -d; print (d <= t + 1e-9) ? "yes" : "no"}')
				[ "$v" = yes ] || scale_valid=
				echo "$pg,$c,$op,$scale_pairs,$scale_s,$f,$m,$r,$k,$q,$v,$rf,$rm,$rr,$rv" >>"$out/scale.csv"
				echo "  $pg pages, $op c=$c: $scale_max / $scale_few leases $r (control $q, $([ "$v" = yes ] && echo valid || echo INVALID)); PostgreSQL's floor, $scale_max / $scale_few rows: $rr"
			done
		done
	done
	if [ -z "$scale_valid" ]; then
		echo "bench: scale: a control read outside 1 +/- $scale_tol: the figure is invalid (the machine was unsteady)" >&2
	fi
	# sc PAGES CLIENTS OP FIELD
	sc() { awk -F, -v p="$1" -v c="$2" -v op="$3" 'NR > 1 && $1==p && $2==c && $3==op {print $'"$4"'}' "$out/scale.csv"; }
	# the figure as reported: the ratio, or "invalid" with the ratio beside
	sfig() {
		if [ "$(sc "$1" "$2" "$3" 11)" = yes ]; then
			echo "**$(sc "$1" "$2" "$3" 8)**"
		else
			echo "invalid ($(sc "$1" "$2" "$3" 8))"
		fi
	}
	# ratio / floor, in brackets where the figure is invalid
	vfloor() {
		if [ "$(sc "$1" "$2" "$3" 11)" = yes ]; then sc "$1" "$2" "$3" 15; else echo "($(sc "$1" "$2" "$3" 15))"; fi
	}
	# interleaved: median (min..max) of the runs' ratios
	si() {
		awk -F, -v c="$1" -v op="$2" 'NR > 1 && $1==c && $2==op {print $6}' "$out/scale_interleaved.csv" | sort -n |
			awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f (%.3f..%.3f)", m, v[1], v[NR]}'
	}
	fmt() { awk -v x="$1" 'BEGIN {printf "%.0f", x}'; }
	{
		echo "## Scale: $scale_max live leases"
		echo
		echo "Every lease created (\`tenure.create_lease('scale-' || i, '1 day', holdoff => '0')\`), acquired by holder \`h\` and"
		echo "held; each call picks one of them at random. The $scale_max (\`'scale-'\`, the many), $scale_few (\`'few-'\`, the few)"
		echo "and $scale_few more (\`'ctl-'\`, the control) live at once, in $scale_pairs alternating rounds of separate runs of $scale_s s"
		echo "(few, many, ctl, then the floor's few and many; then the reverse; and so on), each run with its own new backends (\`scale.csv\`, \`scale_raw.csv\`;"
		echo "every other figure below: \`scale_costs.csv\`)."
		echo
		echo "| pages | clients | op | TPS, $scale_few leases | $scale_max leases | **ratio** | control: TPS, $scale_few others | control ratio | PostgreSQL's floor: $scale_max / $scale_few rows | ratio / floor | interleaved ratio (not the figure) |"
		echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
		for pg in $scale_pages; do
			pgn="4 kB"
			[ "$pg" = huge ] && pgn="2 MB"
			for c in $CLIENTS; do
				for op in leader renew; do
					opn=leader_is
					[ "$op" = renew ] && opn=renew
					inter=$(si "$c" "$op")
					[ "$pg" = 4k ] || inter=
					echo "| $pgn | $c | $opn | $(fmt "$(sc "$pg" "$c" "$op" 6)") | $(fmt "$(sc "$pg" "$c" "$op" 7)") | $(sfig "$pg" "$c" "$op") | $(fmt "$(sc "$pg" "$c" "$op" 9)") | $(sc "$pg" "$c" "$op" 10) | $(sc "$pg" "$c" "$op" 14) | $(vfloor "$pg" "$c" "$op") | $inter |"
				done
			done
		done
		echo
		echo "Pages: the server's shared memory in pages of 4 kB (\`huge_pages = off\`) or of 2 MB (\`huge_pages = on\`, the bench"
		echo "reserving \`vm.nr_hugepages\` for the run and restarting the server; the leases acquired again after the restart)."
		[ -z "$hp_note" ] || echo "2 MB pages: $hp_note."
		echo
		echo "Ratio (the figure): median TPS at $scale_max leases / median TPS at $scale_few, over $scale_pairs pairs of separate runs. It is"
		echo "valid only if the control, two sets of $scale_few alike measured the same way (median ctl / median few), reads"
		echo "1 +/- $scale_tol in the same run; otherwise the machine was too unsteady and the figure is reported as invalid."
		echo "PostgreSQL's floor: the same ratio for the narrowest table a lease service could keep, a name and its holder"
		echo "(\`k text PRIMARY KEY, h text\`), $scale_max rows against $scale_few, each call \`SELECT h = 'h' FROM bench_floor_r... WHERE k = ...\`"
		echo "by its primary key (an index scan for both: \`enable_seqscan\` and \`enable_bitmapscan\` off) from shared buffers, in the same pairs, beside \`leader_is\` (the \`renew\` rows repeat it): $floor_pages pages of 4 kB, heap and index (the $scale_max"
		echo "leases' slots: $(awk -v n="$scale_max" -v b="$per_slot" 'BEGIN {printf "%.0f", n * b / 4096}') pages at $per_slot bytes each). Ratio / floor: pg_tenure's ratio over PostgreSQL's"
		echo "(1.00: as flat as a lookup in PostgreSQL's own shared buffers on the same machine)."
		echo "Interleaved ratio, not the figure: $mixes runs of $mix_s s, every client picking the few or the many at random for each"
		echo "call; the few's mean latency / the many's, median (min..max) (\`scale_interleaved.csv\`). Both scripts share the"
		echo "backends and their caches, and a call's latency is mostly the wait for a core, which both share: it hides a cost of the many."
		echo
		echo "pgbench: \`pgbench -n -M prepared -c C -j J -T $scale_s -f scale_leader_many.sql\` (J = 1 for 1 client, else 2), the script"
		echo "\`\\set k random(1, $scale_max)\` \`SELECT tenure.leader_is('scale-' || :k, 'h');\` (\`'few-'\` or \`'ctl-'\` and $scale_few for"
		echo "the few and the control); \`scale_renew_*.sql\` call \`tenure.renew(..., 'h')\`."
		echo
		echo "Settings for the scale run (the cluster restarted with them after the other sections):"
		echo
		echo "- \`tenure.max_leases = $scale_leases\` (>= the $scale_max leases, plus the few, the control's and the bench's own)."
		echo "- \`max_locks_per_transaction = $scale_locks\`: the shared lock table holds max_locks_per_transaction x"
		echo "  (max_connections + autovacuum_max_workers + 1 + max_worker_processes + max_wal_senders + max_prepared_transactions)"
		echo "  = $scale_locks x $slots = $capacity locks; one per live tenure ($scale_max) plus $headroom for every other lock:"
		echo "  ceil(($scale_max + $headroom) / $slots) = $scale_locks. The keeper held $live_max advisory locks with the"
		echo "  $scale_max leases held ($live_few with the $scale_few and the control's $scale_few, before the $scale_max were created)."
		if [ -n "$probe_held" ]; then
			echo "- Check of the rule: at max_locks_per_transaction = 64 it gives 64 x $slots = $probe_cap locks; acquiring leases one"
			echo "  at a time, the keeper held **$probe_held** locks ($(awk -v a="$probe_held" -v b="$probe_cap" 'BEGIN {printf "%.2f", a / b}') times the rule's figure) when acquire"
			echo "  failed with \`${probe_err:-(no error up to $probe_n leases)}\`. The rule is the room PostgreSQL reserves"
			echo "  for the table; the excess came out of shared memory's spare space, which other tables share: size by the rule."
		fi
		echo
		echo "| cost | value |"
		echo "| --- | ---: |"
		echo "| shared memory per lease slot: $slot_formula | $per_slot bytes |"
		echo "| shared_memory_bytes() at tenure.max_leases = $max_leases0 / $scale_leases | $shm0 / $shm1 bytes |"
		echo "| create $scale_max leases: \`SELECT tenure.create_lease('scale-' \\|\\| i, ...) FROM generate_series(1, $scale_max) i\` | $ms_create ms ($(awk -v a="$ms_create" -v n="$scale_max" 'BEGIN {printf "%.1f", a * 1000 / n}') us per lease) |"
		echo "| acquire them, $acq_batch per statement: \`SELECT tenure.acquire('scale-' \\|\\| i, 'h') FROM generate_series(lo, lo + $((acq_batch - 1))) i\` | $ms_acquire ms ($(awk -v a="$ms_acquire" -v n="$scale_max" 'BEGIN {printf "%.1f", a * 1000 / n}') us per lease; first statement $ms_acq_first ms, last $ms_acq_last ms) |"
		echo "| drop them: \`SELECT tenure.drop_lease('scale-' \\|\\| i) FROM generate_series(1, $scale_max) i\` | $ms_drop ms ($(awk -v a="$ms_drop" -v n="$scale_max" 'BEGIN {printf "%.1f", a * 1000 / n}') us per lease) |"
		echo "| create_lease, $scale_loop single calls (one statement and transaction each, timed by psql), $scale_max leases live | $us_create_loop us per call |"
		echo "| drop_lease, $scale_loop single calls | $us_drop_loop us per call |"
		echo "| the keeper lets the dropped leases' locks go: locks held right after the drop's commit / $ms_release ms later | $live_drop / $live_after (before: $live_base) |"
		echo "| keeper CPU, $scale_max leases held, nothing running, $idle_s s (utime + stime from /proc/PID/stat, $clk ticks/s) | $((k1 - k0)) ticks: $idle_pct% of a core |"
		echo "| keeper CPU, the same with \`tenure.renew\` of random leases at $renew_rate/s (\`pgbench -R $renew_rate\`), $idle_s s | $((k2 - k1)) ticks: $renew_pct% of a core |"
		echo
	} >"$parts/60_scale.md"
	phase_done scale
fi

# ---------------------------------------------------------------- ddl
if want ddl; then
	echo "ddl: bash bench/ddl.sh (its own cluster)"
	ddl_env=(TENURE_SKIP_APT=1 TENURE_SKIP_INSTALL=1 DDL_CSV="$out/ddl.csv")
	if [ -n "$smoke" ]; then
		ddl_env+=(DDL_SECONDS="${DDL_SECONDS:-1}" DDL_RUNS="${DDL_RUNS:-1}" DDL_CHILDREN="${DDL_CHILDREN:-100}")
	fi
	echo "case,side,run,latency_ms,backend_cpu_us" >"$out/ddl.csv"
	if ! env "${ddl_env[@]}" bash "$here/ddl.sh" >"$out/ddl.md" 2>"$dir/ddl.err"; then
		cat "$dir/ddl.err" >&2
		echo "bench: ddl.sh failed" >&2
		exit 1
	fi
	{
		cat "$out/ddl.md"
		echo
	} >"$parts/65_ddl.md"
	phase_done ddl
fi

# ---------------------------------------------------------------- profile
if want profile; then
	echo "profile: bash bench/profile.sh (its own cluster)"
	prof_env=(TENURE_SKIP_APT=1 TENURE_SKIP_INSTALL=1)
	if [ -n "$smoke" ]; then
		prof_env+=(PROFILE_SECONDS="${PROFILE_SECONDS:-2}" PROFILE_CLIENTS="${PROFILE_CLIENTS:-1}")
	fi
	rc=0
	env "${prof_env[@]}" bash "$here/profile.sh" >"$out/profile.txt" 2>&1 || rc=$?
	if [ "$rc" = 3 ]; then
		echo "bench: perf cannot record on this machine: profile.txt has the TPS only" >&2
	elif [ "$rc" != 0 ]; then
		cat "$out/profile.txt" >&2
		echo "bench: profile.sh failed" >&2
		exit 1
	fi
	{
		echo "## Profile: acquire + release"
		echo
		echo "\`bash bench/profile.sh\` (\`profile.txt\`): perf of the pgbench backends and the keeper running \`cycle.sql\`."
		echo
		echo '```'
		sed -n '/^== summary/,$p' "$out/profile.txt" | tail -n +2
		echo '```'
		echo
	} >"$parts/70_profile.md"
	phase_done profile
fi

# ---------------------------------------------------------------- peer
# pg_tenure beside etcd with Python clients, in alternating windows:
# bench/peer.py starts its own cluster (the bench's settings, then
# synchronous_commit = on) and a local etcd, and stops both.
if want peer; then
	peer_windows=${PEER_WINDOWS:-$(dflt 15 1)}
	peer_s=${PEER_SECONDS:-1}
	echo "peer: bench/peer.py, $peer_windows rounds of ${peer_s}s windows, clients: $CLIENTS"
	cp "$here/peer.py" "$dir"/
	bench_settings >"$dir/peer.conf"
	chown "$BENCH_USER": "$dir/peer.py" "$dir/peer.conf"
	as_user /usr/bin/python3 "$dir/peer.py" --bindir "$PG_BIN" --port 54335 --conf "$dir/peer.conf" \
		--clients "$CLIENTS" --windows "$peer_windows" --seconds "$peer_s" --csv "$dir/peer.csv" --md "$dir/peer.md"
	cp "$dir/peer.csv" "$dir/peer.md" "$out"/
	cp "$dir/peer.md" "$parts/75_peer.md"
	phase_done peer
fi

# ---------------------------------------------------------------- report
summary=$out/latest.csv
if want scenarios; then
	echo "scenario,clients,tps_median,tps_min,tps_max,wal_bytes_per_op,reference,ratio,interleaved_median,interleaved_min,interleaved_max,description" >"$summary"
	for c in $CLIENTS; do
		for s in "${scenarios[@]}"; do
			IFS='|' read -r id ref script opts desc <<<"$s"
			col() { awk -F, -v s="$1" -v c="$c" '$1==s && $2==c {print $4}' "$raw"; }
			m=$(col "$id" | bench_median)
			r=$(col "$ref" | bench_median)
			lo=$(col "$id" | sort -g | head -1)
			hi=$(col "$id" | sort -g | tail -1)
			wal=$(awk -F, -v s="$id" -v c="$c" '$1==s && $2==c {w+=$6; n+=$5} END {printf "%.1f", w/n}' "$raw")
			ratio=$(awk -v a="$m" -v b="$r" 'BEGIN {printf "%.3f", a/b}')
			read -r im ilo ihi <<<"$(ilv_stats "$id" "$c")"
			echo "$id,$c,$m,$lo,$hi,$wal,$ref,$ratio,$im,$ilo,$ihi,\"$desc\"" >>"$summary"
		done
	done
fi

phase_done report
total=$(($(date +%s) - t_start))
pgver=$(psql_q -c "SELECT version()")
cpu=$(awk -F: '/model name/ {print $2; exit}' /proc/cpuinfo | sed 's/^ *//')
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)
{
	echo "# pg_tenure benchmark results"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- command: \`bash bench/run.sh${smoke:+ --smoke}\` (DURATION=$DURATION REPEATS=$REPEATS CLIENTS=\"$CLIENTS\"; SECTIONS=\"$SECTIONS\")"
	echo "- duration: $((total / 60)) min $((total % 60)) s ($(printf '%s, ' "${timings[@]}" | sed 's/, $//'))"
	echo "- machine: $(nproc) cores, $cpu, $mem"
	echo "- server: $pgver"
	echo "- settings: $(bench_settings_line)$(want scale && echo "; the scale section restarts with its own, below")"
	if [ -n "$fsync_ops" ]; then
		echo "- disk flush (\`pg_test_fsync -s $fsync_s\`, one 8 kB write per flush, on the cluster's file system; \`fsync.txt\`):"
		echo "  $fsync_method (the wal_sync_method in use) **$fsync_ops ops/sec, $fsync_us usecs/op**"
	fi
	if want scenarios; then
		echo "- pgbench: -M prepared -T $DURATION, -j 2 for 8 clients; median of $REPEATS runs (min..max)$(want interleaved &&
			echo "; interleaved ratio: median of $mixes runs (min..max), see below")"
		echo
		echo "| scenario | clients | TPS median (min..max) | WAL B/op | ratio | interleaved ratio (min..max) | against |"
		echo "| --- | ---: | ---: | ---: | ---: | ---: | --- |"
		tail -n +2 "$summary" | while IFS=, read -r id c m lo hi wal ref ratio im ilo ihi desc; do
			desc=${desc#\"}
			desc=${desc%\"}
			iv=
			[ -n "$im" ] && iv=$(printf '%.3f (%.3f..%.3f)' "$im" "$ilo" "$ihi")
			printf '| %s | %s | %.0f (%.0f..%.0f) | %s | %s | %s | %s |\n' "$desc" "$c" "$m" "$lo" "$hi" "$wal" "$ratio" "$iv" "$ref"
		done
	fi
	echo
	for p in "$parts"/*.md; do
		[ -f "$p" ] && cat "$p"
	done
} >"$out/latest.md"

# the chart: latest.png from latest.csv
if want scenarios && command -v gnuplot >/dev/null; then
	bash "$here/chart.sh" "$out"
fi

# superseded by interleaved.csv and the fragments above
if [ "$out" = "$here/results" ]; then
	rm -f "$out/fenced_mixed.csv" "$out/extra.md"
fi

cat "$out/latest.md"
if [ -z "$keep" ]; then
	rm -rf "$out"
else
	echo "results: $out"
fi
