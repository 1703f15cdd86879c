# Ends of tenures that happen outside a transaction reach tenure.history
# soon, without waiting for the lease's next tenure: an expiry, the end of
# a session-bound holder's backend, a crash or restart ("server restart")
# and a promotion ("promoted").  The history writer (a short-lived
# background worker the keeper starts) also visits databases without
# pg_tenure, and changes nothing there.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $primary = tenure_node('history_primary',
	init => { allows_streaming => 1 },
	conf => "synchronous_commit = on\n");
$primary->safe_psql('postgres', q{
SELECT tenure.create_lease('hx', ttl => '1 s', holdoff => '0');
SELECT tenure.create_lease('hs', ttl => '1 min', holdoff => '0');
SELECT tenure.create_lease('hr', ttl => '1 min', holdoff => '0');
});
$primary->safe_psql('postgres', 'CREATE DATABASE plain');

# The end reason of a lease's tenure at an epoch, once it is written.
sub ended_as
{
	my ($node, $what, $lease, $epoch, $reason) = @_;
	my $got;
	wait_until($what, sub {
		$got = $node->safe_psql('postgres',
			"SELECT coalesce(end_reason, 'open') FROM tenure.history"
			  . " WHERE lease = '$lease' AND epoch = $epoch");
		return $got eq $reason;
	});
	is($got, $reason, $what);
}

# an expiry, with no later tenure of the lease
my $e1 = $primary->safe_psql('postgres', "SELECT tenure.acquire('hx', 'a')");
ended_as($primary, 'an expired tenure is closed in the history', 'hx', $e1, 'expired');
is( $primary->safe_psql(
		'postgres',
		"SELECT ended <= clock_timestamp() AND ended >= started FROM tenure.history"
		  . " WHERE lease = 'hx' AND epoch = $e1"),
	't', 'with the time it expired');
is($primary->safe_psql('postgres',
		"SELECT count(*) FROM tenure.history WHERE lease = 'hx'"),
	'1', 'and no later tenure wrote it');

# a session-bound holder's backend exits
my $bg = $primary->background_psql('postgres');
my $e2 = $bg->query_safe("SELECT tenure.acquire('hs', 'b', session_bound => true)");
$bg->quit;
ended_as($primary, 'a session-bound tenure is closed when its backend exits',
	'hs', $e2, 'session ended');

# a crash: every tenure open at the time is closed once the server is back
my $e3 = $primary->safe_psql('postgres', "SELECT tenure.acquire('hr', 'c')");
my $standby = tenure_standby($primary, 'history_standby');
$primary->stop('immediate');
$primary->start;
ended_as($primary, 'a tenure open at a crash is closed as "server restart"',
	'hr', $e3, 'server restart');
is($primary->safe_psql('postgres',
		"SELECT count(*) FROM tenure.history WHERE lease = 'hr'"),
	'1', 'without a new tenure of the lease');
is($primary->safe_psql('plain',
		"SELECT count(*) FROM pg_namespace WHERE nspname = 'tenure'"),
	'0', 'a database without pg_tenure is left as it was');

# a promotion: the standby's copy of an open tenure ends as "promoted"
my $e4 = $primary->safe_psql('postgres', "SELECT tenure.acquire('hs', 'd')");
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres',
		"SELECT coalesce(end_reason, 'open') FROM tenure.history WHERE lease = 'hs' AND epoch = $e4"),
	'open', 'the standby has the open tenure');
$primary->stop('immediate');
$standby->promote;
ended_as($standby, 'after the promotion it is closed as "promoted"',
	'hs', $e4, 'promoted');
is( $standby->safe_psql(
		'postgres',
		"SELECT string_agg(lease || '/' || end_reason, ',' ORDER BY lease, epoch) FROM tenure.history"),
	'hr/server restart,hs/session ended,hs/promoted,hx/expired',
	'the earlier ends keep their reasons');

# and a restart of the promoted server is a restart again
my $e5 = $standby->safe_psql('postgres', "SELECT tenure.acquire('hr', 'e')");
$standby->stop('immediate');
$standby->start;
ended_as($standby, 'a restart on the new timeline is a "server restart"',
	'hr', $e5, 'server restart');

$standby->stop;
done_testing();
