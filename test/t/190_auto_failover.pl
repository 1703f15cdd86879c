
# Failover under a real HA manager (pg_auto_failover): a monitor and two
# nodes with pg_tenure preloaded through an include after pg_autoctl's own.
# Two campaigners acquire/renew a lease (automatic hold-off) through a
# read-write multi-host URI; the leader writes numbered rows to a fenced
# table, presenting its epoch in each transaction.  After a planned
# switchover (with the old primary's keeper frozen, so that the old primary
# keeps serving after the new one was promoted) and a killed primary:
# epochs rose, old tokens get TN002, no write that the standby had flushed
# when its COMMIT returned is lost, and never two leaders by the client
# rule.
#
# pg_auto_failover runs the primary without a synchronous standby whenever
# it judges the standby unhealthy (wait_primary, which its short health
# checks here enter on a busy machine, and which follows every failover);
# a write acknowledged then may be lost by a failover, with or without
# pg_tenure.  So right after each COMMIT the writer asks its node whether
# a standby has flushed the WAL up to there, as synchronous replication
# ensures (unless other WAL came in the meantime); only those writes must
# survive, the others are counted.  pg_autoctl 2.0 can also leave a node
# that becomes primary without synchronous_standby_names, when the
# standby's goal flips to catchingup as the node enters the primary state;
# the test then re-applies the formation's settings, as an operator would,
# and switches over only with synchronous replication in force.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use POSIX ();
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;
use TenureHA;

my $ttl = 2;
sub which
{
	my ($prog) = @_;
	my ($found) = grep { -x "$_/$prog" } split /:/, $ENV{PATH};
	return $found ? "$found/$prog" : undef;
}
my $pg_ctl = which('pg_ctl');
my $autoctl = which('pg_autoctl');
my ($major) = `pg_config --version` =~ /PostgreSQL (\d+)/;
if (!$autoctl)
{
	# test/run.sh says whether Debian ships pg_auto_failover for this major
	BAIL_OUT("pg_autoctl is missing: install postgresql-$major-auto-failover pg-auto-failover-cli")
	  if $ENV{TENURE_HA_EXPECTED};
	plan skip_all => "pg_autoctl not installed (PostgreSQL $major)";
}

our $dir = PostgreSQL::Test::Utils::tempdir('ha');
our $keeper;    # n1's keeper, while the switchover freezes it
my $sock = PostgreSQL::Test::Utils::tempdir_short();
# pg_autoctl's configuration, state and pid files all under the test's
# directory (the pid files default to /tmp/pg_autoctl, which belongs to
# whichever user ran pg_autoctl first on the machine)
$ENV{XDG_CONFIG_HOME} = "$dir/xdgc";
$ENV{XDG_DATA_HOME} = "$dir/xdgd";
$ENV{XDG_RUNTIME_DIR} = "$dir/xdgr";
$ENV{PGHOST} = $sock;
mkdir $_ for "$dir/xdgc", "$dir/xdgd", "$dir/xdgr";
my $log = $PostgreSQL::Test::Utils::log_path;
my %port = map { $_ => PostgreSQL::Test::Cluster::get_free_port() } qw(mon n1 n2);
my %run;
my @holders = qw(c1 c2);

sub autoctl
{
	my @cmd = ($autoctl, @_);
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	return $out;
}

# the pid of a node's keeper: the node-active service of its `pg_autoctl
# run`, in that command's process group
sub keeper_of
{
	my ($name) = @_;
	my $pgid = $run{$name}{KIDS}[0]{PID};
	for (split /\n/, `ps -e -o pid=,pgid=,args=`)
	{
		my ($pid, $g, $args) = /^\s*(\d+)\s+(\d+)\s+(.*)$/ or next;
		return $pid if $g == $pgid && $pid != $pgid && $args =~ /node.active/;
	}
	return undef;
}

sub start_node
{
	my ($name) = @_;
	$run{$name} = IPC::Run::start([ $autoctl, 'run', '--pgdata', "$dir/$name" ],
		'<', \undef, '>>', "$log/190_$name.log", '2>&1',
		init => sub { POSIX::setsid() });
}

# name => [reported, assigned]
sub states
{
	my %s;
	for (split /\n/, eval { autoctl('show', 'state', '--pgdata', "$dir/mon") } // '')
	{
		my @f = map { s/^\s+|\s+$//gr } split /\|/;
		$s{ $f[0] } = [ $f[5], $f[6] ] if @f >= 7 && $f[1] =~ /^\d+$/;
	}
	return \%s;
}

sub converged
{
	my (%want) = @_;
	my $s = states();
	for (keys %want)
	{
		return 0 unless $s->{$_} && $s->{$_}[0] eq $want{$_} && $s->{$_}[1] eq $want{$_};
	}
	return 1;
}

# psql on one node (by name) or on the read-write node
sub psql
{
	my ($target, $sql) = @_;
	my $conn = $target eq 'rw'
	  ? "host=127.0.0.1,127.0.0.1 port=$port{n1},$port{n2} dbname=app target_session_attrs=read-write connect_timeout=2"
	  : "host=127.0.0.1 port=$port{$target} dbname=app connect_timeout=2";
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run([ 'psql', '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1',
			'-v', 'VERBOSITY=verbose', '-d', $conn, '-f', '-' ],
			'<', \$sql, '>', \$out, '2>', \$err, IPC::Run::timeout(15));
	};
	chomp $out;
	return ($ok ? 1 : 0, $out, $err);
}

# the pid in a data directory's postmaster.pid, if any
sub postmaster_of
{
	my ($name) = @_;
	open my $f, '<', "$dir/$name/postmaster.pid" or return undef;
	my $pm = <$f>;
	chomp $pm if defined $pm;
	return $pm && $pm =~ /^\d+$/ ? $pm : undef;
}

END
{
	my $rc = $?;
	return unless defined $dir;
	kill 'CONT', $keeper if $keeper;
	kill_campaigners();
	# Let each postmaster end its children before anything is killed: the
	# monitor's health check worker outlives a SIGKILLed postmaster, and
	# keeps its logger alive with it.
	for my $name (qw(n1 n2 mon))
	{
		next unless -d "$dir/$name";
		my $pm = postmaster_of($name);
		system($autoctl, 'stop', '--pgdata', "$dir/$name", '--immediate') if $run{$name};
		my $end = now() + 30;
		select(undef, undef, undef, 0.1) while $pm && kill(0, $pm) && now() < $end;
	}
	for my $name (qw(n1 n2 mon))
	{
		next unless -d "$dir/$name";
		if ($run{$name})
		{
			my $pid = $run{$name}{KIDS}[0]{PID};
			kill 'KILL', -$pid if $pid;
			eval { $run{$name}->finish };
		}
		my $pm = postmaster_of($name);
		if ($pm && kill 0, $pm)
		{
			my @kids = split ' ', `pgrep -P $pm`;
			kill 'KILL', $pm, @kids;
		}
	}
	$? = $rc;
}
$SIG{TERM} = $SIG{INT} = sub { die "signal" };

# --- the monitor (TESTING.md's recipe, including its workarounds)
open my $sc, '>', "$dir/sock.conf" or die;
print $sc "unix_socket_directories = '$sock'\nlisten_addresses = '127.0.0.1'\n";
close $sc;
my @mon = ('--pgdata', "$dir/mon", '--pgport', $port{mon}, '--hostname',
	'127.0.0.1', '--auth', 'trust', '--no-ssl', '--pgctl', $pg_ctl);
eval { autoctl('create', 'monitor', @mon) };    # fails on /var/run/postgresql
append_to_file("$dir/mon/postgresql.conf", "include '$dir/sock.conf'\n");
autoctl('config', 'set', '--pgdata', "$dir/mon", 'postgresql.listen_addresses', '127.0.0.1');
autoctl('create', 'monitor', @mon);
autoctl('config', 'set', '--pgdata', "$dir/mon", 'postgresql.listen_addresses', '127.0.0.1');
start_node('mon');
poll_until('monitor', sub { system('pg_isready', '-q', '-p', $port{mon}) == 0 });
# shorter failure detection and demote timeout than the defaults (20 s, 30 s)
for ("health_check_period = 1000", "health_check_timeout = 1000",
	"health_check_retry_delay = 500", "health_check_max_retries = 1",
	"node_considered_unhealthy_timeout = 3000", "primary_demote_timeout = 5000")
{
	system_or_bail('psql', '-X', '-q', '-p', $port{mon}, '-d', 'pg_auto_failover',
		'-c', "ALTER SYSTEM SET pgautofailover.$_");
}
system_or_bail('psql', '-X', '-q', '-p', $port{mon}, '-d', 'pg_auto_failover',
	'-c', 'SELECT pg_reload_conf()');

# --- two nodes; pg_tenure preloaded by an include after pg_autoctl's own
append_to_file("$dir/tenure.conf", "shared_preload_libraries = 'pg_stat_statements,pg_tenure'\n");
system_or_bail('initdb', '-D', "$dir/n1", '-A', 'trust');
append_to_file("$dir/n1/postgresql.conf", "include '$dir/sock.conf'\ninclude '$dir/tenure.conf'\n");
for my $n (qw(n1 n2))
{
	autoctl('create', 'postgres', '--pgdata', "$dir/$n", '--pgport', $port{$n},
		'--listen', '127.0.0.1', '--hostname', '127.0.0.1', '--name', $n,
		'--dbname', 'app', '--auth', 'trust', '--no-ssl', '--pgctl', $pg_ctl,
		'--monitor', "postgres://autoctl_node\@127.0.0.1:$port{mon}/pg_auto_failover?sslmode=disable");
	start_node($n);
	poll_until("$n joined", sub { my $s = states(); $s->{$n} && $s->{$n}[0] eq $s->{$n}[1] && $s->{$n}[0] =~ /single|secondary/ });
}
poll_until('primary and secondary', sub { converged(n1 => 'primary', n2 => 'secondary') });
pass('pg_auto_failover: n1 primary, n2 secondary');

my ($ok, $out, $err) = psql('rw', qq{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('w', ttl => '$ttl s');
	CREATE TABLE public.ledger (holder text, seq int, epoch bigint, PRIMARY KEY (holder, seq));
	SELECT tenure.fence_table('public.ledger', 'w');
});
ok($ok, 'extension, lease and fenced table created') or diag $err;

# --- campaigners: acquire/renew every ttl/4; the leader by the client rule writes
# (TenureHA.pm's loop; lines: campaign sent recv port epoch leader_is,
# lead recv epoch, write t0 t1 holder seq epoch result)
sub campaigner
{
	my ($holder) = @_;
	run_campaigner(
		dir => $dir,
		holder => $holder,
		period => $ttl / 4,
		ttl => $ttl,
		step => sub {
			my ($l, $sent) = @_;
			my ($ok, $out) = psql('rw', "SELECT inet_server_port(), e, tenure.leader_is('w', '$holder') FROM tenure.acquire('w', '$holder') e");
			my $recv = now();
			my ($p, $e, $li) = split /\|/, $out // '';
			if ($ok && defined $e && $e ne '')
			{
				printf $l "campaign %.6f %.6f %s %s %s\n", $sent, $recv, $p, $e, $li;
				return ($e, $li, $recv);
			}
			printf $l "campaign %.6f %.6f - - -\n", $sent, $recv;
			return (undef, undef, $recv);
		},
		write => sub {
			my ($l, $seq, $epoch) = @_;
			my $t0 = now();
			my ($r) = ledger_write(\&psql, $holder, $seq, $epoch);
			printf $l "write %.6f %.6f %s %d %s %s\n", $t0, now(), $holder, $seq, $epoch, $r;
			return $r;
		});
}
start_campaigners(\&campaigner, @holders);
# acknowledged writes under an epoch first returned after $t
sub acked_after
{
	my ($t) = @_;
	my @ev = events($dir, @holders);
	my %new = map { $_->[5] => 1 } grep { $_->[1] eq 'campaign' && $_->[2] > $t && $_->[5] ne '-' } @ev;
	return grep { $_->[1] eq 'write' && $_->[7] =~ /^ack/ && $new{ $_->[6] } } @ev;
}

# Whether $node has synchronous_standby_names, looked up at most once a
# second.  A converged primary without it has the monitor send it the
# formation's settings again (apply_settings fetches them anew), at most
# every 5 s.
my (%sync_looked, %sync_on, $last_nudge);
sub sync_in_force
{
	my ($node) = @_;
	return $sync_on{$node} if now() < ($sync_looked{$node} // 0) + 1;
	$sync_looked{$node} = now();
	my ($ok, $names) = psql($node, 'SHOW synchronous_standby_names');
	$sync_on{$node} = $ok && $names ne '' ? 1 : 0;
	if ($ok && $names eq '' && now() >= ($last_nudge // 0) + 5 && converged($node => 'primary'))
	{
		$last_nudge = now();
		diag "$node is primary without synchronous_standby_names: re-applying the formation's settings";
		system('psql', '-X', '-q', '-p', $port{mon}, '-d', 'pg_auto_failover', '-c',
			"SELECT pgautofailover.set_formation_number_sync_standbys('default', 0)");
	}
	return $sync_on{$node};
}

# synchronous replication in force on $node, and $count writes after $t
# that the standby had flushed at their COMMIT
sub sync_writes_on
{
	my ($node, $t, $count) = @_;
	poll_until("synchronous replication on $node", sub {
		return sync_in_force($node)
		  && (grep { $_->[1] eq 'write' && $_->[7] eq 'ack' && $_->[2] > $t } events($dir, @holders)) >= $count;
	});
}

poll_until('acknowledged writes', sub { acked_after(0) >= 10 });
sync_writes_on('n1', 0, 5);

sub check_after_failover
{
	my ($what, $t_fail, $new) = @_;
	# issued on the new primary: returned by it after the failure began;
	# everything else was issued before (the old primary may still renew
	# while a planned switchover drains it)
	my @c = grep { $_->[1] eq 'campaign' && $_->[5] ne '-' } events($dir, @holders);
	my $on_new = sub { $_[0][4] eq $port{$new} && $_[0][2] > $t_fail };
	my @new = map { $_->[5] } grep { $on_new->($_) } @c;
	my @old = map { $_->[5] } grep { !$on_new->($_) } @c;
	my ($maxold) = sort { $b <=> $a } @old;
	my ($minnew) = sort { $a <=> $b } @new;
	cmp_ok($minnew, '>', $maxold, "$what: first epoch on the new primary > every earlier epoch");
	my (undef, $tli) = psql($new, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int");
	my (undef, $h) = psql($new, "SELECT coalesce(min(epoch) FILTER (WHERE issued_tli = $tli), 0) > coalesce(max(epoch) FILTER (WHERE issued_tli < $tli), 0) FROM tenure.history WHERE lease = 'w'");
	is($h, 't', "$what: tenure.history: epochs of the new timeline exceed all earlier ones");
	my %seen;
	for my $e (grep { !$seen{$_}++ } @old)
	{
		my ($ok, undef, $err) = psql($new, fenced_write('public.ledger', 'w', $e, "'old', -1, $e"));
		ok(!$ok && $err =~ /TN002/, "$what: old token $e gets TN002 on the new primary");
	}
	my @ev = events($dir, @holders);
	my (undef, $rows) = psql($new, "SELECT holder || ':' || seq || ':' || epoch FROM public.ledger");
	my %have = map { $_ => 1 } split /\n/, $rows;
	my @acked = map { "$_->[4]:$_->[5]:$_->[6]" } grep { $_->[1] eq 'write' && $_->[7] eq 'ack' } @ev;
	my @lost = grep { !$have{$_} } @acked;
	is("@lost", '', "$what: all " . scalar(@acked) . " writes a standby had flushed at their COMMIT are on the new primary")
	  or diag "pg_auto_failover's events:\n" . eval { autoctl('show', 'events', '--count', '60', '--pgdata', "$dir/mon") };
	my @local = map { "$_->[4]:$_->[5]:$_->[6]" } grep { $_->[1] eq 'write' && $_->[7] eq 'ack_local' } @ev;
	diag "$what: " . scalar(@local) . " writes acknowledged before a standby had them, "
	  . scalar(grep { !$have{$_} } @local) . " of them not on the new primary";
	my @bad = grep { $have{"$_->[4]:$_->[5]:$_->[6]"} } grep { $_->[1] eq 'write' && $_->[7] eq 'tn002' } @ev;
	is(scalar(@bad), 0, "$what: no TN002-rejected write is there");
	diag "$what: tenure.history on the new primary:\n" . (psql($new, "SELECT epoch, holder, started, ended, end_reason, issued_tli FROM tenure.history WHERE lease = 'w' ORDER BY epoch"))[1];
}

# --- planned switchover, with the old primary's keeper frozen: n1 does not
# learn of it and goes on serving, while n2 is promoted and, once the
# demote timeout has passed, let write.  The clients try n1 first; every
# COMMIT there after n2's promotion waits for a synchronous standby that
# is gone, and no write that n2 had not flushed may count as replicated.
my $t1 = now();
# Frozen, n1's keeper cannot change n1's settings: switch over only with
# synchronous replication in force there.  The monitor refuses a failover
# while the standby is not a secondary (a health check that failed a
# moment ago): ask again once it is.
poll_until('switchover begun', sub {
	return 0 unless sync_in_force('n1') && converged(n1 => 'primary', n2 => 'secondary');
	$keeper = keeper_of('n1') or return 0;
	kill('STOP', $keeper) or return 0;
	my ($ok, $names) = psql('n1', 'SHOW synchronous_standby_names');
	return 1 if $ok && $names ne '' && system('psql', '-X', '-q', '-p', $port{mon}, '-d',
		'pg_auto_failover', '-c', 'SELECT pgautofailover.perform_failover()') == 0;
	kill 'CONT', $keeper;
	$keeper = undef;
	return 0;
});
poll_until('n2 takes writes while n1 is frozen', sub { converged(n2 => 'wait_primary') });
my (undef, $n1_rw) = psql('n1', 'SELECT NOT pg_is_in_recovery()');
is($n1_rw, 't', 'switchover: n1, frozen, still serves as a primary after n2 was promoted');
kill 'CONT', $keeper;
$keeper = undef;
poll_until('n2 primary', sub { converged(n2 => 'primary') });
poll_until('writes under a new epoch', sub { acked_after($t1) >= 5 });
check_after_failover('switchover', $t1, 'n2');
poll_until('n1 secondary again', sub { converged(n1 => 'secondary', n2 => 'primary') });
sync_writes_on('n2', now(), 1);

# --- node kill: SIGKILL of n2's pg_autoctl (its process group) and postmaster
open my $pf, '<', "$dir/n2/postmaster.pid" or die;
chomp(my $pm = <$pf>);
close $pf;
my $t2 = now();
kill 'KILL', $pm;
kill 'KILL', -$run{n2}{KIDS}[0]{PID};
poll_until('n1 takes over', sub { my $s = states(); $s->{n1} && $s->{n1}[0] eq $s->{n1}[1] && $s->{n1}[0] =~ /^(wait_primary|primary)$/ });
poll_until('writes under a new epoch', sub { acked_after($t2) >= 5 });
end_campaigners();
check_after_failover('node kill', $t2, 'n1');

# --- never two leaders by the client rule: [lead observed, last renew sent + ttl]
my (%iv, %last);
for my $e (events($dir, @holders))
{
	if ($e->[1] eq 'campaign' && $e->[5] ne '-') { $last{"$e->[0]/$e->[5]"} = $e->[2] }
	if ($e->[1] eq 'lead') { $iv{"$e->[0]/$e->[3]"} = $e->[2] }
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
my @nat = grep { $_->[1] eq 'write' && $_->[7] eq 'tn002' } events($dir, @holders);
diag scalar(@nat) . ' writes by a stale leader were rejected with TN002 in the run';

done_testing();
