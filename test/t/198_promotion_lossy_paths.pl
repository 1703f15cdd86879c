
# After a promotion without the proof, reach an active tenure
# sooner than the promotion + ttl + tenure.demotion_bound by paths other
# than a plain acquire of a lease the standby knew held.
#
# SECURITY.md, Streaming replication, tenures: "after any other promotion
# they end (promoted), the old holder cannot renew on the new primary, and
# a successor is active no earlier than the promotion plus the ttl plus
# tenure.demotion_bound, also while the old primary goes on serving".
# doc/reference.md, Hold-off: after a release the successor is active at
# once "unless the released tenure was itself still waiting out an earlier
# holder's bound, which then still applies"; doc/operations.md, Hand-off:
# the same for a handoff.
#
#  - late:  created and acquired on the old primary after the standby was
#           cut off; on the new primary the owner creates it again and B
#           acquires.
#  - chain: A acquires on the old primary after the cut-off; on the new
#           primary B acquires, releases, and C acquires.
#  - hand:  the same, but B hands the lease to a waiting C.
#  - crash: A acquires before the cut-off; the new primary crashes and
#           restarts within tenure.demotion_bound of the promotion, and
#           only then B acquires.
# Meanwhile A renews on the old primary, which goes on serving.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $old = tenure_node('x2_old', init => { allows_streaming => 1 });
$old->safe_psql(
	'postgres', q{
	CREATE ROLE app LOGIN;
	GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text) TO app;
	SET ROLE app;
	SELECT tenure.create_lease('chain', ttl => '5 s');
	SELECT tenure.create_lease('hand', ttl => '5 s');
	SELECT tenure.create_lease('crash', ttl => '10 min');
	SELECT tenure.acquire('crash', 'A');
});
my $new = tenure_standby($old, 'x2_new');
$new->append_conf('postgresql.conf', "tenure.demotion_bound = '1h'\n");
$new->reload;
$old->wait_for_catchup($new);

# the standby stops receiving; the old primary goes on
$new->stop;
$old->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.create_lease('late', ttl => '5 s')");
for my $l (qw(late chain hand))
{
	$old->safe_psql('postgres', "SET ROLE app; SELECT tenure.acquire('$l', 'A')");
	is($old->safe_psql('postgres', "SELECT tenure.leader_is('$l', 'A')"),
		't', "$l: A leads on the old primary");
}
$new->append_conf('postgresql.conf', "primary_conninfo = ''\n");
$new->start;
promote_ready($new, 'the standby');
ok($new->wait_for_log(qr/may have lost transactions of the old primary; its tenures end/),
	'the keeper found no proof');
my $promoted_at = keeper_started($new);

# late: the owner creates it again on the new primary, B acquires
$new->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.create_lease('late', ttl => '5 s')");
$new->safe_psql('postgres', "SET ROLE app; SELECT tenure.acquire('late', 'B')");

# chain: B acquires and releases, C acquires
$new->safe_psql('postgres', "SET ROLE app; SELECT tenure.acquire('chain', 'B')");
$new->safe_psql('postgres', "SET ROLE app; SELECT tenure.release('chain', 'B')");
$new->safe_psql('postgres', "SET ROLE app; SELECT tenure.acquire('chain', 'C')");

# hand: B acquires, C waits, B hands over to C
$new->safe_psql('postgres', "SET ROLE app; SELECT tenure.acquire('hand', 'B')");
my $waiter = $new->background_psql('postgres');
start_statement($waiter, "SET ROLE app; SELECT tenure.acquire('hand', 'C', wait => '1 min');");
ok( $new->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM tenure.waiters WHERE lease = 'hand' AND holder = 'C'"),
	'hand: C waits');
$new->safe_psql('postgres', "SET ROLE app; SELECT tenure.handoff('hand', 'B', 'C')");
ok( $new->poll_query_until(
		'postgres', "SELECT holder = 'C' FROM tenure.leases WHERE lease = 'hand'"),
	'hand: C holds it');
eval { $waiter->quit };

# A renews on the old primary, which is still serving
is($old->safe_psql('postgres', "SELECT tenure.renew('late', 'A'), tenure.renew('chain', 'A'), tenure.renew('hand', 'A')"),
	"t|t|t", 'the old primary still serves A');

my %who = (late => 'B', chain => 'C', hand => 'C');
for my $l (qw(late chain hand))
{
	is($new->safe_psql('postgres', "SELECT tenure.leader_is('$l', '$who{$l}')"),
		'f', "$l: $who{$l} does not lead while the old primary may serve A");
	is( $new->safe_psql(
			'postgres',
			"SELECT active_from >= '$promoted_at'::timestamptz + interval '1 h' FROM tenure.leases WHERE lease = '$l'"
		),
		't',
		"$l: active no earlier than the promotion + ttl + demotion_bound");
}

# crash: a restart of the new primary does not forget the bound
$new->stop('immediate');
$new->start;
ok(defined wait_for_keeper($new), 'crash: the new primary restarted');
is($old->safe_psql('postgres', "SELECT tenure.renew('crash', 'A')"),
	't', 'crash: the old primary still serves A');
$new->safe_psql('postgres', "SET ROLE app; SELECT tenure.acquire('crash', 'B')");
is($new->safe_psql('postgres', "SELECT tenure.leader_is('crash', 'B')"),
	'f', 'crash: B does not lead while the old primary may serve A');
is( $new->safe_psql(
		'postgres',
		"SELECT active_from >= '$promoted_at'::timestamptz + interval '1 h' FROM tenure.leases WHERE lease = 'crash'"
	),
	't',
	'crash: active no earlier than the promotion + ttl + demotion_bound');

done_testing();
