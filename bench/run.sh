#!/usr/bin/env bash
#
# pg_tenure benchmarks: pg_tenure against the approaches users build today,
# on this machine, in one run, with pgbench (prepared statements).
#
#   bash bench/run.sh            # full run: writes bench/results/latest.{md,csv,png}
#   bash bench/run.sh --smoke    # every scenario for 2 s, results in a temp dir
#
# Environment: DURATION (seconds per run, default 10), REPEATS (default 3),
# CLIENTS (default "1 8"), PAIRS and PAIR_SECONDS (paired fenced INSERT
# runs, default 20 of 5 s), MIXES and MIX_SECONDS (interleaved fenced INSERT
# runs, default 5 of 10 s), TENURE_SKIP_APT, TENURE_SKIP_INSTALL.
#
# Runs as root: installs what it needs, builds and installs pg_tenure, and
# starts a throwaway cluster owned by the user "tenure".  PG_MAJOR picks
# the PostgreSQL major (test/pg_major.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$top/test/pg_major.sh"
BENCH_USER=${BENCH_USER:-tenure}
DURATION=${DURATION:-10}
REPEATS=${REPEATS:-3}
CLIENTS=${CLIENTS:-"1 8"}
out=$here/results
smoke=
if [ "${1:-}" = --smoke ]; then
	smoke=1
	DURATION=2
	REPEATS=1
	out=$(mktemp -d /tmp/pg_tenure-bench-smoke.XXXXXX)
fi

if [ "$(id -u)" != 0 ]; then
	echo "bench/run.sh: run as root" >&2
	exit 2
fi
if [ -z "${TENURE_SKIP_APT:-}" ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential \
		postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libpq-dev gnuplot-nox >/dev/null
fi
id "$BENCH_USER" >/dev/null 2>&1 || useradd -m "$BENCH_USER"
if [ -z "${TENURE_SKIP_INSTALL:-}" ]; then
	build=$(mktemp -d /tmp/pg_tenure-bench-build.XXXXXX)
	cp -a "$top"/. "$build"/
	make -s -C "$build" PG_CONFIG=$PG_CONFIG with_llvm=no clean >/dev/null
	make -s -C "$build" PG_CONFIG=$PG_CONFIG with_llvm=no install >/dev/null
	rm -rf "$build"
fi

# the throwaway cluster
dir=$(mktemp -d /tmp/pg_tenure-bench.XXXXXX)
# the user runs the scripts from a copy: the checkout may sit where it
# cannot read (under /root)
cp -a "$here/scripts" "$here/setup.sql" "$dir"/
chown -R "$BENCH_USER": "$dir"
chmod 755 "$dir"
cd "$dir"
as_user() { runuser -u "$BENCH_USER" -- "$@"; }
port=54329
as_user $PG_BIN/initdb -D "$dir/data" -A trust >/dev/null
cat >>"$dir/data/postgresql.conf" <<EOF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
shared_preload_libraries = 'pg_tenure'
shared_buffers = '256MB'
max_connections = 100
tenure.max_leases = 20000
max_locks_per_transaction = 256
synchronous_commit = off
EOF
as_user $PG_BIN/pg_ctl -D "$dir/data" -l "$dir/log" -w start >/dev/null
cleanup() {
	as_user $PG_BIN/pg_ctl -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT

export PGHOST=$dir PGPORT=$port PGDATABASE=postgres
psql_q() { as_user env PGHOST=$dir PGPORT=$port $PG_BIN/psql -X -q -t -A -v ON_ERROR_STOP=1 -d postgres "$@"; }

# wait for the keeper, then create the objects
for _ in $(seq 300); do
	[ "$(psql_q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_tenure keeper'")" = 1 ] && break
	sleep 0.1
done
psql_q -f "$dir/setup.sql" >/dev/null
epoch=$(psql_q -c "SELECT tenure.current_epoch('bench-writer')")

# Scenarios: id | reference id | script | extra PGOPTIONS | description
scenarios=(
	"select1|select1|select1.sql||SELECT 1 (floor)"
	"leader_is|select1|leader_is.sql||is-leader: tenure.leader_is"
	"leader_row|select1|leader_row.sql||is-leader today: SELECT on a lease row with expiry"
	"renew|select1|renew.sql||renew: tenure.renew, a lease per client"
	"renew_row|select1|renew_row.sql||renew today: UPDATE of a lease row"
	"cycle|cycle_advisory|cycle.sql||acquire + release: tenure.acquire / tenure.release"
	"cycle_advisory|cycle_advisory|cycle_advisory.sql||acquire + release today: pg_try_advisory_lock / pg_advisory_unlock"
	"insert_plain|insert_plain|insert_plain.sql||INSERT into a plain table (reference)"
	"insert_trigger|insert_plain|insert_trigger.sql|-c app.epoch=$epoch|fenced INSERT today: PL/pgSQL trigger vs epoch row (not linearizable)"
	"insert_for_share|insert_plain|insert_for_share.sql||fenced INSERT today: epoch row FOR SHARE in the transaction"
	"insert_plain_local|insert_plain_local|insert_plain_local.sql||BEGIN; set_config(local); INSERT; COMMIT (reference)"
	"insert_fenced_local|insert_plain_local|insert_fenced_local.sql||fenced INSERT: pg_tenure, token presented in the transaction (set_config local)"
)

raw=$out/raw.csv
mkdir -p "$out"
echo "scenario,clients,repeat,tps,transactions,wal_bytes" >"$raw"

run_one() {
	local id=$1 script=$2 opts=$3 clients=$4 rep=$5
	local lsn0 lsn1 log tps n wal
	lsn0=$(psql_q -c "SELECT pg_current_wal_insert_lsn()")
	log=$(as_user env PGHOST=$dir PGPORT=$port PGOPTIONS="$opts" $PG_BIN/pgbench -n -M prepared \
		-c "$clients" -j "$(( clients < 2 ? 1 : 2 ))" -T "$DURATION" -D epoch="$epoch" \
		-f "$dir/scripts/$script" postgres 2>&1) || { echo "$log" >&2; return 1; }
	lsn1=$(psql_q -c "SELECT pg_current_wal_insert_lsn()")
	tps=$(echo "$log" | awk '/^tps = .*without initial connection time/ {print $3}')
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

echo "pg_tenure bench: ${DURATION}s per run, $REPEATS repeats, clients: $CLIENTS"
for rep in $(seq "$REPEATS"); do
	for c in $CLIENTS; do
		for s in "${scenarios[@]}"; do
			IFS='|' read -r id ref script opts desc <<<"$s"
			run_one "$id" "$script" "$opts" "$c" "$rep"
		done
	done
done

# Fenced INSERT, paired: on a noisy 2-core machine consecutive runs differ
# by up to 10%, more than the 5% target, so also alternate short plain and
# fenced runs and take the median of the per-pair ratios.
pairs=${PAIRS:-$([ -n "$smoke" ] && echo 1 || echo 20)}
pair_s=${PAIR_SECONDS:-$([ -n "$smoke" ] && echo 1 || echo 5)}
echo "fenced INSERT, $pairs paired runs of ${pair_s}s, 8 clients"
echo "pair,plain_tps,fenced_tps,ratio" >"$out/fenced_pairs.csv"
for i in $(seq "$pairs"); do
	pt() {
		as_user env PGHOST=$dir PGPORT=$port PGOPTIONS="$2" $PG_BIN/pgbench -n -M prepared -c 8 -j 2 \
			-T "$pair_s" -D epoch="$epoch" -f "$dir/scripts/$1" postgres 2>&1 |
			awk '/^tps = .*without initial connection time/ {print $3}'
	}
	# alternate which runs first, so that drift favours neither
	if [ $(( i % 2 )) = 1 ]; then
		a=$(pt insert_plain_local.sql "")
		b=$(pt insert_fenced_local.sql "")
	else
		b=$(pt insert_fenced_local.sql "")
		a=$(pt insert_plain_local.sql "")
	fi
	[ -n "$a" ] && [ -n "$b" ] || { echo "bench: paired fenced INSERT failed" >&2; exit 1; }
	echo "$i,$a,$b,$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.4f", b/a}')" >>"$out/fenced_pairs.csv"
done
pair_median=$(tail -n +2 "$out/fenced_pairs.csv" | cut -d, -f4 | sort -g |
	awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}')
pair_min=$(tail -n +2 "$out/fenced_pairs.csv" | cut -d, -f4 | sort -g | head -1)
pair_max=$(tail -n +2 "$out/fenced_pairs.csv" | cut -d, -f4 | sort -g | tail -1)
echo "  fenced/plain: median $pair_median ($pair_min..$pair_max)"

# Fenced INSERT, interleaved: one pgbench run whose 8 clients pick the plain
# or the fenced INSERT at random for each transaction, so both see exactly
# the same machine.  Each transaction's latency comes from pgbench's
# per-transaction log; with a fixed number of clients TPS is inversely
# proportional to latency, so plain/fenced mean latency is the TPS ratio.
mixes=${MIXES:-$([ -n "$smoke" ] && echo 1 || echo 5)}
mix_s=${MIX_SECONDS:-$([ -n "$smoke" ] && echo 1 || echo 10)}
echo "fenced INSERT, $mixes interleaved runs of ${mix_s}s, 8 clients"
echo "run,plain_tx,plain_mean_us,fenced_tx,fenced_mean_us,ratio" >"$out/fenced_mixed.csv"
for i in $(seq "$mixes"); do
	rm -f "$dir"/mix_log*
	as_user env PGHOST=$dir PGPORT=$port \
		$PG_BIN/pgbench -n -M prepared -c 8 -j 2 -T "$mix_s" -D epoch="$epoch" -l --log-prefix="$dir/mix_log" \
		-f "$dir/scripts/insert_plain_local.sql@1" -f "$dir/scripts/insert_fenced_local.sql@1" postgres >/dev/null 2>&1 ||
		{ echo "bench: interleaved fenced INSERT failed" >&2; exit 1; }
	# log lines: client transaction latency_us script epoch_s epoch_us
	cat "$dir"/mix_log* | awk -v i="$i" '
		{ n[$4]++; t[$4] += $3 }
		END {
			if (n[0] == 0 || n[1] == 0) exit 1
			printf "%d,%d,%.2f,%d,%.2f,%.4f\n", i, n[0], t[0] / n[0], n[1], t[1] / n[1], (t[0] / n[0]) / (t[1] / n[1])
		}' >>"$out/fenced_mixed.csv" || { echo "bench: interleaved run logged no transactions" >&2; exit 1; }
done
rm -f "$dir"/mix_log*
mix_median=$(tail -n +2 "$out/fenced_mixed.csv" | cut -d, -f6 | sort -g |
	awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}')
mix_min=$(tail -n +2 "$out/fenced_mixed.csv" | cut -d, -f6 | sort -g | head -1)
mix_max=$(tail -n +2 "$out/fenced_mixed.csv" | cut -d, -f6 | sort -g | tail -1)
echo "  fenced/plain (plain mean latency / fenced mean latency): median $mix_median ($mix_min..$mix_max)"

# Failover: the holder's backend exits while a candidate waits.
cc -O2 -Wall -Wextra -Werror -I"$($PG_CONFIG --includedir)" -o "$dir/failover" \
	"$here/failover.c" -L"$($PG_CONFIG --libdir)" -lpq
chmod 755 "$dir/failover"
failover_trials=${FAILOVER_TRIALS:-$([ -n "$smoke" ] && echo 10 || echo 200)}
failover_ttl=${FAILOVER_TTL_MS:-500}
today_trials=${TODAY_TRIALS:-$([ -n "$smoke" ] && echo 3 || echo 30)}
# the defaults (automatic hold-off, renewed every ttl/3) at 1/10 of the
# default ttl of 15 s: every trial takes up to a ttl
defaults_trials=${DEFAULTS_TRIALS:-$([ -n "$smoke" ] && echo 3 || echo 30)}
defaults_ttl=${DEFAULTS_TTL_MS:-1500}
echo "failover: $failover_trials trials each"
fo() { as_user env PGHOST=$dir PGPORT=$port PGDATABASE=postgres "$dir/failover" "$@" | tail -1; }
f_h0=$(fo holdoff0 "$failover_trials")
f_auto=$(fo automatic "$failover_trials" "$failover_ttl")
f_defaults=$(fo defaults "$defaults_trials" "$defaults_ttl")
f_today=$(fo today "$today_trials")
echo "  $f_h0"; echo "  $f_auto"; echo "  $f_defaults"; echo "  $f_today"
field() { echo "$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1==k {print $2}'; }
{
	echo "mode,trials,p50_ms,p99_ms,max_ms"
	for r in "$f_h0" "$f_auto" "$f_defaults" "$f_today"; do
		echo "$(echo "$r" | cut -d' ' -f1),$(field "$r" n),$(field "$r" p50),$(field "$r" p99),$(field "$r" max)"
	done
} >"$out/failover.csv"

# Scale: leader_is and renew with 10, 1,000 and 10,000 live leases.
scale_sizes=${SCALE_SIZES:-"10 1000 10000"}
echo "scale: $scale_sizes leases"
echo "leases,clients,op,tps" >"$out/scale.csv"
have=0
for n in $scale_sizes; do
	psql_q -c "SELECT count(*) FROM (SELECT tenure.create_lease('scale-' || i, '1 day', holdoff => '0'),
		tenure.acquire('scale-' || i, 'h') FROM generate_series($have + 1, $n) i) s" >/dev/null
	have=$n
	printf '\\set k random(1, %s)\nSELECT tenure.leader_is('"'"'scale-'"'"' || :k, '"'"'h'"'"');\n' "$n" >"$dir/scale_leader.sql"
	printf '\\set k random(1, %s)\nSELECT tenure.renew('"'"'scale-'"'"' || :k, '"'"'h'"'"');\n' "$n" >"$dir/scale_renew.sql"
	chmod 644 "$dir"/scale_*.sql
	cp "$dir/scale_leader.sql" "$dir/scale_leader_$n.sql"
	cp "$dir/scale_renew.sql" "$dir/scale_renew_$n.sql"
done
# repeated and interleaved like the other scenarios; medians below
echo "leases,clients,op,repeat,tps" >"$out/scale_raw.csv"
for rep in $(seq "$REPEATS"); do
	for c in $CLIENTS; do
		for n in $scale_sizes; do
			for op in leader renew; do
				t=$(as_user env PGHOST=$dir PGPORT=$port $PG_BIN/pgbench -n -M prepared -c "$c" \
					-j "$(( c < 2 ? 1 : 2 ))" -T "$DURATION" -f "$dir/scale_${op}_$n.sql" postgres 2>&1 |
					awk '/^tps = .*without initial connection time/ {print $3}')
				[ -n "$t" ] || { echo "bench: scale $op $n with $c clients failed" >&2; exit 1; }
				echo "$n,$c,$op,$rep,$t" >>"$out/scale_raw.csv"
				printf '  %-6s leases=%-6s c=%s r=%s tps=%s\n' "$op" "$n" "$c" "$rep" "$t"
			done
		done
	done
done
for c in $CLIENTS; do
	for n in $scale_sizes; do
		for op in leader renew; do
			m=$(awk -F, -v n="$n" -v c="$c" -v op="$op" '$1==n && $2==c && $3==op {print $5}' "$out/scale_raw.csv" |
				sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}')
			echo "$n,$c,$op,$m" >>"$out/scale.csv"
		done
	done
done
locks=$(psql_q -c "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 32321")
shm=$(psql_q -c "SELECT tenure.shared_memory_bytes()")
maxl=$(psql_q -c "SHOW tenure.max_leases")
capacity=$(psql_q -c "SELECT current_setting('max_locks_per_transaction')::int *
	(current_setting('max_connections')::int + current_setting('autovacuum_max_workers')::int + 1 +
	 current_setting('max_worker_processes')::int + current_setting('max_wal_senders')::int +
	 current_setting('max_prepared_transactions')::int)")

{
	echo
	echo "## Fenced INSERT, paired runs"
	echo
	echo "$pairs pairs of ${pair_s}-second runs, plain and fenced in alternating order, 8 clients (\`fenced_pairs.csv\`):"
	echo "fenced/plain TPS ratio median **$pair_median** (min $pair_min, max $pair_max)."
	echo
	echo "## Fenced INSERT, interleaved"
	echo
	echo "$mixes runs of ${mix_s} s in which each of 8 clients picks the plain or the fenced INSERT at random for every"
	echo "transaction (\`pgbench -f insert_plain_local.sql@1 -f insert_fenced_local.sql@1 -l\`), so both run on exactly the same machine"
	echo "state. Mean latencies come from pgbench's per-transaction log; at a fixed number of clients TPS is inversely"
	echo "proportional to latency, so the TPS ratio is plain mean latency / fenced mean latency (\`fenced_mixed.csv\`):"
	echo "median **$mix_median** (min $mix_min, max $mix_max)."
	echo
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
	echo "## Scale"
	echo
	echo "A random lease among N live ones per call; median of $REPEATS runs; ratio against the same operation with the fewest leases."
	echo
	echo "| live leases | clients | leader_is TPS | ratio | renew TPS | ratio |"
	echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
	first=${scale_sizes%% *}
	for c in $CLIENTS; do
		for n in $scale_sizes; do
			tps() { awk -F, -v n="$1" -v c="$c" -v op="$2" '$1==n && $2==c && $3==op {print $4}' "$out/scale.csv"; }
			l=$(tps "$n" leader); l0=$(tps "$first" leader)
			r=$(tps "$n" renew); r0=$(tps "$first" renew)
			printf '| %s | %s | %.0f | %.3f | %.0f | %.3f |\n' "$n" "$c" "$l" \
				"$(awk -v a="$l" -v b="$l0" 'BEGIN {print a/b}')" "$r" \
				"$(awk -v a="$r" -v b="$r0" 'BEGIN {print a/b}')"
		done
	done
	echo
	echo "- shared memory: $shm bytes for tenure.max_leases = $maxl, $(( shm / maxl )) bytes per lease slot"
	echo "- advisory locks held by the keeper: $locks (one per live tenure); the lock table here has room for $capacity locks"
	echo "  (max_locks_per_transaction x (max_connections + autovacuum workers + 1 + max_worker_processes + max_wal_senders + max_prepared_transactions));"
	echo "  with the default max_locks_per_transaction = 64 it would hold $(( capacity / 256 * 64 )), so 10,000 tenures need max_locks_per_transaction >= $(( (10000 + 1000) * 256 / capacity + 1 ))"
} >"$out/extra.md"

# medians, spread and ratios
summary=$out/latest.csv
echo "scenario,clients,tps_median,tps_min,tps_max,wal_bytes_per_op,reference,ratio,description" >"$summary"
for c in $CLIENTS; do
	for s in "${scenarios[@]}"; do
		IFS='|' read -r id ref script opts desc <<<"$s"
		med() { awk -F, -v s="$1" -v c="$c" '$1==s && $2==c {print $4}' "$raw" | sort -g |
			awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
		m=$(med "$id")
		r=$(med "$ref")
		lo=$(awk -F, -v s="$id" -v c="$c" '$1==s && $2==c {print $4}' "$raw" | sort -g | head -1)
		hi=$(awk -F, -v s="$id" -v c="$c" '$1==s && $2==c {print $4}' "$raw" | sort -g | tail -1)
		wal=$(awk -F, -v s="$id" -v c="$c" '$1==s && $2==c {w+=$6; n+=$5} END {printf "%.1f", w/n}' "$raw")
		ratio=$(awk -v a="$m" -v b="$r" 'BEGIN {printf "%.3f", a/b}')
		echo "$id,$c,$m,$lo,$hi,$wal,$ref,$ratio,\"$desc\"" >>"$summary"
	done
done

pgver=$(psql_q -c "SELECT version()")
cpu=$(awk -F: '/model name/ {print $2; exit}' /proc/cpuinfo | sed 's/^ *//')
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)
{
	echo "# pg_tenure benchmark results"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- command: \`bash bench/run.sh${smoke:+ --smoke}\` (DURATION=$DURATION REPEATS=$REPEATS CLIENTS=\"$CLIENTS\")"
	echo "- machine: $(nproc) cores, $cpu, $mem"
	echo "- server: $pgver"
	echo "- settings: shared_buffers 256MB, synchronous_commit off, tenure.max_leases 20000, max_locks_per_transaction 256"
	echo "- pgbench: -M prepared -T $DURATION, -j 2 for 8 clients; median of $REPEATS runs (min..max)"
	echo
	echo "| scenario | clients | TPS median (min..max) | WAL B/op | ratio | against |"
	echo "| --- | ---: | ---: | ---: | ---: | --- |"
	tail -n +2 "$summary" | while IFS=, read -r id c m lo hi wal ref ratio desc; do
		desc=${desc#\"}
		desc=${desc%\"}
		printf '| %s | %s | %.0f (%.0f..%.0f) | %s | %s | %s |\n' "$desc" "$c" "$m" "$lo" "$hi" "$wal" "$ratio" "$ref"
	done
	[ -f "$out/extra.md" ] && cat "$out/extra.md"
} >"$out/latest.md"

if command -v gnuplot >/dev/null; then
	awk -F, 'NR>1 && $2==8 {print $1, $8}' "$summary" >"$out/chart.dat"
	gnuplot <<EOF
set terminal pngcairo size 1000,500 noenhanced
set output '$out/latest.png'
set title 'pg_tenure: TPS ratio against the reference, 8 clients (higher is better)'
set style data histograms
set style fill solid 0.8
set boxwidth 0.8
set xtics rotate by -35
set yrange [0:*]
set grid ytics
plot '$out/chart.dat' using 2:xtic(1) notitle
EOF
	rm -f "$out/chart.dat"
fi

cat "$out/latest.md"
if [ -n "$smoke" ]; then
	rm -rf "$out"
fi
