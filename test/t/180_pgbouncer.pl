# pg_tenure behind a real PgBouncer (Debian's pgbouncer) in transaction
# mode, with fewer server connections (2) than clients, so that clients
# share server connections:
#
# 1. a campaign loop of five clients, each calling acquire() in autocommit
#    and believing it leads by the client rule; the leader is killed, a
#    later leader is frozen (SIGSTOP) past its ttl and resumed: the
#    intervals in which the clients believed they led never overlap;
# 2. fenced writes presenting tokens with SET LOCAL, set_config(..., true)
#    and present(..., true) while the holder claims a new epoch: the
#    current epoch commits, the old one fails with TN002, also at COMMIT of
#    transactions open during the claim; a value left on a server
#    connection by a plain SET never lets another client's (or the same
#    client's next) tokenless write commit;
# 3. statement mode fails closed: transaction blocks are refused by the
#    pooler, and a lone tokenless write fails with TN002;
# 4. session_bound behind a transaction pooler: the session is the pooler's
#    server connection, so the tenure outlives the client that acquired it
#    and ends when PgBouncer closes that connection (RECONNECT, KILL), or by
#    its ttl.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);
use TenureBouncer;
use TenureTest;

my $timeout = $PostgreSQL::Test::Utils::timeout_default;
my $logdir = $PostgreSQL::Test::Utils::log_path;

my $node = tenure_node('pgbouncer');
$node->safe_psql('postgres', q{
SELECT tenure.create_lease('campaign', ttl => '1 s');
SELECT tenure.create_lease('w', ttl => '5 min', holdoff => '0');
CREATE TABLE public.w_rows (client text NOT NULL, how text NOT NULL, epoch bigint);
SELECT tenure.fence_table('public.w_rows', 'w');
SELECT tenure.create_lease('sb', ttl => '5 min', holdoff => '0');
SELECT tenure.create_lease('sb-short', ttl => '2 s', holdoff => '0');
});

my $bouncer = TenureBouncer->new(
	$node, '180',
	pool_size => 2,
	databases => {
		tx => 'pool_mode=transaction',
		st => 'pool_mode=statement',
	});

sub mono { return clock_gettime(CLOCK_MONOTONIC); }

#
# 1. The campaign loop
#
my $ttl = 1.0;    # the lease's ttl, in seconds
my %client_pid;    # client name => pid (also its process group)

# A client: a process that loops acquire() through the pooler every ttl/3
# and logs each answer with its send and receive time on CLOCK_MONOTONIC,
# one clock for all processes of the machine.  SIGTERM ends the loop.
sub start_campaign_client
{
	my ($name) = @_;
	my $file = "$logdir/180_$name.answers";
	my $pid = fork();

	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		my $stop = 0;

		setpgrp(0, 0);    # its psql too, so that SIGKILL and SIGSTOP reach both
		eval {
			my $tb = Test::More->builder;
			open(my $null, '>', '/dev/null') or die;
			$tb->output($null);
			$tb->failure_output($null);
			$tb->todo_output($null);
			local $SIG{TERM} = sub { $stop = 1 };
			open(my $fh, '>', $file) or die "$file: $!";
			$fh->autoflush(1);
			my $s = $bouncer->background_psql('tx');
			my $until = mono() + $timeout;
			while (!$stop && mono() < $until)
			{
				my $sent = mono();
				my ($r) = $s->query("SELECT tenure.acquire('campaign', '$name')");
				my $recv = mono();
				printf $fh "%s %.6f %.6f\n",
				  ($r =~ /^\d+$/ ? 'ok' : 'no'), $sent, $recv;
				Time::HiRes::sleep(0.01) while !$stop && mono() < $sent + $ttl / 3;
			}
			$s->quit;
		};
		POSIX::_exit($@ ? 1 : 0);
	}
	$client_pid{$name} = $pid;
	return $pid;
}

END
{
	kill 'KILL', -$_ for values %client_pid;
}

sub answers
{
	my ($name) = @_;
	my $file = "$logdir/180_$name.answers";

	return () unless -e $file;
	return map { [ split / / ] } split /\n/, slurp_file($file);
}

sub holder_now
{
	return $node->safe_psql('postgres',
		"SELECT coalesce(holder, '') FROM tenure.leases WHERE lease = 'campaign'");
}

start_campaign_client("client-$_") for 1 .. 5;

my $first;
ok(wait_until('a client to lead', sub { ($first = holder_now()) ne '' }),
	'one of five clients acquires the lease through the pooler');
ok( wait_until(
		"$first to renew",
		sub { (grep { $_->[0] eq 'ok' } answers($first)) >= 3 }),
	"$first renews it through the pooler");

kill 'KILL', -$client_pid{$first};
waitpid($client_pid{$first}, 0);
delete $client_pid{$first};

my $second;
ok( wait_until(
		'another client to lead',
		sub { ($second = holder_now()) ne '' && $second ne $first }),
	"after $first is killed, another client leads");

# freeze the new leader past its ttl, then let it go on
kill 'STOP', -$client_pid{$second};
my $third;
ok( wait_until(
		'a third client to lead',
		sub { ($third = holder_now()) ne '' && $third ne $second }),
	"while $second is frozen, a third client leads");
my $stopped_answers = () = answers($second);
kill 'CONT', -$client_pid{$second};
ok( wait_until(
		"$second to hear that it lost the lease",
		sub {
			my @a = answers($second);
			return grep { $_->[0] eq 'no' } @a[ $stopped_answers .. $#a ];
		}),
	"$second, resumed, is told it does not lead");

kill 'TERM', $client_pid{$_} for keys %client_pid;
for my $name (sort keys %client_pid)
{
	waitpid($client_pid{$name}, 0);
	is($? >> 8, 0, "$name ran its loop without error");
}
%client_pid = ();

# Belief intervals by the client rule: from receiving a successful answer
# until its send time + ttl, ended early by receiving a false answer.
my @intervals;
for my $name (map { "client-$_" } 1 .. 5)
{
	my @a = answers($name);

	for my $i (0 .. $#a)
	{
		next unless $a[$i][0] eq 'ok';
		my ($from, $until) = ($a[$i][2], $a[$i][1] + $ttl);
		for my $later (@a[ $i + 1 .. $#a ])
		{
			next unless $later->[0] eq 'no';
			$until = $later->[2] if $later->[2] < $until;
			last;
		}
		push @intervals, [ $name, $from, $until ] if $from < $until;
	}
}
my %leaders = map { $_->[0] => 1 } @intervals;
cmp_ok(scalar(keys %leaders), '>=', 3, 'three clients or more believed they led');
my @overlaps;
for my $i (0 .. $#intervals)
{
	for my $j ($i + 1 .. $#intervals)
	{
		my ($a, $b) = @intervals[ $i, $j ];
		push @overlaps, sprintf('%s [%.3f, %.3f] and %s [%.3f, %.3f]', @$a, @$b)
		  if $a->[0] ne $b->[0] && $a->[1] < $b->[2] && $b->[1] < $a->[2];
	}
}
is(scalar(@overlaps), 0, 'no two clients ever believed they led at once')
  or diag(join("\n", @overlaps));
is( $node->safe_psql('postgres',
		"SELECT string_agg(DISTINCT end_reason, ',') FROM tenure.history
		  WHERE lease = 'campaign' AND holder IN ('$first', '$second')"),
	'expired',
	'the killed and the frozen leader lost their tenures by expiry');

#
# 2. Fenced writes through the pooler
#
my $epoch1 = $node->safe_psql('postgres', "SELECT tenure.acquire('w', 'writer')");
my @c = map { $bouncer->background_psql('tx') } 1 .. 4;
$_->query_safe('\set VERBOSITY verbose') for @c;

# The three ways to present a token in a transaction.
sub present_sql
{
	my ($how, $epoch) = @_;

	return {
		set_local => "SET LOCAL tenure.tokens = 'w=$epoch'",
		set_config => "SELECT set_config('tenure.tokens', 'w=$epoch', true)",
		present => "SELECT tenure.present('w', $epoch, true)",
	}->{$how};
}
my @hows = qw(set_local set_config present);

# Run SQL on a client; return its errors ('' if none).
sub run_on
{
	my ($s, $sql) = @_;

	$s->query($sql);
	my $err = $s->{stderr};
	$s->{stderr} = '';
	return $err;
}

my @errors;
for my $round (1 .. 3)
{
	for my $k (0 .. $#c)
	{
		my $how = $hows[ ($round + $k) % 3 ];
		push @errors, run_on($c[$k], "BEGIN;\n" . present_sql($how, $epoch1) . ";\n"
			  . "INSERT INTO public.w_rows VALUES ('c$k', '$how', $epoch1);\nCOMMIT;");
	}
}
is(join('', @errors), '', 'writes presenting the current epoch commit, in all three ways');
is($node->safe_psql('postgres', "SELECT count(*) FROM public.w_rows WHERE epoch = $epoch1"),
	'12', 'all twelve rows landed');

# two transactions open with epoch 1 (each holds one of the two server
# connections) while the holder claims a new epoch
for my $k (0, 1)
{
	my $how = $hows[$k];
	is( run_on($c[$k], "BEGIN;\n" . present_sql($how, $epoch1) . ";\n"
			  . "INSERT INTO public.w_rows VALUES ('c$k', 'open', $epoch1);"),
		'', "client $k writes with epoch 1 in an open transaction ($how)");
}
my $epoch2 = $node->safe_psql('postgres', "SELECT tenure.claim_epoch('w', 'writer')");
cmp_ok($epoch2, '>', $epoch1, 'the holder claims a new epoch');
for my $k (0, 1)
{
	like(run_on($c[$k], 'COMMIT;'),
		qr/TN002: commit of a write to table "w_rows" fenced by lease "w" rejected: epoch $epoch1 is not current.*\n.*DETAIL:  The transaction presented epoch $epoch1; the current epoch is $epoch2\./,
		"client $k cannot commit its open transaction after the claim");
}

my ($stale_fail, $current_fail) = (0, 0);
for my $round (1 .. 3)
{
	for my $k (0 .. $#c)
	{
		my $how = $hows[ ($round + $k) % 3 ];
		my $epoch = ($round + $k) % 2 ? $epoch1 : $epoch2;
		my $err = run_on($c[$k], "BEGIN;\n" . present_sql($how, $epoch) . ";\n"
			  . "INSERT INTO public.w_rows VALUES ('c$k', '$how', $epoch);\nCOMMIT;");
		if ($epoch == $epoch1)
		{
			$stale_fail++ if $err =~ /TN002: write to table "w_rows" fenced by lease "w" rejected: epoch $epoch1 is not current/;
		}
		else
		{
			$current_fail++ if $err ne '';
		}
	}
}
is($stale_fail, 6, 'every write presenting the old epoch fails with TN002');
is($current_fail, 0, 'every write presenting the new epoch commits');
is( $node->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE epoch = $epoch1) || '/' || count(*) FILTER (WHERE epoch = $epoch2)
		   FROM public.w_rows"),
	'12/6', 'no row of the old epoch landed after the claim; the new ones did');

# A plain SET leaves the current epoch on a server connection; nobody's
# tokenless write may commit with it, not even the same client's.
is(run_on($c[0], "SET tenure.tokens = 'w=$epoch2';"), '',
	'client 0 leaves the current epoch on its server connection with a plain SET');
my ($tn002, $saw_leaked, $others_saw_leaked) = (0, 0, 0);
my $transactions = 48;
for my $i (1 .. $transactions)
{
	my $k = $i % @c;
	my $sql = "SELECT current_setting('tenure.tokens');\n"
	  . "INSERT INTO public.w_rows VALUES ('c$k', 'tokenless', NULL);";
	$sql = "BEGIN;\n$sql\nCOMMIT;" if $i % 2;
	my ($out) = $c[$k]->query($sql);
	my $err = $c[$k]->{stderr};
	$c[$k]->{stderr} = '';
	$tn002++ if $err =~ /TN002: table "w_rows" is fenced by lease "w" and the transaction presents no epoch for it/;
	if ($out =~ /w=$epoch2/)
	{
		$saw_leaked++;
		$others_saw_leaked++ if $k != 0;
	}
}
is($tn002, $transactions, "all $transactions tokenless writes fail with TN002");
cmp_ok($others_saw_leaked, '>', 0,
	"other clients' transactions ran on the server connection holding the leaked value ($saw_leaked of $transactions did)");
is($node->safe_psql('postgres', "SELECT count(*) FROM public.w_rows WHERE how = 'tokenless'"),
	'0', 'no tokenless write committed');
$_->quit for @c;

#
# 3. Statement mode fails closed
#
my ($out, $err, $status) = $bouncer->psql('st',
	"BEGIN;\nSELECT set_config('tenure.tokens', 'w=$epoch2', true);\n"
	  . "INSERT INTO public.w_rows VALUES ('st', 'block', $epoch2);\nCOMMIT;\n");
isnt($status, 0, 'statement mode: a transaction block fails');
like($err, qr/transaction blocks not allowed in statement pooling mode/,
	'... refused by the pooler');
($out, $err, $status) = $bouncer->psql('st',
	"INSERT INTO public.w_rows VALUES ('st', 'tokenless', NULL);");
like($err, qr/TN002: table "w_rows" is fenced by lease "w" and the transaction presents no epoch for it/,
	'statement mode: a lone tokenless write fails with TN002');
($out, $err, $status) = $bouncer->psql('st',
	"SET tenure.tokens = 'w=$epoch2';\nINSERT INTO public.w_rows VALUES ('st', 'tokenless', NULL);");
like($err, qr/TN002: table "w_rows" is fenced by lease "w" and the transaction presents no epoch for it/,
	'statement mode: a plain SET before a write does not count either');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM public.w_rows WHERE client = 'st'"),
	'0', 'nothing committed through statement mode');

#
# 4. session_bound behind a transaction pooler
#
my $a = $bouncer->background_psql('tx');
my $sb_epoch = $a->query_safe("SELECT tenure.acquire('sb', 'A', session_bound => true)");
like($sb_epoch, qr/^\d+$/, 'A acquires a session-bound tenure through the pooler');
my $server_pid = $node->safe_psql('postgres',
	"SELECT holder_pid FROM tenure.leases WHERE lease = 'sb'");
$a->{run}->kill_kill;
ok( wait_until(
		'the pooler to see A go',
		sub { ($bouncer->admin('SHOW CLIENTS'))[0] !~ /\|tx\|/ }),
	"A's process is gone, and so is its client connection to the pooler");
is( $node->safe_psql('postgres',
		"SELECT holder || '|' || holder_pid || '|' || tenure.leader_is('sb', 'A')
		   FROM tenure.leases WHERE lease = 'sb'"),
	"A|$server_pid|true",
	"A's tenure lives on: its session is the pooler's server connection");
is(($bouncer->psql('tx', "SELECT tenure.acquire('sb', 'B');"))[0], '',
	'B, through the pooler, cannot acquire it');

$bouncer->admin('RECONNECT tx');
ok( $node->poll_query_until('postgres',
		"SELECT holder IS NULL FROM tenure.leases WHERE lease = 'sb'"),
	'the tenure ends when PgBouncer closes that server connection (RECONNECT)');
# (the tenure ends in the backend's exit, a moment before it leaves
# pg_stat_activity)
ok( $node->poll_query_until('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE pid = $server_pid", '0'),
	'the server connection is gone');
like(($bouncer->psql('tx', "SELECT tenure.acquire('sb', 'B', session_bound => true);"))[0],
	qr/^\d+$/, 'then B acquires it');
poll_is($node, 'postgres',
	"SELECT end_reason FROM tenure.history WHERE lease = 'sb' AND epoch = $sb_epoch",
	'session ended', "A's tenure ended as 'session ended'");

$bouncer->admin('KILL tx');
ok( $node->poll_query_until('postgres',
		"SELECT holder IS NULL FROM tenure.leases WHERE lease = 'sb'"),
	"KILL on the admin console ends B's tenure too");
$bouncer->admin('RESUME tx');

my $short = ($bouncer->psql('tx',
		"SELECT tenure.acquire('sb-short', 'A', session_bound => true);"))[0];
like($short, qr/^\d+$/, 'A acquires a session-bound tenure with a ttl of 2 s');
ok( $node->poll_query_until('postgres',
		"SELECT holder IS NULL FROM tenure.leases WHERE lease = 'sb-short'"),
	'without renewals it ends by its ttl');
like(($bouncer->psql('tx', "SELECT tenure.acquire('sb-short', 'B');"))[0],
	qr/^\d+$/, 'then B acquires it');
poll_is($node, 'postgres',
	"SELECT end_reason FROM tenure.history WHERE lease = 'sb-short' AND epoch = $short",
	'expired', "A's tenure ended as 'expired'");

$bouncer->stop;
$node->stop;
done_testing();
