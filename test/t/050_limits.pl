
# Limits: the shared lease table holds tenure.max_leases leases; when it is
# full of held leases, acquiring another lease fails with SQLSTATE 53400 and
# a hint naming the setting, and changes nothing; the slot of a released or
# dropped lease goes to the next lease.  Without shared_preload_libraries the
# extension cannot be created, and the message says how to fix it.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

#
# (a) tenure.max_leases = 16 (the minimum)
#
my $node = tenure_node('limits',
	conf => "tenure.max_leases = 16\ntenure.role_share = 100\ntenure.database_share = 100\n");
is($node->safe_psql('postgres', 'SHOW tenure.max_leases'),
	'16', 'tenure.max_leases is 16');

# creating leases takes no slot: 18 of them
$node->safe_psql('postgres',
	"SELECT tenure.create_lease(format('l%s', lpad(i::text, 2, '0')), '10 min', '0')"
	  . " FROM generate_series(1, 18) i");
is( $node->safe_psql(
		'postgres',
		"SELECT count(tenure.acquire(format('l%s', lpad(i::text, 2, '0')), 'h'))"
		  . " FROM generate_series(1, 16) i"),
	'16',
	'16 distinct leases are acquired');

my $state_l17 =
    "SELECT tenure.current_epoch('l17'),"
  . " (SELECT count(*) FROM tenure.history WHERE lease = 'l17'),"
  . " (SELECT coalesce(holder, 'none') || ':' || transitions FROM tenure.leases WHERE lease = 'l17')";
my $before = $node->safe_psql('postgres', $state_l17);
is($before, '0|0|none:0', 'l17 has never been held');

# 16 held leases: no slot can be given to another lease
for my $call ("tenure.acquire('l17', 'h')", "tenure.acquire_or_error('l17', 'h')")
{
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT $call;",
		on_error_stop => 0);
	like($stderr, qr/ERROR:  53400: too many leases in use/,
		"$call fails with 53400 when the table is full");
	like($stderr, qr/HINT:  .*tenure\.max_leases/,
		"$call: the hint names tenure.max_leases");
}
is($node->safe_psql('postgres', $state_l17),
	$before, 'the failed calls changed nothing: epoch, history, leases view');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM tenure.history WHERE ended IS NULL"),
	'16', 'the 16 tenures held are untouched');
is($node->safe_psql('postgres', "SELECT tenure.leader_is('l01', 'h')"),
	't', 'holders of other leases still lead');

# a released lease's slot goes to the next lease that needs one
is($node->safe_psql('postgres', "SELECT tenure.release('l16', 'h')"),
	't', 'l16 is released');
is($node->safe_psql('postgres', "SELECT tenure.acquire('l17', 'h') IS NOT NULL"),
	't', 'l17 takes the slot of the released l16');
is( $node->safe_psql(
		'postgres',
		"SELECT holder, epoch > 0, epoch = tenure.current_epoch('l17') FROM tenure.leases WHERE lease = 'l17'"
	),
	'h|t|t',
	'l17 is held');

# the table is full of held leases again
my ($ret18, $out18, $err18) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT tenure.acquire('l18', 'h');",
	on_error_stop => 0);
like($err18, qr/ERROR:  53400: too many leases in use/,
	'with l17 in, an 18th lease does not fit');

# dropping a held lease keeps its slot while its holder may still believe
# in the tenure (10 min): a lease created again under the name inherits
# that hold-off
my $e01 = $node->safe_psql('postgres', "SELECT tenure.current_epoch('l01')");
$node->safe_psql('postgres', "SELECT tenure.drop_lease('l01')");
($ret18, $out18, $err18) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT tenure.acquire('l18', 'h');",
	on_error_stop => 0);
like($err18, qr/ERROR:  53400: too many leases in use/,
	'l01 dropped unreleased keeps its slot');

# a lease released and dropped frees its slot, once the keeper has let go
# of it
$node->safe_psql('postgres',
	"SELECT tenure.release('l02', 'h'); SELECT tenure.drop_lease('l02')");
ok( $node->poll_query_until(
		'postgres', "SELECT tenure.acquire('l18', 'h') IS NOT NULL"),
	'after l02 is released and dropped, l18 can be acquired');
is( $node->safe_psql(
		'postgres',
		"SELECT end_reason FROM tenure.history WHERE lease = 'l01' AND epoch = $e01"),
	'dropped', 'history: the tenure of l01 ended as dropped');

$node->stop;

#
# (b) Without shared_preload_libraries (so not a tenure_node)
#
my $bare = PostgreSQL::Test::Cluster->new('not_preloaded');
$bare->init;
$bare->start;

my ($ret, $stdout, $stderr) = $bare->psql('postgres',
	"\\set VERBOSITY verbose\nCREATE EXTENSION pg_tenure;",
	on_error_stop => 0);
like(
	$stderr,
	qr/ERROR:  55000: pg_tenure must be loaded via shared_preload_libraries/,
	'the error says pg_tenure must be preloaded');
like(
	$stderr,
	qr/HINT:  Add pg_tenure to shared_preload_libraries in postgresql\.conf and restart the server\./,
	'the hint says how to fix it');
is( $bare->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_extension WHERE extname = 'pg_tenure'"),
	'0',
	'the extension was not created');
is($bare->safe_psql('postgres', "SELECT to_regnamespace('tenure') IS NULL"),
	't', 'no schema tenure is left behind');

$bare->stop;

#
# (c) The shared lock table is full: the keeper cannot take a tenure's lock,
# and acquire says so (53200, hint max_locks_per_transaction) instead of
# blaming a foreign session.  Everything else keeps working.
#
my $small = tenure_node(
	'small_lock_table', conf => q{
tenure.max_leases = 20000
tenure.role_share = 100
tenure.database_share = 100
max_locks_per_transaction = 10
max_connections = 10
max_worker_processes = 2
max_wal_senders = 0
autovacuum_max_workers = 1
});
wait_for_keeper($small) or die "keeper did not start";
$small->safe_psql('postgres',
	"SELECT tenure.create_lease('m' || i, '10 min', '0') FROM generate_series(1, 2000) i");

# acquire one lease per transaction until one fails
($ret, $stdout, $stderr) = $small->psql(
	'postgres', q{
\set VERBOSITY verbose
DO $$
BEGIN
	FOR i IN 1..2000 LOOP
		PERFORM tenure.acquire('m' || i, 'h');
		COMMIT;
	END LOOP;
END
$$;
},
	on_error_stop => 0);
# The keeper's lock or the commit's fence lock finds the table full first;
# either way the error is 53200 and says what to raise.
like($stderr, qr/ERROR:  53200: out of shared memory/,
	'a full lock table fails acquire with 53200');
like($stderr, qr/HINT:  .*max_locks_per_transaction/,
	'the hint names max_locks_per_transaction');
unlike($stderr, qr/another session/, 'no foreign session is blamed');
my $held = $small->safe_psql('postgres',
	"SELECT count(*) FROM tenure.leases WHERE holder IS NOT NULL");
cmp_ok($held, '>', 0, "$held tenures fit in the lock table");
is( $small->safe_psql(
		'postgres',
		"SELECT count(*) FROM tenure.leases WHERE holder IS NULL AND transitions > 0"),
	'0',
	'the failed acquisition left no tenure behind');
is($small->safe_psql('postgres', "SELECT tenure.leader_is('m1', 'h')"),
	't', 'earlier tenures still lead');

# The keeper keeps the lock of a released lease for a moment (a lease taken
# again soon needs no round trip to it).  In a full lock table, those locks
# make room for new tenures at once: release five leases and acquire five
# others right away, each in its own transaction.
$small->safe_psql('postgres',
	"SELECT tenure.create_lease('n' || i, '10 min', '0') FROM generate_series(1, 5) i");
($ret, $stdout, $stderr) = $small->psql(
	'postgres', q{
SELECT tenure.release('m' || i, 'h') FROM generate_series(1, 5) i;
DO $$
BEGIN
	FOR i IN 1..5 LOOP
		PERFORM tenure.acquire('n' || i, 'h');
		COMMIT;
	END LOOP;
END
$$;
});
is($stderr, '', 'locks of released leases make room for new tenures in a full lock table');
is( $small->safe_psql(
		'postgres',
		"SELECT count(*) FROM tenure.leases WHERE lease LIKE 'n_' AND holder = 'h'"),
	'5', 'the five new leases are held');
$small->stop;

done_testing();
