# Helpers shared by pg_tenure's TAP tests.
#
#   use FindBin;
#   use lib $FindBin::Bin;
#   use TenureTest;
#
#   my $node = tenure_node('name');          # initialized, pg_tenure
#                                            # preloaded, started, with the
#                                            # extension in database postgres
#   my $node = tenure_node('name', conf => "track_commit_timestamp = on\n",
#                          extension => 0);  # more settings; no extension
#   wait_until('what', sub { ... });         # poll every 50 ms; a failed
#                                            # test after the default timeout
#   my ($holder, $epoch) = tenure_of($node, 'lease');   # () if not held
#   my $primary = tenure_node('name', init => { allows_streaming => 1 });
#   my $standby = tenure_standby($primary, 'name');  # a streaming standby
#                                            # of $primary from its backup
#                                            # 'base' (taken by the first
#                                            # call for $primary), started
#   my $standby = tenure_standby($primary, 'name', start => 0);
#                                            # the same, not started
#   start_statement($session, $sql);         # $sql in a background_psql
#                                            # session, not waiting for
#                                            # its result
#   my $pid = keeper_pid($node);             # '' if no keeper runs
#   my $pid = wait_for_keeper($node);        # poll until exactly one keeper
#   my $pid = wait_for_keeper($node, $old);  # runs (one that is not $old);
#                                            # its pid, undef if none came
#   my $ts = keeper_started($node);          # the keeper's backend_start
#                                            # ('' if none runs), no wait
#   my $pid = promote_ready($node, 'what');  # promote, then test that it
#                                            # left recovery and that its
#                                            # keeper runs (two tests, named
#                                            # 'what: promoted' and 'what:
#                                            # keeper runs'); the keeper's
#                                            # pid, undef if a wait failed
#   promote_after_keeper_death($old, $new, $t_kill);   # the switchover of
#                                            # 203 and 204: stop $old for
#                                            # $new, note the timing and the
#                                            # lists $old wrote, then
#                                            # promote_ready($new, ...)
#   my $sql = fenced_write('t', 'w', $epoch);   # a transaction presenting
#                                            # token w=$epoch that inserts
#                                            # ($epoch) into table t
#   my $sql = fenced_write('t', 'w', $epoch, "$id, $epoch");  # other values
#   my ($rc, $stderr) = try_sql($node, 'db', $sql);   # psql, errors
#                                            # verbose (with the SQLSTATE)
#   my $h = start_client('name', @cmd);     # run @cmd in the background
#                                            # (an IPC::Run harness), its
#                                            # output in the log directory
#                                            # as NNN_name.log (NNN: the
#                                            # test's number); killed at
#                                            # exit if still running
#   my $text = client_log('name');           # that output so far
#   stop_for_switchover($primary, $standby); # stop $primary cleanly and
#                                            # wait until $standby replayed
#                                            # its shutdown checkpoint (dies
#                                            # after the default timeout)
#   my $stderr = sql_error($node, 'db', $sql);   # the same, and a test
#                                            # that it fails
#   poll_is($node, 'db', $sql, $expected, 'what');   # is(), once $sql
#                                            # returns $expected or the
#                                            # default timeout passed: for
#                                            # what another process writes
#                                            # (the history writer closes
#                                            # a row an acquire skipped)
#   waits_in_tenure($node, $pid, 'what');    # ok(), once backend $pid
#                                            # runs a statement that sleeps
#                                            # in pg_tenure (wait event
#                                            # type Extension)
#
# Polls have a deadline of PostgreSQL::Test::Utils::timeout_default and
# never sleep a fixed time for an outcome.

package TenureTest;

use strict;
use warnings;

use Exporter 'import';
use File::Basename qw(basename);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

our @EXPORT = qw(tenure_node wait_until tenure_of tenure_standby
  start_statement keeper_pid wait_for_keeper fenced_write try_sql sql_error
  stop_for_switchover keeper_started promote_ready
  promote_after_keeper_death start_client client_log poll_is
  waits_in_tenure);

sub tenure_node
{
	my ($name, %params) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init(%{ $params{init} // {} });
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'pg_tenure'\n" . ($params{conf} // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION pg_tenure')
	  if $params{extension} // 1;
	return $node;
}

sub wait_until
{
	my ($what, $cond) = @_;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;

	until ($cond->())
	{
		if (time() > $deadline)
		{
			fail("timed out waiting for $what");
			return 0;
		}
		usleep(50_000);
	}
	return 1;
}

sub poll_is
{
	my ($node, $db, $sql, $expected, $what) = @_;
	my $got;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;

	while (1)
	{
		$got = $node->safe_psql($db, $sql);
		last if $got eq $expected || time() > $deadline;
		usleep(50_000);
	}
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return is($got, $expected, $what);
}

sub waits_in_tenure
{
	my ($node, $pid, $what) = @_;

	local $Test::Builder::Level = $Test::Builder::Level + 1;
	return ok(
		$node->poll_query_until(
			'postgres',
			"SELECT wait_event_type = 'Extension' AND state = 'active'"
			  . " FROM pg_stat_activity WHERE pid = $pid"),
		$what);
}

sub tenure_of
{
	my ($node, $lease) = @_;
	my $r = $node->safe_psql('postgres',
		"SELECT holder || '|' || epoch FROM tenure.leases"
		  . " WHERE lease = '$lease' AND holder IS NOT NULL");

	return $r eq '' ? () : split(/\|/, $r);
}

sub tenure_standby
{
	my ($primary, $name, %params) = @_;

	$primary->backup('base') unless -d $primary->backup_dir . '/base';
	my $standby = PostgreSQL::Test::Cluster->new($name);
	$standby->init_from_backup($primary, 'base', has_streaming => 1);
	$standby->start if $params{start} // 1;
	return $standby;
}

sub start_statement
{
	my ($session, $sql) = @_;

	$session->query_until(qr/started/, "\\echo started\n$sql\n");
	return;
}

# the keeper's rows of pg_stat_activity
my $keeper_where = "backend_type = 'pg_tenure keeper'";

# One column of the keeper's row; '' if no keeper runs.  Does not wait.
sub keeper_value
{
	my ($node, $column) = @_;

	return $node->safe_psql('postgres',
		"SELECT $column FROM pg_stat_activity WHERE $keeper_where");
}

sub keeper_pid
{
	my ($node) = @_;

	return keeper_value($node, 'pid');
}

sub wait_for_keeper
{
	my ($node, $old) = @_;
	my $where = $keeper_where . (defined $old ? " AND pid <> $old" : '');

	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE $where")
	  or return undef;
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE $where");
}

# The keeper's backend_start: when the keeper of the server's current
# life (or of its promotion) began.  Does not wait; '' if no keeper runs.
sub keeper_started
{
	my ($node) = @_;

	return keeper_value($node, 'backend_start');
}

# Promote $node and wait, each up to the default timeout, until it has
# left recovery and then until its keeper runs; both are tests named after
# $what.  Returns the keeper's pid, undef if either wait failed.
sub promote_ready
{
	my ($node, $what) = @_;

	$node->promote;
	ok($node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
		"$what: promoted")
	  or return undef;
	my $pid = wait_for_keeper($node);
	ok(defined $pid, "$what: keeper runs");
	return $pid;
}

# The switchover after the old primary's keeper was killed at $t_kill
# (time()): stop $old cleanly for $new, note how long after the kill and
# how many lists of live tenures $old's keepers wrote (normally the
# killed keeper's last, before its restart a second later), promote $new
# with promote_ready, and note what its promotion logged.
sub promote_after_keeper_death
{
	my ($old, $new, $t_kill) = @_;
	my $t_stop = time();

	stop_for_switchover($old, $new);
	note sprintf('shut down %.2f s after the keeper died', $t_stop - $t_kill);
	my @exits = grep { /keeper exiting/ } split /\n/, slurp_file($old->logfile);
	note 'lists written: ', scalar(@exits);
	my $pid = promote_ready($new, 'new primary');
	note join("\n",
		grep { /pg_tenure: the promotion/ } split /\n/, slurp_file($new->logfile));
	return $pid;
}

sub fenced_write
{
	my ($table, $lease, $epoch, $values) = @_;

	return "BEGIN;\nSET LOCAL tenure.tokens = '$lease=$epoch';\n"
	  . "INSERT INTO $table VALUES (" . ($values // $epoch) . ");\nCOMMIT;";
}

sub try_sql
{
	my ($node, $db, $sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql(
		$db, "\\set VERBOSITY verbose\n$sql",
		stdout => \$out,
		stderr => \$err);

	return ($rc, $err);
}

sub sql_error
{
	my ($node, $db, $sql) = @_;
	my ($rc, $err) = try_sql($node, $db, $sql);

	isnt($rc, 0, 'statement fails: ' . (split /\n/, $sql)[-1]);
	return $err;
}


# A clean stop of the primary whose shutdown checkpoint the standby
# replays: promoting the standby then keeps every transaction (src/README,
# P1).
sub stop_for_switchover
{
	my ($primary, $standby) = @_;

	$primary->stop('fast');
	my ($controldata) = run_command([ 'pg_controldata', $primary->data_dir ]);
	my ($checkpoint) =
	  $controldata =~ /^Latest checkpoint location:\s+(\S+)$/m
	  or die "no checkpoint location in pg_controldata's output";
	$standby->poll_query_until('postgres',
		"SELECT pg_last_wal_replay_lsn() > '$checkpoint'::pg_lsn")
	  or die "the standby did not replay the shutdown checkpoint $checkpoint";
	return;
}

# Clients a test runs in the background (examples/ programs): each
# one's output goes to the test's log directory, named after the test's
# number, so that it is kept with the server logs after the run.
my @clients;

sub _client_logfile
{
	my ($name) = @_;
	my ($test) = basename($0) =~ /^(\d+)_/;

	return "$PostgreSQL::Test::Utils::log_path/" . ($test // 'client')
	  . "_$name.log";
}

# Start @cmd in the background, stdin closed, stdout and stderr to the
# client's log; its harness.  It gets the default timeout at most; does
# not wait for anything.
sub start_client
{
	my ($name, @cmd) = @_;
	my $h = IPC::Run::start(\@cmd, '<', \undef, '>', _client_logfile($name),
		'2>&1', IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));

	push @clients, $h;
	return $h;
}

# The output of a client started by start_client, so far.
sub client_log
{
	my ($name) = @_;

	return slurp_file(_client_logfile($name));
}

# If the test dies half-way, do not leave clients behind.
END
{
	local $?;    # keep the test's exit status

	eval { $_->kill_kill(grace => 1) } for @clients;
}

1;
