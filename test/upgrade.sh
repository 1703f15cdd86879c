#!/usr/bin/env bash
#
# Test ALTER EXTENSION pg_tenure UPDATE: for every released version older
# than the control file's default_version (a git tag v<version>), install
# that version's install script as it was released (git show
# v<version>:pg_tenure--<version>.sql), run ALTER EXTENSION pg_tenure
# UPDATE, and compare the extension's objects with those of a fresh CREATE
# EXTENSION pg_tenure in another database: every member (pg_describe_object
# over pg_depend deptype 'e'), functions with their signatures, definitions,
# volatility, security and ACLs, tables, views and sequences with their
# columns, constraints, indexes, triggers and ACLs, event triggers, initial
# privileges, comments and the extension's configuration tables.  Prints a
# diff and fails if they differ.
#
#   bash test/upgrade.sh               # every released version -> the current one
#   bash test/upgrade.sh --self-test   # prove that the harness passes a good
#                                      # upgrade script and fails broken ones
#
# Also fails if the install script of a released version in the tree is no
# longer the one released.  Without a release before the current version
# it says so and exits 0.
#
# Runs against the PostgreSQL of PG_CONFIG (test/pg_major.sh), but installs
# nothing into it: pg_tenure is built in a copy of the tree and installed
# (make install DESTDIR=...) into a private tree under /tmp that mirrors
# that PostgreSQL's bin, lib and share directories, where the released
# install scripts are added; PostgreSQL finds its lib and share
# directories relative to its binaries.  The temporary instance preloads
# pg_tenure with test/tenure.conf.  As root, builds and runs the instance as
# the unprivileged user TEST_USER (default "tenure", created if missing).
set -euo pipefail

TEST_USER=${TEST_USER:-tenure}
src=$(cd "$(dirname "$0")/.." && pwd)
me=upgrade.sh
# The trees this reads may belong to another user than the one running it
# (a clone made by root, a copy in a chroot); newer git refuses those
# ("dubious ownership") unless told otherwise, on the command line's level.
export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
. "$src/test/pg_major.sh"

self_test=
case ${1:-} in
	--self-test) self_test=1 ;;
	"") ;;
	*)
		echo "usage: test/upgrade.sh [--self-test]" >&2
		exit 2
		;;
esac

control_version() { sed -n "s/^default_version = '\(.*\)'/\1/p"; }
current=$(control_version <"$src/pg_tenure.control")

tmp=
pgdata=
as_user() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$TEST_USER" -- "$@"
	else
		"$@"
	fi
}
cleanup() {
	if [ -n "$pgdata" ] && [ -f "$pgdata/postmaster.pid" ]; then
		as_user "$pg_ctl" -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true
	fi
	[ -z "$tmp" ] || rm -rf "$tmp"
	return 0
}
trap cleanup EXIT

# ---------------------------------------------------------------------------
# --self-test: fabricate a release and a next version in a scratch git
# repository made from this tree, and check the harness's verdicts.
# ---------------------------------------------------------------------------
if [ -n "$self_test" ]; then
	command -v git >/dev/null || {
		echo "$me --self-test: needs git" >&2
		exit 1
	}
	tmp=$(mktemp -d /tmp/pg_tenure-upgrade-self.XXXXXX)
	repo=$tmp/repo
	mkdir "$repo"
	tar -C "$src" --exclude=.git --exclude='tmp_check*' --exclude=results \
		--exclude=output_iso --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
		--exclude='regression.*' -cf - . | tar -C "$repo" -xf -
	# no automatic maintenance: recent git (2.55 in Debian unstable)
	# repacks in the background after this commit, removing the loose
	# objects while the cases below copy the repository
	git_r() {
		git -C "$repo" -c user.name=self-test -c user.email=self-test@invalid \
			-c init.defaultBranch=main -c maintenance.auto=false -c gc.auto=0 \
			"$@" >/dev/null
	}
	git_r init -q
	git_r add -A
	git_r commit -q -m "pg_tenure $current"

	# run NAME DIR: start the harness on the scratch repository DIR
	run() {
		(
			status=0
			bash "$2/test/upgrade.sh" >"$tmp/$1.log" 2>&1 || status=$?
			echo $status >"$tmp/$1.status"
		) &
	}
	# expect NAME passes|fails TEXT: the harness's run NAME must have
	# passed, or failed, and printed a line that starts with TEXT
	fails=0
	expect() {
		local name=$1 want=$2 text=$3 status
		status=$(cat "$tmp/$name.status")
		if { [ "$want" = passes ] && [ "$status" = 0 ]; } ||
			{ [ "$want" = fails ] && [ "$status" != 0 ]; }; then
			if awk -v t="$text" 'index($0, t) == 1 { found = 1 } END { exit !found }' \
				"$tmp/$name.log"; then
				echo "$me --self-test: $name: $want as it should"
				return
			fi
			echo "$me --self-test: $name: no line starts with \"$text\"" >&2
		else
			echo "$me --self-test: $name: exit status $status; it should have been: $want" >&2
		fi
		sed 's/^/    /' "$tmp/$name.log" >&2
		fails=$((fails + 1))
	}

	# no release yet: nothing to upgrade from
	run no-release "$repo"
	wait
	expect no-release passes "$me: no released version before $current"

	# release the current version; the next one adds a function
	git_r tag "v$current"
	next=$current.1
	probe="CREATE FUNCTION tenure.upgrade_probe() RETURNS integer
	LANGUAGE sql IMMUTABLE AS 'SELECT 1';
COMMENT ON FUNCTION tenure.upgrade_probe() IS 'made by test/upgrade.sh --self-test';"
	revoke="REVOKE ALL ON FUNCTION tenure.upgrade_probe() FROM PUBLIC;"
	guard='\echo Use "ALTER EXTENSION pg_tenure UPDATE" to load this file. \quit'
	sed -i "s/^default_version = .*/default_version = '$next'/" "$repo/pg_tenure.control"
	{
		sed "s/pg_tenure--$current\.sql/pg_tenure--$next.sql/" "$repo/pg_tenure--$current.sql"
		printf '\n%s\n%s\n' "$probe" "$revoke"
	} >"$repo/pg_tenure--$next.sql"
	update=pg_tenure--$current--$next.sql
	printf '%s\n\n%s\n%s\n' "$guard" "$probe" "$revoke" >"$repo/$update"

	# each case in its own copy, all at once
	for c in forgets-function forgets-revoke edited-release; do
		cp -a "$repo" "$tmp/$c"
	done
	printf '%s\n' "$guard" >"$tmp/forgets-function/$update"
	printf '%s\n\n%s\n' "$guard" "$probe" >"$tmp/forgets-revoke/$update"
	echo "-- edited after the release" >>"$tmp/edited-release/pg_tenure--$current.sql"
	run good "$repo"
	for c in forgets-function forgets-revoke edited-release; do
		run $c "$tmp/$c"
	done
	wait

	expect good passes "$me: $current -> $next: ALTER EXTENSION pg_tenure UPDATE equals CREATE EXTENSION"
	# the update script forgets the function
	expect forgets-function fails "-member function tenure.upgrade_probe()"
	# the update script forgets the REVOKE: only the ACL differs
	expect forgets-revoke fails "+  acl =X/"
	# a released install script edited after its release
	expect edited-release fails "$me: pg_tenure--$current.sql is not the one released in v$current"

	if [ $fails != 0 ]; then
		echo "$me --self-test: FAILED ($fails cases)" >&2
		exit 1
	fi
	echo "$me --self-test: passed"
	exit 0
fi

# ---------------------------------------------------------------------------
# The released versions before the current one, from the git tags.
# ---------------------------------------------------------------------------
if ! git -C "$src" rev-parse -q --verify HEAD >/dev/null 2>&1; then
	echo "$me: $src is not a git checkout, so no released version is known: nothing to upgrade from"
	exit 0
fi
tmp=$(mktemp -d /tmp/pg_tenure-upgrade.XXXXXX)
mkdir "$tmp/released"
older=()
fail=0
for tag in $(git -C "$src" tag -l 'v*'); do
	v=$(git -C "$src" show "$tag:pg_tenure.control" 2>/dev/null | control_version) || true
	if [ -z "$v" ] || [ "v$v" != "$tag" ]; then
		echo "$me: tag $tag: its pg_tenure.control says default_version '$v'; skipped"
		continue
	fi
	git -C "$src" show "$tag:pg_tenure--$v.sql" >"$tmp/released/pg_tenure--$v.sql"
	# users who installed a release ran its script as released
	if [ -f "$src/pg_tenure--$v.sql" ] &&
		! cmp -s "$src/pg_tenure--$v.sql" "$tmp/released/pg_tenure--$v.sql"; then
		echo "$me: pg_tenure--$v.sql is not the one released in $tag: a released install script must not change (add an upgrade script instead)" >&2
		diff -u "$tmp/released/pg_tenure--$v.sql" "$src/pg_tenure--$v.sql" >&2 || true
		fail=1
	fi
	if [ "$v" != "$current" ] &&
		[ "$(printf '%s\n%s\n' "$v" "$current" | sort -V | head -n 1)" = "$v" ]; then
		older+=("$v")
	fi
done
[ $fail = 0 ] || exit 1
if [ ${#older[@]} = 0 ]; then
	echo "$me: no released version before $current (no git tag v<version> names one): no upgrade to test"
	exit 0
fi
echo "$me: upgrades to $current from: ${older[*]}"

# ---------------------------------------------------------------------------
# A private PostgreSQL tree with this tree's pg_tenure and the released
# install scripts, and a temporary instance that preloads it.
# ---------------------------------------------------------------------------
if [ "$(id -u)" = 0 ]; then
	id "$TEST_USER" >/dev/null 2>&1 || useradd -m "$TEST_USER"
fi
bindir=$("$PG_CONFIG" --bindir)
libdir=$("$PG_CONFIG" --pkglibdir)
sharedir=$("$PG_CONFIG" --sharedir)
pg=$tmp/pg
mkdir -p "$pg$bindir" "$pg$libdir" "$pg$sharedir"
# real copies of the binaries: PostgreSQL resolves symbolic links to find
# its own location; the rest symbolic links, without pg_tenure's files
cp -RL "$bindir"/. "$pg$bindir"/
cp -Rs "$libdir"/. "$pg$libdir"/
cp -Rs "$sharedir"/. "$pg$sharedir"/
rm -rf "$pg$libdir"/pg_tenure* "$pg$libdir"/bitcode/pg_tenure* "$pg$sharedir"/extension/pg_tenure*

mkdir "$tmp/src"
tar -C "$src" --exclude=.git --exclude='tmp_check*' --exclude=results \
	--exclude=output_iso --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
	--exclude='regression.*' -cf - . | tar -C "$tmp/src" -xf -
chmod 755 "$tmp"
[ "$(id -u)" != 0 ] || chown -R "$TEST_USER": "$tmp"

make_q() { as_user make -s -C "$tmp/src" PG_CONFIG="$PG_CONFIG" with_llvm=no "$@"; }
make_q -j"$(nproc)" all >"$tmp/build.log" 2>&1 || {
	cat "$tmp/build.log"
	exit 1
}
make_q install DESTDIR="$pg" >>"$tmp/build.log" 2>&1 || {
	cat "$tmp/build.log"
	exit 1
}
for v in "${older[@]}"; do
	as_user cp "$tmp/released/pg_tenure--$v.sql" "$pg$sharedir/extension/"
done

pg_ctl=$pg$bindir/pg_ctl
pgdata=$tmp/data
as_user "$pg$bindir/initdb" -D "$pgdata" -A trust --no-sync >"$tmp/initdb.log" 2>&1 || {
	cat "$tmp/initdb.log"
	exit 1
}
cat >>"$pgdata/postgresql.conf" <<EOF
include '$tmp/src/test/tenure.conf'
listen_addresses = ''
unix_socket_directories = '$tmp'
EOF
as_user "$pg_ctl" -D "$pgdata" -l "$tmp/server.log" -w -t 120 start >/dev/null || {
	cat "$tmp/server.log"
	exit 1
}
psql() {
	as_user "$pg$bindir/psql" -X -q -h "$tmp" -v ON_ERROR_STOP=1 "$@"
}

# Everything about the extension's objects that an upgrade must get right,
# one sorted line (or block) per fact, without OIDs.
cat >"$tmp/describe.sql" <<'EOF'
\pset format unaligned
\pset tuples_only on
-- every name outside pg_catalog comes out qualified
SET search_path = pg_catalog;
CREATE TEMP VIEW m AS
SELECT d.classid, d.objid, d.objsubid
  FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND e.extname = 'pg_tenure';
-- an ACL with the owner's implicit default written out, its items sorted
CREATE FUNCTION pg_temp.acl(a aclitem[], kind "char", owner oid) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT pg_catalog.string_agg(i::text, ' ' ORDER BY i::text COLLATE "C")
	  FROM pg_catalog.unnest(coalesce(a, pg_catalog.acldefault(kind, owner))) i
$$;
CREATE TEMP VIEW rels AS
SELECT c.* FROM pg_class c JOIN m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid;

SELECT k, v FROM (
SELECT 'extension', format('schema %s relocatable %s config %s',
	e.extnamespace::regnamespace, e.extrelocatable,
	(SELECT string_agg(format('%s %L', c::regclass, w), ', ' ORDER BY c::regclass::text)
	   FROM unnest(e.extconfig, e.extcondition) AS u(c, w)))
  FROM pg_extension e WHERE e.extname = 'pg_tenure'
UNION ALL
SELECT 'member ' || pg_describe_object(classid, objid, objsubid), ''
  FROM m
UNION ALL
SELECT 'schema ' || n.nspname, format('owner %s acl %s comment %L',
	n.nspowner::regrole, pg_temp.acl(n.nspacl, 'n', n.nspowner),
	obj_description(n.oid, 'pg_namespace'))
  FROM pg_namespace n WHERE n.nspname = 'tenure'
UNION ALL
SELECT 'function ' || p.oid::regprocedure,
	format(E'kind %s volatile %s strict %s security_definer %s leakproof %s parallel %s returns %s%s config %s\n  acl %s\n  comment %L\n%s',
		p.prokind, p.provolatile, p.proisstrict, p.prosecdef, p.proleakproof,
		p.proparallel, CASE WHEN p.proretset THEN 'setof ' ELSE '' END,
		format_type(p.prorettype, NULL), p.proconfig,
		pg_temp.acl(p.proacl, 'f', p.proowner),
		obj_description(p.oid, 'pg_proc'),
		CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid) END)
  FROM pg_proc p JOIN m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
UNION ALL
SELECT 'relation ' || c.oid::regclass, format('kind %s persistence %s rls %s/%s options %s owner %s acl %s comment %L',
	c.relkind, c.relpersistence, c.relrowsecurity, c.relforcerowsecurity,
	c.reloptions, c.relowner::regrole,
	pg_temp.acl(c.relacl, (CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END)::"char", c.relowner),
	obj_description(c.oid, 'pg_class'))
  FROM rels c
UNION ALL
SELECT format('relation %s column %s', c.oid::regclass,
	lpad((row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum))::text, 3, '0')),
	format('%I %s not_null %s default %s identity %s generated %s collation %s acl %s comment %L',
		a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
		pg_get_expr(ad.adbin, ad.adrelid), a.attidentity, a.attgenerated,
		CASE WHEN a.attcollation <> 0 THEN a.attcollation::regcollation::text END,
		(SELECT string_agg(i::text, ' ' ORDER BY i::text COLLATE "C") FROM unnest(a.attacl) i),
		col_description(c.oid, a.attnum))
  FROM rels c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
UNION ALL
SELECT format('relation %s constraint %s', c.oid::regclass, quote_ident(k.conname)),
	pg_get_constraintdef(k.oid) || coalesce(format(' comment %L', obj_description(k.oid, 'pg_constraint')), '')
  FROM rels c JOIN pg_constraint k ON k.conrelid = c.oid
UNION ALL
SELECT format('relation %s index %s', c.oid::regclass, i.indexrelid::regclass),
	pg_get_indexdef(i.indexrelid)
  FROM rels c JOIN pg_index i ON i.indrelid = c.oid
UNION ALL
SELECT format('relation %s trigger %s', c.oid::regclass, quote_ident(t.tgname)),
	format('enabled %s %s', t.tgenabled, pg_get_triggerdef(t.oid))
  FROM rels c JOIN pg_trigger t ON t.tgrelid = c.oid AND NOT t.tgisinternal
UNION ALL
SELECT format('relation %s policy %s', c.oid::regclass, quote_ident(p.polname)),
	format('%s %s roles %s using %s check %s', p.polcmd, p.polpermissive, p.polroles::regrole[],
		pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
  FROM rels c JOIN pg_policy p ON p.polrelid = c.oid
UNION ALL
SELECT format('relation %s rule %s', c.oid::regclass, quote_ident(r.rulename)),
	CASE WHEN r.rulename = '_RETURN' THEN pg_get_viewdef(c.oid, true) ELSE pg_get_ruledef(r.oid, true) END
  FROM rels c JOIN pg_rewrite r ON r.ev_class = c.oid
UNION ALL
SELECT 'relation ' || c.oid::regclass || ' sequence',
	format('type %s start %s increment %s min %s max %s cache %s cycle %s owned_by %s',
		format_type(s.seqtypid, NULL), s.seqstart, s.seqincrement, s.seqmin, s.seqmax,
		s.seqcache, s.seqcycle,
		(SELECT string_agg(format('%s.%I', d.refobjid::regclass, a.attname), ', ')
		   FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
		  WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
		    AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')))
  FROM rels c JOIN pg_sequence s ON s.seqrelid = c.oid
UNION ALL
SELECT 'event trigger ' || quote_ident(t.evtname),
	format('event %s function %s enabled %s tags %s comment %L', t.evtevent,
		t.evtfoid::regprocedure, t.evtenabled, t.evttags,
		obj_description(t.oid, 'pg_event_trigger'))
  FROM pg_event_trigger t JOIN m ON m.classid = 'pg_event_trigger'::regclass AND m.objid = t.oid
UNION ALL
SELECT 'type ' || format_type(t.oid, NULL),
	format('type %s category %s enum %s comment %L', t.typtype, t.typcategory,
		(SELECT string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder)
		   FROM pg_enum e WHERE e.enumtypid = t.oid),
		obj_description(t.oid, 'pg_type'))
  FROM pg_type t JOIN m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
UNION ALL
SELECT 'initial privileges ' || pg_describe_object(ip.classoid, ip.objoid, ip.objsubid),
	format('%s %s', ip.privtype,
		(SELECT string_agg(i::text, ' ' ORDER BY i::text COLLATE "C") FROM unnest(ip.initprivs) i))
  FROM pg_init_privs ip
 WHERE (ip.classoid, ip.objoid) IN (SELECT classid, objid FROM m)
    OR (ip.classoid = 'pg_namespace'::regclass AND ip.objoid = 'tenure'::regnamespace)
) AS facts(k, v)
ORDER BY k COLLATE "C", v COLLATE "C";
EOF

psql -d postgres -c 'CREATE DATABASE fresh' -c "CREATE DATABASE fresh_check"
psql -d fresh -c 'CREATE EXTENSION pg_tenure'
psql -d fresh -f "$tmp/describe.sql" >"$tmp/fresh.txt"
# the catalog query is itself deterministic
psql -d fresh_check -c 'CREATE EXTENSION pg_tenure'
psql -d fresh_check -f "$tmp/describe.sql" >"$tmp/fresh_check.txt"
diff -u "$tmp/fresh.txt" "$tmp/fresh_check.txt" || {
	echo "$me: two fresh installs describe differently" >&2
	exit 1
}

n=0
for v in "${older[@]}"; do
	n=$((n + 1))
	db=upgraded_$n
	psql -d postgres -c "CREATE DATABASE $db"
	psql -d "$db" -c "CREATE EXTENSION pg_tenure VERSION '$v'"
	psql -d "$db" -c 'ALTER EXTENSION pg_tenure UPDATE'
	got=$(psql -d "$db" -At -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_tenure'")
	if [ "$got" != "$current" ]; then
		echo "$me: $v -> $current: ALTER EXTENSION pg_tenure UPDATE left version $got" >&2
		fail=1
		continue
	fi
	psql -d "$db" -f "$tmp/describe.sql" >"$tmp/upgraded_$v.txt"
	if diff -u --label "CREATE EXTENSION pg_tenure ($current)" \
		--label "CREATE EXTENSION pg_tenure VERSION '$v'; ALTER EXTENSION pg_tenure UPDATE" \
		"$tmp/fresh.txt" "$tmp/upgraded_$v.txt"; then
		echo "$me: $v -> $current: ALTER EXTENSION pg_tenure UPDATE equals CREATE EXTENSION ($(grep -c '^member ' "$tmp/fresh.txt") members)"
	else
		echo "$me: $v -> $current: the upgraded extension differs from a fresh one (diff above)" >&2
		fail=1
	fi
done
if [ $fail != 0 ]; then
	echo "$me: FAILED" >&2
	exit 1
fi
