#!/usr/bin/env bash
#
# Build the Debian package postgresql-15-tenure from this checkout, install
# it into a clean Debian 12 chroot, and run the regression suite (sql/ and
# expected/) there against the installed package alone:
#
#   bash test/package.sh
#
# As root.  The package is built with "dpkg-buildpackage -us -uc -b" in a
# copy of the tree under /tmp (debhelper, postgresql-server-dev-all and
# build-essential are installed first if missing).  The chroot is made once
# with debootstrap --variant=minbase under TENURE_CHROOT_BASE (default
# /var/tmp) as pg_tenure-chroot-bookworm-pkg and never changed after that:
# every run works in a throwaway copy of it, so each run starts from a
# system that has never seen PostgreSQL or pg_tenure.  In that copy the
# .deb alone is installed with apt-get (its dependencies must bring the
# server), then pgTAP for the suite.  Nothing is built or installed from
# the checkout there: only sql/, expected/, test/tenure.conf and
# test/mask_epochs are copied in, and pg_regress (which Debian ships in
# postgresql-client-15) runs them as the user "tenure" on a temporary
# instance that preloads pg_tenure.  Neither make nor the server headers
# are installed in the chroot.
#
# Checks that dpkg -L lists the library, the control file and every
# pg_tenure--*.sql of the tree, and that every pg_tenure file in the
# server's directories belongs to the package.  Exits non-zero on any
# failure, after printing regression.diffs and the server log.
set -euo pipefail

major=15
suite=bookworm
mirror=${TENURE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${TENURE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
src=$(cd "$(dirname "$0")/.." && pwd)
base=${TENURE_CHROOT_BASE:-/var/tmp}/pg_tenure-chroot-$suite-pkg
package=postgresql-$major-tenure
me=package.sh

if [ "$(id -u)" != 0 ]; then
	echo "$me: run as root (it installs packages and uses chroot)" >&2
	exit 2
fi
. "$src/test/chroot_lib.sh"

tmp=
run=
archives=$base.apt-archives
cleanup() {
	if [ -n "$run" ]; then
		if mountpoint -q "$run/var/cache/apt/archives" 2>/dev/null; then
			umount "$run/var/cache/apt/archives" 2>/dev/null ||
				umount -l "$run/var/cache/apt/archives" 2>/dev/null || true
		fi
		tenure_chroot_unmount "$run"
		# only once nothing is mounted below it
		if ! grep -q " $run/" /proc/mounts; then
			rm -rf --one-file-system "$run"
		fi
	fi
	[ -z "$tmp" ] || rm -rf "$tmp"
	return 0
}
trap cleanup EXIT

step() { echo "== $me: $* ($SECONDS s)"; }

# 1. Build the binary package in a copy of the tree.
need=()
for p in build-essential debhelper postgresql-server-dev-all \
	"postgresql-server-dev-$major" debootstrap; do
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] ||
		need+=("$p")
done
if [ ${#need[@]} != 0 ]; then
	step "installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

tmp=$(mktemp -d /tmp/pg_tenure-package.XXXXXX)
mkdir "$tmp/pg-tenure"
tar -C "$src" --exclude=.git --exclude='tmp_check*' --exclude=results \
	--exclude=output_iso --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
	--exclude='regression.*' -cf - . | tar -C "$tmp/pg-tenure" -xf -
debversion=$(cd "$tmp/pg-tenure" && dpkg-parsechangelog -S Version)
deb=${package}_${debversion}_$(dpkg --print-architecture).deb
step "dpkg-buildpackage -us -uc -b ($package $debversion)"
if ! (cd "$tmp/pg-tenure" && dpkg-buildpackage -us -uc -b) >"$tmp/build.log" 2>&1; then
	tail -n 60 "$tmp/build.log"
	echo "$me: dpkg-buildpackage FAILED" >&2
	exit 1
fi
[ -f "$tmp/$deb" ] || {
	ls -l "$tmp" >&2
	echo "$me: the build made no $deb" >&2
	exit 1
}

# 2. A throwaway copy of the clean chroot, made once with debootstrap.
# One run at a time uses the chroot and the apt cache beside it.
exec 9>"$base.lock"
flock 9
tenure_chroot_create "$base" "$suite" "$mirror"
run=$(mktemp -d "$base.run.XXXXXX")
step "copying the clean chroot to $run"
cp -a --reflink=auto "$base"/. "$run"/
tenure_chroot_mount "$run"
mkdir -p "$archives"
mount --bind "$archives" "$run/var/cache/apt/archives"

# as a Debian 12 system has it: with the point and security updates
cat >"$run/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
EOF
# no service starts in the chroot: the packaged cluster stays down
printf '#!/bin/sh\nexit 101\n' >"$run/usr/sbin/policy-rc.d"
chmod 755 "$run/usr/sbin/policy-rc.d"

in_chroot() {
	chroot "$run" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# 3. Install the package alone: its dependencies must bring the server.
cp "$tmp/$deb" "$run/tmp/$deb"
step "apt-get install ./$deb in the chroot"
in_chroot apt-get update -qq
in_chroot sh -c "cd /tmp && apt-get install -y -qq --no-install-recommends ./$deb" \
	>"$tmp/apt.log" 2>&1 || {
	cat "$tmp/apt.log"
	echo "$me: installing $deb FAILED" >&2
	exit 1
}
in_chroot dpkg-query -W -f='${db:Status-Status}' "postgresql-$major" | grep -qx installed || {
	echo "$me: installing $deb did not install postgresql-$major" >&2
	exit 1
}
# the suite's own need: pgTAP (pg_regress comes with postgresql-client-$major)
in_chroot apt-get install -y -qq --no-install-recommends "postgresql-$major-pgtap" \
	>"$tmp/apt.log" 2>&1 || {
	cat "$tmp/apt.log"
	exit 1
}
pg_regress=/usr/lib/postgresql/$major/lib/pgxs/src/test/regress/pg_regress
in_chroot test -x "$pg_regress" || {
	echo "$me: no $pg_regress in the chroot" >&2
	exit 1
}
for p in "postgresql-server-dev-$major" build-essential make; do
	if in_chroot dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed; then
		echo "$me: $p is installed in the chroot; the suite must run without it" >&2
		exit 1
	fi
done

# 4. The package holds what the extension needs, and is all of it.
step "checking the files of $package"
libdir=/usr/lib/postgresql/$major/lib
extdir=/usr/share/postgresql/$major/extension
in_chroot dpkg -L "$package" >"$tmp/files"
fail=0
expect="$libdir/pg_tenure.so $extdir/pg_tenure.control"
for f in "$src"/pg_tenure--*.sql; do
	expect="$expect $extdir/$(basename "$f")"
done
for f in $expect; do
	grep -qx -F "$f" "$tmp/files" || {
		echo "$me: dpkg -L $package does not list $f" >&2
		fail=1
	}
done
# every pg_tenure file the server could load is the package's
for f in $(in_chroot find "$libdir" "$extdir" -name 'pg_tenure*' ! -type d); do
	grep -qx -F "$f" "$tmp/files" || {
		echo "$me: $f is not from $package" >&2
		fail=1
	}
done
[ $fail = 0 ] || exit 1
grep -E "^($libdir|$extdir)/" "$tmp/files" | sed 's/^/  /'

# 5. The regression suite against the installed files.
in_chroot sh -c 'id tenure >/dev/null 2>&1 || useradd -m tenure'
suite_dir=$run/home/tenure/regress
mkdir -p "$suite_dir"
cp -a "$src/sql" "$src/expected" "$src/test/tenure.conf" "$src/test/mask_epochs" "$suite_dir"/
in_chroot chown -R tenure: /home/tenure/regress
tests=
for f in "$src"/sql/*.sql; do
	f=${f##*/}
	tests="$tests ${f%.sql}"
done
step "pg_regress in the chroot:$tests"
status=0
in_chroot runuser -u tenure -- sh -c "cd /home/tenure/regress &&
	$pg_regress --inputdir=. --bindir=/usr/lib/postgresql/$major/bin \
		--temp-instance=./tmp_check --temp-config=./tenure.conf \
		--launcher=./mask_epochs --dbname=contrib_regression $tests" || status=$?
if [ $status != 0 ]; then
	for f in "$suite_dir/regression.diffs" "$suite_dir"/log/*; do
		[ -s "$f" ] || continue
		echo "==== ${f#"$run"} (last 200 lines)"
		tail -n 200 "$f"
	done
	echo "$me: the regression suite FAILED against the installed $deb" >&2
	exit 1
fi
step "$deb passed"
