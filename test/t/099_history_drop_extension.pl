
# DROP EXTENSION pg_tenure while the history writer (a background worker
# nobody started by hand) writes ends of tenures in the same database.
# DROP locks the extension first and then its tables in its own order; the
# writer must not hold one of those tables while it waits for another, or
# the two deadlock and the user's DROP fails.  Another session holds both
# tables so that the writer and the DROP queue behind it in the order that
# deadlocked: the writer first, the DROP next.

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
});

# a session-bound tenure
my $holder = $node->background_psql('app');
my $epoch = $holder->query_safe(
	"SELECT tenure.acquire('w', 'h', session_bound => true)");
like($epoch, qr/^\d+$/, 'a session-bound tenure is held');

# a session that holds every table the writer and DROP EXTENSION need
my $blocker = $node->background_psql('app');
$blocker->query_safe(
	'BEGIN; LOCK TABLE tenure.lease, tenure.history IN ACCESS EXCLUSIVE MODE');

# the holder's backend exits: the keeper starts a run of the history writer
# for database app, which waits behind the blocker
$holder->quit;

my $writer_waits = q{SELECT count(*) FROM pg_stat_activity
	WHERE backend_type = 'pg_tenure history' AND datname = 'app'
	  AND wait_event_type = 'Lock'};
ok($node->poll_query_until('postgres', $writer_waits, '1'),
	'the history writer waits for a lock the blocker holds');

my $offset = -s $node->logfile;
my $dropper = $node->background_psql('app', on_error_stop => 0);
my $dropper_pid = $dropper->query_safe('SELECT pg_backend_pid()');
start_statement($dropper, 'DROP EXTENSION pg_tenure;');
ok( $node->poll_query_until(
		'postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $dropper_pid"
	),
	'DROP EXTENSION waits too');

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
