
# A crash (a backend killed with SIGKILL) restarts the server: every tenure
# ends, epochs survive and the next ones are greater, and the history says
# "server restart" for the tenures that were open.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('crash_restart', conf => "restart_after_crash = on\n");

my $keeper1 = wait_for_keeper($node);
ok($keeper1, 'keeper is running');

$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('c1', ttl => '10 min', holdoff => '0');
	SELECT tenure.create_lease('c2', ttl => '10 min', holdoff => '0');
	SELECT tenure.create_lease('c3', ttl => '10 min', holdoff => '0', lock_key => 9001);
	SELECT tenure.create_lease('c4', ttl => '10 min', holdoff => '0');
});

# every epoch issued before the crash, per lease
my %epochs;

push @{ $epochs{c1} },
  $node->safe_psql('postgres', "SELECT tenure.acquire('c1', 'x')");
push @{ $epochs{c1} },
  $node->safe_psql('postgres', "SELECT tenure.claim_epoch('c1', 'x')");

my $holder = $node->background_psql('postgres');
push @{ $epochs{c2} },
  $holder->query_safe("SELECT tenure.acquire('c2', 'y', session_bound => true)");

push @{ $epochs{c3} },
  $node->safe_psql('postgres', "SELECT tenure.acquire('c3', 'z')");

for my $lease (sort keys %epochs)
{
	like($_, qr/^\d+$/, "epoch $_ issued for $lease") for @{ $epochs{$lease} };
}
ok($epochs{c1}[1] > $epochs{c1}[0], 'claim_epoch issued a greater epoch');

is( $node->safe_psql(
		'postgres',
		"SELECT tenure.leader_is('c1', 'x'), tenure.leader_is('c2', 'y'), tenure.leader_is('c3', 'z')"
	),
	't|t|t',
	'all three holders lead before the crash');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 3 FROM pg_locks WHERE locktype = 'advisory' AND pid = $keeper1 AND granted"
	),
	'the keeper holds three lease locks');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM tenure.history WHERE ended IS NULL"),
	'3', 'history: three open tenures');

# crash: SIGKILL an ordinary backend
my $victim = $node->background_psql('postgres');
my $victim_pid = $victim->query_safe('SELECT pg_backend_pid()');
my $log_offset = -s $node->logfile;
ok(kill('KILL', $victim_pid), 'backend killed with SIGKILL');
$node->wait_for_log(qr/all server processes terminated; reinitializing/,
	$log_offset);
ok($node->poll_query_until('postgres', undef, ''),
	'server accepts connections again');
ok(wait_for_keeper($node, $keeper1), 'a new keeper is running');
$holder->quit;
$victim->quit;

#
# No tenure survives.
#
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE holder IS NOT NULL OR lock_held), count(*)"
		  . " FROM tenure.leases"),
	'0|4',
	'leases view: no lease has a holder');
is( $node->safe_psql(
		'postgres',
		"SELECT tenure.leader_is('c1', 'x'), tenure.leader_is('c2', 'y'), tenure.leader_is('c3', 'z')"
	),
	'f|f|f',
	'no former holder leads');
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"),
	'0',
	'no advisory lock is held');
is( $node->safe_psql(
		'postgres',
		"SELECT tenure.renew('c1', 'x'), tenure.renew('c2', 'y'), tenure.renew('c3', 'z')"
	),
	'f|f|f',
	'no former holder can renew');
is( $node->safe_psql(
		'postgres',
		"SELECT tenure.current_epoch('c1') = $epochs{c1}[-1],"
		  . " tenure.current_epoch('c2') = $epochs{c2}[-1],"
		  . " tenure.current_epoch('c3') = $epochs{c3}[-1]"),
	't|t|t',
	'epochs survived the crash');

#
# A new tenure of any lease of the database closes the old tenures in the
# history.
#
my $e4 = $node->safe_psql('postgres', "SELECT tenure.acquire('c4', 'w')");
like($e4, qr/^\d+$/, 'a lease never held before the crash is acquired');
poll_is($node, 'postgres',
	"SELECT string_agg(lease || ':' || coalesce(end_reason, 'open'), ',' ORDER BY lease)"
	  . " FROM tenure.history WHERE (lease, epoch) IN (('c1', $epochs{c1}[-1]), ('c2', $epochs{c2}[-1]), ('c3', $epochs{c3}[-1]))",
	'c1:server restart,c2:server restart,c3:server restart',
	'history: the tenures open at the crash ended with "server restart"'
	  . ' once a new tenure started in the database');

#
# The next epoch of each lease exceeds every earlier one.
#
my %new;
$new{c1} = $node->safe_psql('postgres', "SELECT tenure.acquire('c1', 'x')");
$new{c2} = $node->safe_psql('postgres', "SELECT tenure.acquire('c2', 'y')");
$new{c3} = $node->safe_psql('postgres', "SELECT tenure.acquire('c3', 'z')");
for my $lease (sort keys %new)
{
	my @greater = grep { $new{$lease} =~ /^\d+$/ && $new{$lease} > $_ }
	  @{ $epochs{$lease} };
	is(scalar @greater, scalar @{ $epochs{$lease} },
		"new epoch of $lease ($new{$lease}) exceeds every earlier one");
}

for my $lease (sort keys %new)
{
	is( $node->safe_psql(
			'postgres',
			"SELECT o.end_reason, o.ended >= o.started, o.ended <= n.started,"
			  . " o.boot_id <> n.boot_id"
			  . " FROM tenure.history o, tenure.history n"
			  . " WHERE o.lease = '$lease' AND o.epoch = $epochs{$lease}[-1]"
			  . " AND n.lease = '$lease' AND n.epoch = $new{$lease}"),
		'server restart|t|t|t',
		"history of $lease: the old tenure says \"server restart\", ended"
		  . ' between its start and the start of the next one, in another boot');
}
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM tenure.history WHERE ended IS NULL"),
	'4', 'history: only the four new tenures are open');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory'"
		  . " AND objsubid = 1 AND classid = 0 AND objid = 9001 AND granted"),
	'the new keeper holds the lock_key of c3\'s new tenure');

$node->stop;

done_testing();
