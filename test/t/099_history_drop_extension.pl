
# The history writer (a background worker nobody starts by hand) beside
# locks other sessions hold on the extension and its tables.
#
# - DROP EXTENSION locks the extension first and then its tables in an
#   order of its own.  A run that held one of the tables while it waited
#   for the other deadlocked with it, and the deadlock detector cancelled
#   the user's DROP.  A run takes both tables without waiting, or skips.
#   Another session holds both so that the writer and the DROP come to
#   them in the order that deadlocked: the writer first, the DROP next.
# - A role with no rights on the extension can hold a lock on it
#   (pg_get_object_address()) and queue a DROP EXTENSION behind that lock;
#   the writer takes no lock on the extension, so its runs go on.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('drop_beside_writer', extension => 0,
	conf => "deadlock_timeout = 100ms\n");
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql(
	'app', q{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
	CREATE ROLE mallory LOGIN;
});

# A session-bound tenure of lease w, whose backend exits: its end is
# written by a run of the history writer.  Returns the tenure's epoch.
sub session_ends
{
	my $holder = $node->background_psql('app');
	my $epoch = $holder->query_safe(
		"SELECT tenure.acquire('w', 'h', session_bound => true)");
	$holder->quit;
	return $epoch;
}

# --- another role's lock on the extension, and its DROP queued behind it
my $m1 = $node->background_psql('app', extra_params => [ '-U', 'mallory' ]);
$m1->query_safe(
	"BEGIN; SELECT pg_get_object_address('extension', '{pg_tenure}', '{}')");
my $m2 = $node->background_psql(
	'app',
	on_error_stop => 0,
	extra_params => [ '-U', 'mallory' ]);
my $m2_pid = $m2->query_safe('SELECT pg_backend_pid()');
start_statement($m2, 'DROP EXTENSION pg_tenure;');
ok( $node->poll_query_until(
		'postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $m2_pid"
	),
	"mallory's DROP EXTENSION waits behind mallory's lock on the extension");
my $e0 = session_ends();
ok( $node->poll_query_until(
		'app',
		"SELECT end_reason FROM tenure.history WHERE lease = 'w' AND epoch = $e0",
		'session ended'),
	'the history writer still writes the end of a tenure');
$m1->query_safe('ROLLBACK');
$m1->quit;
$m2->quit;

# --- DROP EXTENSION beside a run of the writer
my $holder = $node->background_psql('app');
my $epoch = $holder->query_safe(
	"SELECT tenure.acquire('w', 'h', session_bound => true)");
like($epoch, qr/^\d+$/, 'a session-bound tenure is held');

# a session that holds every table the writer and DROP EXTENSION need
my $blocker = $node->background_psql('app');
$blocker->query_safe(
	'BEGIN; LOCK TABLE tenure.lease, tenure.history IN ACCESS EXCLUSIVE MODE');

# the holder's backend exits: the keeper starts a run of the history writer
# for database app, which finds the tables locked and skips
my $offset = -s $node->logfile;
$holder->quit;
ok( wait_until(
		'the history writer to skip database app',
		sub {
			slurp_file($node->logfile, $offset) =~
			  /history writer skipped database "app": tenure.lease or tenure.history is locked/;
		}),
	'the history writer skips the database rather than wait for its tables');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_tenure history'",
		'0'),
	'and exits');

my $dropper = $node->background_psql('app', on_error_stop => 0);
my $dropper_pid = $dropper->query_safe('SELECT pg_backend_pid()');
start_statement($dropper, 'DROP EXTENSION pg_tenure;');
ok( $node->poll_query_until(
		'postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $dropper_pid"
	),
	'DROP EXTENSION waits for the blocker');

$blocker->query_safe('COMMIT');
$blocker->quit;

# DROP EXTENSION finishes: the extension is gone
ok( $node->poll_query_until(
		'app',
		"SELECT count(*) FROM pg_extension WHERE extname = 'pg_tenure'", '0'),
	'DROP EXTENSION committed');
$dropper->quit;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_tenure history'",
		'0'),
	'the history writer is done');

my $log = slurp_file($node->logfile, $offset);
unlike($log, qr/deadlock detected/, 'no deadlock');
unlike($log, qr/ERROR/, 'no error from DROP EXTENSION or the history writer');

# the extension created again starts above the epoch the writer closed
$node->safe_psql(
	'app', q{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
});
my $next = $node->safe_psql('app', "SELECT tenure.acquire('w', 'h2')");
cmp_ok($next, '>', $epoch, 'a tenure after the extension is created again has a higher epoch');

$node->stop;
done_testing();
