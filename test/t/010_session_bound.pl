
# Session-bound tenures end when the acquiring backend exits
# (pg_terminate_backend here): the lease is free at once, the history says
# "session ended", a waiting acquirer takes over, and with the automatic
# hold-off the successor becomes leader only once the predecessor's last
# renewal plus ttl has passed.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('session_bound');

# Wait until a background session's statement returns a number; return it.
sub finish_number
{
	my ($session) = @_;
	my $out = $session->query_until(qr/^-?\d+\s*$/m, '');
	return $out =~ /^(-?\d+)\s*$/m ? $1 : undef;
}

# Wait until a backend sleeps in pg_tenure (a waiting acquire).
sub wait_until_waiting
{
	my ($pid, $what) = @_;
	local $Test::Builder::Level = $Test::Builder::Level + 1;
	waits_in_tenure($node, $pid, "$what is waiting");
	return;
}

sub terminate
{
	my ($pid, $what) = @_;
	is($node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)"),
		't', "$what terminated");
	return;
}

#
# 1. Holdoff '0': a waiting acquirer gets the lease as soon as the
#    session-bound holder's backend is terminated, and leads at once.
#
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('sb0', ttl => '60 s', holdoff => '0')");

my $sess_a = $node->background_psql('postgres');
my $a_pid = $sess_a->query_safe('SELECT pg_backend_pid()');
my $e1 = $sess_a->query_safe(
	"SELECT tenure.acquire('sb0', 'a', session_bound => true)");
like($e1, qr/^\d+$/, 'session-bound holder acquires sb0');

is( $node->safe_psql(
		'postgres',
		"SELECT holder, epoch, session_bound, holder_pid FROM tenure.leases WHERE lease = 'sb0'"
	),
	"a|$e1|t|$a_pid",
	'leases view shows the session-bound holder and its backend');
is($node->safe_psql('postgres', "SELECT tenure.leader_is('sb0', 'a')"),
	't', 'holder leads at once with holdoff 0');

my $sess_b = $node->background_psql('postgres');
my $b_pid = $sess_b->query_safe('SELECT pg_backend_pid()');
start_statement($sess_b, "SELECT tenure.acquire('sb0', 'b', wait => '30 s');");
wait_until_waiting($b_pid, 'second acquirer');
is($node->safe_psql('postgres', "SELECT holder FROM tenure.leases WHERE lease = 'sb0'"),
	'a', 'the waiter has not taken the lease while the holder lives');

terminate($a_pid, 'session-bound holder');
my $e2 = finish_number($sess_b);
ok(defined $e2 && $e2 > $e1,
	'waiting acquirer gets the lease with a greater epoch');

is( $node->safe_psql(
		'postgres',
		"SELECT holder, epoch, session_bound FROM tenure.leases WHERE lease = 'sb0'"),
	"b|$e2|f",
	'leases view shows the successor');
is( $node->safe_psql(
		'postgres',
		"SELECT tenure.leader_is('sb0', 'b'), tenure.leader_is('sb0', 'a')"),
	't|f',
	'successor leads at once with holdoff 0, the terminated holder does not');
poll_is($node, 'postgres',
	"SELECT holder, session_bound, end_reason, ended IS NOT NULL AND ended >= started"
	  . " FROM tenure.history WHERE lease = 'sb0' AND epoch = $e1",
	'a|t|session ended|t',
	'history: the terminated holder\'s tenure ended with "session ended"');
is( $node->safe_psql(
		'postgres',
		"SELECT holder, end_reason IS NULL, ended IS NULL"
		  . " FROM tenure.history WHERE lease = 'sb0' AND epoch = $e2"),
	'b|t|t',
	'history: the successor\'s tenure is open');
$sess_a->quit;

#
# 2. Without a waiter: terminating the holder frees the lease (no holder,
#    no advisory lock) and the next acquirer gets a new epoch.
#
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('sb1', ttl => '60 s', holdoff => '0')");
my $sb1_id =
  $node->safe_psql('postgres', "SELECT id FROM tenure.lease WHERE name = 'sb1'");

my $sess_c = $node->background_psql('postgres');
my $c_pid = $sess_c->query_safe('SELECT pg_backend_pid()');
my $e3 = $sess_c->query_safe(
	"SELECT tenure.acquire('sb1', 'c', session_bound => true)");
like($e3, qr/^\d+$/, 'session-bound holder acquires sb1');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory'"
		  . " AND objsubid = 32321 AND classid = 0 AND objid = $sb1_id AND granted"),
	'the keeper holds the lease\'s advisory lock');

terminate($c_pid, 'holder of sb1');
ok( $node->poll_query_until(
		'postgres',
		"SELECT holder IS NULL AND holder_pid IS NULL AND NOT lock_held"
		  . " FROM tenure.leases WHERE lease = 'sb1'"),
	'leases view shows no holder after the holder\'s backend is gone');
is($node->safe_psql('postgres', "SELECT tenure.leader_is('sb1', 'c')"),
	'f', 'the terminated holder is not leader');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_locks WHERE locktype = 'advisory'"
		  . " AND objsubid = 32321 AND objid = $sb1_id"),
	'the lease\'s advisory lock is released');

my $e4 = $node->safe_psql('postgres', "SELECT tenure.acquire('sb1', 'd')");
ok($e4 =~ /^\d+$/ && $e4 > $e3, 'a new acquirer gets sb1 at a greater epoch');
is( $node->safe_psql(
		'postgres',
		"SELECT end_reason FROM tenure.history WHERE lease = 'sb1' AND epoch = $e3"),
	'session ended',
	'history of sb1: "session ended"');
$sess_c->quit;

#
# 3. A tenure that is not session-bound survives its backend.
#
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('nsb', ttl => '60 s', holdoff => '0')");
my $sess_d = $node->background_psql('postgres');
my $d_pid = $sess_d->query_safe('SELECT pg_backend_pid()');
my $e5 = $sess_d->query_safe("SELECT tenure.acquire('nsb', 'e')");
terminate($d_pid, 'backend that acquired nsb');
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $d_pid"),
	'the backend is gone');
is( $node->safe_psql(
		'postgres',
		"SELECT holder, epoch, tenure.leader_is('nsb', 'e') FROM tenure.leases WHERE lease = 'nsb'"
	),
	"e|$e5|t",
	'a tenure that is not session-bound survives the exit of its backend');
$sess_d->quit;

#
# 4. Automatic hold-off: the successor of a terminated session-bound holder
#    holds the lease at once but leads only from the predecessor's last
#    renewal + ttl.
#
$node->safe_psql('postgres', "SELECT tenure.create_lease('sbh', ttl => '3 s')");
$node->safe_psql('postgres',
	'CREATE TABLE obs (t_before timestamptz, renewed boolean, leader boolean,'
	  . ' t_after timestamptz)');

my $sess_f = $node->background_psql('postgres');
my $f_pid = $sess_f->query_safe('SELECT pg_backend_pid()');
my $e6 = $sess_f->query_safe(
	"SELECT tenure.acquire('sbh', 'f', session_bound => true)");
like($e6, qr/^\d+$/, 'session-bound holder acquires sbh');
is($node->safe_psql('postgres', "SELECT tenure.leader_is('sbh', 'f')"),
	't', 'the first holder of a lease leads at once');

# the waiter first, so that the predecessor's last renewal is the very last
# thing before its termination
start_statement($sess_b, "SELECT tenure.acquire('sbh', 'b', wait => '30 s');");
wait_until_waiting($b_pid, 'acquirer of sbh');

is($sess_f->query_safe("SELECT tenure.renew('sbh', 'f')"), 't', 'holder renews');
my $f_expires = $node->safe_psql('postgres',
	"SELECT expires FROM tenure.leases WHERE lease = 'sbh' AND holder = 'f'");
isnt($f_expires, '', 'the holder\'s expiry is shown');

terminate($f_pid, 'session-bound holder of sbh');
my $e7 = finish_number($sess_b);
ok(defined $e7 && $e7 > $e6, 'waiting acquirer gets sbh with a greater epoch');

# Campaign like a client: renew, then ask whether we lead; record each
# observation between two readings of the clock, until b leads.
my $observe =
    "WITH o AS (INSERT INTO obs SELECT clock_timestamp(),"
  . " tenure.renew('sbh', 'b'), tenure.leader_is('sbh', 'b'),"
  . " clock_timestamp() RETURNING leader)"
  . " SELECT leader FROM o";
my $first = $node->safe_psql('postgres', $observe);
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM obs WHERE t_after < '$f_expires'"),
	'1',
	'first observation happened before the predecessor\'s expiry');
is($first, 'f', 'successor is not leader right after taking the lease');
is( $node->safe_psql(
		'postgres',
		"SELECT holder, epoch, active_from > acquired,"
		  . " active_from BETWEEN '$f_expires'::timestamptz - interval '10 ms'"
		  . " AND '$f_expires'::timestamptz + interval '10 ms'"
		  . " FROM tenure.leases WHERE lease = 'sbh'"),
	"b|$e7|t|t",
	'successor holds the lease, active from the predecessor\'s expiry');

ok($node->poll_query_until('postgres', $observe),
	'successor becomes leader');

# The order of events: no observation said "leader" before the
# predecessor's expiry (5 ms allow for converting the monotonic clock to
# wall time), and some said "not leader" before it.
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE leader AND t_after < '$f_expires'::timestamptz - interval '5 ms'),"
		  . " count(*) FILTER (WHERE NOT leader AND t_before < '$f_expires')"
		  . " > 0, bool_and(renewed) FROM obs"),
	'0|t|t',
	'successor was not leader before the predecessor\'s last renewal + ttl');
is( $node->safe_psql(
		'postgres',
		"SELECT holder, epoch, tenure.leader_is('sbh', 'b'), tenure.leader_is('sbh', 'f')"
		  . " FROM tenure.leases WHERE lease = 'sbh'"),
	"b|$e7|t|f",
	'the successor leads at the epoch it was given, the predecessor does not');
is( $node->safe_psql(
		'postgres',
		"SELECT end_reason FROM tenure.history WHERE lease = 'sbh' AND epoch = $e6"),
	'session ended',
	'history of sbh: "session ended"');

$sess_f->quit;
$sess_b->quit;

#
# A backend's exit looks up the leases it reserved or waited for, not the
# whole table; the list it keeps is bounded.  Past the bound it drops the
# leases it no longer holds, and if it holds more than fit it scans the
# whole table at exit.  Both ways, every session-bound tenure ends with it.
#
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('many-' || i, ttl => '60 s', holdoff => '0')"
	  . " FROM generate_series(1, 80) i");

# 40 leases released again, then 3 held: the list kept room for them
my $sess_p = $node->background_psql('postgres');
my $p_pid = $sess_p->query_safe('SELECT pg_backend_pid()');
$sess_p->query_safe(
	"SELECT count(tenure.release('many-' || i, 'p'))"
	  . " FROM generate_series(1, 40) i,"
	  . " LATERAL (SELECT tenure.acquire('many-' || i, 'p', session_bound => true)) a");
is( $sess_p->query_safe(
		"SELECT count(tenure.acquire('many-' || i, 'p', session_bound => true))"
		  . " FROM generate_series(41, 43) i"),
	'3',
	'after 40 leases acquired and released, a backend holds 3 more session-bound');

# 37 held at once: more than the list holds
my $sess_o = $node->background_psql('postgres');
my $o_pid = $sess_o->query_safe('SELECT pg_backend_pid()');
is( $sess_o->query_safe(
		"SELECT count(tenure.acquire('many-' || i, 'o', session_bound => true))"
		  . " FROM generate_series(44, 80) i"),
	'37',
	'another backend holds 37 leases session-bound');

terminate($p_pid, 'the backend holding 3');
terminate($o_pid, 'the backend holding 37');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM tenure.leases WHERE lease LIKE 'many-%' AND holder IS NOT NULL"),
	'every session-bound tenure of both backends ended with them');
ok( $node->poll_query_until(
		'postgres',
		"SELECT string_agg(end_reason || ' ' || n, ', ' ORDER BY end_reason) FROM"
		  . " (SELECT end_reason, count(*) n FROM tenure.history WHERE lease LIKE 'many-%'"
		  . " GROUP BY 1) s",
		'released 40, session ended 40'),
	'history: 40 released, 40 ended with their session');
$sess_p->quit;
$sess_o->quit;
$node->stop;

done_testing();
