
# A lock_key tenure continued by a promotion with the proof, and a
# LOGIN role that races the new primary's keeper for the advisory lock.
#
# doc/high-availability.md: "A lock_key tenure leads once the new
# primary's keeper holds its lock."  doc/reference.md, Advisory locks: "a
# tenure whose lock_key a foreign session took in the meantime ends as
# revoked. While the keeper does not hold a lock_key tenure's lock,
# leader_is answers false for it."  So never: the foreign session holds
# pg_try_advisory_lock(lock_key) and leader_is is true.
# Then a second switchover (timeline 2 to 3), also with the proof: A's
# tenure, continued once and renewed, must continue again ("every tenure
# that is not session-bound continues with the same holder and epoch").

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $primary = tenure_node('a5_primary', init => { allows_streaming => 1 });
$primary->safe_psql(
	'postgres', q{
	CREATE ROLE nobody LOGIN;
	SELECT tenure.create_lease('lk', ttl => '10 min', lock_key => 4242);
	SELECT tenure.create_lease('twice', ttl => '10 min');
});
my $standby = tenure_standby($primary, 'a5_standby');
my $eA = $primary->safe_psql('postgres', "SELECT tenure.acquire('lk', 'A')");
my $eT = $primary->safe_psql('postgres', "SELECT tenure.acquire('twice', 'A')");
$primary->wait_for_catchup($standby);

sub switchover
{
	my ($old, $new) = @_;
	stop_for_switchover($old, $new);
	$new->promote;
}

# the racer connects to the standby and tries the lock as soon as it can
my $racer = $standby->background_psql('postgres',
	extra_params => [ '-U', 'nobody' ]);
switchover($primary, $standby);
my $got = '';
for my $i (1 .. 200)
{
	$got = $racer->query_safe("SELECT pg_try_advisory_lock(4242)");
	last if $got eq 't';
	last
	  if $standby->safe_psql('postgres',
		"SELECT lock_held FROM tenure.leases WHERE lease = 'lk'") eq 't';
}
diag("racer got the lock: $got");
if ($got eq 't')
{
	# the foreign session holds the key: A must not lead
	my $leads = $standby->safe_psql('postgres',
		"SELECT tenure.leader_is('lk', 'A')");
	is($leads, 'f', 'A does not lead while a foreign session holds lock_key');
}
else
{
	wait_until('A leads lk',
		sub {
			$standby->safe_psql('postgres', "SELECT tenure.leader_is('lk', 'A')")
			  eq 't';
		});
	is($racer->query_safe("SELECT pg_try_advisory_lock(4242)"),
		'f', 'the keeper holds lock_key: the foreign session cannot take it');
}
$racer->quit;

# a second switchover: back to a standby of the promoted server
my $third = PostgreSQL::Test::Cluster->new('a5_third');
$standby->backup('b2');
$third->init_from_backup($standby, 'b2', has_streaming => 1);
$third->start;
is($standby->safe_psql('postgres', "SELECT tenure.renew('twice', 'A')"),
	't', 'twice: continued once');
$standby->wait_for_catchup($third);
switchover($standby, $third);
wait_for_keeper($third);
$third->wait_for_log(qr/pg_tenure: the promotion from timeline 2/);
like(slurp_file($third->logfile), qr/promotion from timeline 2 kept every transaction/,
	'second switchover had the proof');
is($third->safe_psql('postgres', "SELECT tenure.acquire('twice', 'B')"),
	'', 'twice: B cannot take it after the second switchover');
is($third->safe_psql('postgres', "SELECT tenure.leader_is('twice', 'B')"),
	'f', 'twice: B does not lead while A (renewed a moment ago, ttl 10 min) may believe it leads')
  or diag($third->safe_psql('postgres', "SELECT * FROM tenure.leases WHERE lease = 'twice'"));
is($third->safe_psql('postgres', "SELECT tenure.renew('twice', 'A')"),
	't', 'twice: continued a second time');
diag($third->safe_psql('postgres', "SELECT * FROM tenure.history WHERE lease = 'twice' ORDER BY epoch"));

done_testing();
