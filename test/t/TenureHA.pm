# Helpers shared by the tests under a real HA manager
# (test/t/190_auto_failover.pl, test/t/191_patroni.pl): campaigner
# processes that hold a lease and write to a fenced ledger through the
# manager's read-write URI, each logging what it did to $dir/<holder>.log.
#
#   use TenureHA;
#
#   my $t = now();                           # a monotonic clock, seconds
#   poll_until('what', sub { ... });         # wait_until, and dies when the
#                                            # step never comes (nothing
#                                            # after it would mean anything)
#   start_campaigners(sub { my ($holder) = @_; ... }, qw(c1 c2));
#                                            # forks one campaigner each
#   run_campaigner(dir => $dir, holder => 'c1', period => $ttl / 4,
#       ttl => $ttl, step => sub { ... }, write => sub { ... });
#                                            # a campaigner's loop (in the
#                                            # child; never returns)
#   my ($r, $port) = ledger_write(\&psql, 'c1', $seq, $epoch);
#                                            # one fenced write of the ledger
#   end_campaigners();                       # SIGTERM, wait until each has
#                                            # exited (poll_until)
#   my @ev = events($dir, qw(c1 c2));        # every logged line, as
#                                            # [holder, split on spaces]
#
# At exit (also when the test dies) every campaigner still running gets
# SIGKILL; a test's own END block calls kill_campaigners() first when it
# must stop them before anything else (END blocks run in reverse order of
# compilation: this module's runs after the test's).

package TenureHA;

use strict;
use warnings;

use Exporter 'import';
use POSIX ();
use Time::HiRes qw(clock_gettime CLOCK_MONOTONIC);
use TenureTest;

our @EXPORT = qw(now poll_until start_campaigners run_campaigner
  ledger_write end_campaigners kill_campaigners events);

my @children;
my $owner = $$;    # the test's process, not a campaigner

sub now { clock_gettime(CLOCK_MONOTONIC) }

# wait_until (every 50 ms, the default timeout), and a step that never
# comes ends the test
sub poll_until
{
	my ($what, $cond) = @_;
	return wait_until($what, $cond) || die "timed out waiting for $what";
}

# Fork $campaigner->($holder) for each holder; it must not return (it
# ends with POSIX::_exit, as run_campaigner does).
sub start_campaigners
{
	my ($campaigner, @holders) = @_;

	for my $h (@holders)
	{
		my $pid = fork();
		die "fork: $!" unless defined $pid;
		$campaigner->($h) if $pid == 0;
		push @children, $pid;
	}
	return;
}

# A campaigner's loop, until SIGTERM.  Every period from the previous
# step's start: $step->($log, $sent, $state) runs one acquire or renew,
# logs its line to $log and returns the epoch it got (undef if none),
# leader_is ('t' or not) and when the answer came (now()); it may clear
# $state->{epoch} and $state->{leading} (a refused renew).
# On an epoch, this logs "lead <recv> <epoch>" when the holder first
# leads by the client rule under it.  While it leads (and its epoch is
# not fenced) and its last successful step was sent less than a ttl ago,
# it writes: $write->($log, $seq, $epoch) does one write, logs it and
# returns its result ('tn002' fences the epoch: never retried).
sub run_campaigner
{
	my (%c) = @_;
	my $stop = 0;
	local $SIG{TERM} = sub { $stop = 1 };
	open my $l, '>>', "$c{dir}/$c{holder}.log" or POSIX::_exit(1);
	$l->autoflush(1);
	my $s = { epoch => undef, last_sent => 0, leading => 0, fenced => 0, seq => 0 };
	while (!$stop)
	{
		my $sent = now();
		my ($e, $li, $recv) = $c{step}->($l, $sent, $s);
		if (defined $e)
		{
			@$s{qw(epoch leading fenced)} = ($e, 0, 0)
			  if !defined $s->{epoch} || $e != $s->{epoch};
			$s->{last_sent} = $sent;
			if ($li eq 't' && !$s->{leading})
			{
				$s->{leading} = 1;
				printf $l "lead %.6f %s\n", $recv, $e;
			}
		}
		my $next = $sent + $c{period};
		while (!$stop && now() < $next)
		{
			if ($s->{leading} && !$s->{fenced} && now() < $s->{last_sent} + $c{ttl})
			{
				$s->{seq}++;
				my $r = $c{write}->($l, $s->{seq}, $s->{epoch});
				$s->{fenced} = 1 if $r eq 'tn002';
			}
			else { select(undef, undef, undef, 0.05) }
		}
	}
	POSIX::_exit(0);
}

# One write of ($holder, $seq, $epoch) to public.ledger, presenting token
# w=$epoch, through $psql->('rw', $sql) (returning ok, stdout, stderr);
# then, on the same connection, whether a standby has flushed the WAL as
# far as this node (as synchronous replication ensures, unless other WAL
# came in the meantime).  Returns the result: 'ack' (flushed by a
# standby), 'ack_local', 'tn002' or 'err'; and the port of the server.
sub ledger_write
{
	my ($psql, $holder, $seq, $epoch) = @_;
	my ($ok, $out, $err) = $psql->('rw', "BEGIN;\n"
		  . "SELECT inet_server_port(), set_config('tenure.tokens', 'w=$epoch', true);\n"
		  . "INSERT INTO public.ledger VALUES ('$holder', $seq, $epoch);\nCOMMIT;\n"
		  . "SELECT EXISTS (SELECT FROM pg_stat_replication WHERE flush_lsn >= pg_current_wal_flush_lsn());\n");
	my ($port, $flushed) = split /\n/, $out // '';
	($port) = split /\|/, $port // '-';
	my $r = $ok ? (($flushed // '') eq 't' ? 'ack' : 'ack_local') : $err =~ /TN002/ ? 'tn002' : 'err';
	return ($r, $port || '-');
}

# SIGTERM to every campaigner, and wait until each has exited.
sub end_campaigners
{
	kill 'TERM', @children;
	for my $c (@children)
	{
		poll_until("campaigner $c exits", sub { waitpid($c, POSIX::WNOHANG()) != 0 });
	}
	@children = ();
	return;
}

# SIGKILL to every campaigner still running; does not wait.
sub kill_campaigners
{
	kill 'KILL', @children if @children;
	@children = ();
	return;
}

# Every line the campaigners logged, as [holder, fields...].
sub events
{
	my ($dir, @holders) = @_;
	my @ev;

	for my $h (@holders)
	{
		open my $f, '<', "$dir/$h.log" or next;
		while (<$f>) { chomp; push @ev, [ $h, split / / ] }
	}
	return @ev;
}

END
{
	my $rc = $?;
	# not in a campaigner that died (they leave by POSIX::_exit)
	kill_campaigners() if $$ == $owner;
	$? = $rc;
}

1;
