# A private PgBouncer in front of a PostgreSQL::Test::Cluster node, for the
# TAP tests that run clients through a real pooler.
#
#   my $bouncer = TenureBouncer->new($node, 'name',
#       pool_size => 2,
#       databases => { tx => 'pool_mode=transaction', st => 'pool_mode=statement' });
#   $bouncer->connstr('tx');            # libpq connection string of a database
#   $bouncer->psql('tx', $sql);         # (stdout, stderr, exit status of psql)
#   $bouncer->admin('RECONNECT tx');    # a command on the admin console
#   $bouncer->stop;
#
# It listens on a Unix socket only (listen_addr empty), runs as the test
# user, forces the cluster's superuser on every database (auth_type = any
# needs a forced user) and logs to the test's log directory.  It is a child
# of the test process, killed at the latest when the test exits.  A missing
# pgbouncer fails the test: test/run.sh installs it.

package TenureBouncer;

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my @running;

sub new
{
	my ($class, $node, $name, %params) = @_;
	my $bin = $ENV{PGBOUNCER} // '/usr/sbin/pgbouncer';
	my $dir = PostgreSQL::Test::Utils::tempdir_short();
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $user = $node->safe_psql('postgres', 'SELECT current_user');
	my $log = "$PostgreSQL::Test::Utils::log_path/pgbouncer_$name.log";
	my $pool_size = $params{pool_size} // 2;
	my $databases = $params{databases} // { tx => 'pool_mode=transaction' };
	my $self;

	BAIL_OUT("pgbouncer is not installed ($bin); test/run.sh installs it")
	  unless -x $bin;

	open(my $ini, '>', "$dir/pgbouncer.ini") or die "$dir/pgbouncer.ini: $!";
	print $ini "[databases]\n";
	printf $ini "%s = dbname=postgres user=%s host=%s port=%d %s\n",
	  $_, $user, $node->host, $node->port, $databases->{$_}
	  for sort keys %$databases;
	print $ini <<"EOF";
[pgbouncer]
listen_addr =
listen_port = $port
unix_socket_dir = $dir
auth_type = any
admin_users = $user
pool_mode = transaction
default_pool_size = $pool_size
max_client_conn = 200
logfile = $log
EOF
	close($ini);

	$self = bless {
		name => $name,
		dir => $dir,
		port => $port,
		user => $user,
		node => $node,
	}, $class;
	$self->{handle} = IPC::Run::start([ $bin, "$dir/pgbouncer.ini" ],
		'<', \undef, '>', \$self->{out}, '2>', \$self->{out});
	push @running, $self->{handle};

	# wait (bounded) until it answers on its admin console
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	until (($self->admin('SHOW VERSION'))[2] == 0)
	{
		if (time() > $deadline || !$self->{handle}->pumpable)
		{
			$self->{handle}->pump_nb if $self->{handle}->pumpable;
			BAIL_OUT("pgbouncer did not start: " . ($self->{out} // ''));
		}
		usleep(50_000);
	}
	note("pgbouncer $name listening in $dir, port $port");
	return $self;
}

# A libpq connection string for one of its databases.
sub connstr
{
	my ($self, $db) = @_;

	return "host=$self->{dir} port=$self->{port} dbname=$db";
}

# Run SQL with psql through the pooler: (stdout, stderr, exit status).
sub psql
{
	my ($self, $db, $sql) = @_;
	my ($out, $err) = ('', '');

	IPC::Run::run(
		[
			$self->{node}->installed_command('psql'), '-XAtq',
			'-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose',
			'-d', $self->connstr($db), '-f', '-'
		],
		'<', \$sql, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	chomp($out);
	return ($out, $err, $? >> 8);
}

# A command on the admin console: (stdout, stderr, exit status).
sub admin
{
	my ($self, $command) = @_;
	my ($out, $err) = ('', '');

	IPC::Run::run(
		[
			$self->{node}->installed_command('psql'), '-XAtq',
			'-d', $self->connstr('pgbouncer'), '-c', $command
		],
		'<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	chomp($out);
	return ($out, $err, $? >> 8);
}

# A background psql session through the pooler (see BackgroundPsql).
sub background_psql
{
	my ($self, $db, %params) = @_;

	return $self->{node}->background_psql(
		'postgres',
		on_error_stop => 0,
		extra_params => [ '-d', $self->connstr($db) ],
		%params);
}

# Stop it (SIGTERM: immediate shutdown in PgBouncer 1.18).
sub stop
{
	my ($self) = @_;
	my $h = $self->{handle};

	return unless $h->pumpable;
	$h->signal('TERM');
	$h->finish;
	@running = grep { $_ != $h } @running;
	return;
}

END
{
	local $?;    # keep the test's exit status

	eval { $_->kill_kill(grace => 1) } for @running;
}

1;
