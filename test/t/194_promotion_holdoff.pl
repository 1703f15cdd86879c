
# Tenures continued by a promotion with the proof (fast shutdown,
# standby caught up past the shutdown checkpoint) that were not yet active
# on the old primary.
#
# doc/high-availability.md, "Tenures through a promotion": "A continued
# tenure that may not yet have been active on the old primary (its
# predecessor ended by session end, revocation, a restart or a promotion,
# or the lease has a fixed hold-off) becomes active no earlier than the new
# primary's ready time plus its hold-off".  SECURITY.md, Streaming
# replication, tenures: "active no earlier than the promotion plus their
# hold-off unless surely active before"; Lease owner, tenures:
# "drop_lease + create_lease keeps the hold-off bound of the dropped
# tenure".  "What a standby answers": await_change "returns when they
# differ ...; if the standby is promoted during the wait, it goes on from
# the promoted server's shared memory".

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use TenureTest;

my $primary = tenure_node('a3_primary', init => { allows_streaming => 1 });
$primary->safe_psql(
	'postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE nobody LOGIN;
	GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text) TO app;
	SET ROLE app;
	SELECT tenure.create_lease('fixed0', ttl => '10 min', holdoff => '40 s');
	SELECT tenure.create_lease('fixed_rel', ttl => '10 min', holdoff => '40 s');
	SELECT tenure.create_lease('dropped', ttl => '40 s');
	SELECT tenure.create_lease('waited', ttl => '10 min');
});
my $standby = tenure_standby($primary, 'a3_standby');

my %e;

# fixed0: a fixed hold-off, no predecessor; fixed_rel: a predecessor that
# released.  Either way A is active 40 s after its acquisition.
$primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.acquire('fixed_rel', 'P'); SELECT tenure.release('fixed_rel', 'P')"
);

# dropped: P holds it and renews; the lease owner drops the lease and
# creates it again; A acquires and must wait out P's belief (renewal + 40 s)
$primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.acquire('dropped', 'P')");
my $p_sent = time();
$primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.renew('dropped', 'P')");
$primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.drop_lease('dropped')");
$primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.create_lease('dropped', ttl => '40 s')");

for my $l (qw(fixed0 fixed_rel dropped waited))
{
	$e{$l} = $primary->safe_psql('postgres',
		"SET ROLE app; SELECT tenure.acquire('$l', 'A')");
}
for my $l (qw(fixed0 fixed_rel dropped))
{
	is($primary->safe_psql('postgres', "SELECT tenure.leader_is('$l', 'A')"),
		'f', "$l: A is not active yet on the old primary");
}

# any LOGIN role waits on the standby for a change of 'waited'
$primary->wait_for_catchup($standby);
my $aw = $standby->background_psql('postgres',
	extra_params => [ '-U', 'nobody' ]);
start_statement($aw,
	"SELECT changed, holder, epoch FROM tenure.await_change('waited', $e{waited}, 'A', '10 s');"
);

# the switchover
stop_for_switchover($primary, $standby);
my $before_promote = time();
promote_ready($standby, 'the standby');
$standby->wait_for_log(qr/pg_tenure: the promotion from timeline/);
like(slurp_file($standby->logfile), qr/kept every transaction/,
	'the promotion had the proof');

for my $l (qw(fixed0 fixed_rel))
{
	is($standby->safe_psql('postgres', "SELECT tenure.renew('$l', 'A')"),
		't', "$l: A's tenure continued");
	is($standby->safe_psql('postgres', "SELECT tenure.leader_is('$l', 'A')"),
		'f', "$l: A is not active right after the promotion (fixed hold-off)");
	my $af = $standby->safe_psql('postgres',
		"SELECT extract(epoch FROM active_from) FROM tenure.leases WHERE lease = '$l'");
	ok($af >= $before_promote + 40 - 0.5,
		"$l: active_from $af >= promotion ($before_promote) + 40 s");
}

is($standby->safe_psql('postgres', "SELECT tenure.renew('dropped', 'A')"),
	't', "dropped: A's tenure continued");
my $leads =
  $standby->safe_psql('postgres', "SELECT tenure.leader_is('dropped', 'A')");
ok(time() < $p_sent + 40, "P may still lead 'dropped' by the client rule");
is($leads, 'f',
	"dropped: A does not lead while the dropped tenure's holder may still believe it leads"
);

my $out = $aw->query_safe("SELECT 'done'");
like($out, qr/^f\|A\|$e{waited}$/m,
	'await_change through the promotion: A still holds it, no change reported')
  or diag($out);
$aw->quit;
is($standby->safe_psql('postgres', "SELECT tenure.renew('waited', 'A')"),
	't', "waited: A's tenure continued");

done_testing();
