
# pg_partman's maintenance of a fenced partition set.  Its maintenance
# adds empty partitions (CREATE TABLE, then ATTACH PARTITION), which
# change no row of the tree and need no token: a fenced set is maintained
# like any other, and no longer stops the maintenance of the others.
# Attaching a table that holds rows still needs the token, a foreign
# partition is still refused, and so is retention (DETACH PARTITION and
# DROP TABLE take rows out of the tree) without a token.  Before pg_partman
# 5.5, run_maintenance() re-raises a set's error at its end, so that
# refusal rolls back every set's maintenance; since 5.5 it skips the set
# with a WARNING and maintains the others.  (src/README, F9.)  The
# background worker is not used: partman.run_maintenance() is called
# directly.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('partman');
my $major = $node->safe_psql('postgres', 'SHOW server_version_num') / 10000;

if ($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_partman'") == 0)
{
	$node->stop;
	# test/run.sh says whether Debian ships pg_partman for this major
	BAIL_OUT("pg_partman is missing: install postgresql-$major-partman")
	  if $ENV{TENURE_PARTMAN_EXPECTED};
	plan skip_all => "pg_partman not installed (PostgreSQL $major)";
}

# Two sets of 10 ids per partition, two partitions made ahead of the
# highest id; pm_a fenced by lease pm, pm_b not.  Every name is
# schema-qualified: the test's role may have a schema of its own name.
# (pg_partman 4 names its native partitioning 'native'; 5, which has no
# other, takes the interval third and the type, 'range', by default)
$node->safe_psql('postgres',
	'CREATE SCHEMA partman; CREATE EXTENSION pg_partman SCHEMA partman;');
my $partman_major = $node->safe_psql('postgres',
	"SELECT split_part(extversion, '.', 1) FROM pg_extension WHERE extname = 'pg_partman'");
my $kind = $partman_major >= 5 ? '' : "p_type => 'native', ";
# since 5.5, a set whose maintenance fails is skipped, not the whole run
my $per_set = $node->safe_psql('postgres',
	"SELECT string_to_array(extversion, '.')::int[] >= '{5,5}' FROM pg_extension WHERE extname = 'pg_partman'"
) eq 't';
$node->safe_psql(
	'postgres', qq{
	SELECT tenure.create_lease('pm', ttl => '1 h');
	CREATE TABLE public.pm_a (id bigint NOT NULL, v text) PARTITION BY RANGE (id);
	CREATE TABLE public.pm_b (id bigint NOT NULL, v text) PARTITION BY RANGE (id);
	SELECT partman.create_parent(p_parent_table => 'public.pm_a', p_control => 'id', ${kind}p_interval => '10', p_premake => 2);
	SELECT partman.create_parent(p_parent_table => 'public.pm_b', p_control => 'id', ${kind}p_interval => '10', p_premake => 2);
	SELECT tenure.fence_table('public.pm_a', 'pm');
});
my $epoch = $node->safe_psql('postgres', "SELECT tenure.acquire('pm', 'w')");
my $token = "SELECT tenure.present('pm', $epoch, true);";

# the partitions of a set, and how many of them are not fenced by pm
sub partitions
{
	my ($parent) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_inherits WHERE inhparent = 'public.$parent'::regclass");
}
my $unfenced_a = q{
	SELECT count(*) FROM pg_inherits i LEFT JOIN tenure.fenced f ON f.tbl = i.inhrelid
	 WHERE i.inhparent = 'public.pm_a'::regclass AND f.lease IS DISTINCT FROM 'pm'};

# run SQL in a transaction; returns stderr ('' if it committed)
sub run
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	$node->psql(
		'postgres', "BEGIN; $sql COMMIT;",
		stdout => \$out,
		stderr => \$err,
		on_error_stop => 1,
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return $err;
}

# ids up to 25 in both sets: maintenance must add partitions 30 and 40
is(run("$token INSERT INTO public.pm_a SELECT g, 'a' FROM generate_series(0, 25) g;"),
	'', 'rows written to the fenced set with the token');
is(run("INSERT INTO public.pm_b SELECT g, 'b' FROM generate_series(0, 25) g;"),
	'', 'rows written to the other set');
my ($a0, $b0) = (partitions('pm_a'), partitions('pm_b'));

# 1. maintenance without a token adds the fenced set's partitions (fenced
# with it) and the other set's
is(run('SELECT partman.run_maintenance();'), '', 'run_maintenance() without a token');
is(partitions('pm_a'), $a0 + 2, 'two partitions added to the fenced set');
is(partitions('pm_b'), $b0 + 2, 'and to the other set, in the same run');
is($node->safe_psql('postgres', $unfenced_a), '0', 'every partition of the fenced set is fenced by pm');
like(run("INSERT INTO public.pm_a_p30 VALUES (35, 'no token');"),
	qr/TN002.*table "pm_a_p30" is fenced by lease "pm"/s,
	'a new partition takes no write without the token');

# 2. a table that holds a row joins the tree only with the token (named
# as pg_partman names its partitions, which it reads back)
$node->safe_psql(
	'postgres', q{
	CREATE TABLE public.pm_a_p100 (LIKE public.pm_a);
	INSERT INTO public.pm_a_p100 VALUES (105, 'full');
});
my $attach = 'ALTER TABLE public.pm_a ATTACH PARTITION public.pm_a_p100 FOR VALUES FROM (100) TO (110);';
like(run($attach), qr/TN002.*table "pm_a" is fenced by lease "pm" and the transaction presents no epoch/s,
	'attaching a table with a row needs the token');
is(run("$token $attach"), '', 'and is accepted with it');

# 3. a foreign partition is refused, token or not
$node->safe_psql(
	'postgres', q{
	CREATE FOREIGN DATA WRAPPER pm_fdw;
	CREATE SERVER pm_server FOREIGN DATA WRAPPER pm_fdw;
	CREATE FOREIGN TABLE public.pm_f (id bigint NOT NULL, v text) SERVER pm_server;
});
like(
	run("$token ALTER TABLE public.pm_a ATTACH PARTITION public.pm_f FOR VALUES FROM (200) TO (210);"),
	qr/0A000.*cannot make foreign table public\.pm_f a partition or child of fenced table public\.pm_a/s,
	'a foreign partition is refused');

# 4. retention takes partitions out of the fenced set: refused without the
# token, which rolls back the whole run, the other set's partitions too
$node->safe_psql(
	'postgres', q{
	UPDATE partman.part_config SET retention = '30', retention_keep_table = false
	 WHERE parent_table = 'public.pm_a';
	INSERT INTO public.pm_b SELECT g, 'b' FROM generate_series(26, 45) g;
});
($a0, $b0) = (partitions('pm_a'), partitions('pm_b'));
like(run('SELECT partman.run_maintenance();'),
	qr/is fenced by lease "pm" and the transaction presents no epoch/,
	'retention of the fenced set without the token is refused');
is(partitions('pm_a'), $a0, 'the fenced set kept its partitions');
if ($per_set)
{
	# the refusal came as pg_partman's WARNING, and the run committed
	cmp_ok(partitions('pm_b'), '>', $b0, 'and the other set got its partitions (pg_partman 5.5 skips a failing set)');
	$b0 = partitions('pm_b');
	$node->safe_psql('postgres', 'INSERT INTO public.pm_b SELECT g, \'b\' FROM generate_series(46, 65) g;');
}
else
{
	is(partitions('pm_b'), $b0, 'and the other set got none: the run rolled back');
}
is(run("$token SELECT partman.run_maintenance();"), '', 'with the token, the run goes through');
cmp_ok(partitions('pm_b'), '>', $b0, 'the other set got its partitions');
is($node->safe_psql('postgres', "SELECT to_regclass('public.pm_a_p0') IS NULL"),
	't', 'the fenced set\'s oldest partition is dropped');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM tenure.fenced f WHERE f.tbl::text LIKE '%pm_a_p0'"),
	'0', 'and forgotten');
is($node->safe_psql('postgres', $unfenced_a), '0', 'the fenced set is still fenced whole');

$node->stop;
done_testing();
