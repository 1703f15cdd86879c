
# Failover to an asynchronous streaming standby: epochs and claims replicate;
# after the primary dies having issued epochs the standby never received,
# the promoted standby issues epochs greater than every one the old primary
# returned, and its fenced tables reject every old token (SQLSTATE TN002),
# before and after a new tenure starts there.  A lease with the automatic
# hold-off does not make its new holder lead while the old primary's holder
# may still believe in its tenure.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $primary =
  tenure_node('failover_primary', init => { allows_streaming => 1 });
$primary->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('writer', ttl => '10 min', holdoff => '0');
	SELECT tenure.create_lease('jobs', ttl => '10 min', holdoff => '0');
	SELECT tenure.create_lease('cron', ttl => '10 min');
	CREATE TABLE orders (epoch bigint);
	SELECT tenure.fence_table('orders', 'writer');
});

my $standby = tenure_standby($primary, 'failover_standby');

# every epoch the old primary returned, per lease
my %old;

# --- replicated: a tenure and a claim reach the standby
push @{ $old{writer} },
  $primary->safe_psql('postgres', "SELECT tenure.acquire('writer', 'a')");
push @{ $old{writer} },
  $primary->safe_psql('postgres', "SELECT tenure.claim_epoch('writer', 'a')");
like($_, qr/^\d+$/, "old primary returned epoch $_") for @{ $old{writer} };
cmp_ok($old{writer}[1], '>', $old{writer}[0], 'the claim issued a greater epoch');

$primary->wait_for_catchup($standby);
my $replicated =
  $primary->safe_psql('postgres', "SELECT tenure.current_epoch('writer')");
is($replicated, $old{writer}[1], 'primary: current_epoch is the claimed one');
is($standby->safe_psql('postgres', "SELECT tenure.current_epoch('writer')"),
	$replicated, 'standby: current_epoch equals the primary\'s after catch-up');
is( $standby->safe_psql(
		'postgres',
		"SELECT string_agg(epoch || ':' || coalesce(end_reason, 'open'), ',' ORDER BY epoch)"
		  . " FROM tenure.history WHERE lease = 'writer'"),
	"$old{writer}[0]:claimed,$old{writer}[1]:open",
	'standby: the history of the tenure and the claim replicated');

# --- lost: the standby is down while the primary issues more epochs
$standby->stop;

push @{ $old{writer} },
  $primary->safe_psql('postgres', "SELECT tenure.claim_epoch('writer', 'a')");
is($primary->safe_psql('postgres', "SELECT tenure.release('writer', 'a')"),
	't', 'old primary: holder a releases');
push @{ $old{writer} },
  $primary->safe_psql('postgres', "SELECT tenure.acquire('writer', 'b')");
push @{ $old{writer} },
  $primary->safe_psql('postgres', "SELECT tenure.claim_epoch('writer', 'b')");
push @{ $old{jobs} },
  $primary->safe_psql('postgres', "SELECT tenure.acquire('jobs', 'j')");
push @{ $old{jobs} },
  $primary->safe_psql('postgres', "SELECT tenure.claim_epoch('jobs', 'j')");

for my $lease (sort keys %old)
{
	my @e = @{ $old{$lease} };
	like($_, qr/^\d+$/, "old primary returned $lease epoch $_") for @e;
	ok((!grep { $e[$_] <= $e[ $_ - 1 ] } 1 .. $#e),
		"old primary: $lease epochs strictly increase (@e)");
}
my $last_old = $old{writer}[-1];

# the fence on the old primary accepts exactly the current epoch
$primary->safe_psql('postgres', fenced_write('orders', 'writer', $last_old));
is($primary->safe_psql('postgres', 'SELECT count(*) FROM orders'),
	'1', 'old primary: a write with the current token commits');

# a singleton job under the automatic hold-off: its holder may act until
# its last renewal plus the ttl, whatever happens to the server
$primary->safe_psql('postgres', "SELECT tenure.acquire('cron', 'old')");
my $cron_expires = $primary->safe_psql('postgres',
	"SELECT expires FROM tenure.leases WHERE lease = 'cron' AND holder = 'old'");
isnt($cron_expires, '', "old primary: old holds cron until $cron_expires");

$primary->stop('immediate');

# --- failover
$standby->start;
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'standby promoted');

is($standby->safe_psql('postgres', "SELECT tenure.current_epoch('writer')"),
	$replicated,
	'new primary: the epochs issued while the standby was down are lost');
is($standby->safe_psql('postgres', "SELECT tenure.current_epoch('jobs')"),
	'0', 'new primary: lease jobs was never acquired as far as it knows');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM orders'),
	'0', 'new primary: the write the standby never received is lost too');

# every old token is rejected before any tenure exists on the new primary
for my $epoch (@{ $old{writer} })
{
	like(
		sql_error($standby, 'postgres', fenced_write('orders', 'writer', $epoch)),
		qr/ERROR:  TN002: write to table "orders" fenced by lease "writer" rejected: the lease has no live tenure/,
		"new primary, no tenure yet: old token $epoch rejected with TN002");
}
# the latest epoch this server knows is the replicated one
like(
	sql_error($standby, 'postgres', fenced_write('orders', 'writer', $last_old)),
	qr/DETAIL:  The transaction presented epoch $last_old; the latest epoch is $replicated\./,
	"new primary, no tenure yet: the detail names the latest epoch $replicated");
like(
	sql_error($standby, 'postgres', 'INSERT INTO orders VALUES (0)'),
	qr/ERROR:  TN002: table "orders" is fenced by lease "writer" and the transaction presents no epoch for it/,
	'new primary: a write without a token is rejected with TN002');

# the next epochs exceed every epoch the old primary returned
my $new = $standby->safe_psql('postgres', "SELECT tenure.acquire('writer', 'c')");
like($new, qr/^\d+$/, "new primary: acquire returned epoch $new");
for my $epoch (@{ $old{writer} })
{
	cmp_ok($new, '>', $epoch, "new epoch $new > old primary's epoch $epoch");
}
my $new_jobs =
  $standby->safe_psql('postgres', "SELECT tenure.acquire('jobs', 'k')");
like($new_jobs, qr/^\d+$/, "new primary: acquire of jobs returned $new_jobs");
for my $epoch (@{ $old{jobs} })
{
	cmp_ok($new_jobs, '>', $epoch,
		"new jobs epoch $new_jobs > old primary's jobs epoch $epoch");
}

# the successor of the job's holder waits out the hold-off
like($standby->safe_psql('postgres', "SELECT tenure.acquire('cron', 'new')"),
	qr/^\d+$/, 'new primary: new acquires cron');
is( $standby->safe_psql(
		'postgres',
		"SELECT tenure.leader_is('cron', 'new') AND clock_timestamp() < '$cron_expires'"
	),
	'f',
	'new primary: new does not lead cron while old may still believe it does');

# every old token is still rejected once a tenure exists
for my $epoch (@{ $old{writer} })
{
	like(
		sql_error($standby, 'postgres', fenced_write('orders', 'writer', $epoch)),
		qr/ERROR:  TN002: write to table "orders" fenced by lease "writer" rejected: epoch $epoch is not current/,
		"new primary, new tenure: old token $epoch rejected with TN002");
}

# the new token works, and a claim on the new primary keeps increasing
$standby->safe_psql('postgres', fenced_write('orders', 'writer', $new));
is($standby->safe_psql('postgres', 'SELECT epoch FROM orders'),
	$new, 'new primary: a write with the new token commits');
my $claimed =
  $standby->safe_psql('postgres', "SELECT tenure.claim_epoch('writer', 'c')");
cmp_ok($claimed, '>', $new, 'new primary: a claim issues a greater epoch');
like(
	sql_error($standby, 'postgres', fenced_write('orders', 'writer', $new)),
	qr/ERROR:  TN002: write to table "orders" fenced by lease "writer" rejected: epoch $new is not current/,
	'new primary: the token replaced by the claim is rejected');

$standby->stop;
done_testing();
