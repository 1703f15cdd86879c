
# The paths of a promotion with the proof (fast shutdown, standby
# caught up past the shutdown checkpoint).  doc/high-availability.md,
# "Tenures through a promotion":
#  - every tenure that is not session-bound continues with the same holder
#    and epoch; renew succeeds, leader_is stays true;
#  - renewal counts from the new primary's ready time;
#  - a tenure that may not yet have been active (fixed hold-off, or a
#    predecessor ended by session end) is active no earlier than ready time
#    plus its hold-off;
#  - session-bound tenures end, as `promoted`;
#  - a restart of the promoted server ends every tenure.
# Also, against the new paths: the first call on a lease after the
# promotion is made by someone other than the holder (another holder's
# acquire, any LOGIN role's await_change or read of tenure.leases, a fenced
# write by another role); the keeper is restarted after the decision.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use TenureTest;

my $primary = tenure_node('a2_primary', init => { allows_streaming => 1 });
$primary->safe_psql(
	'postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE nobody LOGIN;
	GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text) TO app;
	SET ROLE app;
	SELECT tenure.create_lease('first_acq', ttl => '10 min', holdoff => '0');
	SELECT tenure.create_lease('first_leader', ttl => '10 min');
	SELECT tenure.create_lease('first_view', ttl => '10 min');
	SELECT tenure.create_lease('first_write', ttl => '10 min', holdoff => '0');
		SELECT tenure.create_lease('sb', ttl => '10 min');
	SELECT tenure.create_lease('fixed', ttl => '30 s', holdoff => '40 s');
	SELECT tenure.create_lease('waited2', ttl => '10 min');
	SELECT tenure.create_lease('short', ttl => '8 s', holdoff => '0');
	SELECT tenure.create_lease('pred', ttl => '30 s');
	RESET ROLE;
	CREATE TABLE public.ft (e bigint);
	ALTER TABLE public.ft OWNER TO app;
	GRANT INSERT ON public.ft TO nobody;
	SET ROLE app;
	SELECT tenure.fence_table('public.ft', 'first_write');
});
my $standby = tenure_standby($primary, 'a2_standby');

my %e;
for my $l (qw(first_acq first_leader first_view first_write waited2))
{
	$e{$l} = $primary->safe_psql('postgres',
		"SET ROLE app; SELECT tenure.acquire('$l', 'A')");
}

# a predecessor whose session ended: A's tenure of 'pred' waits its hold-off
my $p = $primary->background_psql('postgres');
$p->query_safe(
	"SET ROLE app; SELECT tenure.acquire('pred', 'P', session_bound => true)");
$p->quit;
$primary->poll_query_until('postgres',
	"SELECT holder IS NULL FROM tenure.leases WHERE lease = 'pred'")
  or die;
$e{pred} = $primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.acquire('pred', 'A')");
is($primary->safe_psql('postgres', "SELECT tenure.leader_is('pred', 'A')"),
	'f', 'pred: A waits its hold-off on the old primary');

# 'fixed' (ttl 30 s, hold-off 40 s): P held it, its session ended; A
# acquired and is active only 40 s later, after P's belief (renewal + 30 s)
$p = $primary->background_psql('postgres');
$p->query_safe(
	"SET ROLE app; SELECT tenure.acquire('fixed', 'P', session_bound => true)");
my $p_sent = time();
$p->query_safe("SELECT tenure.renew('fixed', 'P')");
$p->quit;
$primary->poll_query_until('postgres',
	"SELECT holder IS NULL FROM tenure.leases WHERE lease = 'fixed'")
  or die;
$e{fixed} = $primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.acquire('fixed', 'A')");
is($primary->safe_psql('postgres', "SELECT tenure.leader_is('fixed', 'A')"),
	'f', 'fixed: A waits its 40 s hold-off on the old primary');
my $af_old = $primary->safe_psql('postgres',
	"SELECT extract(epoch FROM active_from) FROM tenure.leases WHERE lease = 'fixed'");

# a session-bound tenure, its session open until the old primary stops
my $sbs = $primary->background_psql('postgres', on_error_stop => 0);
$sbs->query_safe(
	"SET ROLE app; SELECT tenure.acquire('sb', 'A', session_bound => true)");

# an await_change on the standby, by a role without rights, through the
# promotion
$primary->wait_for_catchup($standby);
is( $standby->safe_psql(
		'postgres',
		"SELECT holder || ' ' || (as_of IS NOT NULL) FROM tenure.leases WHERE lease = 'waited2'"),
	'A true',
	'standby shows the recorded holder with as_of');

$e{short} = $primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.acquire('short', 'A')");

# the switchover
stop_for_switchover($primary, $standby);
$sbs->quit;
my $before_promote = time();
$standby->promote;
my $promoted = time();

# renewal counts from the promotion: 'short' (ttl 8 s) is not renewed; it
# must last until at least the promotion + 8 s, and not beyond ready + 8 s
# (tenure.leases shows it once the history writer's first run after the
# promotion loaded it into shared memory: poll for that)
my $exp = '';
wait_until(
	'the continued tenure of short to be loaded',
	sub {
		$exp = $standby->safe_psql('postgres',
			"SELECT extract(epoch FROM expires) FROM tenure.leases WHERE lease = 'short'");
		return $exp ne '';
	});
ok($exp >= $before_promote + 8 - 0.5 && $exp <= time() + 8,
	"short: expires $exp counts from the promotion ($before_promote)");

# first calls on each lease, before the holder's, by others
is( $standby->safe_psql('postgres',
		"SET ROLE app; SELECT tenure.acquire('first_acq', 'B')"),
	'',
	'first call after promotion is B\'s acquire: it gets nothing');
is($standby->safe_psql('postgres', "SELECT tenure.leader_is('first_leader', 'A')"),
	't', 'first call is leader_is: A leads');
is( $standby->safe_psql(
		'postgres',
		"SET ROLE nobody; SELECT coalesce(holder, '-') || ' ' || epoch FROM tenure.leases WHERE lease = 'first_view'"),
	"A $e{first_view}",
	'first call is a read of tenure.leases: A holds it');
my ($rc, $err) = try_sql($standby, 'postgres',
	"SET ROLE nobody;\n" . fenced_write('ft', 'first_write', $e{first_write}));
is($rc, 0, 'first call is a fenced write with A\'s epoch: it commits')
  or diag($err);
$standby->wait_for_log(qr/pg_tenure: the promotion from timeline/);
like(slurp_file($standby->logfile), qr/kept every transaction/,
	'keeper found the proof');

for my $l (qw(first_acq first_leader first_view first_write))
{
	is( $standby->safe_psql('postgres',
			"SET ROLE app; SELECT tenure.acquire('$l', 'B')"),
		'', "$l: B cannot take it");
	is($standby->safe_psql('postgres', "SELECT tenure.renew('$l', 'A')"),
		't', "$l: A renews");
	is($standby->safe_psql('postgres', "SELECT tenure.current_epoch('$l')"),
		$e{$l}, "$l: same epoch");
}

# a fresh await_change, the first call on its lease after the promotion
is( $standby->safe_psql(
		'postgres',
		"SET ROLE nobody; SELECT changed || ' ' || coalesce(holder, '-') FROM tenure.await_change('waited2', $e{waited2}, 'A', '1 s')"
	),
	'false A',
	'await_change after the promotion: A still holds waited2, nothing changed');

# session-bound: ended as promoted
is($standby->safe_psql('postgres', "SELECT tenure.renew('sb', 'A')"),
	'f', 'session-bound tenure ended');
$standby->poll_query_until('postgres',
	"SELECT end_reason = 'promoted' FROM tenure.history WHERE lease = 'sb' ORDER BY epoch DESC LIMIT 1"
) or fail('sb history not closed as promoted');

# history of continued tenures stays open (not short's: its ttl of 8 s,
# never renewed, may have run out by now on a slow machine)
is( $standby->safe_psql(
		'postgres',
		"SELECT count(*) FROM tenure.history WHERE holder = 'A' AND ended IS NULL"
		  . " AND lease IN ('first_acq','first_leader','first_view','first_write','waited2','fixed','pred')"
	),
	'7',
	'continued tenures stay open in the history')
  or diag($standby->safe_psql('postgres', 'SELECT * FROM tenure.history ORDER BY lease, epoch'));

# fixed hold-off: not active before the promotion plus 40 s, and
# certainly not while P may still believe it leads
ok(time() < $p_sent + 30, 'P may still lead fixed by the client rule');
is($standby->safe_psql('postgres', "SELECT tenure.leader_is('fixed', 'A')"),
	'f', 'fixed: not active yet')
  or diag($standby->safe_psql('postgres', "SELECT * FROM tenure.leases WHERE lease = 'fixed'"));
my $af = $standby->safe_psql('postgres',
	"SELECT extract(epoch FROM active_from) FROM tenure.leases WHERE lease = 'fixed'");
ok($af >= $before_promote + 40 - 0.5,
	"fixed: active_from $af >= promotion + 40 s ($before_promote; on the old primary it was $af_old)");

# automatic hold-off after a session end: active no earlier than ready + ttl
is($standby->safe_psql('postgres', "SELECT tenure.leader_is('pred', 'A')"),
	'f', 'pred: not active yet');
$af = $standby->safe_psql('postgres',
	"SELECT extract(epoch FROM active_from) FROM tenure.leases WHERE lease = 'pred'");
ok($af >= $before_promote + 30 - 0.5, "pred: active_from $af >= promotion + 30 s");

# the keeper restarts: the decision stands
my $kp = keeper_pid($standby);
$standby->safe_psql('postgres', "SELECT pg_terminate_backend($kp)");
wait_for_keeper($standby, $kp);
is( $standby->safe_psql('postgres',
		"SET ROLE app; SELECT tenure.acquire('waited2', 'B')"),
	'', 'after a keeper restart B still cannot take waited2');
is($standby->safe_psql('postgres', "SELECT tenure.renew('waited2', 'A')"),
	't', 'after a keeper restart A still renews waited2');

# a crash restart of the promoted server ends every tenure
$standby->stop('immediate');
$standby->start;
wait_for_keeper($standby);
for my $l (qw(first_acq waited2 fixed pred))
{
	is($standby->safe_psql('postgres', "SELECT tenure.renew('$l', 'A')"),
		'f', "after a crash restart of the promoted server A lost $l");
	is($standby->safe_psql('postgres', "SELECT tenure.leader_is('$l', 'A')"),
		'f', "after a crash restart A does not lead $l");
}
my $eb = $standby->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.acquire('first_acq', 'B')");
ok($eb > $e{first_acq}, 'after the restart B takes first_acq');
($rc, $err) = try_sql($standby, 'postgres',
	fenced_write('ft', 'first_write', $e{first_write}));
isnt($rc, 0, 'after the restart A\'s old token is fenced');

# and a clean restart
$standby->restart;
wait_for_keeper($standby);
is($standby->safe_psql('postgres', "SELECT tenure.renew('first_acq', 'B')"),
	'f', 'a clean restart ends B too');

done_testing();
