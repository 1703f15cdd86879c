
# An acquisition whose transaction never commits holds the lease for at most
# its ttl, counted from the reservation.
#
# (a) The client comes back after the ttl, nobody having taken the lease
#     meanwhile: its COMMIT fails (SQLSTATE TN001) before the commit record,
#     and nothing of the acquisition remains: no epoch, no history row, no
#     tenure.
# (b) The client stays idle in its transaction: a second acquirer waiting in
#     acquire() takes the lease over after the first one's ttl, without
#     waiting for the client.  The abandoned transaction holds the lease's
#     row lock in tenure.lease (it issued its epoch there), which only its
#     end frees, so its backend is terminated, and nothing of it remains.
# (c) The history rows an open acquisition locks (closing the tenures a
#     crash left open, of every lease) do not hold up acquirers of other
#     leases.
# (d) The take-over terminates the abandoned backend only where
#     pg_terminate_backend, called by the current user of the acquire call,
#     would: Mallory's SECURITY DEFINER function, which Bob calls, acquires
#     her lease inside Bob's transaction, which stays idle (a trigger of
#     hers cannot: pg_tenure's functions refuse to run in triggers); Mallory may not terminate Bob,
#     so each of her acquisitions fails at once with 55P03 naming his
#     backend, and Bob's session lives on.
# (e) A member of the abandoned backend's role, or of pg_signal_backend,
#     takes the lease over as in (b).
# (f) A superuser's abandoned acquisition: every call of a non-superuser,
#     not only the first, fails at once with 55P03; none waits for the
#     lease's row lock.  (statement_timeout bounds every call that must not
#     wait, so that a regression fails instead of hanging.)
#
# Only outcomes and messages are asserted, never how long anything took.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('abandoned');
$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('late', ttl => '1 s', holdoff => '0');
	SELECT tenure.create_lease('idle', ttl => '1 s', holdoff => '0');
});

# What the server keeps of a lease: epoch, history rows, holder, transitions.
sub lease_state
{
	my ($lease) = @_;
	return $node->safe_psql('postgres',
		"SELECT tenure.current_epoch('$lease'),"
		  . " (SELECT count(*) FROM tenure.history WHERE lease = '$lease'),"
		  . " (SELECT coalesce(holder, 'none') || ':' || transitions"
		  . "    FROM tenure.leases WHERE lease = '$lease')");
}

#
# (a) the COMMIT comes after the ttl
#
my $before = lease_state('late');
is($before, '0|0|none:0', 'lease late has never been held');

my $late = $node->background_psql('postgres', on_error_stop => 0);
$late->query_safe('\set VERBOSITY verbose');
my $epoch = $late->query_safe(
	"BEGIN; SELECT tenure.acquire('late', 'a');");
like($epoch, qr/^\d+$/, "the late client acquired late at epoch $epoch");

# its transaction started before the acquisition: wait until its clock is
# well past the acquisition's ttl
wait_until(
	'the clock to move past the ttl',
	sub {
		$late->query_safe("SELECT clock_timestamp() > now() + interval '1.5 s';")
		  =~ /^t/;
	}) or die "the clock did not move";

my ($out, $ret) = $late->query('COMMIT;');
like(
	$late->{stderr},
	qr/ERROR:  TN001: acquisition of lease "late" expired before its transaction committed/,
	'the late COMMIT fails with TN001');
$late->{stderr} = '';
is(lease_state('late'), $before,
	'the failed COMMIT changed nothing: epoch, history, tenure.leases');
is($late->query_safe("SELECT tenure.acquire('late', 'a') IS NOT NULL;"),
	't', 'the client acquires the lease again in a new transaction');
is($node->safe_psql('postgres', "SELECT tenure.leader_is('late', 'a')"),
	't', 'and leads');
$late->quit;

#
# (b) the client stays idle in its transaction
#
$before = lease_state('idle');
my $idle = $node->background_psql('postgres', on_error_stop => 0);
my $idle_pid = $idle->query_safe('SELECT pg_backend_pid();');
my $idle_epoch =
  $idle->query_safe("BEGIN; SELECT tenure.acquire('idle', 'a');");
like($idle_epoch, qr/^\d+$/,
	"the idle client acquired idle at epoch $idle_epoch and stays idle");
is( $node->safe_psql(
		'postgres',
		"SELECT state FROM pg_stat_activity WHERE pid = $idle_pid"),
	'idle in transaction',
	'its session is idle in transaction');

my $log_offset = -s $node->logfile;
# (the ttl, 1 s for the take-over, becomes 10 min once b holds the lease,
# so that the checks below do not race its expiry on a busy machine)
my $second = $node->safe_psql('postgres',
	"SELECT tenure.acquire('idle', 'b', wait => '10 s')");
$node->safe_psql('postgres', "SELECT tenure.alter_lease('idle', ttl => '10 min')");
like($second, qr/^\d+$/,
	"a second acquirer takes the lease over after the ttl (epoch $second)");
is($node->safe_psql('postgres', "SELECT tenure.leader_is('idle', 'b')"),
	't', 'the second acquirer leads');
ok( $node->log_contains(
		qr/terminating backend $idle_pid for an expired acquisition of lease "idle"/,
		$log_offset),
	'the abandoned backend was terminated, and the log says why');
ok( $node->poll_query_until(
		'postgres',
		"SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $idle_pid)"),
	'the abandoned session is gone');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(holder || ':' || coalesce(end_reason, 'open'), ',')"
		  . " FROM tenure.history WHERE lease = 'idle'"),
	'b:open',
	'history: only the second acquirer\'s tenure, nothing of the abandoned one');
is( $node->safe_psql(
		'postgres',
		"SELECT holder, epoch = $second, transitions FROM tenure.leases WHERE lease = 'idle'"),
	'b|t|1',
	'tenure.leases: the second acquirer, its epoch, one transition');
eval { $idle->quit; };

#
# (c) after a crash, the first acquisition in the database closes in the
#     history the tenures of every lease the crash left open; while its
#     transaction is open, an acquirer of another lease skips those rows
#     instead of waiting for it
#
$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('x', ttl => '10 min', holdoff => '0');
	SELECT tenure.create_lease('y', ttl => '10 min', holdoff => '0');
	SELECT tenure.acquire('x', 'old');
	SELECT tenure.acquire('y', 'old');
});
$node->stop('immediate');
$node->start;

my $first = $node->background_psql('postgres', on_error_stop => 0);
like($first->query_safe("BEGIN; SELECT tenure.acquire('x', 'a');"),
	qr/^\d+$/, 'the first acquisition after the crash, of x, is open');
($ret, $out, my $err) = $node->psql('postgres',
	"SET lock_timeout = '5 s';\nSELECT tenure.acquire('y', 'b') IS NOT NULL;");
is($err, '', 'an acquisition of y meanwhile does not wait for it');
is($out, 't', 'and acquires y');
$first->query_safe('COMMIT;');
$first->quit;
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(lease || ':' || holder || ':' || coalesce(end_reason, 'open'), ','"
		  . " ORDER BY lease, epoch) FROM tenure.history WHERE lease IN ('x', 'y')"),
	'x:old:server restart,x:a:open,y:old:server restart,y:b:open',
	'history: the tenures the crash left open are closed, the new ones open');

#
# (d) Mallory may not terminate Bob's backend
#
$node->safe_psql(
	'postgres', q{
	CREATE ROLE mallory LOGIN;
	CREATE ROLE bob LOGIN;
	GRANT EXECUTE ON FUNCTION
	  tenure.create_lease(text, interval, interval, bigint, text) TO mallory;
	CREATE SCHEMA mallory AUTHORIZATION mallory;
	SET ROLE mallory;
	SELECT tenure.create_lease('m', ttl => '1 s', holdoff => '0');
	CREATE TABLE mallory.t (x int);
	CREATE FUNCTION mallory.trap_trigger() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
	BEGIN
		PERFORM tenure.acquire('m', 'mallory');
		RETURN NEW;
	END
	$$;
	CREATE TRIGGER trap BEFORE INSERT ON mallory.t
	  FOR EACH ROW EXECUTE FUNCTION mallory.trap_trigger();
	CREATE FUNCTION mallory.trap() RETURNS void
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
	BEGIN
		PERFORM tenure.acquire('m', 'mallory');
	END
	$$;
	GRANT USAGE ON SCHEMA mallory TO bob;
	GRANT INSERT ON mallory.t TO bob;
	GRANT EXECUTE ON FUNCTION mallory.trap() TO bob;
});

# A trigger cannot acquire (or change any lease) in the writer's
# transaction at all: Bob's insert into her table fails.
{
	my ($ret, $out, $err) = $node->psql('postgres',
		'INSERT INTO mallory.t VALUES (0)',
		extra_params => [ '-U', 'bob' ]);
	like($err, qr/cannot execute tenure\.acquire\(\) from a trigger/,
		"Mallory's trigger cannot acquire her lease inside Bob's insert");
}

# Wait until the server's clock is well past the ttl of lease m, counted
# from $at (a clock_timestamp() taken after the acquisition).
sub wait_past_ttl
{
	my ($at) = @_;
	return wait_until(
		"the ttl of m to pass",
		sub {
			$node->safe_psql('postgres',
				"SELECT clock_timestamp() > '$at'::timestamptz + interval '1.5 s'"
			) eq 't';
		});
}

# Bob calls Mallory's SECURITY DEFINER function, which acquires m inside
# his transaction, which then stays idle past m's ttl.  Returns his
# session and its pid.
sub bob_abandons
{
	my $bob = $node->background_psql(
		'postgres',
		on_error_stop => 0,
		extra_params => [ '-U', 'bob' ]);
	$bob->query_safe('\set VERBOSITY verbose');
	my $pid = $bob->query_safe('SELECT pg_backend_pid();');
	my $at = $bob->query_safe(
		"BEGIN; SELECT mallory.trap(); SELECT clock_timestamp();");
	is( $node->safe_psql(
			'postgres',
			"SELECT state FROM tenure._lease_state() WHERE lease = 'm'"),
		'pending',
		"Bob's transaction (backend $pid) is acquiring m for Mallory");
	wait_past_ttl($at);
	return ($bob, $pid);
}

# Runs $sql as Mallory; returns psql's stderr.
sub as_mallory
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql(
		'postgres',
		"SET statement_timeout = '5 s';\n\\set VERBOSITY verbose\n$sql",
		on_error_stop => 0,
		extra_params => [ '-U', 'mallory' ]);
	return ($out, $err);
}

my ($bob, $bob_pid) = bob_abandons();
$log_offset = -s $node->logfile;

(undef, $err) = as_mallory("SELECT pg_terminate_backend($bob_pid);");
like(
	$err,
	qr/ERROR:  42501: /,
	'pg_terminate_backend of Bob is refused to Mallory');

(undef, $err) = as_mallory(
	qq{SELECT tenure.acquire('m', 'mallory', wait => '0');
SELECT tenure.acquire('m', 'mallory', wait => '10 s');
SELECT tenure.acquire_or_error('m', 'mallory');});
my @refused = ($err =~
	  /ERROR:  55P03: lease "m" is locked by an expired acquisition of backend $bob_pid\n/g
);
is(scalar(@refused), 3,
	'each of Mallory\'s acquisitions fails at once with 55P03 naming Bob\'s backend'
) or diag($err);
like(
	$err,
	qr/DETAIL:  Its transaction has neither committed nor rolled back\. Only roles with privileges of the role of that backend or of the "pg_signal_backend" role may terminate it\./,
	'the detail says who may terminate it');
unlike($err, qr/57014/, 'none of them waited for the statement timeout');

# the current user counts, as for pg_terminate_backend: a superuser's
# session acting as Mallory is refused too
($ret, $out, $err) = $node->psql(
	'postgres',
	"SET ROLE mallory;\nSET statement_timeout = '5 s';\n"
	  . "SELECT tenure.acquire('m', 'mallory', wait => '0');",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like(
	$err,
	qr/ERROR:  55P03: lease "m" is locked by an expired acquisition of backend $bob_pid\n/,
	'a superuser\'s session after SET ROLE mallory is refused too');

ok( !$node->log_contains(qr/terminating backend $bob_pid/, $log_offset),
	'nobody terminated Bob\'s backend');
is($bob->query_safe('SELECT 1;'), '1', 'Bob\'s session lives on');
$bob->query('COMMIT;');
like(
	$bob->{stderr},
	qr/ERROR:  TN001: acquisition of lease "m" expired before its transaction committed/,
	'Bob\'s COMMIT fails with TN001, his acquisition having expired');
$bob->quit;
($out, $err) = as_mallory(
	"SELECT tenure.acquire('m', 'mallory', wait => '0') IS NOT NULL;\n"
	  . "SELECT tenure.release('m', 'mallory');");
is($out, "t\nt", 'Bob\'s transaction ended: Mallory acquires m and releases it')
  or diag($err);

#
# (e) a member of Bob's role, or of pg_signal_backend, takes the lease over
#
foreach my $grant ('bob', 'pg_signal_backend')
{
	$node->safe_psql('postgres', "GRANT $grant TO mallory");
	($bob, $bob_pid) = bob_abandons();
	$log_offset = -s $node->logfile;
	($out, $err) = as_mallory(
		"SELECT tenure.acquire('m', 'mallory', wait => '0') IS NOT NULL;");
	is($out, 't',
		"a member of $grant takes the lease over from Bob's expired acquisition"
	) or diag($err);
	ok( $node->log_contains(
			qr/terminating backend $bob_pid for an expired acquisition of lease "m"/,
			$log_offset),
		"and terminates Bob's backend, as pg_terminate_backend would let her");
	ok( $node->poll_query_until(
			'postgres',
			"SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $bob_pid)"
		),
		'Bob\'s session is gone');
	eval { $bob->quit; };
	($out, $err) = as_mallory("SELECT tenure.release('m', 'mallory');");
	is($out, 't', 'Mallory releases m') or diag($err);
	$node->safe_psql('postgres', "REVOKE $grant FROM mallory")
	  unless $grant eq 'pg_signal_backend';
}

#
# (f) a superuser's abandoned acquisition: Mallory (a member of
#     pg_signal_backend since (e)) is refused at every call, at once
#
my $root = $node->background_psql('postgres', on_error_stop => 0);
my $root_pid = $root->query_safe('SELECT pg_backend_pid();');
my $root_at = $root->query_safe(
	"BEGIN; SELECT tenure.acquire('m', 'root') IS NOT NULL; SELECT clock_timestamp();"
);
like($root_at, qr/^t\n/,
	'a superuser\'s transaction acquires m and stays idle');
$root_at =~ s/^t\n//;
wait_past_ttl($root_at);

(undef, $err) = as_mallory(join("\n",
		("SELECT tenure.acquire('m', 'mallory', wait => '0');") x 3,
		("SELECT tenure.acquire_or_error('m', 'mallory');") x 3));
@refused = ($err =~
	  /ERROR:  55P03: lease "m" is locked by an expired acquisition of backend $root_pid\n/g
);
is(scalar(@refused), 6,
	'all six acquire(wait => 0) and acquire_or_error calls fail at once with 55P03'
) or diag($err);
like(
	$err,
	qr/DETAIL:  Its transaction has neither committed nor rolled back\. Only roles with the SUPERUSER attribute may terminate backends of roles with the SUPERUSER attribute\./,
	'the detail says only a superuser may terminate it');
unlike($err, qr/57014/, 'none of them waited for the lease\'s row lock');
is($root->query_safe('SELECT 1;'), '1', 'the superuser\'s session lives on');
$root->query_safe('ROLLBACK;');
$root->quit;
($out, $err) = as_mallory(
	"SELECT tenure.acquire('m', 'mallory', wait => '0') IS NOT NULL;");
is($out, 't',
	'once the superuser\'s transaction ended, Mallory acquires m at once')
  or diag($err);

done_testing();
