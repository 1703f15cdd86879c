#!/usr/bin/env bash
#
# Run pg_tenure's test suite: pg_regress (sql/, with pgTAP), isolation
# specs (test/isolation/) and Perl TAP tests (test/t/), each against a
# throwaway cluster with pg_tenure preloaded.
#
# As root (a fresh Debian 12 machine): installs the packages it needs,
# builds with assertions and -Werror, installs the extension, and runs the
# tests as the unprivileged user "tenure" in a copy of the tree.
#
#   bash test/run.sh                        # everything, with the upgrade
#                                           # harness (test/upgrade.sh)
#   bash test/run.sh REGRESS=acquire ISOLATION= TAP_TESTS=   # one file
#   PG_MAJOR=17 bash test/run.sh            # another major (test/pg_major.sh)
#   TENURE_TAP_SKIP="180_pgbouncer 185_python_go" bash test/run.sh
#                                           # every TAP test but those
#
# Exits non-zero on any failure, after printing the diffs and logs.
set -euo pipefail

TEST_USER=${TEST_USER:-tenure}
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/test/pg_major.sh"

if [ "$(id -u)" != 0 ]; then
	echo "run.sh: run as root (it installs packages and the extension)" >&2
	exit 2
fi

# whether the Patroni test runs here: on 15, where Debian ships Patroni
# and etcd
patroni_wanted() {
	[ "$PG_MAJOR" = 15 ] && apt-cache show patroni etcd-server >/dev/null 2>&1
}

if [ -z "${TENURE_SKIP_APT:-}" ]; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		build-essential postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR \
		postgresql-$PG_MAJOR-pgtap libtap-parser-sourcehandler-pgtap-perl \
		libipc-run-perl libpq-dev pgbouncer git procps gdb \
		python3-psycopg python3-psycopg-pool \
		golang-go golang-github-jackc-pgx-v4-dev >/dev/null
	# pg_auto_failover for the HA manager test (190_auto_failover.pl), where
	# Debian ships it for this major (12: 15; 13: 17; unstable: 18)
	if apt-cache show "postgresql-$PG_MAJOR-auto-failover" >/dev/null 2>&1; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			"postgresql-$PG_MAJOR-auto-failover" pg-auto-failover-cli >/dev/null
	fi
	# Patroni with etcd as its store for the Patroni test (191_patroni.pl),
	# on 15 only (Debian 12's major; the test takes about a minute)
	if patroni_wanted; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq patroni etcd-server >/dev/null
	fi
	# pg_partman for its maintenance of fenced sets (187_partman.pl), where
	# Debian ships it for this major
	if apt-cache show "postgresql-$PG_MAJOR-partman" >/dev/null 2>&1; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			"postgresql-$PG_MAJOR-partman" >/dev/null
	fi
fi
# where Debian ships pg_auto_failover for this major, its test must run
if apt-cache show "postgresql-$PG_MAJOR-auto-failover" >/dev/null 2>&1; then
	export TENURE_HA_EXPECTED=1
fi
# and the Patroni test where this script installs Patroni
if patroni_wanted; then
	export TENURE_PATRONI_EXPECTED=1
fi
# and the pg_partman test where Debian ships pg_partman for this major
if apt-cache show "postgresql-$PG_MAJOR-partman" >/dev/null 2>&1; then
	export TENURE_PARTMAN_EXPECTED=1
fi
# (TENURE_APT_ONLY=1: install the packages and stop)
[ -z "${TENURE_APT_ONLY:-}" ] || exit 0
id "$TEST_USER" >/dev/null 2>&1 || useradd -m "$TEST_USER"

# the PGXN metadata agrees with the spec and with the tree;
perl "$src/test/meta_check.pl" "$src"
# every planted bug of the stress test applies exactly to this tree (CI
# runs only skip_commit_check; a drifted plant would fail only there);
python3 "$src/test/stress/plant.py"
perl "$src/test/doc_links.pl" "$src"   # the links between the .md files resolve;
# calls between the source files run one way (no cycle);
perl "$src/test/call_graph.pl" "$src"
# the release archive (make dist, from HEAD) holds what a user needs and
# builds; a copy without git history (the chroots' copies) has no HEAD
if git -C "$src" rev-parse -q --verify HEAD >/dev/null 2>&1; then
	PG_CONFIG=$PG_CONFIG bash "$src/test/dist_check.sh"
else
	echo "dist_check: skipped, $src is not a git checkout"
fi

# a private copy the test user owns (the checkout may sit under /root)
work=$(mktemp -d /tmp/pg_tenure-test.XXXXXX)
cp -a "$src"/. "$work"/
rm -rf "$work"/tmp_check* "$work"/results "$work"/output_iso "$work"/regression.*
chown -R "$TEST_USER": "$work"
chmod 755 "$work"
cd "$work"

as_user() { runuser -u "$TEST_USER" -- "$@"; }

as_user make -s PG_CONFIG=$PG_CONFIG with_llvm=no clean >/dev/null
as_user make -s PG_CONFIG=$PG_CONFIG with_llvm=no TENURE_WERROR=-Werror EXTRA_CFLAGS=-DUSE_ASSERT_CHECKING all examples
[ -n "${TENURE_SKIP_INSTALL:-}" ] || make -s PG_CONFIG=$PG_CONFIG with_llvm=no install >/dev/null

# ALTER EXTENSION pg_tenure UPDATE from every released version gives what
# a fresh CREATE EXTENSION gives, and the harness that checks it fails a
# broken upgrade script (test/upgrade.sh; it installs into a private tree,
# not into PG_CONFIG's).  Only when running everything, not one test.
if [ $# = 0 ]; then
	TEST_USER=$TEST_USER bash "$src/test/upgrade.sh"
	TEST_USER=$TEST_USER bash "$src/test/upgrade.sh" --self-test
fi

stop_leftovers() {
	# a TAP test that dies can leave postmasters behind
	for pid in $(find "$work" -name postmaster.pid 2>/dev/null); do
		as_user "$PG_BIN/pg_ctl" -D "$(dirname "$pid")" -m immediate stop >/dev/null 2>&1 || true
	done
}
trap stop_leftovers EXIT

# TENURE_TAP_SKIP: TAP tests (file names without .pl) to leave out
tap_args=()
if [ -n "${TENURE_TAP_SKIP:-}" ]; then
	tap=
	for t in test/t/*.pl; do
		case " $TENURE_TAP_SKIP " in
			*" $(basename "$t" .pl) "*) echo "run.sh: leaving out $t" ;;
			*) tap="$tap $t" ;;
		esac
	done
	tap_args=("PROVE_TESTS=${tap# }")
fi

status=0
make_log=$(mktemp /tmp/pg_tenure-make.XXXXXX)
chmod 644 "$make_log"
as_user make PG_CONFIG=$PG_CONFIG with_llvm=no installcheck "${tap_args[@]}" "$@" 2>&1 |
	tee "$make_log" || status=$?

if [ $status != 0 ]; then
	echo "==== pg_tenure tests FAILED (work tree: $work)"
	for f in regression.diffs output_iso/regression.diffs; do
		[ -s "$f" ] && { echo "==== $f"; cat "$f"; }
	done
	# the TAP files that failed (prove's summary names them), each with
	# the logs of its own nodes; the logs of passing files are left out
	failed_tap=$(sed -n '/^Test Summary Report/,$p' "$make_log" |
		sed -n 's|^test/t/\([^ ]*\)\.pl .*|\1|p' | sort -u)
	for t in $failed_tap; do
		for f in tmp_check/log/regress_log_"$t" tmp_check/log/"$t"_*.log; do
			[ -f "$f" ] || continue
			echo "==== $f (last 200 lines)"
			tail -n 200 "$f"
		done
	done
	for f in tmp_check_regress/log/* tmp_check_iso/log/*; do
		[ -f "$f" ] || continue
		echo "==== $f (last 60 lines)"
		tail -n 60 "$f"
	done
	echo "==== pg_tenure tests FAILED: what failed"
	grep -E '^(not ok|# Failed|test/t/.*(Wstat|Failed)|Failed [0-9]+/|Result: FAIL)' "$make_log" || true
	grep -E '(FAILED|failed \(ignored\)| failed$)' "$make_log" | grep -v '^ok' || true
	if [ -n "$failed_tap" ]; then
		echo "failed TAP files:" $failed_tap
	fi
fi
rm -f "$make_log"
[ $status = 0 ] && { stop_leftovers; cd /; rm -rf "$work"; }
exit $status
