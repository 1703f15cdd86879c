
# The keeper survives an ERROR of its own: it reports it, cleans up and
# goes on, with the same pid and every lease lock still held (losing the
# process would drop them all at once).  pg_cancel_backend() of the keeper
# raises such an ERROR at its next CHECK_FOR_INTERRUPTS.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('keeper_error', extension => 0);
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('ke_a', ttl => '1 h', lock_key => 4242);
	SELECT tenure.create_lease('ke_b', ttl => '1 h', lock_key => 4343);
});

my $keeper = wait_for_keeper($node);
ok($keeper, 'the keeper runs');
my $epoch_a = $node->safe_psql('postgres', "SELECT tenure.acquire('ke_a', 'holder-a')");
ok($epoch_a > 0, 'ke_a acquired');

# whether the keeper holds the advisory lock of lock_key $key
sub keeper_holds
{
	my ($key) = @_;
	return "SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory'"
	  . " AND pid = $keeper AND granted AND objid = $key";
}
ok($node->poll_query_until('postgres', keeper_holds(4242)),
	'the keeper holds ke_a\'s lock');

foreach my $round (1, 2)
{
	my $offset = -s $node->logfile;
	is($node->safe_psql('postgres', "SELECT pg_cancel_backend($keeper)"),
		't', "round $round: the keeper is cancelled");
	$node->wait_for_log(qr/ERROR:  canceling statement due to user request/, $offset);
	pass("round $round: the keeper reported the ERROR");

	is(keeper_pid($node), $keeper, "round $round: the same keeper process goes on");
	is($node->safe_psql('postgres', keeper_holds(4242)),
		't', "round $round: it still holds ke_a's lock");
	is($node->safe_psql('postgres', "SELECT tenure.leader_is('ke_a', 'holder-a')"),
		't', "round $round: ke_a's tenure goes on");
	# a foreign session cannot take the key meanwhile
	is($node->safe_psql('postgres', 'SELECT pg_try_advisory_lock(4242)'),
		'f', "round $round: a foreign session cannot take ke_a's key");
}

# and it still serves new tenures: ke_b's lock is taken by the same keeper
my $epoch_b = $node->safe_psql('postgres', "SELECT tenure.acquire('ke_b', 'holder-b')");
ok($epoch_b > 0, 'ke_b acquired after the errors');
ok($node->poll_query_until('postgres', keeper_holds(4343)),
	'the keeper holds ke_b\'s lock');
is($node->safe_psql('postgres', 'SELECT pg_try_advisory_lock(4343)'),
	'f', 'a foreign session cannot take ke_b\'s key');

# no crash and no restart of the keeper in the log
unlike(slurp_file($node->logfile), qr/terminated by signal|pg_tenure keeper.*exited with exit code/,
	'the keeper neither crashed nor exited');

$node->stop;
done_testing();
