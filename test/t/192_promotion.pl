
# Tenures through a promotion (src/README, P1 .. P5).
#
# A standby that replayed the old primary's shutdown checkpoint, and was
# then promoted, lost nothing: every tenure that is not session-bound
# continues there with its holder and epoch.  The holder's renew and
# leader_is answer true, its fenced writes commit with the epoch it
# already presents, nobody else can acquire the lease, its next claim
# exceeds every epoch of the old timeline, a lock_key tenure leads once
# the keeper holds its lock, and a tenure that may not yet have been
# active on the old primary becomes active no earlier than the promotion
# plus its hold-off.
#
# A standby promoted without that proof (it missed an acquisition the old
# primary committed, and the old primary goes on serving): the old
# holder's renew through the new primary is refused, and a new holder's
# tenure is not active before the promotion plus the ttl plus
# tenure.demotion_bound, also once the old primary has served its holder
# for longer than the ttl after the promotion.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

# --- a promotion that kept every transaction ------------------------------

my $primary = tenure_node('kept_primary', init => { allows_streaming => 1 });
$primary->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('c', ttl => '10 min');
	SELECT tenure.create_lease('k', ttl => '10 min', lock_key => 4242);
	SELECT tenure.create_lease('h', ttl => '10 min');
	SELECT tenure.create_lease('s', ttl => '10 min');
	CREATE TABLE orders (id bigint);
	SELECT tenure.fence_table('orders', 'c');
});
my $standby = tenure_standby($primary, 'kept_standby');

my $c1 = $primary->safe_psql('postgres', "SELECT tenure.acquire('c', 'a')");
my $c2 = $primary->safe_psql('postgres', "SELECT tenure.claim_epoch('c', 'a')");
cmp_ok($c2, '>', $c1, 'primary: a claimed a new epoch of c');
my $k = $primary->safe_psql('postgres', "SELECT tenure.acquire('k', 'a')");
# h: its predecessor's session ended, so the successor waits out the ttl
$primary->safe_psql('postgres',
	"SELECT tenure.acquire('h', 'x', session_bound => true)");
my $h = $primary->safe_psql('postgres', "SELECT tenure.acquire('h', 'y')");
is($primary->safe_psql('postgres', "SELECT tenure.leader_is('h', 'y')"),
	'f', 'primary: y is not active yet (x may still believe)');
# s: session-bound, held by a session that stays open until the shutdown
my $session = $primary->background_psql('postgres');
$session->query_safe("SELECT tenure.acquire('s', 'b', session_bound => true)");
$primary->safe_psql('postgres', fenced_write('orders', 'c', $c2, '(1)'));

# a clean shutdown (the session-bound holder's session still open): the
# standby receives and replays its checkpoint
$primary->wait_for_catchup($standby);
stop_for_switchover($primary, $standby);
eval { $session->quit };
promote_ready($standby, 'the standby');
ok( $standby->wait_for_log(
		qr/the promotion from timeline 1 kept every transaction of the old primary; its tenures continue/
	),
	'the keeper found the proof');

is( $standby->safe_psql(
		'postgres',
		"SELECT tenure.leader_is('c', 'a'), tenure.renew('c', 'a'), tenure.current_epoch('c')"
	),
	"t|t|$c2",
	'continued: a still leads c at the same epoch, and renews');
is($standby->safe_psql('postgres', fenced_write('orders', 'c', $c2, '(2)')),
	'', 'continued: a fenced write with the epoch a holds commits');
my ($rc, $err) = try_sql($standby, 'postgres', fenced_write('orders', 'c', $c1, '(3)'));
ok($rc != 0 && $err =~ /TN002/, 'continued: the older epoch stays fenced')
  or diag $err;
is($standby->safe_psql('postgres',
		"SELECT tenure.acquire('c', 'z') IS NULL"),
	't', 'continued: nobody else acquires c');
is( $standby->safe_psql(
		'postgres',
		"SELECT holder, epoch, coalesce(end_reason, 'open') FROM tenure.history WHERE lease = 'c' ORDER BY epoch DESC LIMIT 1"
	),
	"a|$c2|open",
	'continued: the history shows the tenure open');

ok( wait_until(
		'the keeper takes the lock of k',
		sub {
			$standby->safe_psql('postgres', "SELECT tenure.leader_is('k', 'a')")
			  eq 't';
		}),
	'continued: a leads k once the keeper holds its lock');
is($standby->safe_psql('postgres', 'SELECT pg_try_advisory_lock(4242)'),
	'f', 'continued: the keeper holds k\'s lock_key');
is($standby->safe_psql('postgres', "SELECT tenure.release('k', 'a')"),
	't', 'continued: a releases k');
is( $standby->safe_psql(
		'postgres', "SELECT end_reason FROM tenure.history WHERE lease = 'k' AND epoch = $k"),
	'released',
	'continued: the history says so');

is($standby->safe_psql('postgres', "SELECT tenure.leader_is('h', 'y')"),
	'f', 'continued: y does not lead h yet');
is( $standby->safe_psql(
		'postgres',
		"SELECT holder, epoch, active_from > now() + interval '9 min' FROM tenure.leases WHERE lease = 'h'"
	),
	"y|$h|t",
	'continued: y holds h, active no earlier than the promotion plus the ttl');

is( $standby->safe_psql(
		'postgres',
		"SELECT tenure.leader_is('s', 'b'), tenure.renew('s', 'b')"),
	'f|f',
	'the session-bound tenure does not continue');
ok( $standby->poll_query_until(
		'postgres',
		"SELECT end_reason IN ('promoted', 'session ended') FROM tenure.history WHERE lease = 's' ORDER BY epoch DESC LIMIT 1"
	),
	'the history closes the session-bound tenure');

my $c3 = $standby->safe_psql('postgres', "SELECT tenure.claim_epoch('c', 'a')");
cmp_ok($c3, '>', $c2, 'continued: a\'s next claim exceeds the old timeline\'s epochs');
is($standby->safe_psql('postgres', fenced_write('orders', 'c', $c3, '(4)')),
	'', 'continued: and writes with it');
is($standby->safe_psql('postgres', 'SELECT string_agg(id::text, \',\' ORDER BY id) FROM orders'),
	'1,2,4', 'continued: every acknowledged fenced write is there');

# a crash of the promoted server ends the tenures like any crash (the
# postmaster stays: the promotion happened before the crash)
$standby->append_conf('postgresql.conf', "restart_after_crash = on\n");
$standby->reload;
ok($standby->poll_query_until('postgres', 'SHOW restart_after_crash', 'on'),
	'the promoted server restarts after a crash');
my $keeper_before = keeper_pid($standby);
my $crasher = $standby->background_psql('postgres');
kill 'KILL', $crasher->query_safe('SELECT pg_backend_pid()');
eval { $crasher->quit };
ok(defined wait_for_keeper($standby, $keeper_before),
	'after a crash, a new keeper runs');
is($standby->safe_psql('postgres', "SELECT tenure.renew('h', 'y'), tenure.renew('c', 'a')"),
	'f|f', 'after a crash of the promoted server, the tenures have ended');

# and so does a restart
$standby->restart;
ok(defined wait_for_keeper($standby), 'after a restart, the keeper runs');
is($standby->safe_psql('postgres', "SELECT tenure.renew('c', 'a')"),
	'f', 'after a restart of the promoted server, the tenure has ended');
$standby->stop;

# --- a promotion without the proof, the old primary still serving -------

my $old = tenure_node('lost_primary', init => { allows_streaming => 1 });
$old->safe_psql('postgres', "SELECT tenure.create_lease('l', ttl => '5 s')");
my $new = tenure_standby($old, 'lost_standby');
$new->append_conf('postgresql.conf', "tenure.demotion_bound = '1h'\n");
$new->reload;
$old->wait_for_catchup($new);

# the standby stops receiving, then the old primary's holder acquires
$new->stop;
my $lost = $old->safe_psql('postgres', "SELECT tenure.acquire('l', 'a')");
$new->append_conf('postgresql.conf', "primary_conninfo = ''\n");
$new->start;
promote_ready($new, 'lossy: the standby');
ok( $new->wait_for_log(
		qr/the promotion from timeline 1 may have lost transactions of the old primary; its tenures end/
	),
	'lossy: the keeper found no proof');

is($new->safe_psql('postgres', "SELECT tenure.renew('l', 'a')"),
	'f', 'lossy: a cannot renew into a second leadership on the new primary');
my $b = $new->safe_psql('postgres', "SELECT tenure.acquire('l', 'b')");
cmp_ok($b, '>', $lost, 'lossy: b\'s epoch exceeds the one the standby missed');
my $promoted_at = keeper_started($new);
is( $new->safe_psql(
		'postgres',
		"SELECT active_from >= '$promoted_at'::timestamptz + interval '5 s' + interval '1 h' FROM tenure.leases WHERE lease = 'l'"
	),
	't',
	'lossy: b is active no earlier than the promotion plus the ttl plus tenure.demotion_bound');

# both renew, a on the old primary, which serves it for longer than the
# ttl after the promotion
my ($renewed_old, $refused_old) = (0, 0);
ok( wait_until(
		'the ttl to pass since the promotion',
		sub {
			my $r = $old->safe_psql('postgres', "SELECT tenure.renew('l', 'a')");
			$r eq 't' ? $renewed_old++ : $refused_old++;
			$new->safe_psql('postgres', "SELECT tenure.renew('l', 'b')");
			$new->safe_psql('postgres',
				"SELECT now() > '$promoted_at'::timestamptz + interval '6 s'")
			  eq 't';
		}),
	'lossy: more than the ttl has passed since the promotion');
ok($renewed_old > 0 && $refused_old == 0,
	"lossy: the old primary went on serving a's renewals ($renewed_old)");
is($new->safe_psql('postgres', "SELECT tenure.leader_is('l', 'b')"),
	'f', 'lossy: b still does not lead: never two leaders');
is( $new->safe_psql(
		'postgres',
		"SELECT string_agg(holder || '/' || coalesce(end_reason, 'open'), ',' ORDER BY epoch) FROM tenure.history WHERE lease = 'l'"
	),
	'b/open',
	'lossy: the new primary never saw a\'s tenure; b\'s is open');

$old->stop;
$new->stop;
done_testing();
