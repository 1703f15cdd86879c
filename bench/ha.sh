#!/usr/bin/env bash
#
# pg_tenure under a real HA manager: how long a failover takes, as clients
# see it, with pg_auto_failover (a monitor and two nodes on this machine)
# and with Patroni (one etcd member and two nodes on this machine).
#
#   bash bench/ha.sh            # TRIALS of each kind per manager:
#                               # bench/results/ha.{csv,md}
#   bash bench/ha.sh --smoke    # one trial of each kind per manager,
#                               # results in a temp dir
#
# Each trial is a planned switchover (`pg_autoctl perform failover`,
# `patronictl switchover`) or a killed primary (SIGKILL of its postmaster
# and of its pg_autoctl or Patroni); bench/ha.py says what is measured and
# which safety properties every trial asserts.  Exits non-zero if one is
# violated or a trial does not complete.
#
# Environment: MANAGERS (default "pg_auto_failover patroni"), TRIALS (per
# kind and manager, default 5), TTL_MS (the leases' ttl, default 2000),
# RETRY_MS (clients' reconnection interval, default 100), RESULTS (the
# results' base name, default ha), TENURE_SKIP_APT, TENURE_SKIP_INSTALL.
#
# Runs as root: installs what it needs, builds and installs pg_tenure, and
# runs the clusters as the user "tenure".  PG_MAJOR picks the PostgreSQL
# major (test/pg_major.sh); Debian must ship pg_auto_failover for it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
MANAGERS=${MANAGERS:-pg_auto_failover patroni}
TRIALS=${TRIALS:-5}
RESULTS=${RESULTS:-ha}
out=$here/results
smoke=
if [ "${1:-}" = --smoke ]; then
	smoke=1
	TRIALS=1
fi
export TTL_MS=${TTL_MS:-2000} RETRY_MS=${RETRY_MS:-100}

packages=(python3-psycopg)
for m in $MANAGERS; do
	case $m in
		pg_auto_failover) packages+=("postgresql-$PG_MAJOR-auto-failover" pg-auto-failover-cli) ;;
		patroni) packages+=(patroni etcd-server) ;;
		*) echo "bench/ha.sh: unknown manager $m (pg_auto_failover, patroni)" >&2; exit 2 ;;
	esac
done

bench_require_root
bench_prepare "${packages[@]}"

# the user runs the driver from a copy: the checkout may sit where it
# cannot read (under /root)
dir=$(mktemp -d /tmp/pg_tenure-ha.XXXXXX)
cp "$here/ha.py" "$dir"/
for m in $MANAGERS; do mkdir "$dir/run-$m"; done
chown -R "$BENCH_USER": "$dir"
driver=
cleanup() {
	local run pid
	# ha.py stops its cluster on every exit path; this catches a driver
	# that was killed
	if [ -n "$driver" ] && kill -0 "$driver" 2>/dev/null; then
		kill -TERM "$driver" 2>/dev/null || true
		wait "$driver" 2>/dev/null || true
	fi
	for run in "$dir"/run-*; do
		# the process groups ha.py started (pg_autoctl, Patroni, etcd)
		if [ -f "$run/pids" ]; then
			while read -r pid; do
				kill -KILL -- "-$pid" 2>/dev/null || true
			done <"$run/pids"
		fi
		for pid in "$run"/*/postmaster.pid; do
			[ -f "$pid" ] || continue
			runuser -u "$BENCH_USER" -- "$PG_BIN/pg_ctl" -D "$(dirname "$pid")" -m immediate stop >/dev/null 2>&1 || true
		done
	done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "pg_tenure HA bench: $MANAGERS; $TRIALS trials per kind, ttl $TTL_MS ms"
start=$(date +%s)
header=
for m in $MANAGERS; do
	runuser -u "$BENCH_USER" -- env PATH="$PG_BIN:$PATH" TTL_MS="$TTL_MS" RETRY_MS="$RETRY_MS" \
		/usr/bin/python3 "$dir/ha.py" "$m" "$dir/run-$m" "$TRIALS" "$dir/ha-$m.csv" "$dir/summary-$m.md" &
	driver=$!
	status=0
	wait "$driver" || status=$?
	driver=
	if [ "$status" != 0 ]; then
		echo "bench/ha.sh: $m failed (status $status); logs:" >&2
		tail -n 20 "$dir/run-$m"/log/*.log >&2 2>/dev/null || true
		exit "$status"
	fi
	# one CSV for every manager, the header once
	if [ -z "$header" ]; then
		cat "$dir/ha-$m.csv" >"$dir/ha.csv"
		header=1
	else
		tail -n +2 "$dir/ha-$m.csv" >>"$dir/ha.csv"
	fi
done
elapsed=$(( $(date +%s) - start ))

pgver=$(runuser -u "$BENCH_USER" -- "$PG_BIN/postgres" --version)
versions=
for m in $MANAGERS; do
	case $m in
		pg_auto_failover) versions+="; $(pg_autoctl --version 2>/dev/null | head -1)" ;;
		patroni) versions+="; $(patroni --version 2>/dev/null), etcd $(etcd --version 2>/dev/null | sed -n 's/^etcd Version: //p')" ;;
	esac
done
cpu=$(awk -F: '/model name/ {print $2; exit}' /proc/cpuinfo | sed 's/^ *//')
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)
report=$dir/ha.md
{
	echo "# pg_tenure failover under HA managers"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- command: \`bash bench/ha.sh${smoke:+ --smoke}\` (MANAGERS=\"$MANAGERS\" TRIALS=$TRIALS TTL_MS=$TTL_MS RETRY_MS=$RETRY_MS RESULTS=$RESULTS), $elapsed s"
	echo "- machine: $(nproc) cores, $cpu, $mem"
	echo "- server: $pgver$versions"
	for m in $MANAGERS; do
		echo
		cat "$dir/summary-$m.md"
	done
} >"$report"
cat "$report"
if [ -z "$smoke" ]; then
	mkdir -p "$out"
	cp "$dir/ha.csv" "$out/$RESULTS.csv"
	cp "$report" "$out/$RESULTS.md"
fi
