
# A promotion without the proof (the old primary goes on serving A), then,
# within tenure.demotion_bound of it, a switchover with the proof to a
# third server.  The middle server's keeper says in its list how long the
# old primary may still serve, so the switchover counts as a promotion
# without the proof too (src/README, P3, P5): its tenures end, and a
# successor on the third server waits for the third server's ready time +
# ttl + demotion_bound, later than the first promotion's bound.
#
#  x: A holds it on the old primary; nobody touches it on the middle
#     server; C acquires it on the third server.
#  y: A holds it on the old primary; B acquires it on the middle server
#     (waiting out the bound); on the third server B's tenure has ended
#     and D acquires it.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $conf = "tenure.demotion_bound = '1h'\n";
my $old = tenure_node('ls_old', init => { allows_streaming => 1 }, conf => $conf);
$old->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('x', ttl => '5 s');
	SELECT tenure.create_lease('y', ttl => '5 s');
	SELECT tenure.acquire('x', 'A');
	SELECT tenure.acquire('y', 'A');
});
my $mid = tenure_standby($old, 'ls_mid');
$old->wait_for_catchup($mid);

# the lossy promotion: the old primary keeps running and serving A
promote_ready($mid, 'the middle server');
ok( $mid->wait_for_log(
		qr/the promotion from timeline 1 may have lost transactions of the old primary/),
	'without the proof');
my $promoted_at = keeper_started($mid);
$mid->safe_psql('postgres', "SELECT tenure.acquire('y', 'B')");
is($mid->safe_psql('postgres', "SELECT tenure.leader_is('y', 'B')"),
	'f', 'y: B does not lead on the middle server while A may');

# a third server, then a switchover from the middle one
$mid->backup('mid_base');
my $new = PostgreSQL::Test::Cluster->new('ls_new');
$new->init_from_backup($mid, 'mid_base', has_streaming => 1);
$new->start;
$mid->wait_for_catchup($new);
stop_for_switchover($mid, $new);
promote_ready($new, 'the third server');
ok($new->wait_for_log(qr/the old primary's list of live tenures proves nothing/),
	'the list says the first old primary may still serve');
ok( $new->wait_for_log(
		qr/the promotion from timeline 2 may have lost transactions of the old primary/),
	'so the switchover counts as without the proof');

is($old->safe_psql('postgres', "SELECT tenure.renew('x', 'A'), tenure.renew('y', 'A')"),
	't|t', 'the old primary still serves A');
is($new->safe_psql('postgres', "SELECT tenure.renew('y', 'B')"),
	'f', "y: B's tenure ended with the switchover");
$new->safe_psql('postgres', "SELECT tenure.acquire('x', 'C'), tenure.acquire('y', 'D')");
is( $new->safe_psql(
		'postgres',
		"SELECT tenure.leader_is('x', 'C'), tenure.leader_is('y', 'D')"),
	'f|f', 'neither C nor D leads while A may');
is( $new->safe_psql(
		'postgres',
		"SELECT bool_and(active_from >= '$promoted_at'::timestamptz + interval '1 h') FROM tenure.leases WHERE lease IN ('x', 'y')"
	),
	't',
	'x and y are active no earlier than the first promotion + ttl + demotion_bound');

done_testing();
