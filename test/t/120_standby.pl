
# On a hot standby: every function that changes leases or fences fails with
# SQLSTATE 25006 and a message saying what cannot be done during recovery;
# reading epochs (current_epoch, await_change), the history and the leases
# view works; nobody leads there; the keeper does not run during recovery.
# After promotion the keeper starts and leases can be acquired, at an epoch
# above the primary's.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $primary =
  tenure_node('standby_primary', init => { allows_streaming => 1 });
$primary->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('st', ttl => '10 min', holdoff => '0');
	SELECT tenure.create_lease('spare', ttl => '1 min', lock_key => 77);
	CREATE TABLE fenced_t (x int);
	CREATE TABLE plain_t (x int);
	SELECT tenure.fence_table('fenced_t', 'st');
});
ok(wait_for_keeper($primary), 'primary: the keeper runs');

my $standby = tenure_standby($primary, 'standby_standby');

my $first = $primary->safe_psql('postgres', "SELECT tenure.acquire('st', 'p')");
$primary->wait_for_catchup($standby);
is( $standby->safe_psql(
		'postgres', "SELECT epoch FROM tenure.await_change('st', NULL)"),
	$first,
	'standby: await_change reports the replicated epoch');
my $claimed =
  $primary->safe_psql('postgres', "SELECT tenure.claim_epoch('st', 'p')");
cmp_ok($claimed, '>', $first, 'primary: the claim issued a greater epoch');
is($primary->safe_psql('postgres', "SELECT tenure.leader_is('st', 'p')"),
	't', 'primary: p leads st');
$primary->wait_for_catchup($standby);

is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery');

# --- changes are refused with 25006
my @refused = (
	[ "SELECT tenure.acquire('st', 's')",        'tenure.acquire()' ],
	[ "SELECT tenure.acquire('st', 's', wait => '1 s', session_bound => true)",
		'tenure.acquire()' ],
	[ "SELECT tenure.acquire_or_error('st', 's')", 'tenure.acquire_or_error()' ],
	[ "SELECT tenure.renew('st', 'p')",           'tenure.renew()' ],
	[ "SELECT tenure.release('st', 'p')",         'tenure.release()' ],
	[ "SELECT tenure.claim_epoch('st', 'p')",     'tenure.claim_epoch()' ],
	[ "SELECT tenure.create_lease('new', ttl => '5 s')", 'tenure.create_lease()' ],
	[ "SELECT tenure.drop_lease('spare')",        'tenure.drop_lease()' ],
	[ "SELECT tenure.fence_table('plain_t', 'spare')", 'tenure.fence_table()' ],
	[ "SELECT tenure.unfence_table('fenced_t')",  'tenure.unfence_table()' ]);
for my $case (@refused)
{
	my ($sql, $what) = @$case;
	my ($rc, $err) = try_sql($standby, 'postgres', $sql);
	isnt($rc, 0, "standby: $sql fails");
	like(
		$err,
		qr/ERROR:  25006: cannot execute \Q$what\E during recovery/,
		"standby: $sql: 25006, \"cannot execute $what during recovery\"");
}

# --- reading works
is($standby->safe_psql('postgres', "SELECT tenure.current_epoch('st')"),
	$claimed, 'standby: current_epoch is the primary\'s latest epoch');
is($standby->safe_psql('postgres', "SELECT tenure.current_epoch('spare')"),
	'0', 'standby: current_epoch of a lease never acquired is 0');

my $history_query =
  "SELECT string_agg(format('%s/%s/%s/%s', lease, epoch, holder, coalesce(end_reason, 'open')), ',' ORDER BY lease, epoch)"
  . ' FROM tenure.history';
my $history = $primary->safe_psql('postgres', $history_query);
is($history, "st/$first/p/claimed,st/$claimed/p/open",
	'primary: the history of st');
is($standby->safe_psql('postgres', $history_query),
	$history, 'standby: tenure.history equals the primary\'s');

my $leases_query =
  "SELECT string_agg(format('%s/%s/%s/%s/%s/%s/%s', lease, epoch, ttl, holdoff, lock_key, owner, fences), ',' ORDER BY lease)"
  . ' FROM tenure.leases';
my $leases = $primary->safe_psql('postgres', $leases_query);
is($standby->safe_psql('postgres', $leases_query),
	$leases, 'standby: tenure.leases shows the primary\'s leases and settings');

# an epoch that replay brought is a change, and what is current
is( $standby->safe_psql(
		'postgres',
		"SELECT changed, epoch FROM tenure.await_change('st', $first, NULL, '1 s')"),
	"t|$claimed",
	'standby: await_change sees the epoch claimed on the primary');
is( $standby->safe_psql(
		'postgres', "SELECT epoch FROM tenure.await_change('st', NULL)"),
	$claimed,
	'standby: await_change reports the latest replicated epoch');

is( $standby->safe_psql(
		'postgres',
		"SELECT tenure.leader_is('st', 'p'), tenure.leader_is('st', 's'), tenure.leader_is('nope', 'p')"
	),
	'f|f|f',
	'standby: leader_is is false (no tenure lives on a standby)');

# the refused calls changed nothing
is($primary->safe_psql('postgres', "SELECT tenure.leader_is('st', 'p')"),
	't', 'primary: p still leads st');
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', $history_query),
	$history, 'standby: the history is unchanged');

# --- no keeper during recovery (it had all the time the checks above took)
is(keeper_pid($standby), '', 'standby: no pg_tenure keeper runs during recovery');

# --- promotion
$primary->stop;
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'standby promoted');
ok(wait_for_keeper($standby), 'promoted: the keeper starts');

is( $standby->safe_psql(
		'postgres', "SELECT epoch FROM tenure.await_change('st', NULL)"),
	$claimed,
	'promoted: await_change reports the latest epoch before any tenure');

my $new = $standby->safe_psql('postgres', "SELECT tenure.acquire('st', 's')");
like($new, qr/^\d+$/, "promoted: acquire returns epoch $new");
cmp_ok($new, '>', $claimed, 'promoted: the new epoch exceeds the primary\'s');
is( $standby->safe_psql(
		'postgres',
		"SELECT holder, lock_held, tenure.leader_is('st', 's') FROM tenure.leases WHERE lease = 'st'"
	),
	's|t|t',
	'promoted: s leads st and the keeper holds its lock');
is( $standby->safe_psql(
		'postgres',
		"SELECT end_reason FROM tenure.history WHERE lease = 'st' AND epoch = $claimed"
	),
	'promoted',
	'promoted: the history closes the primary\'s open tenure as "promoted"');
$standby->safe_psql('postgres', "SELECT tenure.fence_table('plain_t', 'spare')");
is( $standby->safe_psql(
		'postgres', "SELECT lease FROM tenure.fenced WHERE tbl = 'plain_t'::regclass"),
	'spare',
	'promoted: fence_table works');

$standby->stop;
done_testing();
