
# The automatic hold-off across a crash restart and a clean restart.  A
# restart ends every tenure without an explicit release, so the former
# holder may still believe in its tenure until its last renewal plus the
# ttl.  A successor acquiring a lease with the automatic hold-off (holdoff
# NULL) right after the restart must not be active before then: at no
# moment may leader_is be true for the successor while the predecessor's
# tenure had not yet expired.  A lease with a fixed hold-off counts it from
# the new acquisition, as always.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;


my $node =
  tenure_node('restart_holdoff', conf => "restart_after_crash = on\n");
$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('auto', ttl => '1 min');
	SELECT tenure.create_lease('fixed', ttl => '1 min', holdoff => '1 min');
});

# Acquire both leases as holder $who; return when each tenure expires, as
# tenure.leases shows it (the predecessor's last renewal plus the ttl).
sub hold
{
	my ($who) = @_;
	$node->safe_psql('postgres',
		"SELECT tenure.acquire('auto', '$who'), tenure.acquire('fixed', '$who')");
	my %expires = split /[|\n]/,
	  $node->safe_psql('postgres',
		"SELECT lease, expires FROM tenure.leases WHERE holder = '$who'");
	is(scalar(keys %expires), 2, "$who holds both leases");
	return \%expires;
}

# After a restart: the successor acquires at once and is not active while
# the predecessor may still believe in its tenure.
sub check_successor
{
	my ($round, $old, $new) = @_;
	for my $lease ('auto', 'fixed')
	{
		like(
			$node->safe_psql(
				'postgres', "SELECT tenure.acquire('$lease', '$new')"),
			qr/^\d+$/,
			"$round: $new acquires $lease at once");
		is( $node->safe_psql(
				'postgres',
				"SELECT tenure.leader_is('$lease', '$new') AND clock_timestamp() < '$old->{$lease}'"
			),
			'f',
			"$round: $new does not lead $lease before the predecessor's tenure would have expired"
		);
		is( $node->safe_psql(
				'postgres',
				"SELECT active_from >= '$old->{$lease}' FROM tenure.leases WHERE lease = '$lease'"
			),
			't',
			"$round: $lease is active for $new only after the predecessor's expiry"
		);
	}
	is( $node->safe_psql(
			'postgres',
			"SELECT tenure.release('auto', '$new'), tenure.release('fixed', '$new')"),
		't|t',
		"$round: $new releases both");
	return;
}

# --- crash restart
my $old = hold('before-crash');
my $victim = $node->background_psql('postgres');
my $victim_pid = $victim->query_safe('SELECT pg_backend_pid()');
my $log_offset = -s $node->logfile;
ok(kill('KILL', $victim_pid), 'crash: a backend is killed with SIGKILL');
$node->wait_for_log(qr/all server processes terminated; reinitializing/,
	$log_offset);
ok($node->poll_query_until('postgres', undef, ''),
	'crash: the server accepts connections again');
ok(wait_for_keeper($node), 'crash: the keeper runs');
$victim->quit;
check_successor('crash', $old, 'after-crash');

# --- clean restart
$old = hold('before-restart');
$node->restart;
ok(wait_for_keeper($node), 'restart: the keeper runs');
check_successor('restart', $old, 'after-restart');

$node->stop;
done_testing();
