#!/usr/bin/env bash
#
# Where acquire + release spends its time: a CPU profile of the pgbench
# backends and the pg_tenure keeper while pgbench runs bench/scripts/cycle.sql
# (tenure.acquire + tenure.release), on a throwaway cluster with run.sh's
# settings (bench/lib.sh).
#
#   bash bench/profile.sh                              # as root; about 1 minute
#   bash bench/profile.sh >bench/results/profile.txt   # what bench/run.sh does
#
# For each client count: pgbench runs PROFILE_SECONDS + 3 s; after 1 s,
# `perf record -g -F PROFILE_FREQ -p <backends>,<keeper>` samples for
# PROFILE_SECONDS; then `perf report --children --sort dso,sym --stdio
# -g none` gives pg_tenure's functions and PostgreSQL's usual suspects by
# children % (the share of samples with the function on the stack).
#
# Environment: PROFILE_SECONDS (10), PROFILE_CLIENTS ("1 8"), PROFILE_SCRIPT
# (cycle.sql, a file of bench/scripts), PROFILE_FREQ (1999), PERF
# (/usr/bin/perf), TENURE_SKIP_APT, TENURE_SKIP_INSTALL.  Exits 3 if perf
# cannot record here (a container without perf_event_open, say), after
# printing the TPS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
secs=${PROFILE_SECONDS:-10}
clients=${PROFILE_CLIENTS:-"1 8"}
script=${PROFILE_SCRIPT:-cycle.sql}
freq=${PROFILE_FREQ:-1999}
perf=${PERF:-/usr/bin/perf}

# PostgreSQL functions worth watching under acquire + release
suspects="PostgresMain exec_execute_message exec_bind_message PortalRun ExecutorRun
SPI_execute_plan SPI_execute SPI_connect SPI_finish SPI_prepare
CommitTransactionCommand CommitTransaction PreCommit_Notify AtEOXact_SPI
XLogInsert XLogInsertRecord XLogFlush XLogBackgroundFlush issue_xlog_fsync
WaitLatch WaitEventSetWait SetLatch ConditionVariableSleep ConditionVariableBroadcast
LockAcquireExtended LockRelease LWLockAcquire LWLockRelease hash_seq_search hash_search_with_hash_value
heap_insert heap_update heap_delete simple_heap_update ExecInsert ExecUpdate
pq_getbyte secure_read secure_write"

bench_require_root
bench_prepare linux-perf
bench_cluster_start 54331
epoch=$(psql_q -c "SELECT tenure.current_epoch('bench-writer')")
keeper=$(bench_keeper_pid)

perf_ok=1
if ! [ -x "$perf" ] || ! "$perf" record -q -o "$dir/perf_probe.data" -- true >/dev/null 2>"$dir/perf_probe.err"; then
	perf_ok=
fi
rm -f "$dir/perf_probe.data"

echo "pg_tenure profile: $script, perf record -g -F $freq, ${secs} s per client count"
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores; $($PG_BIN/postgres --version)"
echo "- settings: $(bench_settings_line)"
echo "- the script:"
sed 's/^/    /' "$dir/scripts/$script"
[ -n "$perf_ok" ] || { echo "- perf cannot record here: $(tail -1 "$dir/perf_probe.err")"; }

summary=()
for c in $clients; do
	log=$dir/pgbench_$c.log
	as_user env PGHOST=$dir PGPORT=$port $PG_BIN/pgbench -n -M prepared -c "$c" -j "$((c < 2 ? 1 : 2))" \
		-T $((secs + 3)) -D epoch="$epoch" -f "$dir/scripts/$script" postgres >"$log" 2>&1 &
	bench=$!
	# its backends, once all have connected; not pgbench's first
	# connection, which it closes at once (and which alone would pass for
	# the one backend of a single client)
	pids=
	for _ in $(seq 200); do
		pids=$(psql_q -c "SELECT string_agg(pid::text, ',') FROM pg_stat_activity
			WHERE application_name = 'pgbench' AND backend_start < now() - interval '200 ms'")
		[ -n "$pids" ] && [ "$(echo "$pids" | tr ',' '\n' | wc -l)" = "$c" ] && break
		pids=
		sleep 0.05
	done
	if [ -z "$pids" ]; then
		cat "$log" >&2
		echo "profile: pgbench's $c clients did not connect" >&2
		exit 1
	fi
	sleep 1
	data=$dir/perf_$c.data
	if [ -n "$perf_ok" ]; then
		"$perf" record -q -g -F "$freq" -p "$pids,$keeper" -o "$data" -- sleep "$secs" >/dev/null 2>"$dir/perf_$c.err" ||
			{ cat "$dir/perf_$c.err" >&2; echo "profile: perf record failed" >&2; exit 1; }
	fi
	wait "$bench" || { cat "$log" >&2; echo "profile: pgbench failed" >&2; exit 1; }
	tps=$(awk '/^tps = .*without initial connection time/ {printf "%.0f", $3}' "$log")
	echo
	echo "== $c client$([ "$c" = 1 ] || echo s): $tps TPS"
	if [ -z "$perf_ok" ]; then
		summary+=("$c client$([ "$c" = 1 ] || echo s): $tps TPS (no profile: perf cannot record here)")
		continue
	fi
	# children % and self % per (object, symbol), callers included
	"$perf" report -i "$data" --children --sort dso,sym --stdio -g none 2>/dev/null |
		awk '$1 ~ /%$/ && $2 ~ /%$/ {obj = $3; sym = $5; for (i = 6; i <= NF; i++) sym = sym " " $i; print $1, $2, obj, sym}' \
			>"$dir/report_$c.txt"
	# each process's share of the samples (self: they add up to 100%)
	"$perf" report -i "$data" --no-children --stdio -g none --sort pid 2>/dev/null >"$dir/pids_$c.txt"
	samples=$(awk '/^# Samples:/ {print $3; exit}' "$dir/pids_$c.txt")
	keeper_pct=$(awk -v k="$keeper" '$1 ~ /%$/ && $2 ~ ("^" k ":") {print $1}' "$dir/pids_$c.txt")
	echo "samples: $samples, of which the keeper (pid $keeper): ${keeper_pct:-0%}"
	echo
	echo "pg_tenure's functions (pg_tenure.so), children % / self %:"
	awk '$3 == "pg_tenure.so" && n++ < 25 {printf "  %8s %8s  %s\n", $1, $2, $4}' "$dir/report_$c.txt"
	echo
	echo "PostgreSQL's usual suspects, children % / self %:"
	awk -v list="$suspects" 'BEGIN {n = split(list, l, /[ \n]+/); for (i = 1; i <= n; i++) want[l[i]] = 1}
		($4 in want) && !seen[$4]++ {printf "  %8s %8s  %s\n", $1, $2, $4}' "$dir/report_$c.txt"
	echo
	echo "top 25 by children %:"
	awk 'NR <= 25 {printf "  %8s %8s  %-22s %s\n", $1, $2, $3, $4}' "$dir/report_$c.txt"
	top_t=$(awk '$3 == "pg_tenure.so" && n++ < 6 {printf "%s%s %s", (n > 1 ? ", " : ""), $4, $1}' "$dir/report_$c.txt")
	top_s=$(awk -v list="$suspects" 'BEGIN {n = split(list, l, /[ \n]+/); for (i = 1; i <= n; i++) want[l[i]] = 1}
		($4 in want) && $4 != "PostgresMain" && $4 != "PortalRun" && !seen[$4]++ && m++ < 6 {
			printf "%s%s %s", (m > 1 ? ", " : ""), $4, $1}' "$dir/report_$c.txt")
	summary+=("$c client$([ "$c" = 1 ] || echo s): $tps TPS; keeper ${keeper_pct:-0%} of the samples"
		"  pg_tenure (children %): $top_t"
		"  PostgreSQL (children %): $top_s")
done

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
[ -n "$perf_ok" ] || exit 3
