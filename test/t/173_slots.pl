
# Lease slots of shared memory (tenure.max_leases = 16, the minimum) are
# reclaimed when nobody needs them:
#
# (a) leases of dropped databases, even held ones, give their slots back;
# (b) await_change takes no slot for a lease that is not held, so a role
#     without rights on a lease cannot fill the table by waiting on it;
# (c) a released lease's slot goes to another lease when the table is full;
# (d) DROP EXTENSION pg_tenure ends every tenure of its database when it
#     commits: after CREATE EXTENSION the old holder leads nothing, and its
#     old token is rejected by a newly fenced table, also once a new holder
#     holds the lease created again.
#
# Waits poll with a deadline; only outcomes and messages are asserted.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('slots',
	conf => "tenure.max_leases = 16\ntenure.role_share = 100\ntenure.database_share = 100\n");

#
# (a) 20 databases, each holding a lease when it is dropped
#
my $failed = 0;
for my $i (1 .. 20)
{
	$node->safe_psql('postgres', "CREATE DATABASE d$i");
	my ($ret, $out, $err) = $node->psql(
		"d$i", q{
		CREATE EXTENSION pg_tenure;
		SELECT tenure.create_lease('job', ttl => '10 min');
		SELECT tenure.acquire('job', 'h') IS NOT NULL;
});
	if ($ret != 0 || $out !~ /^t$/m)
	{
		diag("database d$i: $err");
		$failed++;
	}
	$node->safe_psql('postgres', "DROP DATABASE d$i");
}
is($failed, 0, 'each of 20 databases acquired a lease, one after the other');
ok( $node->poll_query_until(
		'postgres',
		"SELECT NOT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'"
		  . " AND database NOT IN (SELECT oid FROM pg_database))"),
	'the keeper holds no lock in a dropped database');
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('main', ttl => '10 min', holdoff => '0')");
is($node->safe_psql('postgres', "SELECT tenure.acquire('main', 'h') IS NOT NULL"),
	't', 'afterwards a lease of a remaining database is acquired');

#
# (b) a role without rights waits on 20 leases; their owner still acquires
#
$node->safe_psql(
	'postgres', q{
	CREATE ROLE lease_owner;
	CREATE ROLE onlooker;
	GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text) TO lease_owner;
	SET ROLE lease_owner;
	SELECT tenure.create_lease(format('w%s', lpad(i::text, 2, '0')), '10 min', '0')
	  FROM generate_series(1, 20) i;
});
my ($ret, $out, $err) = $node->psql(
	'postgres', q{
	SET ROLE onlooker;
	SELECT count(*) FILTER (WHERE NOT w.changed)
	  FROM generate_series(1, 20) i,
		   tenure.await_change(format('w%s', lpad(i::text, 2, '0')), 0, NULL, '0 s') w;
});
is($ret, 0, 'await_change on 20 leases by a role without rights succeeds')
  or diag($err);
is($out, '20', 'each of them answered (unchanged, not held)');
is( $node->safe_psql(
		'postgres', q{
	SET ROLE lease_owner;
	SELECT count(tenure.acquire(format('w%s', lpad(i::text, 2, '0')), 'h'))
	  FROM generate_series(1, 15) i;
}),
	'15',
	'the owner then acquires 15 of them: with main, every slot is held');
($ret, $out, $err) = $node->psql(
	'postgres',
	"\\set VERBOSITY verbose\nSET ROLE lease_owner;\nSELECT tenure.acquire('w16', 'h');");
like($err, qr/ERROR:  53400: too many leases in use/,
	'a 17th held lease does not fit: held leases are never evicted');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM tenure.leases WHERE holder IS NOT NULL"),
	'16',
	'tenure.leases lists all 16 held leases');

#
# (c) released leases give their slots to others
#
is( $node->safe_psql(
		'postgres', q{
	SET ROLE lease_owner;
	SELECT count(*) FILTER (WHERE tenure.release(format('w%s', lpad(i::text, 2, '0')), 'h'))
	  FROM generate_series(1, 5) i;
}),
	'5',
	'w01 to w05 are released');
is( $node->safe_psql(
		'postgres', q{
	SET ROLE lease_owner;
	SELECT count(tenure.acquire(format('w%s', lpad(i::text, 2, '0')), 'h'))
	  FROM generate_series(16, 20) i;
}),
	'5',
	'w16 to w20 take the released leases\' slots');
is( $node->safe_psql(
		'postgres', q{
	SELECT string_agg(lease || ':' || coalesce(holder, 'none'), ',' ORDER BY lease)
	  FROM tenure.leases WHERE lease IN ('w01', 'w05', 'w06', 'w20');
}),
	'w01:none,w05:none,w06:h,w20:h',
	'tenure.leases: evicted leases are free, the others still held');
is( $node->safe_psql(
		'postgres', q{
	SET ROLE lease_owner;
	SELECT tenure.release('w20', 'h');
	SELECT tenure.acquire('w01', 'h') IS NOT NULL;
	SELECT tenure.leader_is('w01', 'h');
}),
	"t\nt\nt",
	'an evicted lease is loaded again when it is next acquired');

#
# (d) DROP EXTENSION and CREATE EXTENSION
#
$node->safe_psql(
	'postgres', q{
	SET ROLE lease_owner;
	SELECT tenure.release(format('w%s', lpad(i::text, 2, '0')), 'h')
	  FROM generate_series(1, 20) i;
});
$node->safe_psql('postgres', 'CREATE DATABASE x');
$node->safe_psql(
	'x', q{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
});
my $old_epoch = $node->safe_psql('x', "SELECT tenure.acquire('w', 'old')");
like($old_epoch, qr/^\d+$/, "old holds w at epoch $old_epoch");
is($node->safe_psql('x', "SELECT tenure.leader_is('w', 'old')"),
	't', 'old leads');

$node->safe_psql('x', 'DROP EXTENSION pg_tenure');
is($node->safe_psql('x', "SELECT count(*) FROM pg_extension WHERE extname = 'pg_tenure'"),
	'0', 'the extension is dropped');
$node->safe_psql(
	'x', q{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
	CREATE TABLE t (i int);
	SELECT tenure.fence_table('t', 'w');
});
is($node->safe_psql('x', "SELECT tenure.leader_is('w', 'old')"),
	'f', 'after CREATE EXTENSION the old holder does not lead');
is($node->safe_psql('x', "SELECT coalesce(holder, 'none') FROM tenure.leases WHERE lease = 'w'"),
	'none', 'tenure.leases shows no holder');
ok( $node->poll_query_until(
		'x',
		"SELECT NOT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'"
		  . " AND database = (SELECT oid FROM pg_database WHERE datname = 'x'))"),
	'the keeper let go of the old tenure\'s lock');
($ret, $err) = try_sql($node, 'x', fenced_write('t', 'w', $old_epoch, 1));
like($err, qr/ERROR:  TN002: write to table "t" fenced by lease "w" rejected/,
	'the old token is rejected by the newly fenced table');
unlike($err, qr/tenure\.tokens/, 'the token itself was well formed');
is($node->safe_psql('x', 'SELECT count(*) FROM t'), '0', 'nothing was written');
is($node->safe_psql('x', "SELECT tenure.renew('w', 'old')"),
	'f', 'the old holder cannot renew');

# while the server runs, the name's epochs still only grow
my $new_epoch = $node->safe_psql('x', "SELECT tenure.acquire('w', 'new')");
cmp_ok($new_epoch, '>', $old_epoch,
	"a new holder's epoch $new_epoch exceeds the old tenure's");
($ret, $err) = try_sql($node, 'x', fenced_write('t', 'w', $old_epoch, 1));
like($err, qr/ERROR:  TN002: write to table "t" fenced by lease "w" rejected: epoch $old_epoch is not current/,
	'the old token is still rejected once the new lease is held');

$node->stop;
done_testing();
