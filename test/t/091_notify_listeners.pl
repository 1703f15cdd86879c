
# Notifications go only where somebody listens.  A transaction that changes
# a lease sends its NOTIFY only if a session of its database has run
# LISTEN tenure, because every notifying transaction commits under one lock
# of the whole cluster.  What must hold:
#
# - a session's first LISTEN tenure makes the next change notify, also
#   after UNLISTEN and LISTEN again;
# - a listener in another database does not make this one notify;
# - a LISTEN that comes while a commit that decided to send nothing (nobody
#   listened at its PRE_COMMIT) is still invisible waits until that commit
#   has ended, so the listener's next read shows the change it is never
#   told of.  A synchronous standby that never answers holds such a commit
#   between PRE_COMMIT and its end; the LISTEN must be seen waiting then,
#   and must finish once the commit does; a LISTEN in another database
#   must not wait for it.  (Set at start, so that the
#   checkpointer has it, with WAL senders allowed; every other session
#   commits locally.)

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::Bin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('notify_listeners', init => { allows_streaming => 1 },
	conf => "synchronous_standby_names = 'nobody'\nsynchronous_commit = local\n");
$node->safe_psql('postgres', q{SELECT tenure.create_lease('here', ttl => '10 min')});
$node->safe_psql('postgres', 'CREATE DATABASE race');
$node->safe_psql('race', 'CREATE EXTENSION pg_tenure');
$node->safe_psql('race', q{SELECT tenure.create_lease('race', ttl => '10 min')});

# Wait until a notification on channel "tenure" for $holder reaches the
# session, running cheap statements until it does.
sub wait_notification
{
	my ($session, $holder, $what) = @_;
	my $got = 0;

	for (my $i = 0; $i < 300 && !$got; $i++)
	{
		my $out = $session->query_safe($i == 0 ? 'SELECT 1' : 'SELECT pg_sleep(0.1)');
		$got = 1
		  if $out =~ /Asynchronous notification "tenure" with payload ".*"holder": "\Q$holder\E".*" received/;
	}
	ok($got, $what);
	return;
}

# 1. The first LISTEN counts; UNLISTEN and LISTEN again still hear.
my $listener = $node->background_psql('postgres');
$listener->query_safe('LISTEN tenure');
$node->safe_psql('postgres', q{SELECT tenure.acquire('here', 'a1')});
wait_notification($listener, 'a1', 'the first change after LISTEN is notified');
$listener->query_safe('UNLISTEN tenure');
$listener->query_safe('LISTEN tenure');
$node->safe_psql('postgres', q{SELECT tenure.release('here', 'a1')});
$node->safe_psql('postgres', q{SELECT tenure.acquire('here', 'a2')});
wait_notification($listener, 'a2', 'after UNLISTEN and LISTEN again');

# 2. A commit in "race" held after PRE_COMMIT; the listener above is in
# another database, so that commit sends nothing and stays quiet.
my $holder = $node->background_psql('race');
my $holder_pid = $holder->query_safe('SELECT pg_backend_pid()');
$holder->query_safe('SET synchronous_commit = on');
start_statement($holder, q{SELECT tenure.acquire('race', 'quiet');});
ok( $node->poll_query_until(
		'postgres',
		"SELECT wait_event = 'SyncRep' FROM pg_stat_activity WHERE pid = $holder_pid"),
	'the acquisition waits for the synchronous standby after PRE_COMMIT');

my $late = $node->background_psql('race');
my $late_pid = $late->query_safe('SELECT pg_backend_pid()');
start_statement($late, "LISTEN tenure;\n\\echo listened");
ok( $node->poll_query_until(
		'postgres',
		"SELECT wait_event_type = 'Extension' AND state = 'active'"
		  . " AND query LIKE 'LISTEN tenure%' FROM pg_stat_activity WHERE pid = $late_pid"),
	'a LISTEN in its database waits for the quiet commit');
is( $node->safe_psql(
		'postgres',
		"SELECT wait_event FROM pg_stat_activity WHERE pid = $holder_pid"),
	'SyncRep',
	'the commit is still held');

# a first LISTEN in another database does not wait for it
my $elsewhere = $node->background_psql('postgres');
$elsewhere->query_safe('LISTEN tenure');
pass('a LISTEN in another database does not wait for the quiet commit');
$elsewhere->quit;

# cancelling the wait for the standby lets the commit end locally
$node->safe_psql('postgres', "SELECT pg_cancel_backend($holder_pid)");
$late->query_until(qr/listened/, '');
pass('the LISTEN finishes once the quiet commit has ended');
is($late->query_safe(q{SELECT holder FROM tenure.leases WHERE lease = 'race'}),
	'quiet', "the listener's next read shows the change it was not told of");

# 3. Counted now: the next change in "race" is notified.
$node->safe_psql('race', q{SELECT tenure.release('race', 'quiet')});
$node->safe_psql('race', q{SELECT tenure.acquire('race', 'heard')});
wait_notification($late, 'heard', 'the next change in that database is notified');

$holder->quit;
$late->quit;
$listener->quit;
$node->stop;
done_testing();
