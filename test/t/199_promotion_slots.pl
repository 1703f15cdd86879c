
# More tenures continue through a switchover with the proof than
# the promoted standby has tenure.max_leases slots for (a standby set up
# with fewer slots, or every slot there taken).
#
# doc/high-availability.md: with the proof every tenure that is not
# session-bound continues; a tenure ends only as the Concepts list says.
# SECURITY.md assets: "a successor becomes active only after a former
# holder's belief has run out".  Whatever happens to a tenure that finds
# no slot, nobody else may lead its lease while its holder may still
# believe (its last renewal + ttl, renewed just before the switchover).

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use TenureTest;

my $n = 24;
my $primary = tenure_node('x4_primary', init => { allows_streaming => 1 },
	conf => "tenure.role_share = 100\ntenure.database_share = 100\n");
$primary->safe_psql('postgres',
	join('', map { "SELECT tenure.create_lease('l$_', ttl => '10 min');\n" } 1 .. $n));
my $standby = tenure_standby($primary, 'x4_standby', start => 0);
$standby->append_conf('postgresql.conf', "tenure.max_leases = 16\n");
$standby->start;

for my $i (1 .. $n)
{
	$primary->safe_psql('postgres', "SELECT tenure.acquire('l$i', 'A')");
}
my $sent = time();
$primary->safe_psql('postgres',
	join('', map { "SELECT tenure.renew('l$_', 'A');\n" } 1 .. $n));

$primary->wait_for_catchup($standby);
stop_for_switchover($primary, $standby);
promote_ready($standby, 'the standby');
ok($standby->wait_for_log(qr/pg_tenure: the promotion from timeline 1/),
	'the keeper decided');

my ($continued, $bad) = (0, 0);
for my $i (1 .. $n)
{
	my ($rc, $out, $err) = $standby->psql('postgres',
		"SELECT tenure.renew('l$i', 'A')");
	$continued++ if $rc == 0 && $out eq 't';
	($rc, $out, $err) = $standby->psql('postgres',
		"SELECT coalesce(tenure.acquire('l$i', 'B')::text, 'null')");
	note("l$i: B's acquire: rc $rc out '$out' err '$err'");
	if ($rc == 0 && $out ne 'null')
	{
		my $lead = $standby->safe_psql('postgres', "SELECT tenure.leader_is('l$i', 'B')");
		if ($lead eq 't' && time() < $sent + 600)
		{
			$bad++;
			diag("l$i: B leads while A may still believe");
		}
	}
}
note("$continued of $n tenures continued");
is($bad, 0, 'nobody else leads a lease whose holder may still believe');

done_testing();
