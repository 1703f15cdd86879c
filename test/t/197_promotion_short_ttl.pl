
# A lease owner shortens the ttl (or drops and creates the lease
# with a shorter one) while a former holder's belief is still being waited
# out, then a switchover with the proof happens.
#
# doc/reference.md, Changing a lease: "a former holder whose tenure ended
# without a release keeps its hold-off bound, computed with the ttl it
# knew".  SECURITY.md, Lease owner, tenures: "drop_lease + create_lease
# keeps the hold-off bound of the dropped tenure"; assets: "a successor
# becomes active only after a former holder's belief has run out";
# Streaming replication, tenures: continued tenures are "active no earlier
# than the promotion plus their hold-off unless surely active before".
# tenure.history keeps the ttl of each epoch, so the new primary can know
# the former holder's ttl.
#
# So: P (ttl 120 s) ends without a release; the owner shortens the ttl to
# 10 s (or drops and creates the lease with 10 s); A acquires and, on the
# old primary, is not active before P's last renewal + 120 s.  After a
# switchover with the proof, A must still not lead while P may believe.
# (The short ttl is 10 s, not less, so that A's tenure outlives a slow
# switchover and continues.)

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use TenureTest;

my $primary = tenure_node('x1_primary', init => { allows_streaming => 1 });
$primary->safe_psql(
	'postgres', q{
	CREATE ROLE app LOGIN;
	GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text) TO app;
	SET ROLE app;
	SELECT tenure.create_lease('alt', ttl => '120 s');
	SELECT tenure.create_lease('drp', ttl => '120 s');
});
my $standby = tenure_standby($primary, 'x1_standby');

# alt: P session-bound, its session ends (no release); then the owner
# shortens the ttl while nobody holds the lease
my $p_sent = time();
$primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.acquire('alt', 'P', session_bound => true)");
# drp: P holds and renews; the owner drops the lease and creates it with 10 s
$primary->safe_psql('postgres', "SET ROLE app; SELECT tenure.acquire('drp', 'P')");
$primary->safe_psql('postgres', "SET ROLE app; SELECT tenure.renew('drp', 'P')");
$primary->safe_psql('postgres', "SET ROLE app; SELECT tenure.drop_lease('drp')");
$primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.create_lease('drp', ttl => '10 s')");

wait_until('P\'s session-bound tenure of alt to end',
	sub {
		$primary->safe_psql('postgres',
			"SELECT holder IS NULL FROM tenure.leases WHERE lease = 'alt'") eq 't';
	});
$primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.alter_lease('alt', ttl => '10 s')");

for my $l (qw(alt drp))
{
	$primary->safe_psql('postgres', "SET ROLE app; SELECT tenure.acquire('$l', 'A')");
	is($primary->safe_psql('postgres', "SELECT tenure.leader_is('$l', 'A')"),
		'f', "$l: A is not active on the old primary (P may still believe)");
	is( $primary->safe_psql(
			'postgres',
			"SELECT active_from >= to_timestamp($p_sent) + interval '120 s' - interval '1 s' FROM tenure.leases WHERE lease = '$l'"
		),
		't',
		"$l: on the old primary A is active only after P's belief (120 s)");
}

# A's tenures are live at the old primary's shutdown, so they continue
$primary->safe_psql('postgres', "SET ROLE app; SELECT tenure.renew('$_', 'A')") for qw(alt drp);
$primary->wait_for_catchup($standby);
stop_for_switchover($primary, $standby);
promote_ready($standby, 'the standby');
ok($standby->wait_for_log(qr/kept every transaction of the old primary; its tenures continue/),
	'the keeper found the proof');

# wait past the promotion plus the (new, short) ttl, well inside P's 120 s
# (A renews its continued tenures all the while: their ttl is now 10 s)
my $ready = time();
my %renewed = (alt => 1, drp => 1);
wait_until(
	'ready + 12 s',
	sub {
		for my $l (qw(alt drp))
		{
			$renewed{$l} = 0
			  if $standby->safe_psql('postgres', "SELECT tenure.renew('$l', 'A')") ne 't';
		}
		return time() > $ready + 12;
	});
ok(time() < $p_sent + 110, 'P may still lead by the client rule');

for my $l (qw(alt drp))
{
	ok($renewed{$l}, "$l: A's tenure continued and A renews it");
	is($standby->safe_psql('postgres', "SELECT tenure.leader_is('$l', 'A')"),
		'f', "$l: A does not lead while P may still believe (ttl 120 s it knew)");
	is( $standby->safe_psql(
			'postgres',
			"SELECT active_from >= to_timestamp($p_sent) + interval '120 s' - interval '1 s' FROM tenure.leases WHERE lease = '$l'"
		),
		't',
		"$l: active_from is not before P's last renewal + 120 s");
}

done_testing();
