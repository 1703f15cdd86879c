# tenure.handoff() back and forth between two replicas, each waiting in
# acquire(wait) while the other leads: every hand-over leaves exactly one
# leader, the successor leads at once (no hold-off, gap 0) at a greater
# epoch, the predecessor neither leads nor renews, and the history shows a
# chain of "handed over" tenures.  A session-bound successor's tenure ends
# with its session.  Waits are long (5 min), so that a missed wakeup makes
# the test hang until its poll gives up and fail, never pass.
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::Bin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('handoff');
# an automatic hold-off: a successor that had to wait for it would not lead
# at once
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('ho', ttl => '10 min', preferred => 'r2')");
is($node->safe_psql('postgres', "SELECT preferred FROM tenure.leases WHERE lease = 'ho'"),
	'r2', 'tenure.leases shows the preferred holder');

my %session;
for my $r ('r1', 'r2')
{
	$session{$r} = $node->background_psql('postgres', on_error_stop => 0);
}

# Start $r waiting for $lease (with the acquire's $more arguments, if any);
# returns at once.
sub start_wait
{
	my ($r, $lease, $more) = @_;
	start_statement($session{$r},
		"SELECT tenure.acquire('$lease', '$r', wait => '5 min'" . ($more // '') . ");\n\\echo end");
	return;
}

# The epoch $r's waiting acquire returned.
sub finish_wait
{
	my ($r) = @_;
	my $out = $session{$r}->query_until(qr/^end\n/m, '');
	$out =~ /^(\d+)\n/m or die "unexpected output of $r: $out";
	return $1;
}

my $epoch = $node->safe_psql('postgres', "SELECT tenure.acquire('ho', 'r1')");
my $leader = 'r1';
my @chain = ("r1:$epoch");
my $rounds = 10;
my $ok = 1;
for my $round (1 .. $rounds)
{
	my $next = $leader eq 'r1' ? 'r2' : 'r1';
	my $bound = $round % 2 ? 'true' : 'false';

	start_wait($next, 'ho', ", session_bound => $bound");
	wait_until("$next waits (round $round)", sub {
		$node->safe_psql('postgres',
			"SELECT count(*) FROM tenure.waiters WHERE lease = 'ho' AND holder = '$next'") eq '1';
	});
	my $new = $node->safe_psql('postgres', "SELECT tenure.handoff('ho', '$leader', '$next')");
	# right after the handoff's COMMIT: exactly the successor leads
	my $state = $node->safe_psql('postgres',
		"SELECT tenure.leader_is('ho', '$next') || '/' || tenure.leader_is('ho', '$leader')"
		  . " || '/' || tenure.renew('ho', '$leader') || '/' || session_bound"
		  . " FROM tenure.leases WHERE lease = 'ho'");
	my $got = finish_wait($next);
	if ($state ne "true/false/false/$bound" || $got ne $new || $new <= $epoch)
	{
		$ok = 0;
		diag("round $round: state $state, handoff returned $new, acquire $got, previous $epoch");
	}
	push @chain, "$next:$new";
	($leader, $epoch) = ($next, $new);
}
ok($ok, "$rounds hand-overs: each time the successor leads at once, the predecessor neither leads nor renews");

is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(holder || ':' || epoch, ',' ORDER BY epoch) FROM tenure.history WHERE lease = 'ho'"),
	join(',', @chain), 'the history is the chain of hand-overs, at growing epochs');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE end_reason = 'handed over') || '/' || count(*) FILTER (WHERE ended IS NULL)"
		  . " FROM tenure.history WHERE lease = 'ho'"),
	"$rounds/1", 'every tenure but the last ended "handed over"');
is( $node->safe_psql(
		'postgres',
		"SELECT tenures || '/' || handed_over || '/' || last_handover_gap FROM tenure.lease_stats WHERE lease = 'ho'"),
	($rounds + 1) . "/$rounds/00:00:00", 'tenure.lease_stats: every gap was 0');

# hand over once more to a session-bound waiter, then end its session
my $next = $leader eq 'r1' ? 'r2' : 'r1';
start_wait($next, 'ho', ', session_bound => true');
wait_until("$next waits", sub {
	$node->safe_psql('postgres',
		"SELECT count(*) FROM tenure.waiters WHERE lease = 'ho' AND holder = '$next'") eq '1';
});
my $last = $node->safe_psql('postgres', "SELECT tenure.handoff('ho', '$leader', '$next')");
is(finish_wait($next), $last, 'a session-bound successor gets the lease');
$session{$next}->quit;
delete $session{$next};
wait_until('the session-bound tenure ends with its session', sub {
	$node->safe_psql('postgres',
		"SELECT coalesce(end_reason, 'open') FROM tenure.history WHERE lease = 'ho' AND epoch = $last")
	  eq 'session ended';
});
is($node->safe_psql('postgres', "SELECT holder IS NULL FROM tenure.leases WHERE lease = 'ho'"),
	't', 'and nobody holds the lease');

# A holder still waiting out an earlier holder's bound passes that wait on:
# z's session ends, so z may believe until its renewal + ttl; r1, next, is
# in that hold-off when it hands the lease to r2, which is then in it too.
$node->safe_psql('postgres', "SELECT tenure.create_lease('hw', ttl => '10 min')");
my $z = $node->background_psql('postgres');
$z->query_safe("SELECT tenure.acquire('hw', 'z', session_bound => true)");
$z->quit;
wait_until('z\'s tenure ends with its session', sub {
	$node->safe_psql('postgres', "SELECT holder IS NULL FROM tenure.leases WHERE lease = 'hw'") eq 't';
});
$node->safe_psql('postgres', "SELECT tenure.acquire('hw', 'r1')");
$session{r2} //= $node->background_psql('postgres', on_error_stop => 0);
start_wait('r2', 'hw');
wait_until('r2 waits for hw', sub {
	$node->safe_psql('postgres',
		"SELECT count(*) FROM tenure.waiters WHERE lease = 'hw' AND holder = 'r2'") eq '1';
});
$node->safe_psql('postgres', "SELECT tenure.handoff('hw', 'r1', 'r2')");
finish_wait('r2');
is( $node->safe_psql(
		'postgres',
		"SELECT holder || '/' || tenure.leader_is('hw', 'r2') || '/' || (active_from > now() + interval '5 min')"
		  . " FROM tenure.leases WHERE lease = 'hw'"),
	'r2/false/true',
	'a hold-off the holder was waiting out applies to its successor');

# In the transaction that hands the lease over, the holder can neither
# claim, release nor hand it over again: those would act on a tenure that
# is the successor's once the transaction commits.
$node->safe_psql('postgres', "SELECT tenure.create_lease('hc', ttl => '10 min', holdoff => '0')");
$node->safe_psql('postgres', "SELECT tenure.acquire('hc', 'r1')");
$session{r3} = $node->background_psql('postgres', on_error_stop => 0);
start_wait('r3', 'hc');
wait_until('r3 waits for hc', sub {
	$node->safe_psql('postgres',
		"SELECT count(*) FROM tenure.waiters WHERE lease = 'hc' AND holder = 'r3'") eq '1';
});
for my $then ("SELECT tenure.claim_epoch('hc', 'r1')",
	"SELECT tenure.release('hc', 'r1')",
	"SELECT tenure.handoff('hc', 'r1', 'r3')")
{
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"BEGIN; SELECT tenure.handoff('hc', 'r1', 'r3'); $then; COMMIT;");
	like($stderr, qr/ERROR:  cannot (claim an epoch of|release|hand over) lease "hc" in the transaction that handed it over/,
		"after a handoff in the same transaction: $then fails");
}
is((tenure_of($node, 'hc'))[0], 'r1', 'and nothing changed: r1 holds hc');

# A wait that ends with an error in a savepoint leaves the waiters, though
# the transaction goes on: a handoff to it then fails.
my ($ret, $stdout, $stderr) = $node->psql('postgres', q{
BEGIN;
SAVEPOINT s;
SET LOCAL statement_timeout = '100ms';
SELECT tenure.acquire('hc', 'r4', wait => '5 min');
ROLLBACK TO s;
SELECT 'waiters:' || count(*) FROM tenure.waiters WHERE lease = 'hc' AND holder = 'r4';
COMMIT;
}, on_error_stop => 0);
like($stderr, qr/canceling statement due to statement timeout/, 'the wait in the savepoint times out');
like($stdout, qr/^waiters:0$/m, 'and its session is no longer among the waiters');

# the successor still waiting gets the lease
$node->safe_psql('postgres', "SELECT tenure.handoff('hc', 'r1', 'r3')");
finish_wait('r3');
is((tenure_of($node, 'hc'))[0], 'r3', 'the handoff to the waiting successor then goes through');

$session{$_}->quit for keys %session;
$node->stop;
done_testing();
