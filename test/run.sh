#!/usr/bin/env bash
#
# Run pg_tenure's test suite: pg_regress (sql/, with pgTAP), isolation
# specs (test/isolation/) and Perl TAP tests (test/t/), each against a
# throwaway cluster with pg_tenure preloaded.
#
# As root (a fresh Debian 12 machine): installs the packages it needs,
# builds with assertions, installs the extension, and runs the tests as
# the unprivileged user "tenure" in a copy of the tree.
#
#   bash test/run.sh                        # everything
#   bash test/run.sh REGRESS=acquire ISOLATION= PROVE_TESTS=   # one file
#
# Exits non-zero on any failure, after printing the diffs and logs.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
TEST_USER=${TEST_USER:-tenure}
src=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" != 0 ]; then
	echo "run.sh: run as root (it installs packages and the extension)" >&2
	exit 2
fi

if [ -z "${TENURE_SKIP_APT:-}" ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		build-essential postgresql-15 postgresql-server-dev-15 \
		postgresql-15-pgtap libtap-parser-sourcehandler-pgtap-perl \
		libipc-run-perl libpq-dev >/dev/null
	# pg_auto_failover for the HA manager test (190_auto_failover.pl);
	# Debian 12 ships it for PostgreSQL 15 only
	if [ "$("$PG_CONFIG" --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')" = 15 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			postgresql-15-auto-failover pg-auto-failover-cli >/dev/null
	fi
fi
id "$TEST_USER" >/dev/null 2>&1 || useradd -m "$TEST_USER"

# a private copy the test user owns (the checkout may sit under /root)
work=$(mktemp -d /tmp/pg_tenure-test.XXXXXX)
cp -a "$src"/. "$work"/
rm -rf "$work"/tmp_check* "$work"/results "$work"/output_iso "$work"/regression.*
chown -R "$TEST_USER": "$work"
chmod 755 "$work"
cd "$work"

as_user() { runuser -u "$TEST_USER" -- "$@"; }

as_user make -s PG_CONFIG=$PG_CONFIG with_llvm=no clean >/dev/null
as_user make -s PG_CONFIG=$PG_CONFIG with_llvm=no EXTRA_CFLAGS=-DUSE_ASSERT_CHECKING all
[ -n "${TENURE_SKIP_INSTALL:-}" ] || make -s PG_CONFIG=$PG_CONFIG with_llvm=no install >/dev/null

stop_leftovers() {
	# a TAP test that dies can leave postmasters behind
	for pid in $(find "$work" -name postmaster.pid 2>/dev/null); do
		as_user "$("$PG_CONFIG" --bindir)/pg_ctl" -D "$(dirname "$pid")" -m immediate stop >/dev/null 2>&1 || true
	done
}
trap stop_leftovers EXIT

status=0
as_user make PG_CONFIG=$PG_CONFIG with_llvm=no installcheck "$@" || status=$?

if [ $status != 0 ]; then
	echo "==== pg_tenure tests FAILED (work tree: $work)"
	for f in regression.diffs output_iso/regression.diffs; do
		[ -s "$f" ] && { echo "==== $f"; cat "$f"; }
	done
	for f in tmp_check/log/*; do
		[ -f "$f" ] || continue
		echo "==== $f (last 200 lines)"
		tail -n 200 "$f"
	done
	for f in tmp_check_regress/log/* tmp_check_iso/log/*; do
		[ -f "$f" ] || continue
		echo "==== $f (last 60 lines)"
		tail -n 60 "$f"
	done
fi
[ $status = 0 ] && { stop_leftovers; cd /; rm -rf "$work"; }
exit $status
