#!/usr/bin/env bash
#
# What pg_tenure's event triggers cost DDL on tables outside every fenced
# tree: pgbench runs bench/scripts/ddl.sql (CREATE TABLE, ALTER TABLE ...
# ADD COLUMN, DROP TABLE, each its own transaction) with 1 client in a
# database with pg_tenure and in one without, on a throwaway cluster with
# run.sh's settings (bench/lib.sh), the two databases taking turns, and
# reports the median latency without / the median latency with (1.0: the
# extension costs nothing), and the same ratio run by run (each run with
# pg_tenure against the run without next to it), which a neighbour's load
# disturbs less on a small machine.
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
		psql_q -d "$db" -c "CREATE TABLE ddl_parent (a int)" >/dev/null
		psql_q -d "$db" >/dev/null <<SQL
SELECT format('CREATE TABLE ddl_child_%s () INHERITS (ddl_parent)', i) FROM generate_series(1, $n) i
\gexec
SQL
	fi
	if [ "$ext" = 1 ]; then
		psql_q -d "$db" -c "CREATE EXTENSION pg_tenure" >/dev/null
	fi
}

# ddl_run DB PGOPTIONS: one pgbench run; prints its mean latency in ms
ddl_run() {
	local log
	log=$(as_user env PGHOST=$dir PGPORT=$port PGOPTIONS="$2" $PG_BIN/pgbench -n -c 1 -T "$secs" \
		-f "$dir/scripts/ddl.sql" "$1" 2>&1) || { echo "$log" >&2; return 1; }
	echo "$log" | awk '/^latency average/ {print $4}'
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
			-c "SELECT tenure.fence_table('ddl_parent', 'ddl')" >/dev/null
	fi
	plain=()
	tenure=()
	for r in $(seq "$runs"); do
		# alternate which database goes first
		if [ $((r % 2)) = 1 ]; then order="ddl_plain ddl_tenure"; else order="ddl_tenure ddl_plain"; fi
		for db in $order; do
			ms=$(ddl_run "$db" "$opts")
			if [ "$db" = ddl_plain ]; then plain+=("$ms"); else tenure+=("$ms"); fi
			[ -n "$csv" ] && echo "$c,$db,$r,$ms" >>"$csv"
			echo "  $c $db run $r: $ms ms" >&2
		done
	done
	mp=$(printf '%s\n' "${plain[@]}" | bench_median)
	mt=$(printf '%s\n' "${tenure[@]}" | bench_median)
	# the ratio of each run with pg_tenure to the run without next to it
	pairs=$(for i in "${!plain[@]}"; do awk -v a="${plain[$i]}" -v b="${tenure[$i]}" 'BEGIN {print a / b}'; done)
	pm=$(echo "$pairs" | bench_median)
	plo=$(echo "$pairs" | sort -g | head -1)
	phi=$(echo "$pairs" | sort -g | tail -1)
	rows+=("$c|$mp|$mt|$(awk -v a="$mp" -v b="$mt" 'BEGIN {printf "%.2f", a / b}')|$(printf '%.2f (%.2f..%.2f)' "$pm" "$plo" "$phi")")
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
echo "| case | latency without pg_tenure (median ms per script) | with | ratio of the medians (without / with) | ratio run by run: median (min..max) |"
echo "| --- | ---: | ---: | ---: | ---: |"
for row in "${rows[@]}"; do
	IFS='|' read -r c mp mt ratio pr <<<"$row"
	echo "| $(case_desc "$c") | $mp | $mt | **${ratio}x** | $pr |"
done
