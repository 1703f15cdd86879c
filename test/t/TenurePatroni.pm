# A Patroni cluster for pg_tenure's TAP tests: one etcd member as its store
# and Patroni nodes, all on 127.0.0.1, all as the test user, everything
# under the test's temporary directory.
#
#   my $cluster = TenurePatroni->new('name', nodes => [qw(n1 n2)],
#       parameters => { 'tenure.demotion_bound' => '20s' });
#   $cluster->start('n1');            # bootstraps the cluster (initdb)
#   $cluster->start('n2');            # a replica, cloned by pg_basebackup
#   $cluster->members;                # name => { role => 'leader' |
#                                     # 'sync_standby' | 'replica', state,
#                                     # timeline }, from Patroni's REST API
#   $cluster->port('n1');             # PostgreSQL's port of a node
#   $cluster->conninfo('rw');         # every node, read-write only
#   $cluster->conninfo('n1');         # one node
#   my ($ok, $out, $err) = $cluster->psql('rw', $sql);
#   $cluster->patronictl('switchover', '--leader', 'n1', ...);
#   $cluster->postmaster('n1');       # its postmaster's pid, if any
#   $cluster->kill_node('n2');        # SIGKILL of Patroni and postmaster
#   $cluster->logfile('n1');          # Patroni's and PostgreSQL's log
#
# The configuration is the one doc/high-availability.md gives ("Failover
# under Patroni"): ttl 20 s (Patroni's least), loop_wait 1 s,
# retry_timeout 3 s, synchronous_mode, pg_tenure in
# postgresql.parameters.shared_preload_libraries, no watchdog.  Each
# Patroni runs in a process group of its own; at exit (also when the test
# dies) every Patroni, every postmaster and etcd are killed.  The caller
# checks that patroni, patronictl and etcd are installed.

package TenurePatroni;

use strict;
use warnings;

use HTTP::Tiny;
use IPC::Run;
use JSON::PP;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my @clusters;

sub new
{
	my ($class, $name, %params) = @_;
	my $dir = PostgreSQL::Test::Utils::tempdir("patroni_$name");
	my $self = bless {
		name => $name,
		dir => $dir,
		sock => PostgreSQL::Test::Utils::tempdir_short(),
		nodes => $params{nodes} // [qw(n1 n2)],
		parameters => $params{parameters} // {},
		bindir => $params{bindir} // _bindir(),
		run => {},
		owner => $$,
	}, $class;

	$self->{port}{$_} = PostgreSQL::Test::Cluster::get_free_port()
	  for 'etcd', 'etcd_peer', map { ($_, "api_$_") } @{ $self->{nodes} };
	push @clusters, $self;
	$self->_start_etcd;
	$self->_write_config($_) for @{ $self->{nodes} };
	return $self;
}

# the directory of the pg_ctl on PATH: make installcheck puts the
# installation's bindir first
sub _bindir
{
	my ($dir) = grep { -x "$_/pg_ctl" } split /:/, $ENV{PATH};
	die "pg_ctl is not on PATH" unless $dir;
	return $dir;
}

sub _start_etcd
{
	my ($self) = @_;
	my ($client, $peer) = map { "http://127.0.0.1:$self->{port}{$_}" } qw(etcd etcd_peer);
	my $log = "$PostgreSQL::Test::Utils::log_path/$self->{name}_etcd.log";

	$self->{etcd} = IPC::Run::start(
		[
			'etcd', '--name', 'tenure', '--data-dir', "$self->{dir}/etcd",
			'--listen-client-urls', $client, '--advertise-client-urls', $client,
			'--listen-peer-urls', $peer, '--initial-advertise-peer-urls', $peer,
			'--initial-cluster', "tenure=$peer"
		],
		'<', \undef, '>', $log, '2>&1',
		init => sub { POSIX::setsid() });
	_poll("etcd", sub {
		my $r = HTTP::Tiny->new(timeout => 2)->get("$client/health");
		return $r->{success} && $r->{content} =~ /"health":\s*"true"/;
	});
	return;
}

sub _write_config
{
	my ($self, $node) = @_;
	my $user = getpwuid($<);
	my %p = %{ $self->{port} };
	my ($api, $pg) = ($p{"api_$node"}, $p{$node});
	my $params = join '',
	  map { "    $_: '$self->{parameters}{$_}'\n" } sort keys %{ $self->{parameters} };

	open my $f, '>', "$self->{dir}/$node.yml" or die "$node.yml: $!";
	print $f <<"EOF";
scope: $self->{name}
name: $node
restapi:
  listen: 127.0.0.1:$api
  connect_address: 127.0.0.1:$api
etcd3:
  hosts: 127.0.0.1:$p{etcd}
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 3
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
  initdb:
    - auth: trust
postgresql:
  listen: 127.0.0.1:$pg
  connect_address: 127.0.0.1:$pg
  data_dir: $self->{dir}/$node
  bin_dir: $self->{bindir}
  pgpass: $self->{dir}/$node.pgpass
  remove_data_directory_on_rewind_failure: true
  basebackup:
    checkpoint: fast
  authentication:
    superuser:
      username: $user
    replication:
      username: $user
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
  parameters:
    shared_preload_libraries: pg_tenure
    unix_socket_directories: '$self->{sock}'
$params
watchdog:
  mode: off
EOF
	close $f;
	return;
}

sub start
{
	my ($self, $node) = @_;
	my $log = $self->logfile($node);

	$self->{run}{$node} = IPC::Run::start([ 'patroni', "$self->{dir}/$node.yml" ],
		'<', \undef, '>>', $log, '2>&1',
		init => sub { POSIX::setsid() });
	return;
}

sub logfile
{
	my ($self, $node) = @_;
	return "$PostgreSQL::Test::Utils::log_path/$self->{name}_$node.log";
}

sub port
{
	my ($self, $node) = @_;
	return $self->{port}{$node};
}

sub members
{
	my ($self) = @_;
	my $http = HTTP::Tiny->new(timeout => 2);

	# any node's REST API answers for the whole cluster
	for my $node (@{ $self->{nodes} })
	{
		my $api = $self->{port}{"api_$node"};
		my $r = $http->get("http://127.0.0.1:$api/cluster");
		next unless $r->{success};
		my $c = eval { decode_json($r->{content}) } or next;
		return { map { $_->{name} => $_ } @{ $c->{members} } };
	}
	return {};
}

sub conninfo
{
	my ($self, $target) = @_;
	my @n = $target eq 'rw' ? @{ $self->{nodes} } : ($target);

	return 'host=' . join(',', map { '127.0.0.1' } @n)
	  . ' port=' . join(',', map { $self->{port}{$_} } @n)
	  . ' dbname=postgres connect_timeout=2'
	  . ($target eq 'rw' ? ' target_session_attrs=read-write' : '');
}

sub psql
{
	my ($self, $target, $sql) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run(
			[
				'psql', '-X', '-q', '-At', '-v', 'ON_ERROR_STOP=1',
				'-v', 'VERBOSITY=verbose', '-d', $self->conninfo($target), '-f', '-'
			],
			'<', \$sql, '>', \$out, '2>', \$err, IPC::Run::timeout(15));
	};

	chomp $out;
	return ($ok ? 1 : 0, $out, $err);
}

sub patronictl
{
	my ($self, @args) = @_;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ 'patronictl', '-c', "$self->{dir}/$self->{nodes}[0].yml", @args ],
		'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(120));

	return ($ok ? 1 : 0, $out . $err);
}

sub postmaster
{
	my ($self, $node) = @_;

	open my $f, '<', "$self->{dir}/$node/postmaster.pid" or return undef;
	my $pm = <$f>;
	return $pm && $pm =~ /^(\d+)$/ ? $1 : undef;
}

sub kill_node
{
	my ($self, $node) = @_;
	my $pm = $self->postmaster($node);
	my $run = delete $self->{run}{$node};

	kill 'KILL', $pm if $pm;
	kill 'KILL', -$run->{KIDS}[0]{PID} if $run;
	eval { $run->finish } if $run;
	return;
}

sub _poll
{
	my ($what, $cond) = @_;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;

	until ($cond->())
	{
		die "timed out waiting for $what" if time() > $deadline;
		usleep(100_000);
	}
	return;
}

# every Patroni first (one that lived on would start its PostgreSQL
# again), then what they started, then etcd
sub _teardown
{
	my ($self) = @_;

	for my $node (keys %{ $self->{run} })
	{
		my $run = delete $self->{run}{$node};
		kill 'KILL', -$run->{KIDS}[0]{PID};
		eval { $run->finish };
	}
	for my $node (@{ $self->{nodes} })
	{
		my $pm = $self->postmaster($node);
		next unless $pm && kill 0, $pm;
		system("$self->{bindir}/pg_ctl", '-D', "$self->{dir}/$node", '-m', 'immediate',
			'stop');
		kill 'KILL', $pm if kill 0, $pm;
	}
	if (my $etcd = delete $self->{etcd})
	{
		kill 'KILL', -$etcd->{KIDS}[0]{PID};
		eval { $etcd->finish };
	}
	return;
}

END
{
	my $rc = $?;
	# not in a child the test forked
	$_->_teardown for grep { $_->{owner} == $$ } @clusters;
	$? = $rc;
}

1;
