
# Failover after a restore from a cluster on a later timeline.  Epochs
# follow the cluster clock (timeline << 50 | WAL position >> 3), and a dump
# taken on timeline 2 and restored into a cluster on timeline 1 brings
# epochs that are already above that cluster's clock.  When that cluster
# later fails over to an asynchronous standby (timeline 2 there), the first
# epoch of the new primary must still exceed every epoch the old primary
# returned, including those the standby never received, and none of the old
# tokens may pass the fence.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

# --- a primary with two standbys from one base backup
my $primary = tenure_node(
	'restore_primary',
	init => { allows_streaming => 1 },
	extension => 0);
$primary->safe_psql(
	'postgres', q{
	CREATE DATABASE src;
	CREATE DATABASE app;
});
$primary->safe_psql('src', 'CREATE EXTENSION pg_tenure');
my $elsewhere = tenure_standby($primary, 'restore_elsewhere', start => 0);
my $standby = tenure_standby($primary, 'restore_standby');

# --- the source of the dump: a cluster on timeline 2
$elsewhere->start;
$elsewhere->promote;
ok($elsewhere->poll_query_until('src', 'SELECT NOT pg_is_in_recovery()'),
	'the source cluster is promoted (timeline 2)');
$elsewhere->safe_psql(
	'src', q{
	SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
	CREATE TABLE t (epoch bigint);
	SELECT tenure.fence_table('t', 'w');
});
my $source_epoch =
  $elsewhere->safe_psql('src', "SELECT tenure.acquire('w', 'source')");
cmp_ok($source_epoch, '>=', 2 << 50,
	"the source issues timeline-2 epochs ($source_epoch)");
cmp_ok(
	$source_epoch, '>',
	$primary->safe_psql('postgres',
		"SELECT (1::bigint << 50) + (pg_current_wal_insert_lsn() - '0/0') / 8"),
	'the source\'s epoch exceeds the clock of the primary (timeline 1)');
my $dump = "$PostgreSQL::Test::Utils::tmp_check/src.dump";
$elsewhere->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'src' ],
	'pg_dump -Fc of the source');
$elsewhere->stop;

# --- restored into the primary (timeline 1), replicated to its standby
$primary->command_ok([ 'pg_restore', '-d', 'app', $dump ],
	'pg_restore into the primary, on timeline 1');
my @old;    # every epoch the primary returned
push @old, $primary->safe_psql('app', "SELECT tenure.acquire('w', 'a')");
cmp_ok($old[0], '>', $source_epoch,
	"the primary continues above the restored epoch ($old[0])");
$primary->wait_for_catchup($standby);
is($standby->safe_psql('app', "SELECT tenure.current_epoch('w')"),
	$old[0], 'the standby has the primary\'s epoch');

# --- epochs the standby never receives
$standby->stop;
push @old, $primary->safe_psql('app', "SELECT tenure.claim_epoch('w', 'a')");
push @old, $primary->safe_psql('app', "SELECT tenure.claim_epoch('w', 'a')");
like($_, qr/^\d+$/, "the old primary returned epoch $_") for @old;
$primary->stop('immediate');

# --- failover
$standby->start;
$standby->promote;
ok($standby->poll_query_until('app', 'SELECT NOT pg_is_in_recovery()'),
	'the standby is promoted');
my $new = $standby->safe_psql('app', "SELECT tenure.acquire('w', 'b')");
like($new, qr/^\d+$/, "the new primary issues epoch $new");
cmp_ok($new, '>', $_, "the new epoch exceeds epoch $_ of the old primary")
  for @old;
for my $epoch (@old)
{
	my (undef, $err) = try_sql($standby, 'app', fenced_write('t', 'w', $epoch));
	like(
		$err,
		qr/ERROR:  TN002: write to table "t" fenced by lease "w" rejected/,
		"old primary's token $epoch is rejected with TN002");
}
is($standby->safe_psql('app', 'SELECT count(*) FROM t'),
	'0', 'no old token wrote to the fenced table');

$standby->stop;
done_testing();
