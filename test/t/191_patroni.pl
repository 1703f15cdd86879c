
# Failover under Patroni (Debian's patroni, with a single etcd member of
# its own as the store): two nodes in synchronous mode, pg_tenure
# preloaded through postgresql.parameters (test/t/TenurePatroni.pm).  Two
# campaigners hold a lease that is not session-bound: the holder renews it
# every ttl/3 with tenure.renew, the other tries tenure.acquire, both
# through a read-write multi-host URI, reconnecting after every error; the
# leader by the client rule writes numbered rows to a fenced table,
# presenting its epoch in each transaction.
#
# A switchover (`patronictl switchover`) stops the old primary cleanly, so
# the standby promoted has replayed its shutdown checkpoint: the promotion
# provably lost nothing, and the tenure continues.  The holder's renew
# through the new primary returns true, leader_is stays true for it, its
# fenced writes commit there with the epoch it already presents, nobody
# needs a new epoch, and every older epoch stays fenced.
#
# A SIGKILL of the primary's Patroni and postmaster (killing only the
# postmaster makes Patroni start it again in place) lets the leader key
# expire after Patroni's ttl, and the standby is promoted without that
# proof: the tenure ends there, the old holder's renew returns false, and
# the next tenure's epoch exceeds every earlier one.
#
# Both times: no fenced write that a standby had flushed when its COMMIT
# returned is lost, no write rejected with TN002 is there, the server log
# says what the promotion kept, and never two leaders by the client rule.
# Patroni's synchronous mode runs the primary without a synchronous
# standby while the other node is away (after each failover, until it
# follows again): a write acknowledged then may be lost by a failover,
# with or without pg_tenure, so right after each COMMIT the writer asks
# its node whether a standby has flushed the WAL up to there, as
# test/t/190_auto_failover.pl does; only those writes must survive.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;
use TenureHA;

my $ttl = 5;
my ($major) = `pg_config --version` =~ /PostgreSQL (\d+)/;
my @missing = grep {
	my $p = $_;
	!grep { -x "$_/$p" } split /:/, $ENV{PATH}
} qw(patroni patronictl etcd);
if (@missing)
{
	# test/run.sh says whether Debian ships Patroni and etcd for this major
	BAIL_OUT("@missing missing: install patroni etcd-server")
	  if $ENV{TENURE_PATRONI_EXPECTED};
	plan skip_all => "@missing not installed (PostgreSQL $major)";
}
require TenurePatroni;

our $dir = PostgreSQL::Test::Utils::tempdir('campaign');
my @holders = qw(c1 c2);

$SIG{TERM} = $SIG{INT} = sub { die "signal" };

my $cluster = TenurePatroni->new('ha');
my %port = map { $_ => $cluster->port($_) } qw(n1 n2);
sub role { ($cluster->members->{ $_[0] } // {})->{role} // '' }

sub steady
{
	my ($primary, $standby) = @_;
	my $m = $cluster->members;
	return ($m->{$primary}{role} // '') eq 'leader'
	  && ($m->{$primary}{state} // '') eq 'running'
	  && ($m->{$standby}{role} // '') eq 'sync_standby'
	  && ($m->{$standby}{state} // '') eq 'running';
}

$cluster->start('n1');
poll_until('n1 leads', sub { role('n1') eq 'leader' && ($cluster->psql('n1', 'SELECT 1'))[0] });
$cluster->start('n2');
poll_until('n2 synchronous standby', sub { steady('n1', 'n2') });
pass('Patroni: n1 leader, n2 synchronous standby');

my ($ok, $out, $err) = $cluster->psql('n1', qq{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('w', ttl => '$ttl s');
	CREATE TABLE public.ledger (holder text, seq int, epoch bigint, PRIMARY KEY (holder, seq));
	SELECT tenure.fence_table('public.ledger', 'w');
});
ok($ok, 'extension, lease and fenced table created') or diag $err;
# an epoch of an earlier tenure, which every new primary must fence off
(undef, my $e0) = $cluster->psql('n1', "SELECT tenure.acquire('w', 'c0')");
$cluster->psql('n1', "SELECT tenure.release('w', 'c0')");

# --- campaigners: renew every ttl/3 while holding, acquire otherwise; the
# leader by the client rule writes
sub campaign_step
{
	my ($holder, $epoch) = @_;
	my $sql = defined $epoch
	  ? "SELECT inet_server_port(), CASE WHEN r THEN $epoch END, tenure.leader_is('w', '$holder') FROM tenure.renew('w', '$holder') r"
	  : "SELECT inet_server_port(), e, tenure.leader_is('w', '$holder') FROM tenure.acquire('w', '$holder') e";
	my ($ok, $out) = $cluster->psql('rw', $sql);
	my ($p, $e, $li) = split /\|/, $out // '';
	return $ok && defined $li ? ($p, $e eq '' ? '-' : $e, $li) : ('-', '-', '-');
}

# (TenureHA.pm's loop; events: [holder, kind, fields...]: renew/acquire
# sent recv port epoch_presented epoch_returned leader_is; lead recv epoch;
# write t0 t1 seq epoch port result)
sub campaigner
{
	my ($holder) = @_;
	run_campaigner(
		dir => $dir,
		holder => $holder,
		period => $ttl / 3,
		ttl => $ttl,
		step => sub {
			my ($l, $sent, $s) = @_;
			my $op = defined $s->{epoch} ? 'renew' : 'acquire';
			my ($p, $e, $li) = campaign_step($holder, $s->{epoch});
			my $recv = now();
			printf $l "%s %.6f %.6f %s %s %s %s\n", $op, $sent, $recv, $p, $s->{epoch} // '-', $e, $li;
			# refused: the tenure is over (an error leaves it to the next step)
			@$s{qw(epoch leading)} = (undef, 0) if $op eq 'renew' && $p ne '-' && $e eq '-';
			return ($e eq '-' ? undef : $e, $li, $recv);
		},
		write => sub {
			my ($l, $seq, $epoch) = @_;
			my $t0 = now();
			my ($r, $wp) = ledger_write(sub { $cluster->psql(@_) }, $holder, $seq, $epoch);
			printf $l "write %.6f %.6f %d %s %s %s\n", $t0, now(), $seq, $epoch, $wp, $r;
			select(undef, undef, undef, 0.05);
			return $r;
		});
}
start_campaigners(\&campaigner, @holders);
sub steps { grep { $_->[1] =~ /^(renew|acquire)$/ } events($dir, @holders) }
sub writes { grep { $_->[1] eq 'write' } events($dir, @holders) }

# acknowledged writes on $node, begun after $t, that a standby had flushed
# at their COMMIT (with $any, also the others), in the order they began
sub acked_on
{
	my ($node, $t, $any) = @_;
	my @w = sort { $a->[2] <=> $b->[2] }
	  grep { $_->[2] > $t && $_->[6] eq $port{$node} && $_->[7] =~ ($any ? qr/^ack/ : qr/^ack$/) } writes();
	return @w;
}

# the holder and epoch of the latest leadership begun before $t
sub leader_at
{
	my ($t) = @_;
	my ($lead) = sort { $b->[2] <=> $a->[2] } grep { $_->[1] eq 'lead' && $_->[2] < $t } events($dir, @holders);
	return () unless $lead;
	return ($lead->[0], $lead->[3]);
}

poll_until('replicated writes on n1', sub { acked_on('n1', 0) >= 5 });

# an epoch gets TN002 on $node
sub fenced_on
{
	my ($node, $e, $what) = @_;
	my ($ok, undef, $err) = $cluster->psql($node, fenced_write('public.ledger', 'w', $e, "'test', -1, $e"));
	ok(!$ok && $err =~ /TN002/, "$what: epoch $e gets TN002 on $node") or diag $err;
}

# writes lost, or there though rejected
sub check_writes
{
	my ($what, $node) = @_;
	my (undef, $rows) = $cluster->psql($node, "SELECT holder || ':' || seq || ':' || epoch FROM public.ledger");
	my %have = map { $_ => 1 } split /\n/, $rows;
	my @w = writes();
	my @acked = map { "$_->[0]:$_->[4]:$_->[5]" } grep { $_->[7] eq 'ack' } @w;
	my @lost = grep { !$have{$_} } @acked;
	is("@lost", '', "$what: all " . scalar(@acked) . " writes a standby had flushed at their COMMIT are on $node");
	my @local = map { "$_->[0]:$_->[4]:$_->[5]" } grep { $_->[7] eq 'ack_local' } @w;
	diag "$what: " . scalar(@local) . " writes acknowledged before a standby had them, "
	  . scalar(grep { !$have{$_} } @local) . " of them not on $node";
	my @bad = grep { $have{"$_->[0]:$_->[4]:$_->[5]"} } grep { $_->[7] eq 'tn002' } @w;
	is(scalar(@bad), 0, "$what: no TN002-rejected write is there");
	diag "$what: tenure.history on $node:\n"
	  . ($cluster->psql($node, "SELECT epoch, holder, ended IS NOT NULL, end_reason, issued_tli FROM tenure.history WHERE lease = 'w' ORDER BY epoch"))[1];
}

sub log_says
{
	my ($node, $re) = @_;
	return slurp_file($cluster->logfile($node)) =~ $re;
}

# --- switchover: n1 stops cleanly, n2 is promoted with the proof
my ($h1, $e1) = leader_at(now());
ok(defined $h1, "switchover: $h1 leads under epoch $e1 before it");
my $t1 = now();
($ok, $out) = $cluster->patronictl('switchover', '--leader', 'n1', '--candidate', 'n2', '--force');
ok($ok, 'patronictl switchover to n2') or diag $out;
poll_until('n2 leads', sub { role('n2') eq 'leader' });
# the holder's first step through n2
my $first;
poll_until("$h1 steps through n2", sub {
	($first) = grep { $_->[0] eq $h1 && $_->[2] > $t1 && $_->[4] eq $port{n2} } steps();
	return $first;
});
is("$first->[1] $first->[5] $first->[6] $first->[7]", "renew $e1 $e1 t",
	"switchover: $h1\'s first renew through n2 returns true, epoch $e1, leader_is true");
my $w;
poll_until('a fenced write on n2', sub { ($w) = acked_on('n2', $t1, 1) });
is("$w->[0] $w->[5]", "$h1 $e1", "switchover: the first fenced write that commits on n2 is $h1\'s, with epoch $e1");
ok(log_says('n2', qr/pg_tenure: the promotion from timeline 1 kept every transaction of the old primary; its tenures continue/),
	'switchover: the log of n2 says the tenures continue');
fenced_on('n2', $e0, 'switchover');
poll_until('n1 synchronous standby again', sub { steady('n2', 'n1') });
my $t_sync = now();
poll_until('replicated writes on n2', sub { acked_on('n2', $t_sync, 0) >= 3 });
my @epochs = map { $_->[6] } grep { $_->[2] > $t1 && $_->[6] ne '-' } steps();
my %seen;
is(join(' ', grep { !$seen{$_}++ } @epochs), $e1, 'switchover: no new epoch after it');
my (undef, $cur) = $cluster->psql('n2', "SELECT tenure.current_epoch('w')");
is($cur, $e1, "switchover: current_epoch on n2 is still $e1");
check_writes('switchover', 'n2');

# --- node kill: SIGKILL of n2's Patroni and postmaster; its leader key
# expires and n1 is promoted without the proof
my ($h2, $e2) = leader_at(now());
ok(defined $h2, "node kill: $h2 leads under epoch $e2 before it");
my $t2 = now();
$cluster->kill_node('n2');
poll_until('n1 leads', sub { role('n1') eq 'leader' && ($cluster->psql('n1', 'SELECT NOT pg_is_in_recovery()'))[1] eq 't' });
poll_until("$h2 renews through n1", sub {
	($first) = grep { $_->[0] eq $h2 && $_->[1] eq 'renew' && $_->[2] > $t2 && $_->[4] eq $port{n1} } steps();
	return $first;
});
is("$first->[5] $first->[6]", "$e2 -", "node kill: $h2\'s renew of epoch $e2 through n1 returns false");
# (the keeper logs what the promotion kept before any lease call answers)
ok(log_says('n1', qr/pg_tenure: the promotion from timeline 2 may have lost transactions of the old primary; its tenures end/),
	'node kill: the log of n1 says the tenures end');
poll_until('a fenced write under a new epoch on n1', sub { grep { $_->[5] ne $e2 } acked_on('n1', $t2, 1) });
end_campaigners();
my @new = map { $_->[6] } grep { $_->[2] > $t2 && $_->[4] eq $port{n1} && $_->[6] ne '-' } steps();
my ($minnew) = sort { $a <=> $b } @new;
my ($maxold) = sort { $b <=> $a } map { $_->[6] } grep { $_->[6] ne '-' && $_->[2] <= $t2 } steps();
cmp_ok($minnew, '>', $maxold, 'node kill: the first epoch on n1 exceeds every earlier epoch');
my (undef, $reason) = $cluster->psql('n1', "SELECT end_reason FROM tenure.history WHERE lease = 'w' AND epoch = $e2");
is($reason, 'promoted', "node kill: tenure.history on n1 ends epoch $e2 as promoted");
fenced_on('n1', $_, 'node kill') for $e0, $e2;
check_writes('node kill', 'n1');

# --- never two leaders by the client rule: [lead observed, last step sent + ttl]
my (%iv, %last);
for my $e (events($dir, @holders))
{
	$last{"$e->[0]/$e->[6]"} = $e->[2] if $e->[1] =~ /^(renew|acquire)$/ && $e->[6] ne '-';
	$iv{"$e->[0]/$e->[3]"} //= $e->[2] if $e->[1] eq 'lead';
}
my @iv = sort { $a->[1] <=> $b->[1] } map { [ $_, $iv{$_}, $last{$_} + $ttl ] } keys %iv;
my @overlap;
for my $i (1 .. $#iv)
{
	for my $j (0 .. $i - 1)
	{
		push @overlap, "$iv[$j][0] and $iv[$i][0]"
		  if (split m{/}, $iv[$j][0])[0] ne (split m{/}, $iv[$i][0])[0] && $iv[$j][2] > $iv[$i][1];
	}
}
is("@overlap", '', 'never two leaders by the client rule (' . scalar(@iv) . ' leaderships)');
diag scalar(grep { $_->[7] eq 'tn002' } writes()) . ' writes by a stale leader were rejected with TN002 in the run';

done_testing();
