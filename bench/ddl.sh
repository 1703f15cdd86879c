#!/usr/bin/env bash
#
# What pg_tenure's event triggers cost DDL on tables outside every fenced
# tree: pgbench runs bench/scripts/ddl.sql (CREATE TABLE, ALTER TABLE ...
# ADD COLUMN, DROP TABLE, each its own transaction) with 1 client in a
# database with pg_tenure and in one without, on a throwaway cluster with
# run.sh's settings (bench/lib.sh), the two databases taking turns, and
# reports the median latency without / the median latency with (1.0: the
# extension costs nothing), the same ratio run by run (each run with
# pg_tenure against the run without next to it), and the ratio of the CPU
# time the backend spends per script, which a neighbour's load on a small
# machine does not disturb.
#
#   bash bench/ddl.sh                     # as root; about 4 minutes
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
# Environment: DDL_SECONDS (5, per run), DDL_RUNS (3 per database and
# case), DDL_CHILDREN (5000), DDL_CASES (all, in the order above),
# DDL_CSV (a file that receives every run), TENURE_SKIP_APT,
# TENURE_SKIP_INSTALL.
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
	plain=()
	tenure=()
	plain_cpu=()
	tenure_cpu=()
	for r in $(seq "$runs"); do
		# alternate which database goes first
		if [ $((r % 2)) = 1 ]; then order="ddl_plain ddl_tenure"; else order="ddl_tenure ddl_plain"; fi
		for db in $order; do
			read -r ms us <<<"$(ddl_run "$db" "$opts")"
			if [ "$db" = ddl_plain ]; then
				plain+=("$ms")
				plain_cpu+=("$us")
			else
				tenure+=("$ms")
				tenure_cpu+=("$us")
			fi
			[ -n "$csv" ] && echo "$c,$db,$r,$ms,$us" >>"$csv"
			echo "  $c $db run $r: $ms ms, backend CPU $us us per script" >&2
		done
	done
	mp=$(printf '%s\n' "${plain[@]}" | bench_median)
	mt=$(printf '%s\n' "${tenure[@]}" | bench_median)
	cp=$(printf '%s\n' "${plain_cpu[@]}" | bench_median)
	ct=$(printf '%s\n' "${tenure_cpu[@]}" | bench_median)
	# the ratio of each run with pg_tenure to the run without next to it
	pairs=$(for i in "${!plain[@]}"; do awk -v a="${plain[$i]}" -v b="${tenure[$i]}" 'BEGIN {print a / b}'; done)
	pm=$(echo "$pairs" | bench_median)
	plo=$(echo "$pairs" | sort -g | head -1)
	phi=$(echo "$pairs" | sort -g | tail -1)
	rows+=("$c|$mp|$mt|$(awk -v a="$mp" -v b="$mt" 'BEGIN {printf "%.2f", a / b}')|$(printf '%.2f (%.2f..%.2f)' "$pm" "$plo" "$phi")|$cp|$ct|$(awk -v a="$cp" -v b="$ct" 'BEGIN {printf "%.2f", a / b}')")
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
echo "- script (\`bench/scripts/ddl.sql\`), 1 client, \`pgbench -n -c 1 -T $secs\`, $runs runs per database, the two databases alternating:"
echo
sed 's/^/    /' "$dir/scripts/ddl.sql"
echo
echo "| case | latency without pg_tenure (median ms per script) | with | ratio of the medians (without / with) | ratio run by run: median (min..max) | backend CPU per script without (median us) | with | CPU ratio |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for row in "${rows[@]}"; do
	IFS='|' read -r c mp mt ratio pr cp ct cratio <<<"$row"
	echo "| $(case_desc "$c") | $mp | $mt | **${ratio}x** | $pr | $cp | $ct | ${cratio}x |"
done
