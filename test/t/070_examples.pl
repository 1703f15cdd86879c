# The example clients of examples/ against a real server with pg_tenure
# preloaded:
#
# - three singleton_job workers: one leads; when its process is killed
#   (SIGKILL) another takes over at a newer epoch; a leader whose backend is
#   terminated demotes itself and reconnects instead of exiting; job runs of
#   different leaders never overlap in time.
# - hand-off: a worker leads a lease whose preferred holder is another; when
#   the preferred worker starts and waits in acquire(), the leader hands the
#   lease over to it (tenure.handoff) and campaigns as a follower; the
#   history shows the first tenure "handed over" and the preferred one's
#   next, and job runs never overlap and lie within their tenures.
# - singleton_writer: a second writer refuses to start (exit 3, the message
#   names the holder); a writer frozen before COMMIT whose tenure ended is
#   fenced at COMMIT (exit 4) while the new writer's rows land.
#
# The binaries are built with "make -C examples" (a no-op when up to date).

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $examples = "$FindBin::Bin/../../examples";
my @make = ('make', '-s', '-C', $examples);
push @make, "PG_CONFIG=$ENV{PG_CONFIG}" if $ENV{PG_CONFIG};
system(@make) == 0 or BAIL_OUT("could not build the examples: @make");
my $job_bin = "$examples/singleton_job";
my $writer_bin = "$examples/singleton_writer";

my $timeout = $PostgreSQL::Test::Utils::timeout_default;

my $node = tenure_node('examples', conf => "track_commit_timestamp = on\n");
$node->safe_psql('postgres', q{
SELECT tenure.create_lease('nightly-job', ttl => '2 s', holdoff => '0');
CREATE TABLE job_runs (id bigserial PRIMARY KEY, holder text NOT NULL, epoch bigint NOT NULL,
                       started timestamptz NOT NULL, finished timestamptz NOT NULL);
SELECT tenure.fence_table('job_runs', 'nightly-job');
SELECT tenure.create_lease('orders-writer', ttl => '10 s', holdoff => '0');
CREATE TABLE orders (writer text NOT NULL, epoch bigint NOT NULL, seq bigint NOT NULL);
SELECT tenure.fence_table('orders', 'orders-writer');
});
my $connstr = $node->connstr('postgres');

#
# Singleton job
#
my %job;
$job{"job-$_"} = start_client("job-$_", $job_bin, '--holder', "job-$_",
	'--job-ms', '50', $connstr)
  for (1 .. 3);

ok( $node->poll_query_until('postgres',
		"SELECT count(*) >= 2 FROM job_runs j JOIN tenure.leases l
		  ON l.lease = 'nightly-job' AND l.holder = j.holder AND l.epoch = j.epoch"),
	'a worker leads and runs the job');
my ($first, $first_epoch) = tenure_of($node, 'nightly-job');
like(client_log($first), qr/ became leader epoch=$first_epoch\n/,
	"the leader $first logs that it became leader");
is(scalar(grep { client_log($_) =~ /became leader/ } keys %job),
	1, 'only one worker became leader');

# Kill the leader's process: its backend exits, its session-bound tenure
# ends and a follower waiting in acquire() takes over.
$job{$first}->signal('KILL');
$job{$first}->finish;
is($job{$first}->full_result & 127, 9, "$first was killed with SIGKILL");
delete $job{$first};

ok( $node->poll_query_until('postgres',
		"SELECT holder <> '$first' AND epoch > $first_epoch FROM tenure.leases
		  WHERE lease = 'nightly-job' AND holder IS NOT NULL"),
	'another worker takes the lease at a newer epoch');
my ($second, $second_epoch) = tenure_of($node, 'nightly-job');
ok( wait_until(
		"$second to lead",
		sub { client_log($second) =~ / became leader epoch=$second_epoch\n/ }),
	"$second logs that it became leader at the new epoch");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) >= 1 FROM job_runs WHERE holder = '$second' AND epoch = $second_epoch"),
	"$second runs the job");
is( $node->safe_psql('postgres',
		"SELECT end_reason FROM tenure.history WHERE lease = 'nightly-job' AND epoch = $first_epoch"),
	'session ended',
	"the killed leader's tenure ended with its session");

# Terminate the new leader's backend: the worker demotes itself and
# reconnects; it does not exit.
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(holder_pid) FROM tenure.leases WHERE lease = 'nightly-job'");
ok( wait_until(
		"$second to demote itself",
		sub {
			client_log($second) =~
			  / lost leadership epoch=$second_epoch \(connection lost: .*\n(?s:.*) reconnected\n/;
		}),
	"$second logs the lost leadership and reconnects");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) >= 1 FROM job_runs WHERE epoch > $second_epoch"),
	'a worker leads at a newer epoch after that');

# SIGTERM: every remaining worker exits with status 0, releasing the lease.
$_->signal('TERM') for values %job;
for my $name (sort keys %job)
{
	ok($job{$name}->finish, "$name exits with status 0 on SIGTERM");
}
like(client_log($second), qr/ stopping/, "$second was still running until SIGTERM");
is($node->safe_psql('postgres',
		"SELECT count(*) FROM tenure.leases WHERE lease = 'nightly-job' AND holder IS NOT NULL"),
	'0', 'no worker holds the lease after they stopped');

is( $node->safe_psql('postgres',
		'SELECT count(*) FROM job_runs a JOIN job_runs b ON a.id < b.id
		   AND tstzrange(a.started, a.finished) && tstzrange(b.started, b.finished)'),
	'0',
	'no two job runs overlap in time');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM job_runs j
		  WHERE NOT EXISTS (SELECT FROM tenure.history h
		                     WHERE h.lease = 'nightly-job' AND h.epoch = j.epoch AND h.holder = j.holder
		                       AND j.started >= h.started
		                       AND (h.ended IS NULL OR j.finished <= h.ended))"),
	'0',
	'every job run lies within a tenure of its holder at its epoch');
cmp_ok(
	$node->safe_psql('postgres', 'SELECT count(DISTINCT epoch) FROM job_runs'),
	'>=', 3, 'job runs were made at three epochs or more');

#
# Hand-off to the preferred holder
#
$node->safe_psql('postgres', q{
SELECT tenure.create_lease('handoff-job', ttl => '2 s', holdoff => '0', preferred => 'job-pref');
CREATE TABLE handoff_runs (id bigserial PRIMARY KEY, holder text NOT NULL, epoch bigint NOT NULL,
                           started timestamptz NOT NULL, finished timestamptz NOT NULL);
SELECT tenure.fence_table('handoff_runs', 'handoff-job');
});
my %ho;
my @ho_args = ('--lease', 'handoff-job', '--job-ms', '50', '--job-table', 'handoff_runs');
$ho{'job-other'} = start_client('job-other', $job_bin, @ho_args, '--holder', 'job-other', $connstr);
ok( $node->poll_query_until('postgres',
		"SELECT count(*) >= 2 FROM handoff_runs j JOIN tenure.leases l
		  ON l.lease = 'handoff-job' AND l.holder = j.holder AND l.epoch = j.epoch"),
	'job-other, not the preferred holder, leads and runs the job');
my ($other, $other_epoch) = tenure_of($node, 'handoff-job');
is($other, 'job-other', 'job-other holds handoff-job');

# the preferred worker campaigns, waiting in acquire(): the leader hands over
$ho{'job-pref'} = start_client('job-pref', $job_bin, @ho_args, '--holder', 'job-pref', $connstr);
ok( $node->poll_query_until('postgres',
		"SELECT holder = 'job-pref' AND epoch > $other_epoch FROM tenure.leases
		  WHERE lease = 'handoff-job' AND holder IS NOT NULL"),
	'the preferred job-pref takes the lease at a newer epoch');
my (undef, $pref_epoch) = tenure_of($node, 'handoff-job');
ok( wait_until(
		'job-other to hand over',
		sub { client_log('job-other') =~ / handed over to job-pref epoch=$pref_epoch\n/ }),
	'job-other logs that it handed the lease over to job-pref at its epoch');
ok( wait_until(
		'job-pref to lead',
		sub { client_log('job-pref') =~ / became leader epoch=$pref_epoch\n/ }),
	'job-pref logs that it became leader at that epoch');
ok( $node->poll_query_until('postgres',
		"SELECT count(*) >= 1 FROM handoff_runs WHERE holder = 'job-pref' AND epoch = $pref_epoch"),
	'job-pref runs the job');
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM tenure.waiters WHERE lease = 'handoff-job' AND holder = 'job-other'"),
	'job-other campaigns again as a follower, waiting in acquire()');
is( $node->safe_psql('postgres',
		"SELECT string_agg(format('%s:%s:%s', epoch, holder, end_reason), ',' ORDER BY epoch)
		   FROM tenure.history WHERE lease = 'handoff-job'"),
	"$other_epoch:job-other:handed over,$pref_epoch:job-pref:",
	"the history shows job-other's tenure handed over and job-pref's next");
is( $node->safe_psql('postgres',
		"SELECT handed_over FROM tenure.lease_stats WHERE lease = 'handoff-job'"),
	'1', 'lease_stats counts one hand-off');

# stop the follower first, so that the leader's release hands nothing on
$ho{'job-other'}->signal('TERM');
ok($ho{'job-other'}->finish, 'job-other exits with status 0 on SIGTERM');
$ho{'job-pref'}->signal('TERM');
ok($ho{'job-pref'}->finish, 'job-pref exits with status 0 on SIGTERM');
like(client_log('job-pref'), qr/ stopping; released epoch=$pref_epoch\n\z/,
	'job-pref led until it released the lease');
is(scalar(() = client_log('job-other') =~ / became leader /g), 1,
	'job-other became leader once, before the hand-off');
unlike(client_log('job-pref'), qr/ lost leadership | handed over /,
	'job-pref never lost the lease');

is( $node->safe_psql('postgres',
		"SELECT string_agg(format('%s:%s:%s', epoch, holder, end_reason), ',' ORDER BY epoch)
		   FROM tenure.history WHERE lease = 'handoff-job'"),
	"$other_epoch:job-other:handed over,$pref_epoch:job-pref:released",
	'two tenures: job-other handed over, job-pref released');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM tenure.history a JOIN tenure.history b
		    ON a.lease = b.lease AND a.epoch < b.epoch
		 WHERE a.lease = 'handoff-job' AND (a.ended IS NULL OR b.started < a.ended)"),
	'0', 'no tenure started before the one before it ended: never two leaders');
is( $node->safe_psql('postgres',
		'SELECT count(*) FROM handoff_runs a JOIN handoff_runs b ON a.id < b.id
		   AND tstzrange(a.started, a.finished) && tstzrange(b.started, b.finished)'),
	'0',
	'no two job runs overlap in time');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM handoff_runs j
		  WHERE NOT EXISTS (SELECT FROM tenure.history h
		                     WHERE h.lease = 'handoff-job' AND h.epoch = j.epoch AND h.holder = j.holder
		                       AND j.started >= h.started
		                       AND (h.ended IS NULL OR j.finished <= h.ended))"),
	'0',
	'every job run lies within a tenure of its holder at its epoch');
is( $node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT holder || ':' || epoch, ',') FROM handoff_runs"),
	"job-other:$other_epoch,job-pref:$pref_epoch",
	'job-other ran the job at its epoch only, job-pref at the new one');

#
# Singleton writer
#
my $writer_a = start_client('writer-a', $writer_bin, '--holder', 'writer-a',
	'--interval-ms', '20', '--pause-at-row', '3',
	'--pause-before-commit-ms', $timeout * 1000, $connstr);
ok( wait_until(
		'writer-a to pause before a COMMIT',
		sub { client_log('writer-a') =~ /paused before COMMIT of row seq=3/ }),
	'writer-a writes two rows and pauses before the COMMIT of the third');
my ($a_holder, $a_epoch) = tenure_of($node, 'orders-writer');
is($a_holder, 'writer-a', 'writer-a holds orders-writer');
like(client_log('writer-a'), qr/ started epoch=$a_epoch pool=3\n/,
	'writer-a logs its epoch');

my ($out, $err);
IPC::Run::run([ $writer_bin, '--holder', 'writer-b', $connstr ],
	'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout($timeout));
is($? >> 8, 3, 'a second writer refuses to start with status 3');
like(
	$out,
	qr/writer-b refusing to start: lease "orders-writer" is held by "writer-a" \(Holder "writer-a" has held it at epoch $a_epoch since \d{4}-\d\d-\d\d /,
	'its message names the holder, its epoch and since when');
is(join('|', tenure_of($node, 'orders-writer')), "writer-a|$a_epoch",
	'writer-a still holds the lease');

# writer-a's tenure ends with its control connection
is( $node->safe_psql('postgres',
		"SELECT pg_terminate_backend(holder_pid) FROM tenure.leases WHERE lease = 'orders-writer'"),
	't', "writer-a's control backend is terminated");
ok( $node->poll_query_until('postgres',
		"SELECT holder IS NULL FROM tenure.leases WHERE lease = 'orders-writer'"),
	"writer-a's tenure ends");

my $writer_b = start_client('writer-b', $writer_bin, '--holder', 'writer-b',
	'--interval-ms', '20', $connstr);
ok( wait_until(
		'writer-b to write',
		sub { client_log('writer-b') =~ /wrote row/ }),
	'writer-b starts and writes');
my ($b_holder, $b_epoch) = tenure_of($node, 'orders-writer');
is($b_holder, 'writer-b', 'writer-b holds orders-writer');
cmp_ok($b_epoch, '>', $a_epoch, "writer-b's epoch is newer");

# writer-a wakes up and commits: fenced
$writer_a->signal('USR1');
$writer_a->finish;
is($writer_a->result, 4, 'writer-a exits with status 4');
like(
	client_log('writer-a'),
	qr/writer-a fenced at commit: commit of a write to table "orders" fenced by lease "orders-writer" rejected: epoch $a_epoch is not current \(The transaction presented epoch $a_epoch; the current epoch is $b_epoch\.\)\n\z/,
	'writer-a logs that it was fenced at COMMIT, and nothing after');
unlike(client_log('writer-a'), qr/wrote row seq=3/,
	'writer-a does not report the fenced row');

my $rows_then = () = client_log('writer-b') =~ /wrote row/g;
ok( wait_until(
		'writer-b to keep writing',
		sub { (() = client_log('writer-b') =~ /wrote row/g) >= $rows_then + 2 }),
	'writer-b keeps writing');
$writer_b->signal('TERM');
ok($writer_b->finish, 'writer-b exits with status 0 on SIGTERM');
like(client_log('writer-b'), qr/ stopping; released epoch=$b_epoch\n\z/,
	'writer-b releases the lease');

my $b_rows = () = client_log('writer-b') =~ /wrote row/g;
is( $node->safe_psql('postgres',
		"SELECT string_agg(writer || ':' || seq, ',' ORDER BY seq) FROM orders WHERE epoch = $a_epoch"),
	'writer-a:1,writer-a:2',
	"writer-a's committed rows are the two it reported");
is( $node->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE epoch = $b_epoch) || '/' || count(*) FROM orders WHERE writer = 'writer-b'"),
	"$b_rows/$b_rows",
	"writer-b's rows landed, all at its epoch");
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM orders o JOIN tenure.history h
		    ON h.lease = 'orders-writer' AND h.epoch > o.epoch
		 WHERE pg_xact_commit_timestamp(o.xmin) >= h.started"),
	'0',
	'no row of an older epoch committed after a newer epoch was issued');
is( $node->safe_psql('postgres',
		"SELECT end_reason FROM tenure.history WHERE lease = 'orders-writer' AND epoch = $a_epoch"),
	'session ended',
	"writer-a's tenure ended with its session");

$node->stop;
done_testing();
