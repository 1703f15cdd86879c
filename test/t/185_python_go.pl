# The Python (psycopg 3) and Go (pgx v4) example clients against a real
# server, directly and through PgBouncer in transaction mode, for each
# language:
#
# - three singleton_job workers: one leads; SIGKILL it and another takes
#   over at a newer epoch; job runs (a fenced table) never overlap in time
#   and each lies within a tenure of its holder at its epoch;
# - hand-off: a worker leads a lease whose preferred holder is another;
#   when the preferred worker starts and waits in acquire, the leader hands
#   the lease over (tenure.handoff) and campaigns as a follower; the history
#   shows the first tenure "handed over" and the preferred one's next, job
#   runs never overlap and lie within their tenures;
# - singleton_writer: a second writer refuses to start (exit 3, the
#   server's TN001 message); after a takeover the frozen first writer is
#   fenced (TN002, exit 4), and only the rows it reported landed.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureBouncer;
use TenureTest;

my $examples = "$FindBin::Bin/../../examples";
system('make', '-s', '-C', "$examples/go") == 0
  or BAIL_OUT('could not build the Go examples (make -C examples/go)');
my $python = $ENV{PYTHON} // '/usr/bin/python3';
system($python, '-c', 'import psycopg, psycopg_pool') == 0
  or BAIL_OUT("$python cannot import psycopg and psycopg_pool; test/run.sh installs them");
my %programs = (
	python => {
		job => [ $python, "$examples/python/singleton_job.py" ],
		writer => [ $python, "$examples/python/singleton_writer.py" ]
	},
	go => {
		job => ["$examples/go/singleton_job/singleton_job"],
		writer => ["$examples/go/singleton_writer/singleton_writer"]
	});

my $timeout = $PostgreSQL::Test::Utils::timeout_default;

my $node = tenure_node('python_go');
my $bouncer = TenureBouncer->new($node, '185', pool_size => 4);

for my $lang (qw(python go))
{
	for my $path (qw(direct pgbouncer))
	{
		my $tag = "${lang}_$path";
		my $connstr = $path eq 'direct' ? $node->connstr('postgres') : $bouncer->connstr('tx');
		my @sb = $path eq 'direct' ? () : ('--session-bound=false');

		#
		# singleton_job
		#
		$node->safe_psql('postgres', qq{
SELECT tenure.create_lease('job_$tag', ttl => '2 s');
CREATE TABLE public.job_$tag (id bigserial PRIMARY KEY, holder text NOT NULL, epoch bigint NOT NULL,
                              started timestamptz NOT NULL, finished timestamptz NOT NULL);
SELECT tenure.fence_table('public.job_$tag', 'job_$tag');
});
		my %job;
		$job{"${tag}_job$_"} = start_client("${tag}_job$_", @{ $programs{$lang}{job} },
			'--lease', "job_$tag", '--holder', "${tag}_job$_", '--job-ms', '50',
			'--job-table', "job_$tag", @sb, $connstr)
		  for 1 .. 3;

		ok( $node->poll_query_until('postgres',
				"SELECT count(*) >= 2 FROM public.job_$tag j JOIN tenure.leases l
				  ON l.lease = 'job_$tag' AND l.holder = j.holder AND l.epoch = j.epoch"),
			"$tag: a worker leads and runs the job");
		my ($first, $first_epoch) = tenure_of($node, "job_$tag");
		like(client_log($first), qr/ became leader epoch=$first_epoch\n/,
			"$tag: the leader $first logs that it became leader");
		is(scalar(grep { client_log($_) =~ /became leader/ } keys %job),
			1, "$tag: only one worker became leader");

		$job{$first}->signal('KILL');
		$job{$first}->finish;
		delete $job{$first};
		ok( $node->poll_query_until('postgres',
				"SELECT holder <> '$first' AND epoch > $first_epoch FROM tenure.leases
				  WHERE lease = 'job_$tag' AND holder IS NOT NULL"),
			"$tag: after SIGKILL of the leader another worker takes the lease");
		my ($second, $second_epoch) = tenure_of($node, "job_$tag");
		ok( wait_until(
				"$second to lead",
				sub { client_log($second) =~ / became leader epoch=$second_epoch\n/ }),
			"$tag: $second logs that it became leader at the new epoch");
		ok( $node->poll_query_until('postgres',
				"SELECT count(*) >= 1 FROM public.job_$tag WHERE holder = '$second' AND epoch = $second_epoch"),
			"$tag: $second runs the job");
		is( $node->safe_psql('postgres',
				"SELECT end_reason FROM tenure.history WHERE lease = 'job_$tag' AND epoch = $first_epoch"),
			$path eq 'direct' ? 'session ended' : 'expired',
			"$tag: the killed leader's tenure ended "
			  . ($path eq 'direct' ? 'with its session' : 'by its ttl (not session-bound behind the pooler)'));

		$_->signal('TERM') for values %job;
		ok($job{$_}->finish, "$tag: $_ exits with status 0 on SIGTERM") for sort keys %job;
		is( $node->safe_psql('postgres',
				"SELECT count(*) FROM tenure.leases WHERE lease = 'job_$tag' AND holder IS NOT NULL"),
			'0', "$tag: no worker holds the lease after they stopped");
		is( $node->safe_psql('postgres',
				"SELECT count(*) FROM public.job_$tag a JOIN public.job_$tag b ON a.id < b.id
				   AND tstzrange(a.started, a.finished) && tstzrange(b.started, b.finished)"),
			'0', "$tag: no two job runs overlap in time");
		is( $node->safe_psql('postgres',
				"SELECT count(*) FROM public.job_$tag j
				  WHERE NOT EXISTS (SELECT FROM tenure.history h
				                     WHERE h.lease = 'job_$tag' AND h.epoch = j.epoch AND h.holder = j.holder
				                       AND j.started >= h.started
				                       AND (h.ended IS NULL OR j.finished <= h.ended))"),
			'0', "$tag: every job run lies within a tenure of its holder at its epoch");

		#
		# singleton_job: hand-off to the preferred holder
		#
		my ($other, $pref) = ("${tag}_other", "${tag}_pref");
		$node->safe_psql('postgres', qq{
SELECT tenure.create_lease('ho_$tag', ttl => '2 s', preferred => '$pref');
CREATE TABLE public.ho_$tag (id bigserial PRIMARY KEY, holder text NOT NULL, epoch bigint NOT NULL,
                             started timestamptz NOT NULL, finished timestamptz NOT NULL);
SELECT tenure.fence_table('public.ho_$tag', 'ho_$tag');
});
		my @hargs = (@{ $programs{$lang}{job} }, '--lease', "ho_$tag", '--job-ms', '50',
			'--job-table', "ho_$tag", @sb);
		my %ho;
		$ho{$other} = start_client($other, @hargs, '--holder', $other, $connstr);
		ok( $node->poll_query_until('postgres',
				"SELECT count(*) >= 2 FROM public.ho_$tag j JOIN tenure.leases l
				  ON l.lease = 'ho_$tag' AND l.holder = j.holder AND l.epoch = j.epoch"),
			"$tag: $other, not the preferred holder, leads and runs the job");
		my ($ho_holder, $other_epoch) = tenure_of($node, "ho_$tag");
		is($ho_holder, $other, "$tag: $other holds ho_$tag");

		$ho{$pref} = start_client($pref, @hargs, '--holder', $pref, $connstr);
		ok( $node->poll_query_until('postgres',
				"SELECT holder = '$pref' AND epoch > $other_epoch FROM tenure.leases
				  WHERE lease = 'ho_$tag' AND holder IS NOT NULL"),
			"$tag: the preferred $pref takes the lease at a newer epoch");
		my (undef, $pref_epoch) = tenure_of($node, "ho_$tag");
		ok( wait_until(
				"$other to hand over",
				sub { client_log($other) =~ / handed over to $pref epoch=$pref_epoch\n/ }),
			"$tag: $other logs that it handed the lease over to $pref at its epoch");
		ok( wait_until(
				"$pref to lead",
				sub { client_log($pref) =~ / became leader epoch=$pref_epoch\n/ }),
			"$tag: $pref logs that it became leader at that epoch");
		ok( $node->poll_query_until('postgres',
				"SELECT count(*) >= 1 FROM public.ho_$tag WHERE holder = '$pref' AND epoch = $pref_epoch"),
			"$tag: $pref runs the job");
		ok( $node->poll_query_until('postgres',
				"SELECT count(*) = 1 FROM tenure.waiters WHERE lease = 'ho_$tag' AND holder = '$other'"),
			"$tag: $other campaigns again as a follower, waiting in acquire");

		# stop the follower first, so that the leader's release hands nothing on
		$ho{$other}->signal('TERM');
		ok($ho{$other}->finish, "$tag: $other exits with status 0 on SIGTERM");
		$ho{$pref}->signal('TERM');
		ok($ho{$pref}->finish, "$tag: $pref exits with status 0 on SIGTERM");
		like(client_log($pref), qr/ stopping; released epoch=$pref_epoch\n/,
			"$tag: $pref led until it released the lease");
		is(scalar(() = client_log($other) =~ / became leader /g), 1,
			"$tag: $other became leader once, before the hand-off");
		unlike(client_log($pref), qr/ lost leadership | handed over /,
			"$tag: $pref never lost the lease");
		is( $node->safe_psql('postgres',
				"SELECT string_agg(format('%s:%s:%s', epoch, holder, end_reason), ',' ORDER BY epoch)
				   FROM tenure.history WHERE lease = 'ho_$tag'"),
			"$other_epoch:$other:handed over,$pref_epoch:$pref:released",
			"$tag: two tenures: $other handed over, $pref released");
		is( $node->safe_psql('postgres',
				"SELECT count(*) FROM tenure.history a JOIN tenure.history b
				    ON a.lease = b.lease AND a.epoch < b.epoch
				 WHERE a.lease = 'ho_$tag' AND (a.ended IS NULL OR b.started < a.ended)"),
			'0', "$tag: no tenure started before the one before it ended: never two leaders");
		is( $node->safe_psql('postgres',
				"SELECT count(*) FROM public.ho_$tag a JOIN public.ho_$tag b ON a.id < b.id
				   AND tstzrange(a.started, a.finished) && tstzrange(b.started, b.finished)"),
			'0', "$tag: no two job runs overlap in time");
		is( $node->safe_psql('postgres',
				"SELECT count(*) FROM public.ho_$tag j
				  WHERE NOT EXISTS (SELECT FROM tenure.history h
				                     WHERE h.lease = 'ho_$tag' AND h.epoch = j.epoch AND h.holder = j.holder
				                       AND j.started >= h.started
				                       AND (h.ended IS NULL OR j.finished <= h.ended))"),
			'0', "$tag: every job run lies within a tenure of its holder at its epoch");
		is( $node->safe_psql('postgres',
				"SELECT string_agg(DISTINCT holder || ':' || epoch, ',') FROM public.ho_$tag"),
			"$other:$other_epoch,$pref:$pref_epoch",
			"$tag: $other ran the job at its epoch only, $pref at the new one");

		#
		# singleton_writer
		#
		$node->safe_psql('postgres', qq{
SELECT tenure.create_lease('w_$tag', ttl => '5 min', holdoff => '0');
CREATE TABLE public.w_$tag (writer text NOT NULL, epoch bigint NOT NULL, seq bigint NOT NULL);
SELECT tenure.fence_table('public.w_$tag', 'w_$tag');
});
		my @wargs = ('--lease', "w_$tag", '--table', "w_$tag", '--interval-ms', '20');
		my $a = start_client("${tag}_writer_a", @{ $programs{$lang}{writer} },
			@wargs, '--holder', "${tag}_a", $connstr);
		ok( wait_until(
				'writer a to write',
				sub { (() = client_log("${tag}_writer_a") =~ /wrote row/g) >= 2 }),
			"$tag: writer a starts and writes");
		my (undef, $a_epoch) = tenure_of($node, "w_$tag");

		my ($out, $err);
		IPC::Run::run([ @{ $programs{$lang}{writer} }, @wargs, '--holder', "${tag}_b", $connstr ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout($timeout));
		is($? >> 8, 3, "$tag: a second writer refuses to start with status 3");
		like($out,
			qr/${tag}_b refusing to start: lease "w_$tag" is held by "${tag}_a" \(Holder "${tag}_a" has held it at epoch $a_epoch since \d{4}-/,
			"$tag: it prints the server's message naming the holder, its epoch and since when");

		# freeze writer a, end its tenure, let b take over
		$a->signal('STOP');
		if ($path eq 'direct')
		{
			$node->safe_psql('postgres',
				"SELECT pg_terminate_backend(holder_pid) FROM tenure.leases WHERE lease = 'w_$tag'");
		}
		else
		{
			# behind the pooler the holder's session is a server connection
			# that other clients may be using: release in its name instead
			$node->safe_psql('postgres', "SELECT tenure.release('w_$tag', '${tag}_a')");
		}
		ok( $node->poll_query_until('postgres',
				"SELECT holder IS NULL FROM tenure.leases WHERE lease = 'w_$tag'"),
			"$tag: writer a's tenure ends");
		my $b = start_client("${tag}_writer_b", @{ $programs{$lang}{writer} },
			@wargs, '--holder', "${tag}_b", $connstr);
		ok(wait_until('writer b to write', sub { client_log("${tag}_writer_b") =~ /wrote row/ }),
			"$tag: writer b takes over and writes");
		my (undef, $b_epoch) = tenure_of($node, "w_$tag");

		$a->signal('CONT');
		$a->finish;
		is($a->result, 4, "$tag: the stale writer a exits with status 4");
		like(client_log("${tag}_writer_a"),
			qr/${tag}_a fenced: .*rejected: epoch $a_epoch is not current \(The transaction presented epoch $a_epoch; the current epoch is $b_epoch\.\)\n/,
			"$tag: writer a was fenced with TN002, naming both epochs");
		$b->signal('TERM');
		ok($b->finish, "$tag: writer b exits with status 0 on SIGTERM");
		like(client_log("${tag}_writer_b"), qr/stopping; released epoch=$b_epoch\n/,
			"$tag: writer b releases the lease");
		my $a_rows = () = client_log("${tag}_writer_a") =~ /wrote row/g;
		is( $node->safe_psql('postgres',
				"SELECT count(*) FROM public.w_$tag WHERE writer = '${tag}_a'"),
			$a_rows, "$tag: writer a's committed rows are the $a_rows it reported");
	}
}

$bouncer->stop;
$node->stop;
done_testing();
