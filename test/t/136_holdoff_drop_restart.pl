
# The hold-off bound outlives drop_lease across a server restart.  A lease
# dropped while held ends its tenure without a release: its former holder
# may still believe in it until its last renewal plus the ttl it knew.  A
# restart ends every tenure too, and its rule (the successor is active no
# earlier than the time the server became ready plus the ttl) must then
# count the dropped tenure, with the dropped lease's ttl, not the
# (shorter) ttl of the lease created again under its name; also when the
# ttl was lengthened by alter_lease while the tenure lasted.  Nothing here
# waits for the hold-off to pass: active_from and leader_is show it.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;


my $node = tenure_node('holdoff_drop_restart');

# Holder 'old' acquires the lease; returns its tenure's expiry as
# tenure.leases shows it (last renewal plus the ttl).
sub hold
{
	my ($lease) = @_;
	like($node->safe_psql('postgres', "SELECT tenure.acquire('$lease', 'old')"),
		qr/^\d+$/, "$lease: 'old' acquires it");
	return $node->safe_psql('postgres',
		"SELECT expires FROM tenure.leases WHERE lease = '$lease'");
}

# 'late': dropped before the restart, created again after it.
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('late', ttl => '1 min')");
my %old;
$old{late} = hold('late');
$node->safe_psql('postgres', "SELECT tenure.drop_lease('late')");

# 'early': dropped and created again (with a shorter ttl) before the restart.
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('early', ttl => '1 min')");
$old{early} = hold('early');
$node->safe_psql(
	'postgres', q{
	SELECT tenure.drop_lease('early');
	SELECT tenure.create_lease('early', ttl => '1 s');
});

# 'longer': its ttl lengthened while held, then dropped before the restart.
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('longer', ttl => '1 s')");
hold('longer');
$node->safe_psql('postgres',
	"SELECT tenure.alter_lease('longer', ttl => '1 min')");
$old{longer} = $node->safe_psql('postgres',
	"SELECT expires FROM tenure.leases WHERE lease = 'longer'");
is( $node->safe_psql(
		'postgres',
		"SELECT expires - last_renewed FROM tenure.leases WHERE lease = 'longer'"),
	'00:01:00',
	'longer: the longer ttl applies to the tenure at once');
$node->safe_psql('postgres', "SELECT tenure.drop_lease('longer')");

$node->restart;
ok(wait_for_keeper($node), 'the keeper runs');

$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('late', ttl => '1 s');
	SELECT tenure.create_lease('longer', ttl => '1 s');
});

for my $lease ('late', 'early', 'longer')
{
	like($node->safe_psql('postgres', "SELECT tenure.acquire('$lease', 'new')"),
		qr/^\d+$/, "$lease: 'new' acquires it at once");
	is( $node->safe_psql(
			'postgres',
			"SELECT tenure.leader_is('$lease', 'new') AND clock_timestamp() < '$old{$lease}'"
		),
		'f',
		"$lease: 'new' does not lead before the dropped tenure would have expired"
	);
	is( $node->safe_psql(
			'postgres',
			"SELECT active_from >= '$old{$lease}' FROM tenure.leases WHERE lease = '$lease'"
		),
		't',
		"$lease: active for 'new' only after the dropped tenure's expiry");
}

$node->stop;
done_testing();
