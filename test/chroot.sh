#!/usr/bin/env bash
#
# Run pg_tenure's test suite (regress, isolation, TAP) and the demo for
# another PostgreSQL major, in a Debian chroot that ships it:
#
#   bash test/chroot.sh 17 trixie          # Debian 13
#   bash test/chroot.sh 18 sid             # Debian unstable
#   bash test/chroot.sh --bootstrap 17 trixie   # only create the chroot and
#                                               # install the packages
#   TENURE_TAP_SKIP="180_pgbouncer" bash test/chroot.sh 17 trixie
#                                               # leave TAP tests out
#   bash test/chroot.sh 18 sid REGRESS= ISOLATION= \
#       PROVE_TESTS=test/t/187_partman.pl      # only these (make's
#                                               # arguments; no demo)
#
# As root.  The chroot is created with debootstrap from Debian's mirror the
# first time (under TENURE_CHROOT_BASE, default /var/tmp) and reused after
# that; proc, sys, dev, dev/pts and dev/shm are bind-mounted while the
# suites run and unmounted on every exit path.  Inside, test/run.sh
# installs the packages of that major and runs everything as the user
# "tenure", exactly as it does natively.  Exits non-zero on any failure.
set -euo pipefail

bootstrap_only=
if [ "${1:-}" = --bootstrap ]; then
	bootstrap_only=1
	shift
fi
if [ $# -lt 2 ]; then
	echo "usage: test/chroot.sh [--bootstrap] MAJOR SUITE [MAKE ARGUMENTS]" >&2
	exit 2
fi
major=$1
suite=$2
shift 2
src=$(cd "$(dirname "$0")/.." && pwd)
root=${TENURE_CHROOT_BASE:-/var/tmp}/pg_tenure-chroot-$suite
mirror=${TENURE_DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ "$(id -u)" != 0 ]; then
	echo "chroot.sh: run as root" >&2
	exit 2
fi

. "$src/test/chroot_lib.sh"
trap 'tenure_chroot_unmount "$root"' EXIT

# Create the chroot once, then reuse it.
tenure_chroot_create "$root" "$suite" "$mirror"
tenure_chroot_mount "$root"

# a fresh copy of the checkout, without build or test leftovers
rm -rf "$root/src/pg_tenure"
mkdir -p "$root/src/pg_tenure"
tar -C "$src" --exclude=.git --exclude='tmp_check*' --exclude=results \
	--exclude=output_iso --exclude='*.o' --exclude='*.so' -cf - . |
	tar -C "$root/src/pg_tenure" -xf -

in_chroot() {
	chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 PG_MAJOR="$major" \
		TENURE_TAP_SKIP="${TENURE_TAP_SKIP:-}" "$@"
}

if [ -n "$bootstrap_only" ]; then
	in_chroot env TENURE_APT_ONLY=1 bash /src/pg_tenure/test/run.sh
	exit 0
fi
echo "== PostgreSQL $major (Debian $suite): test suite"
in_chroot bash /src/pg_tenure/test/run.sh "$@"
[ $# = 0 ] || exit 0
echo "== PostgreSQL $major (Debian $suite): demo"
in_chroot env TENURE_SKIP_APT=1 TENURE_SKIP_INSTALL=1 bash /src/pg_tenure/demo/run.sh
echo "== PostgreSQL $major (Debian $suite): passed"
