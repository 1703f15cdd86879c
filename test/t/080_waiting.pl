
# Waiting for a lease and for a change, without polling:
#
# - a session blocked in tenure.acquire(..., wait => ...) gets the lease when
#   the holder releases it, when the holder's backend ends (session-bound
#   tenure, hold-off 0), and when the holder's ttl runs out while nobody
#   calls anything;
# - of three blocked sessions exactly one wins each time the lease frees up;
# - pg_cancel_backend() interrupts a blocked acquire, which then holds and
#   reserves nothing;
# - tenure.await_change() returns on a committed change (and at the holder's
#   expiry) and returns changed = false at its timeout.
#
# Before acting, the test polls pg_stat_activity until the blocked backends
# sleep (wait_event_type 'Extension') in the function concerned.  Waits are
# long (5 min) and ttls of live holders longer still (10 min), so that a
# missed wakeup cannot be hidden by the waiter's deadline or the holder's
# expiry: it makes the test hang until its poll gives up, and fail.  The test
# asserts outcomes, never durations.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::Bin;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('waiting');

# Run $sql in a new background session and return without waiting for its
# result; finish_query() collects it.
sub start_query
{
	my ($name, $sql) = @_;
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $s->query_safe('SELECT pg_backend_pid()');

	chomp $pid;
	my $early = $s->query_until(qr/^start $name\n/m,
		"\\echo start $name\n$sql;\n"
		  . "\\echo sqlstate $name :SQLSTATE :LAST_ERROR_MESSAGE\n"
		  . "\\echo end $name\n");
	return { name => $name, session => $s, pid => $pid, out => $early };
}

# Wait for the statement started by start_query() to end and return its
# output (tuples only, unaligned), its SQLSTATE and its error message.
sub finish_query
{
	my ($q) = @_;
	my $name = $q->{name};
	my $out = $q->{out};

	$out .= $q->{session}->query_until(qr/^end $name\n/m, '')
	  unless $out =~ /^end $name$/m;
	$out =~ s/.*^start $name\n//ms;
	$out =~ /^(.*?)^sqlstate $name (\S+) ?(.*?)\n/ms
	  or die "unexpected output of $name: $out";
	my ($result, $sqlstate, $message) = ($1, $2, $3);
	chomp $result;

	# the error, if any, was checked through SQLSTATE; forget it so that
	# the session's later query_safe() calls do not take it for theirs
	$q->{session}->{stderr} = '';
	return ($result, $sqlstate, $message);
}

# Poll until exactly $n of the given background sessions sleep in a
# statement matching the LIKE pattern $like.
sub wait_asleep
{
	my ($like, $n, @queries) = @_;
	my $pids = join(', ', map { $_->{pid} } @queries);

	$node->poll_query_until(
		'postgres', qq{
		SELECT count(*) = $n FROM pg_stat_activity
		 WHERE pid IN ($pids) AND state = 'active'
		   AND wait_event_type = 'Extension'
		   AND query LIKE '$like'})
	  or die "timed out waiting for $n sessions asleep in $like";
}

# LIKE patterns of the statements that sleep: acquire with a wait (not one
# briefly waiting for the keeper), await_change
my $in_acquire = '%tenure.acquire(%wait =>%';
my $in_await = '%tenure.await_change(%';

sub sql
{
	my ($query) = @_;
	return $node->safe_psql('postgres', $query);
}

#
# (a) The holder releases.
#
sql(q{SELECT tenure.create_lease('w_release', ttl => '10 min')});
my $epoch_a = sql(q{SELECT tenure.acquire('w_release', 'a')});
ok($epoch_a, 'a acquires w_release');

my $b = start_query('b_release',
	q{SELECT tenure.acquire('w_release', 'b', wait => '5 min')});
wait_asleep($in_acquire, 1, $b);
is(sql(q{SELECT tenure.leader_is('w_release', 'a')}),
	't', 'a still leads while b waits');
is(sql(q{SELECT tenure.release('w_release', 'a')}), 't', 'a releases');

my ($epoch_b, $state) = finish_query($b);
is($state, '00000', 'the waiter returns without error after the release');
like($epoch_b, qr/^\d+$/, 'the waiter gets an epoch');
cmp_ok($epoch_b, '>', $epoch_a, "the waiter's epoch is newer than the holder's");
is( sql(
		q{SELECT tenure.leader_is('w_release', 'b'), holder, epoch
		    FROM tenure.leases WHERE lease = 'w_release'}),
	"t|b|$epoch_b",
	'the waiter leads at once, at its epoch');
is( sql(
		qq{SELECT end_reason FROM tenure.history
		    WHERE lease = 'w_release' AND epoch = $epoch_a}),
	'released',
	"the history says the holder's tenure was released");
$b->{session}->quit;

#
# (b) The session-bound holder's backend ends (hold-off 0).
#
sql(q{SELECT tenure.create_lease('w_exit', ttl => '10 min', holdoff => '0')});
my $h = $node->background_psql('postgres', on_error_stop => 0);
my $h_pid = $h->query_safe('SELECT pg_backend_pid()');
chomp $h_pid;
my $epoch_h =
  $h->query_safe(q{SELECT tenure.acquire('w_exit', 'h', session_bound => true)});
chomp $epoch_h;
like($epoch_h, qr/^\d+$/, 'h acquires w_exit, session-bound');

$b = start_query('b_exit',
	q{SELECT tenure.acquire('w_exit', 'b', wait => '5 min')});
wait_asleep($in_acquire, 1, $b);
is(sql("SELECT pg_terminate_backend($h_pid)"), 't', "h's backend is terminated");

($epoch_b, $state) = finish_query($b);
is($state, '00000', "the waiter returns without error after h's backend ends");
like($epoch_b, qr/^\d+$/, 'the waiter gets an epoch');
cmp_ok($epoch_b, '>', $epoch_h, "the waiter's epoch is newer than h's");
is(sql(q{SELECT tenure.leader_is('w_exit', 'b')}),
	't', 'the waiter leads at once (hold-off 0)');
poll_is($node, 'postgres',
	qq{SELECT end_reason FROM tenure.history
	    WHERE lease = 'w_exit' AND epoch = $epoch_h},
	'session ended',
	"the history says h's session ended");
$b->{session}->quit;
$h->quit;

#
# (c) The holder's ttl runs out and nobody calls anything.
#
sql(q{SELECT tenure.create_lease('w_ttl', ttl => '1 s', holdoff => '0')});
$epoch_h = sql(q{SELECT tenure.acquire('w_ttl', 'h')});
ok($epoch_h, 'h acquires w_ttl (ttl 1 s)');

$b = start_query('b_ttl',
	q{SELECT tenure.acquire('w_ttl', 'b', wait => '5 min')});

# keep h's tenure alive until the waiter is seen asleep, then stop renewing
my $pid_b = $b->{pid};
wait_until('the waiter asleep while h renews', sub {
	sql(qq{SELECT tenure.renew('w_ttl', 'h')
		      AND EXISTS (SELECT FROM pg_stat_activity
		                   WHERE pid = $pid_b AND state = 'active'
		                     AND wait_event_type = 'Extension'
		                     AND query LIKE '$in_acquire')}) eq 't';
}) or die;

($epoch_b, $state) = finish_query($b);
is($state, '00000', "the waiter returns without error after h's expiry");
like($epoch_b, qr/^\d+$/, 'the waiter gets an epoch');
cmp_ok($epoch_b, '>', $epoch_h, "the waiter's epoch is newer than h's");
is(sql(q{SELECT tenure.leader_is('w_ttl', 'b')}),
	't', 'the waiter leads (hold-off 0)');
poll_is($node, 'postgres',
	qq{SELECT end_reason FROM tenure.history
	    WHERE lease = 'w_ttl' AND epoch = $epoch_h},
	'expired',
	"the history says h's tenure expired");
is(sql(q{SELECT tenure.renew('w_ttl', 'h')}),
	'f', 'h can no longer renew');
$b->{session}->quit;

#
# Three waiters: exactly one wins per free-up.
#
sql(q{SELECT tenure.create_lease('w_three', ttl => '10 min')});
sql(
	q{CREATE TABLE w_winners (n serial PRIMARY KEY, waiter text NOT NULL,
	                          epoch bigint)});
$epoch_a = sql(q{SELECT tenure.acquire('w_three', 'a')});
ok($epoch_a, 'a acquires w_three');

my %waiters;
for my $w (qw(b c d))
{
	$waiters{$w} = start_query(
		"w_$w", qq{INSERT INTO w_winners (waiter, epoch)
		           SELECT '$w', tenure.acquire('w_three', '$w', wait => '5 min')});
}
my @all = map { $waiters{$_} } qw(b c d);
wait_asleep($in_acquire, 3, @all);

my $holder = 'a';
my @won;
for my $round (1 .. 3)
{
	is(sql(qq{SELECT tenure.release('w_three', '$holder')}),
		't', "free-up $round: $holder releases");

	# one more winner has committed and the others sleep again
	my $asleep = 3 - $round;
	my $pids = join(', ', map { $_->{pid} } @all);
	wait_until("winner $round and $asleep waiters asleep", sub {
		sql(qq{SELECT (SELECT count(*) FROM w_winners) >= $round
			      AND (SELECT count(*) FROM pg_stat_activity
			            WHERE pid IN ($pids) AND state = 'active'
			              AND wait_event_type = 'Extension'
			              AND query LIKE '$in_acquire') = $asleep}) eq 't';
	}) or die;

	is(sql(q{SELECT count(*) FROM w_winners}),
		$round, "free-up $round: exactly one more waiter won");
	my ($w, $e) = split /\|/,
	  sql(q{SELECT waiter, epoch FROM w_winners ORDER BY n DESC LIMIT 1});
	like($e, qr/^\d+$/, "free-up $round: winner $w has an epoch");
	is( sql(
			q{SELECT holder, epoch FROM tenure.leases WHERE lease = 'w_three'}),
		"$w|$e",
		"free-up $round: tenure.leases shows the winner $w");
	is(sql(qq{SELECT tenure.leader_is('w_three', '$w')}),
		't', "free-up $round: $w leads");
	push @won, $w;
	$holder = $w;
}
is(join(',', sort @won), 'b,c,d', 'each waiter won once');
is( sql(
		q{SELECT count(DISTINCT epoch) = 3 AND bool_and(epoch > prev)
		    FROM (SELECT epoch, lag(epoch, 1, 0::bigint) OVER (ORDER BY n) AS prev
		            FROM w_winners) s}),
	't',
	'the winners have distinct, increasing epochs');
for my $q (@all)
{
	my (undef, $st) = finish_query($q);
	is($st, '00000', "waiter $q->{name} ended without error");
	$q->{session}->quit;
}

#
# Cancelling a waiter leaks nothing.
#
sql(q{SELECT tenure.create_lease('w_cancel', ttl => '10 min')});
sql(q{SELECT tenure.create_lease('w_cancel_other', ttl => '10 min')});
$epoch_a = sql(q{SELECT tenure.acquire('w_cancel', 'a')});
ok($epoch_a, 'a acquires w_cancel');

$b = start_query('b_cancel',
	q{SELECT tenure.acquire('w_cancel', 'b', wait => '5 min')});
wait_asleep($in_acquire, 1, $b);
is(sql("SELECT pg_cancel_backend($b->{pid})"), 't', 'the waiter is cancelled');
my ($res, $msg);
($res, $state, $msg) = finish_query($b);
is($state, '57014', 'the cancelled acquire fails with SQLSTATE 57014');
is($msg, 'canceling statement due to user request', '... and the usual message');
is($res, '', '... and returns nothing');
is( $b->{session}->query_safe(
		q{SELECT tenure.leader_is('w_cancel', 'b'), tenure.leader_is('w_cancel', 'a')}),
	'f|t',
	'the waiter holds nothing, a still leads (seen from the waiter)');
is(sql(q{SELECT holder, epoch FROM tenure.leases WHERE lease = 'w_cancel'}),
	"a|$epoch_a", 'tenure.leases still shows a at its epoch');
is(sql(q{SELECT tenure.release('w_cancel', 'a')}), 't', 'a releases');
like(sql(q{SELECT tenure.acquire('w_cancel', 'c')}),
	qr/^\d+$/, 'c acquires at once afterwards');
$b->{session}->quit;

# a waiter that had reserved another lease in its transaction: the
# cancellation gives that reservation back, even before the ROLLBACK
$b = start_query('b_cancel_tx',
	q{BEGIN;
	  SELECT tenure.acquire('w_cancel_other', 'b') IS NOT NULL AS reserved;
	  SELECT tenure.acquire('w_cancel', 'b', wait => '5 min')});
wait_asleep($in_acquire, 1, $b);
is(sql(q{SELECT tenure.acquire('w_cancel_other', 'x') IS NULL}),
	't', "the waiter's reservation of w_cancel_other keeps others out");
is(sql("SELECT pg_cancel_backend($b->{pid})"), 't', 'the waiter is cancelled');
($res, $state, $msg) = finish_query($b);
is($state, '57014', 'the cancelled acquire fails with SQLSTATE 57014');
is($res, 't', 'the earlier reservation had succeeded');
like(sql(q{SELECT tenure.acquire('w_cancel_other', 'x')}),
	qr/^\d+$/, 'w_cancel_other is free again before the waiter rolls back');
$b->{session}->query_safe('ROLLBACK');
is(sql(q{SELECT holder FROM tenure.leases WHERE lease = 'w_cancel_other'}),
	'x', 'the rollback leaves the new holder alone');
$b->{session}->quit;

#
# await_change: returns on a committed change, times out otherwise, and
# wakes at the holder's expiry.
#
sql(q{SELECT tenure.create_lease('w_await', ttl => '10 min')});
$epoch_a = sql(q{SELECT tenure.acquire('w_await', 'a')});

my $aw = start_query('aw_claim',
	qq{SELECT changed, holder, epoch
	     FROM tenure.await_change('w_await', $epoch_a, 'a', '5 min')});
wait_asleep($in_await, 1, $aw);
my $epoch_claim = sql(q{SELECT tenure.claim_epoch('w_await', 'a')});
cmp_ok($epoch_claim, '>', $epoch_a, 'a claims a newer epoch');
($res, $state) = finish_query($aw);
is($state, '00000', 'await_change returns without error');
is($res, "t|a|$epoch_claim", 'await_change reports the claim: same holder, new epoch');
$aw->{session}->quit;

is( sql(
		qq{SELECT changed, holder, epoch
		     FROM tenure.await_change('w_await', $epoch_claim, 'a', '0.2 s')}),
	"f|a|$epoch_claim",
	'await_change without a change times out with changed = false');

sql(q{SELECT tenure.create_lease('w_await_ttl', ttl => '1 s')});
$epoch_h = sql(q{SELECT tenure.acquire('w_await_ttl', 'h')});
$aw = start_query('aw_ttl',
	qq{SELECT changed, holder IS NULL AS no_holder, epoch
	     FROM tenure.await_change('w_await_ttl', $epoch_h, 'h', '5 min')});
my $pid_aw = $aw->{pid};
wait_until('await_change asleep while h renews', sub {
	sql(qq{SELECT tenure.renew('w_await_ttl', 'h')
		      AND EXISTS (SELECT FROM pg_stat_activity
		                   WHERE pid = $pid_aw AND state = 'active'
		                     AND wait_event_type = 'Extension'
		                     AND query LIKE '$in_await')}) eq 't';
}) or die;
($res, $state) = finish_query($aw);
is($state, '00000', 'await_change returns without error at the expiry');
is($res, "t|t|$epoch_h", "await_change reports the expiry: no holder, same epoch");
$aw->{session}->quit;

$node->stop;
done_testing();
