
# An acquisition whose transaction never commits holds the lease for at most
# its ttl, counted from the reservation.
#
# (a) The client comes back after the ttl, nobody having taken the lease
#     meanwhile: its COMMIT fails (SQLSTATE TN001) before the commit record,
#     and nothing of the acquisition remains: no epoch, no history row, no
#     tenure.
# (b) The client stays idle in its transaction: a second acquirer waiting in
#     acquire() takes the lease over after the first one's ttl, without
#     waiting for the client.  The abandoned transaction holds the lease's
#     row lock in tenure.lease (it issued its epoch there), which only its
#     end frees, so its backend is terminated, and nothing of it remains.
# (c) The history rows an open acquisition locks (closing the tenures a
#     crash left open, of every lease) do not hold up acquirers of other
#     leases.
#
# Only outcomes and messages are asserted, never how long anything took.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('abandoned');
$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('late', ttl => '1 s', holdoff => '0');
	SELECT tenure.create_lease('idle', ttl => '1 s', holdoff => '0');
});

# What the server keeps of a lease: epoch, history rows, holder, transitions.
sub lease_state
{
	my ($lease) = @_;
	return $node->safe_psql('postgres',
		"SELECT tenure.current_epoch('$lease'),"
		  . " (SELECT count(*) FROM tenure.history WHERE lease = '$lease'),"
		  . " (SELECT coalesce(holder, 'none') || ':' || transitions"
		  . "    FROM tenure.leases WHERE lease = '$lease')");
}

#
# (a) the COMMIT comes after the ttl
#
my $before = lease_state('late');
is($before, '0|0|none:0', 'lease late has never been held');

my $late = $node->background_psql('postgres', on_error_stop => 0);
$late->query_safe('\set VERBOSITY verbose');
my $epoch = $late->query_safe(
	"BEGIN; SELECT tenure.acquire('late', 'a');");
like($epoch, qr/^\d+$/, "the late client acquired late at epoch $epoch");

# its transaction started before the acquisition: wait until its clock is
# well past the acquisition's ttl
wait_until(
	'the clock to move past the ttl',
	sub {
		$late->query_safe("SELECT clock_timestamp() > now() + interval '1.5 s';")
		  =~ /^t/;
	}) or die "the clock did not move";

my ($out, $ret) = $late->query('COMMIT;');
like(
	$late->{stderr},
	qr/ERROR:  TN001: acquisition of lease "late" expired before its transaction committed/,
	'the late COMMIT fails with TN001');
$late->{stderr} = '';
is(lease_state('late'), $before,
	'the failed COMMIT changed nothing: epoch, history, tenure.leases');
is($late->query_safe("SELECT tenure.acquire('late', 'a') IS NOT NULL;"),
	't', 'the client acquires the lease again in a new transaction');
is($node->safe_psql('postgres', "SELECT tenure.leader_is('late', 'a')"),
	't', 'and leads');
$late->quit;

#
# (b) the client stays idle in its transaction
#
$before = lease_state('idle');
my $idle = $node->background_psql('postgres', on_error_stop => 0);
my $idle_pid = $idle->query_safe('SELECT pg_backend_pid();');
my $idle_epoch =
  $idle->query_safe("BEGIN; SELECT tenure.acquire('idle', 'a');");
like($idle_epoch, qr/^\d+$/,
	"the idle client acquired idle at epoch $idle_epoch and stays idle");
is( $node->safe_psql(
		'postgres',
		"SELECT state FROM pg_stat_activity WHERE pid = $idle_pid"),
	'idle in transaction',
	'its session is idle in transaction');

my $log_offset = -s $node->logfile;
my $second = $node->safe_psql('postgres',
	"SELECT tenure.acquire('idle', 'b', wait => '10 s')");
like($second, qr/^\d+$/,
	"a second acquirer takes the lease over after the ttl (epoch $second)");
is($node->safe_psql('postgres', "SELECT tenure.leader_is('idle', 'b')"),
	't', 'the second acquirer leads');
ok( $node->log_contains(
		qr/terminating backend $idle_pid for an expired acquisition of lease "idle"/,
		$log_offset),
	'the abandoned backend was terminated, and the log says why');
ok( $node->poll_query_until(
		'postgres',
		"SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $idle_pid)"),
	'the abandoned session is gone');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(holder || ':' || coalesce(end_reason, 'open'), ',')"
		  . " FROM tenure.history WHERE lease = 'idle'"),
	'b:open',
	'history: only the second acquirer\'s tenure, nothing of the abandoned one');
is( $node->safe_psql(
		'postgres',
		"SELECT holder, epoch = $second, transitions FROM tenure.leases WHERE lease = 'idle'"),
	'b|t|1',
	'tenure.leases: the second acquirer, its epoch, one transition');
eval { $idle->quit; };

#
# (c) after a crash, the first acquisition in the database closes in the
#     history the tenures of every lease the crash left open; while its
#     transaction is open, an acquirer of another lease skips those rows
#     instead of waiting for it
#
$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('x', ttl => '10 min', holdoff => '0');
	SELECT tenure.create_lease('y', ttl => '10 min', holdoff => '0');
	SELECT tenure.acquire('x', 'old');
	SELECT tenure.acquire('y', 'old');
});
$node->stop('immediate');
$node->start;

my $first = $node->background_psql('postgres', on_error_stop => 0);
like($first->query_safe("BEGIN; SELECT tenure.acquire('x', 'a');"),
	qr/^\d+$/, 'the first acquisition after the crash, of x, is open');
($ret, $out, my $err) = $node->psql('postgres',
	"SET lock_timeout = '5 s';\nSELECT tenure.acquire('y', 'b') IS NOT NULL;");
is($err, '', 'an acquisition of y meanwhile does not wait for it');
is($out, 't', 'and acquires y');
$first->query_safe('COMMIT;');
$first->quit;
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(lease || ':' || holder || ':' || coalesce(end_reason, 'open'), ','"
		  . " ORDER BY lease, epoch) FROM tenure.history WHERE lease IN ('x', 'y')"),
	'x:old:server restart,x:a:open,y:old:server restart,y:b:open',
	'history: the tenures the crash left open are closed, the new ones open');

done_testing();
