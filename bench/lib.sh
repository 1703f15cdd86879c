# Sourced by bench/run.sh, bench/profile.sh and bench/ha.sh: the packages,
# the build and the throwaway cluster they share, so that they measure the
# same settings (ha.sh uses the packages and the build only).
# Expects $here (bench/) and $top (the checkout).

. "$top/test/pg_major.sh"
BENCH_USER=${BENCH_USER:-tenure}

bench_require_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "$(basename "$0"): run as root" >&2
		exit 2
	fi
}

# bench_prepare [PACKAGE...]: Debian's packages and the given ones (unless
# TENURE_SKIP_APT), the user that owns the cluster, and pg_tenure built and
# installed from a copy of the checkout (unless TENURE_SKIP_INSTALL)
bench_prepare() {
	local build
	if [ -z "${TENURE_SKIP_APT:-}" ]; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential \
			postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libpq-dev "$@" >/dev/null
	fi
	id "$BENCH_USER" >/dev/null 2>&1 || useradd -m "$BENCH_USER"
	if [ -z "${TENURE_SKIP_INSTALL:-}" ]; then
		build=$(mktemp -d /tmp/pg_tenure-bench-build.XXXXXX)
		cp -a "$top"/. "$build"/
		make -s -C "$build" PG_CONFIG=$PG_CONFIG with_llvm=no clean >/dev/null
		make -s -C "$build" PG_CONFIG=$PG_CONFIG with_llvm=no install >/dev/null
		rm -rf "$build"
	fi
}

# bench_require_packages PACKAGE...: stop at once, naming those of the
# given Debian packages that are not installed (under TENURE_SKIP_APT the
# caller installs them: a section must not fail on it halfway through)
bench_require_packages() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q ' installed$' || missing+=("$p")
	done
	if [ "${#missing[@]}" -gt 0 ]; then
		echo "$(basename "$0"): Debian packages missing: ${missing[*]}" >&2
		echo "$(basename "$0"): install them (TENURE_SKIP_APT is set), or leave out the section that needs them (SECTIONS)" >&2
		exit 2
	fi
}

as_user() { runuser -u "$BENCH_USER" -- "$@"; }

# The settings of every bench cluster.  The scale section of run.sh raises
# tenure.max_leases and max_locks_per_transaction (ALTER SYSTEM, restart)
# after the other sections are done.
BENCH_MAX_LEASES=20000
BENCH_MAX_LOCKS=256
bench_settings() {
	cat <<EOF
shared_preload_libraries = 'pg_tenure'
shared_buffers = '256MB'
max_connections = 100
tenure.max_leases = $BENCH_MAX_LEASES
# one database and role hold every tenure of the scale runs
tenure.role_share = 100
tenure.database_share = 100
max_locks_per_transaction = $BENCH_MAX_LOCKS
synchronous_commit = off
EOF
}
# the settings on one line, for reports
bench_settings_line() {
	bench_settings | grep -v shared_preload_libraries | sed "s/ = /=/; s/'//g" | paste -sd',' | sed 's/,/, /g'
}

psql_q() { as_user env PGHOST=$dir PGPORT=$port $PG_BIN/psql -X -q -t -A -v ON_ERROR_STOP=1 -d postgres "$@"; }

bench_wait_keeper() {
	local _
	for _ in $(seq 300); do
		[ "$(psql_q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_tenure keeper'" 2>/dev/null)" = 1 ] &&
			return 0
		sleep 0.1
	done
	echo "$(basename "$0"): the pg_tenure keeper did not start" >&2
	return 1
}

bench_cluster_cleanup() {
	as_user $PG_BIN/pg_ctl -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
	rm -rf "$dir"
	# huge pages the failover or scale section reserved, if it stopped
	# before it gave them back
	if [ -n "${bench_hugepages_restore:-}" ]; then
		echo "$bench_hugepages_restore" >/proc/sys/vm/nr_hugepages || true
	fi
}

# bench_cluster_start PORT: initdb and start a cluster in a new temporary
# directory $dir (the working directory from then on), owned by
# $BENCH_USER, with bench/scripts and bench/setup.sql copied there (the
# user runs them from the copy: the checkout may sit where it cannot read)
# and run; the cluster is stopped and removed at exit
bench_cluster_start() {
	port=$1
	dir=$(mktemp -d /tmp/pg_tenure-bench.XXXXXX)
	cp -a "$here/scripts" "$here/setup.sql" "$dir"/
	chown -R "$BENCH_USER": "$dir"
	chmod 755 "$dir"
	cd "$dir"
	as_user $PG_BIN/initdb -D "$dir/data" -A trust >/dev/null
	{
		echo "port = $port"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$dir'"
		bench_settings
	} >>"$dir/data/postgresql.conf"
	as_user $PG_BIN/pg_ctl -D "$dir/data" -l "$dir/log" -w start >/dev/null
	trap bench_cluster_cleanup EXIT
	export PGHOST=$dir PGPORT=$port PGDATABASE=postgres
	bench_wait_keeper
	psql_q -f "$dir/setup.sql" >/dev/null
}

bench_cluster_restart() {
	as_user $PG_BIN/pg_ctl -D "$dir/data" -l "$dir/log" -m fast -w restart >/dev/null
	bench_wait_keeper
}

# bench_settle: let the cluster finish the cleanup an earlier section left
# (autovacuum of its dead rows, a checkpoint of its dirty buffers) before
# a section whose figures are latencies of a fraction of a millisecond: on
# 2 cores a vacuum worker on the other core delays the side that does
# more work.  VACUUM of every table the database has, a CHECKPOINT, then
# up to 1,200 polls (about two minutes) until no autovacuum worker runs.
# Prints what ran when it started.
bench_settle() {
	local busy _
	busy=$(psql_q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")
	echo "settle: $busy autovacuum worker(s) running, $(psql_q -c "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_all_tables") dead rows"
	psql_q -c "VACUUM" -c "CHECKPOINT" >/dev/null
	for _ in $(seq 1200); do
		[ "$(psql_q -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'")" = 0 ] && return 0
		sleep 0.1
	done
	# a warning, not a failure: the figures' own checks (the scale
	# section's control) judge whether the machine was steady
	echo "settle: autovacuum still running after 1200 polls, measuring anyway" >&2
}

# bench_huge_on: the server restarted with its shared memory in 2 MB
# pages: vm.nr_hugepages raised by SHOW shared_memory_size_in_huge_pages,
# then huge_pages = on (ALTER SYSTEM).  Returns 1, the server left as it
# was, with the reason in bench_huge_note, where the kernel cannot
# reserve them.  Callers test it in an if, where bash ignores set -e: a
# step that fails once the pages are reserved exits here (the EXIT trap
# gives the pages back).
bench_huge_on() {
	local need got
	bench_huge_note=
	need=$(psql_q -c "SHOW shared_memory_size_in_huge_pages") || exit 1
	bench_huge_was=$(psql_q -c "SHOW huge_pages") || exit 1
	bench_huge_old=$(cat /proc/sys/vm/nr_hugepages)
	bench_hugepages_restore=$bench_huge_old
	if ! [ "${need:--1}" -gt 0 ] 2>/dev/null; then
		bench_huge_note="not run: the server gives no size in huge pages ($need)"
	elif ! { echo $((bench_huge_old + need)) >/proc/sys/vm/nr_hugepages; } 2>/dev/null; then
		bench_huge_note="not run: vm.nr_hugepages cannot be written here"
	else
		got=$(cat /proc/sys/vm/nr_hugepages)
		[ "$got" -ge $((bench_huge_old + need)) ] ||
			bench_huge_note="not run: the kernel reserved $((got - bench_huge_old)) of the $need huge pages needed"
	fi
	if [ -n "$bench_huge_note" ]; then
		{ echo "$bench_huge_old" >/proc/sys/vm/nr_hugepages; } 2>/dev/null || true
		bench_hugepages_restore=
		return 1
	fi
	echo "restart with huge_pages = on ($need pages of 2 MB reserved)"
	psql_q -c "ALTER SYSTEM SET huge_pages = on" >/dev/null || exit 1
	bench_cluster_restart || { echo "$(basename "$0"): the server did not restart with huge_pages = on" >&2; exit 1; }
}

# bench_huge_off: after bench_huge_on, the server restarted with
# huge_pages as it was before and the pages given back
bench_huge_off() {
	psql_q -c "ALTER SYSTEM SET huge_pages = '$bench_huge_was'" >/dev/null
	bench_cluster_restart
	echo "$bench_huge_old" >/proc/sys/vm/nr_hugepages
	bench_hugepages_restore=
}

bench_keeper_pid() {
	psql_q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_tenure keeper'"
}

# bench_keeper_locks [KEEPER_PID]: the keeper's advisory locks, one per
# live tenure
bench_keeper_locks() {
	local kpid=${1:-$(bench_keeper_pid)}
	psql_q -c "SELECT count(*) FROM pg_locks WHERE pid = $kpid AND locktype = 'advisory'"
}

# median of the numbers on stdin, one a line
bench_median() {
	sort -g | awk '{v[NR]=$1} END {if (NR == 0) exit; if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'
}
