#!/usr/bin/env bash
#
# Acquire + release against the floor of writing its rows by hand:
# bench/scripts/cycle.sql (tenure.acquire + tenure.release) and
# cycle_sql.sql (the same rows by plain SQL, no checks) in alternating
# separate pgbench runs, and the latency of a new connection's first calls.
#
#   bash bench/floor.sh                 # as root; about 4 minutes a build on 2 cores
#   BUILDS="before=/a/pg_config after=/b/pg_config" TENURE_SKIP_INSTALL=1 bash bench/floor.sh
#
# Each build named in BUILDS (label=pg_config; default: this checkout,
# built and installed as bench/lib.sh does) gets a throwaway cluster with
# bench/lib.sh's settings and two databases, one per shape:
#
#   own    one lease per client and nothing else (bench-cycle-0 ..), the
#          simple protocol (pgbench -M simple)
#   bench  bench/setup.sql's objects (64 cycle leases, 66 held leases, a
#          fenced table), prepared statements, as bench/run.sh runs them
#
# Every client acquires and releases its own lease (bench-cycle-:client_id).
# A pair is one run of each script; PAIRS pairs per shape, client count and
# build, the builds, shapes and client counts taking turns and the order of
# the two scripts alternating from pair to pair, so that whatever else loads
# the machine hits every side alike.  The report gives, per build, shape and
# client count, the median TPS of each script, the ratio of the medians,
# and the min..max of the pairs' ratios.
#
# First calls: FIRST_TRIALS leases per build, each acquired and released
# three times by a new connection (psql, \timing) while not yet used since
# the server started (the call builds its shared entry from its row), then
# three times by another new connection; the median of the first, second
# and third call (acquire and release added up), in ms.
#
# Environment: BUILDS, PAIRS (5), DURATION (4 s per run), CLIENTS ("1 8"),
# SHAPES ("own bench"), FIRST_TRIALS (15), TENURE_SKIP_APT,
# TENURE_SKIP_INSTALL.  Prints the report; OUT (a directory) also keeps
# floor.csv (every run) and floor.md (the report).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"

pairs=${PAIRS:-5}
secs=${DURATION:-4}
clients=${CLIENTS:-"1 8"}
shapes=${SHAPES:-"own bench"}
first_trials=${FIRST_TRIALS:-15}

bench_require_root
if [ -z "${BUILDS:-}" ]; then
	bench_prepare
	BUILDS="this=$PG_CONFIG"
fi
max_clients=$(echo "$clients" | tr ' ' '\n' | sort -n | tail -1)

work=$(mktemp -d /tmp/pg_tenure-floor.XXXXXX)
chown "$BENCH_USER": "$work"
chmod 755 "$work"
cp -a "$here/scripts" "$here/setup.sql" "$work"/
chown -R "$BENCH_USER": "$work"
labels=()
declare -A bin port
floor_cleanup() {
	local l
	for l in "${labels[@]}"; do
		as_user "${bin[$l]}/pg_ctl" -D "$work/$l" -m fast stop >/dev/null 2>&1 || true
	done
	rm -rf "$work"
}
trap floor_cleanup EXIT

# q LABEL DB SQL...: psql on that build's cluster
q() {
	local l=$1 db=$2
	shift 2
	as_user env PGHOST="$work" PGPORT="${port[$l]}" "${bin[$l]}/psql" -X -q -t -A \
		-v ON_ERROR_STOP=1 -d "$db" "$@"
}

# a cluster per build, with bench/lib.sh's settings
p=54340
for b in $BUILDS; do
	l=${b%%=*}
	labels+=("$l")
	bin[$l]=$(dirname "${b#*=}")
	port[$l]=$p
	p=$((p + 1))
	as_user "${bin[$l]}/initdb" -D "$work/$l" -A trust >/dev/null
	{
		echo "port = ${port[$l]}"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$work'"
		bench_settings
	} >>"$work/$l/postgresql.conf"
	as_user "${bin[$l]}/pg_ctl" -D "$work/$l" -l "$work/$l.log" -w start >/dev/null
	for _ in $(seq 300); do
		[ "$(q "$l" postgres -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_tenure keeper'")" = 1 ] && break
		sleep 0.1
	done
	q "$l" postgres -f "$work/setup.sql" >/dev/null
	q "$l" postgres -c "CREATE DATABASE own" >/dev/null
	q "$l" own >/dev/null <<EOF
CREATE EXTENSION pg_tenure;
SELECT tenure.create_lease('bench-cycle-' || i, '1 day', holdoff => '0') FROM generate_series(0, $max_clients - 1) i;
SELECT tenure.create_lease('first-' || i, '1 day', holdoff => '0') FROM generate_series(1, $first_trials) i;
CREATE TABLE bench_cycle_row (name text PRIMARY KEY, epoch bigint NOT NULL);
INSERT INTO bench_cycle_row SELECT 'bench-cycle-' || i, 0 FROM generate_series(0, $max_clients - 1) i;
CREATE TABLE bench_cycle_history (lease text NOT NULL, epoch bigint NOT NULL, holder text NOT NULL,
	started timestamptz NOT NULL, ended timestamptz, end_reason text, PRIMARY KEY (lease, epoch));
CREATE INDEX ON bench_cycle_history (lease) WHERE ended IS NULL;
EOF
done

# run LABEL SHAPE CLIENTS SCRIPT: the TPS of one run
run() {
	local l=$1 shape=$2 c=$3 script=$4 db=postgres mode=prepared log
	if [ "$shape" = own ]; then db=own mode=simple; fi
	log=$(as_user env PGHOST="$work" PGPORT="${port[$l]}" "${bin[$l]}/pgbench" -n -M "$mode" \
		-c "$c" -j "$((c < 2 ? 1 : 2))" -T "$secs" -f "$work/scripts/$script" "$db" 2>&1) ||
		{ echo "$log" >&2; echo "floor: pgbench failed ($l $shape $c $script)" >&2; exit 1; }
	echo "$log" | awk '/^tps = .*without initial connection time/ {print $3}'
}

csv=$work/floor.csv
echo "build,shape,clients,pair,cycle_tps,cycle_sql_tps" >"$csv"
echo "floor: $pairs pairs of ${secs} s runs; builds: ${labels[*]}; shapes: $shapes; clients: $clients" >&2
for i in $(seq "$pairs"); do
	for shape in $shapes; do
		for c in $clients; do
			# the builds take turns, in an order that alternates too
			order=("${labels[@]}")
			if [ $((i % 2)) = 0 ]; then
				order=()
				for ((k = ${#labels[@]} - 1; k >= 0; k--)); do order+=("${labels[$k]}"); done
			fi
			for l in "${order[@]}"; do
				if [ $((i % 2)) = 1 ]; then
					a=$(run "$l" "$shape" "$c" cycle.sql)
					s=$(run "$l" "$shape" "$c" cycle_sql.sql)
				else
					s=$(run "$l" "$shape" "$c" cycle_sql.sql)
					a=$(run "$l" "$shape" "$c" cycle.sql)
				fi
				echo "$l,$shape,$c,$i,$a,$s" >>"$csv"
				printf '  %-8s %-6s c=%s pair %s: cycle %s, cycle_sql %s\n' "$l" "$shape" "$c" "$i" "$a" "$s" >&2
			done
		done
	done
done

# first calls: a new connection, acquire + release three times, of a lease
# not used since the server started (its shared entry is built from its
# row first), then in another new connection of the same lease
first=$work/first.csv
echo "build,trial,lease,call,ms" >"$first"
for t in $(seq "$first_trials"); do
	for l in "${labels[@]}"; do
		for lease in cold warm; do
			out=$(q "$l" own <<EOF
\\timing on
SELECT tenure.acquire('first-$t', 'h');
SELECT tenure.release('first-$t', 'h');
SELECT tenure.acquire('first-$t', 'h');
SELECT tenure.release('first-$t', 'h');
SELECT tenure.acquire('first-$t', 'h');
SELECT tenure.release('first-$t', 'h');
EOF
			)
			echo "$out" | awk -v l="$l" -v t="$t" -v s="$lease" '/^Time:/ {ms[n++] = $2}
				END {for (k = 0; k < 3; k++) printf "%s,%d,%s,%d,%.3f\n", l, t, s, k + 1, ms[2 * k] + ms[2 * k + 1]}' >>"$first"
		done
	done
done

median() { bench_median; }
{
	echo "# acquire + release against its rows written by plain SQL"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- $pairs pairs of separate ${secs} s pgbench runs per build, shape and client count, alternating (bench/floor.sh)"
	echo "- settings: $(bench_settings | grep -v '^#' | grep -v shared_preload_libraries | sed "s/ = /=/; s/'//g" | paste -sd',' | sed 's/,/, /g')"
	echo
	echo "| build | shape | clients | cycle TPS | cycle_sql TPS | ratio of medians | pairs' ratios min..max |"
	echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
	for l in "${labels[@]}"; do
		for shape in $shapes; do
			for c in $clients; do
				sel() { awk -F, -v l="$l" -v s="$shape" -v c="$c" -v col="$1" '$1==l && $2==s && $3==c {print $col}' "$csv"; }
				ma=$(sel 5 | median)
				ms=$(sel 6 | median)
				rr=$(awk -F, -v l="$l" -v s="$shape" -v c="$c" '$1==l && $2==s && $3==c {printf "%.3f\n", $5 / $6}' "$csv" | sort -g)
				printf '| %s | %s | %s | %.0f | %.0f | **%.3f** | %s..%s |\n' "$l" "$shape" "$c" "$ma" "$ms" \
					"$(awk -v a="$ma" -v b="$ms" 'BEGIN {print a / b}')" "$(echo "$rr" | head -1)" "$(echo "$rr" | tail -1)"
			done
		done
	done
	echo
	echo "A new connection's acquire + release of an idle lease, ms (median of $first_trials connections; psql's \\timing):"
	echo
	echo "| build | lease | first call | second | third |"
	echo "| --- | --- | ---: | ---: | ---: |"
	for l in "${labels[@]}"; do
		for lease in cold warm; do
			printf '| %s | %s |' "$l" \
				"$([ $lease = cold ] && echo "not used since the server started" || echo "in shared memory")"
			for k in 1 2 3; do
				printf ' %.2f |' "$(awk -F, -v l="$l" -v s="$lease" -v k="$k" '$1==l && $3==s && $4==k {print $5}' "$first" | median)"
			done
			echo
		done
	done
} >"$work/floor.md"
cat "$work/floor.md"
if [ -n "${OUT:-}" ]; then
	mkdir -p "$OUT"
	cp "$csv" "$first" "$work/floor.md" "$OUT"/
fi
