
# On a hot standby: every function that changes leases or fences fails with
# SQLSTATE 25006 and a message saying what cannot be done during recovery;
# reading epochs (current_epoch, await_change), the history and the leases
# view works, from the replicated tables: tenure.leases shows the tenure the
# primary recorded, as of the replay time (as_of), and await_change waits
# for replay to change it; nobody leads there (leader_is, await_active);
# the keeper does not run during recovery.  After promotion the keeper
# starts, tenure.leases answers live again, and leases can be acquired, at
# an epoch above the primary's.

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
	SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
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

# --- a standby's tenure.leases: the tenure the primary recorded, as of
# the replay time, and nothing that only the primary's memory knows
my $tenure_cols = "format('%s/%s/%s', holder, epoch, session_bound)";
is( $standby->safe_psql(
		'postgres', "SELECT $tenure_cols FROM tenure.leases WHERE lease = 'st'"),
	"p/$claimed/f",
	'standby: tenure.leases shows the primary\'s holder and epoch of st');
is( $primary->safe_psql(
		'postgres', "SELECT $tenure_cols FROM tenure.leases WHERE lease = 'st'"),
	"p/$claimed/f",
	'primary: the same holder and epoch');
is( $standby->safe_psql(
		'postgres',
		"SELECT acquired = (SELECT started FROM tenure.history WHERE lease = 'st' AND epoch = $first)"
		  . " FROM tenure.leases WHERE lease = 'st'"),
	't',
	'standby: acquired is when the tenure started, not when its epoch was claimed');
is( $standby->safe_psql(
		'postgres',
		"SELECT last_renewed IS NULL AND expires IS NULL AND active_from IS NULL"
		  . " AND holder_pid IS NULL AND holder_role IS NULL AND NOT lock_held"
		  . " FROM tenure.leases WHERE lease = 'st'"),
	't',
	'standby: renewal, expiry, activation, backend, lock and role are NULL');
is( $standby->safe_psql(
		'postgres', "SELECT holder IS NULL FROM tenure.leases WHERE lease = 'spare'"),
	't',
	'standby: a lease never acquired has no holder');
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM tenure.leases WHERE as_of IS NULL"
		  . " OR as_of < (SELECT started FROM tenure.history WHERE lease = 'st' AND epoch = $claimed)"
	),
	'0',
	'standby: as_of is set on every row, and no earlier than the claim it reflects');
is( $primary->safe_psql(
		'postgres', 'SELECT count(*) FROM tenure.leases WHERE as_of IS NOT NULL'),
	'0',
	'primary: as_of is NULL: its answer is live');

# replay moves as_of along: a claim on the primary shows once replayed
my $w1 = $primary->safe_psql('postgres', "SELECT tenure.acquire('w', 'q')");
$primary->wait_for_catchup($standby);
my $as_of = $standby->safe_psql('postgres',
	"SELECT as_of FROM tenure.leases WHERE lease = 'w'");
my $w2 = $primary->safe_psql('postgres', "SELECT tenure.claim_epoch('w', 'q')");
ok( $standby->poll_query_until(
		'postgres',
		"SELECT epoch = $w2 AND as_of > '$as_of' FROM tenure.leases WHERE lease = 'w'"
	),
	'standby: once it replayed the claim, tenure.leases shows its epoch and a later as_of'
);
is( $standby->safe_psql(
		'postgres',
		"SELECT holder, acquired = (SELECT started FROM tenure.history WHERE lease = 'w' AND epoch = $w1),"
		  . " tenure.current_epoch('w'), tenure.leader_is('w', 'q'), tenure.await_active('w', 'q', '1 min')"
		  . " FROM tenure.leases WHERE lease = 'w'"),
	"q|t|$w2|f|f",
	'standby: q holds w since its acquire, at the claimed epoch, and does not lead');

# await_change answers what the replicated tables record: the holder too
is( $standby->safe_psql(
		'postgres',
		"SELECT changed, holder, epoch FROM tenure.await_change('w', $w2, 'q', '0')"),
	"f|q|$w2",
	'standby: await_change knowing holder and epoch: no change');
is( $standby->safe_psql(
		'postgres',
		"SELECT changed, holder, epoch FROM tenure.await_change('w', $w2, NULL, '0')"),
	"t|q|$w2",
	'standby: await_change not knowing the holder: a change, and the holder');

# a wait on the standby ends when replay brings the change, also in a
# REPEATABLE READ transaction whose snapshot predates it
my $waiter = $standby->background_psql('postgres');
$waiter->query_safe('BEGIN ISOLATION LEVEL REPEATABLE READ');
$waiter->query_safe('SELECT count(*) FROM tenure.leases');
start_statement($waiter,
	"SELECT changed, holder, epoch FROM tenure.await_change('w', $w2, 'q', '5 min');\n"
	  . "\\echo done");
ok( $standby->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity"
		  . " WHERE wait_event = 'Extension' AND query LIKE '%await_change(''w''%'"),
	'standby: await_change waits');
is($primary->safe_psql('postgres', "SELECT tenure.release('w', 'q')"),
	't', 'primary: q releases w');
like($waiter->query_until(qr/^done\n/m, ''),
	qr/^t\|\|$w2\n/m,
	'standby: the wait ends with the release replayed: changed, no holder');
$waiter->query_safe('COMMIT');
$waiter->quit;

# --- no keeper during recovery (it had all the time the checks above took)
is(keeper_pid($standby), '', 'standby: no pg_tenure keeper runs during recovery');

# --- promotion, after the primary died (a clean shutdown would let its
# tenures continue: 192_promotion.pl)
$primary->stop('immediate');
$standby->promote;
ok($standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'standby promoted');
ok(wait_for_keeper($standby), 'promoted: the keeper starts');
is( $standby->safe_psql(
		'postgres',
		'SELECT count(*) FROM tenure.leases WHERE holder IS NOT NULL OR as_of IS NOT NULL'),
	'0',
	'promoted: tenure.leases answers live: no holder before a new tenure, as_of NULL');

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
poll_is($standby, 'postgres',
	"SELECT end_reason FROM tenure.history WHERE lease = 'st' AND epoch = $claimed",
	'promoted',
	'promoted: the history closes the primary\'s open tenure as "promoted"');
$standby->safe_psql('postgres', "SELECT tenure.fence_table('plain_t', 'spare')");
is( $standby->safe_psql(
		'postgres', "SELECT lease FROM tenure.fenced WHERE tbl = 'plain_t'::regclass"),
	'spare',
	'promoted: fence_table works');

$standby->stop;
done_testing();
