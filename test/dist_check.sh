#!/usr/bin/env bash
#
# Check the release archive that "make dist" builds from HEAD: one top
# directory pg_tenure-<version>/, everything a user needs to build, install
# and test pg_tenure (Makefile, control file, install and upgrade scripts,
# src/, the regression suite, LICENSE, README.md and doc/, META.json,
# debian/), none of the files marked export-ignore, and that it builds from
# the unpacked archive alone, without git and without -Werror.
#
#   PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config bash test/dist_check.sh
#
# Only committed files are in the archive: commit before running this.
set -euo pipefail

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src"

version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" pg_tenure.control)
top=pg_tenure-$version
tmp=$(mktemp -d /tmp/pg_tenure-dist.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

make -s PG_CONFIG="$PG_CONFIG" dist DIST_ARCHIVE="$tmp/$top.tar.gz"
tar -tzf "$tmp/$top.tar.gz" | sed 's:/$::' | sort >"$tmp/list"

fail=0
problem() { echo "dist_check: $*" >&2; fail=1; }

if grep -v -x -e "$top" -e "$top/.*" "$tmp/list" >"$tmp/outside"; then
	problem "entries outside $top/: $(tr '\n' ' ' <"$tmp/outside")"
fi

# what a user needs: the build, the extension's files, its documentation
# and license, the tests, the packaging
need="Makefile pg_tenure.control LICENSE README.md SECURITY.md META.json
	debian/control debian/rules debian/changelog"
need="$need $(git ls-files 'pg_tenure--*.sql' 'src/*' 'sql/*' 'expected/*' 'test/*' 'doc/*')"
for f in $need; do
	grep -q -x -F "$top/$f" "$tmp/list" || problem "missing $f"
done
# what it leaves out
for f in .ci .gitattributes .gitignore; do
	! grep -q -x -F "$top/$f" "$tmp/list" || problem "contains $f, which is export-ignore"
done

# it builds from the archive alone
tar -xzf "$tmp/$top.tar.gz" -C "$tmp"
if ! make -s -C "$tmp/$top" PG_CONFIG="$PG_CONFIG" with_llvm=no >"$tmp/build.log" 2>&1; then
	cat "$tmp/build.log" >&2
	problem "does not build from the unpacked archive"
fi
[ -f "$tmp/$top/pg_tenure.so" ] || problem "the build made no pg_tenure.so"

if [ $fail != 0 ]; then
	echo "dist_check: $top.tar.gz FAILED" >&2
	exit 1
fi
echo "dist_check: $top.tar.gz ok ($(wc -l <"$tmp/list") entries)"
