#!/usr/bin/env bash
#
# What pg_tenure's event triggers cost DDL on tables outside every fenced
# tree: pgbench runs bench/scripts/ddl.sql (CREATE TABLE, ALTER TABLE ...
# ADD COLUMN, DROP TABLE, each its own transaction) with 1 client in a
# database without pg_tenure (ddl_plain), in one with it (ddl_tenure), and
# in that one with its event triggers disabled, on a throwaway cluster with
# run.sh's settings (bench/lib.sh), the three taking turns.  It reports
# the median latency without / the median latency with (1.0: the
# extension costs nothing) and the same ratio run by run (each run with
# pg_tenure against the run without of the same turn); the same two for
# the database with pg_tenure, its event triggers disabled / enabled
# (the same tables in the same files: what the triggers alone cost); and
# the CPU time the backend spends per script, which a neighbour's load on
# a small machine inflates less than latency.
#
#   bash bench/ddl.sh                     # as root; about 5 minutes
#   bash bench/ddl.sh >bench/results/ddl.md   # what bench/run.sh does
#   PG_CONFIG=/some/pg_config TENURE_SKIP_APT=1 TENURE_SKIP_INSTALL=1 bash bench/ddl.sh
#                                         # against a PostgreSQL where pg_tenure is installed
#
# Cases; both databases of a case hold the same tables:
#   empty      nothing but the script's own table
#   children   a table with DDL_CHILDREN inheritance children
#   fenced     the same, the pg_tenure database's tree fenced by a lease
#   planner    the children case, the sessions with enable_seqscan,
#              enable_bitmapscan and enable_indexonlyscan off (PGOPTIONS):
#              no plan of pg_tenure's may turn slow or be JIT-compiled
#
# Environment: DDL_SECONDS (5, per run), DDL_RUNS (3 per side and case),
# DDL_CHILDREN (5000), DDL_CASES (all, in the order above), DDL_CSV (a
# file that receives every run), TENURE_SKIP_APT, TENURE_SKIP_INSTALL.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
secs=${DDL_SECONDS:-5}
runs=${DDL_RUNS:-3}
children=${DDL_CHILDREN:-5000}
cases=${DDL_CASES:-"empty children fenced planner"}
csv=${DDL_CSV:-}

bench_require_root
bench_prepare
bench_cluster_start 54333

# ddl_db NAME EXTENSION CHILDREN: a database, with pg_tenure or not, with
# a table of CHILDREN inheritance children or not
ddl_db() {
	local db=$1 ext=$2 n=$3
	psql_q -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $db" \
		-c "CREATE DATABASE $db" >/dev/null
	if [ "$n" -gt 0 ]; then
		psql_q -d "$db" -c "CREATE TABLE public.ddl_parent (a int)" >/dev/null
		psql_q -d "$db" >/dev/null <<SQL
SELECT format('CREATE TABLE public.ddl_child_%s () INHERITS (public.ddl_parent)', i) FROM generate_series(1, $n) i
\gexec
SQL
	fi
	if [ "$ext" = 1 ]; then
		psql_q -d "$db" -c "CREATE EXTENSION pg_tenure" >/dev/null
	fi
}

# ddl_settle DB...: vacuum and analyze the databases just made (their
# catalogs too) and checkpoint, so that the runs start from the same state:
# otherwise the database made first runs slower for a while
ddl_settle() {
	local db
	for db in "$@"; do
		psql_q -d "$db" -c "VACUUM (ANALYZE)" >/dev/null
	done
	psql_q -c "CHECKPOINT" >/dev/null
}

# ddl_run DB PGOPTIONS: one pgbench run; prints its mean latency in ms and
# the CPU time its backend spent per script in us (utime + stime from
# /proc, read until the backend exits), which other processes' load on
# the machine does not inflate
ddl_run() {
	local db=$1 opts=$2 bg pid= stat= last= n
	as_user env PGHOST=$dir PGPORT=$port PGOPTIONS="$opts" $PG_BIN/pgbench -n -c 1 -T "$secs" \
		-f "$dir/scripts/ddl.sql" "$db" >"$dir/ddl_run.log" 2>&1 &
	bg=$!
	while kill -0 "$bg" 2>/dev/null; do
		[ -n "$pid" ] || pid=$(psql_q -c "SELECT pid FROM pg_stat_activity
			WHERE datname = '$db' AND application_name = 'pgbench'" 2>/dev/null) || pid=
		if [ -n "$pid" ] && stat=$(cat "/proc/$pid/stat" 2>/dev/null); then last=$stat; fi
		sleep 0.05
	done
	wait "$bg" || { cat "$dir/ddl_run.log" >&2; return 1; }
	n=$(awk '/number of transactions actually processed/ {print $NF}' "$dir/ddl_run.log")
	n=${n%%/*}
	# fields 14 and 15 of /proc/PID/stat (the command name has no space)
	echo "$(awk '/^latency average/ {print $4}' "$dir/ddl_run.log")" \
		"$(echo "$last" | awk -v n="$n" -v hz="$(getconf CLK_TCK)" '{printf "%.0f", ($14 + $15) * 1e6 / hz / n}')"
}

# ddl_triggers STATE: pg_tenure's event triggers in ddl_tenure enabled
# (ALWAYS, as installed) or disabled: the same database without their cost
ddl_triggers() {
	local t
	for t in tenure_fence_alter tenure_fence_rewrite tenure_fence_drop tenure_fence_children; do
		psql_q -d ddl_tenure -c "ALTER EVENT TRIGGER $t $1" >/dev/null
	done
}

# each side's latencies and CPU times, space-separated, by side
declare -A lat cpu
# ddl_median "X Y ...": the median of the numbers
ddl_median() { tr ' ' '\n' <<<"$1" | grep . | bench_median; }
# ddl_ratio "A..." "B...": A's median / B's median, and the ratio of each
# run of A to the run of B of the same turn: "ratio|median (min..max)"
ddl_ratio() {
	local a=($1) b=($2) i pairs
	pairs=$(for i in "${!a[@]}"; do awk -v x="${a[$i]}" -v y="${b[$i]}" 'BEGIN {print x / y}'; done)
	printf '%s|%.2f (%.2f..%.2f)' "$(awk -v x="$(ddl_median "$1")" -v y="$(ddl_median "$2")" 'BEGIN {printf "%.2f", x / y}')" \
		"$(echo "$pairs" | bench_median)" "$(echo "$pairs" | sort -g | head -1)" "$(echo "$pairs" | sort -g | tail -1)"
}

rows=()
for c in $cases; do
	opts=
	n=$children
	case $c in
		empty) n=0 ;;
		children | fenced) ;;
		planner) opts="-c enable_seqscan=off -c enable_bitmapscan=off -c enable_indexonlyscan=off" ;;
		*) echo "ddl.sh: unknown case $c" >&2; exit 2 ;;
	esac
	ddl_db ddl_plain 0 "$n"
	ddl_db ddl_tenure 1 "$n"
	if [ "$c" = fenced ]; then
		psql_q -d ddl_tenure -c "SELECT tenure.create_lease('ddl', '1 day')" \
			-c "SELECT tenure.fence_table('public.ddl_parent', 'ddl')" >/dev/null
	fi
	ddl_settle ddl_plain ddl_tenure
	for side in plain off tenure; do
		lat[$side]=
		cpu[$side]=
	done
	for r in $(seq "$runs"); do
		# the three sides take turns, each run starting with the next
		case $((r % 3)) in
			1) order="plain off tenure" ;;
			2) order="off tenure plain" ;;
			0) order="tenure plain off" ;;
		esac
		for side in $order; do
			db=ddl_tenure
			case $side in
				plain) db=ddl_plain ;;
				off) ddl_triggers DISABLE ;;
				tenure) ddl_triggers "ENABLE ALWAYS" ;;
			esac
			read -r ms us <<<"$(ddl_run "$db" "$opts")"
			lat[$side]+=" $ms"
			cpu[$side]+=" $us"
			[ -n "$csv" ] && echo "$c,$side,$r,$ms,$us" >>"$csv"
			echo "  $c $side run $r: $ms ms, backend CPU $us us per script" >&2
		done
	done
	ddl_triggers "ENABLE ALWAYS"
	rows+=("$c|$(ddl_median "${lat[plain]}")|$(ddl_median "${lat[tenure]}")|$(ddl_ratio "${lat[plain]}" "${lat[tenure]}")|$(ddl_ratio "${lat[off]}" "${lat[tenure]}")|$(ddl_median "${cpu[plain]}")|$(ddl_median "${cpu[off]}")|$(ddl_median "${cpu[tenure]}")")
done

case_desc() {
	case $1 in
		empty) echo "empty databases" ;;
		children) echo "$children inheritance children of one table in each" ;;
		fenced) echo "$children inheritance children, their tree fenced in the pg_tenure database" ;;
		planner) echo "$children children; enable_seqscan, enable_bitmapscan, enable_indexonlyscan off" ;;
	esac
}

echo "## DDL outside every fenced tree"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores; $($PG_BIN/postgres --version)"
echo "- script (\`bench/scripts/ddl.sql\`), 1 client, \`pgbench -n -c 1 -T $secs\`, $runs runs of each: without pg_tenure, with it and its event triggers disabled, with it; taking turns:"
echo
sed 's/^/    /' "$dir/scripts/ddl.sql"
echo
echo "| case | latency without pg_tenure (median ms per script) | with | ratio without / with: of the medians | run by run, median (min..max) | the same database, event triggers disabled / enabled: of the medians | run by run | backend CPU per script (median us): without | disabled | with |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for row in "${rows[@]}"; do
	IFS='|' read -r c mp mt ratio pr oratio opr cp co ct <<<"$row"
	echo "| $(case_desc "$c") | $mp | $mt | **${ratio}x** | $pr | **${oratio}x** | $opr | $cp | $co | $ct |"
done
