#!/usr/bin/env bash
#
# pg_tenure under a real HA manager: how long a failover takes, as clients
# see it, with pg_auto_failover (a monitor and two nodes on this machine).
#
#   bash bench/ha.sh            # TRIALS of each kind: bench/results/ha.{csv,md}
#   bash bench/ha.sh --smoke    # one trial of each kind, results in a temp dir
#
# Each trial is a planned switchover (`pg_autoctl perform failover`) or a
# killed primary (SIGKILL of its postmaster and its pg_autoctl); bench/ha.py
# says what is measured and which safety properties every trial asserts.
# Exits non-zero if one is violated or a trial does not complete.
#
# Environment: TRIALS (per kind, default 5), TTL_MS (the leases' ttl,
# default 2000), RETRY_MS (clients' reconnection interval, default 100),
# RESULTS (the results' base name, default ha), TENURE_SKIP_APT,
# TENURE_SKIP_INSTALL.
#
# Runs as root: installs what it needs, builds and installs pg_tenure, and
# runs the cluster as the user "tenure".  PG_MAJOR picks the PostgreSQL
# major (test/pg_major.sh); Debian must ship pg_auto_failover for it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
TRIALS=${TRIALS:-5}
RESULTS=${RESULTS:-ha}
out=$here/results
smoke=
if [ "${1:-}" = --smoke ]; then
	smoke=1
	TRIALS=1
fi
export TTL_MS=${TTL_MS:-2000} RETRY_MS=${RETRY_MS:-100}

bench_require_root
bench_prepare postgresql-$PG_MAJOR-auto-failover pg-auto-failover-cli python3-psycopg

# the user runs the driver from a copy: the checkout may sit where it
# cannot read (under /root)
dir=$(mktemp -d /tmp/pg_tenure-ha.XXXXXX)
cp "$here/ha.py" "$dir"/
mkdir "$dir/run"
chown -R "$BENCH_USER": "$dir"
driver=
cleanup() {
	# ha.py stops its cluster on every exit path; this catches a driver
	# that was killed
	if [ -n "$driver" ] && kill -0 "$driver" 2>/dev/null; then
		kill -TERM "$driver" 2>/dev/null || true
		wait "$driver" 2>/dev/null || true
	fi
	for pid in "$dir"/run/*/postmaster.pid; do
		[ -f "$pid" ] || continue
		runuser -u "$BENCH_USER" -- env XDG_CONFIG_HOME="$dir/run/xdgc" XDG_DATA_HOME="$dir/run/xdgd" \
			XDG_RUNTIME_DIR="$dir/run/xdgr" pg_autoctl stop --immediate --pgdata "$(dirname "$pid")" >/dev/null 2>&1 || true
		runuser -u "$BENCH_USER" -- "$PG_BIN/pg_ctl" -D "$(dirname "$pid")" -m immediate stop >/dev/null 2>&1 || true
	done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "pg_tenure HA bench: $TRIALS trials per kind, ttl $TTL_MS ms"
start=$(date +%s)
runuser -u "$BENCH_USER" -- env PATH="$PG_BIN:$PATH" TTL_MS="$TTL_MS" RETRY_MS="$RETRY_MS" \
	/usr/bin/python3 "$dir/ha.py" "$dir/run" "$TRIALS" "$dir/ha.csv" "$dir/summary.md" &
driver=$!
status=0
wait "$driver" || status=$?
driver=
elapsed=$(( $(date +%s) - start ))
if [ "$status" != 0 ]; then
	echo "bench/ha.sh: failed (status $status); logs:" >&2
	tail -n 20 "$dir"/run/log/*.log >&2 2>/dev/null || true
	exit "$status"
fi

pgver=$(runuser -u "$BENCH_USER" -- "$PG_BIN/postgres" --version)
autoctl=$(pg_autoctl --version 2>/dev/null | head -1)
cpu=$(awk -F: '/model name/ {print $2; exit}' /proc/cpuinfo | sed 's/^ *//')
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)
report=$dir/ha.md
{
	echo "# pg_tenure failover under pg_auto_failover"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- command: \`bash bench/ha.sh${smoke:+ --smoke}\` (TRIALS=$TRIALS TTL_MS=$TTL_MS RETRY_MS=$RETRY_MS RESULTS=$RESULTS), $elapsed s"
	echo "- machine: $(nproc) cores, $cpu, $mem"
	echo "- server: $pgver; $autoctl"
	echo
	cat "$dir/summary.md"
} >"$report"
cat "$report"
if [ -z "$smoke" ]; then
	mkdir -p "$out"
	cp "$dir/ha.csv" "$out/$RESULTS.csv"
	cp "$report" "$out/$RESULTS.md"
fi
