
# The keeper worker holds one advisory lock per live tenure.  Killed with
# SIGTERM it comes back (bgw_restart_time) with a new pid and takes the
# locks of live tenures again; a lock_key tenure whose lock a foreign
# session took while the keeper was away ends as "revoked".

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('keeper_restart');

# Number of the lease locks (private space, and bigint lock_key space)
# that $pid holds in this database.
sub keeper_locks
{
	my ($pid, $ids, $keys) = @_;
	my @conds;
	push @conds, "(objsubid = 32321 AND classid = 0 AND objid = $_)" for @$ids;
	push @conds, "(objsubid = 1 AND classid = 0 AND objid = $_)"     for @$keys;
	return
	    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
	  . " AND pid = $pid AND granted AND mode = 'ExclusiveLock'"
	  . " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
	  . " AND (" . join(' OR ', @conds) . ")";
}

my $keeper1 = wait_for_keeper($node);
ok($keeper1, 'keeper is running');

#
# 1. Keeper killed with SIGTERM: it comes back and re-takes the locks of
#    the live tenures, which go on undisturbed.
#
$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('k1', ttl => '10 min', holdoff => '0');
	SELECT tenure.create_lease('k2', ttl => '10 min', holdoff => '0', lock_key => 4242);
});
my $k1_id =
  $node->safe_psql('postgres', "SELECT id FROM tenure.lease WHERE name = 'k1'");
my $e1 = $node->safe_psql('postgres', "SELECT tenure.acquire('k1', 'h1')");
my $e2 = $node->safe_psql('postgres', "SELECT tenure.acquire('k2', 'h2')");
like($e1, qr/^\d+$/, 'h1 acquires k1');
like($e2, qr/^\d+$/, 'h2 acquires k2');

ok( $node->poll_query_until(
		'postgres', keeper_locks($keeper1, [$k1_id], [4242]), '2'),
	'the keeper holds the locks of both tenures');

is($node->safe_psql('postgres', "SELECT pg_terminate_backend($keeper1)"),
	't', 'keeper terminated');
is($node->safe_psql('postgres', "SELECT tenure.leader_is('k1', 'h1')"),
	't', 'k1\'s holder still leads while the keeper is away');

my $keeper2 = wait_for_keeper($node, $keeper1);
ok($keeper2, 'keeper restarted with a new pid');
ok( $node->poll_query_until(
		'postgres', keeper_locks($keeper2, [$k1_id], [4242]), '2'),
	'the new keeper holds the locks of both live tenures');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $keeper1"),
	'0',
	'no lock is left under the old keeper\'s pid');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(lease || ':' || holder || ':' || epoch || ':' || lock_held, ',' ORDER BY lease)"
		  . " FROM tenure.leases WHERE lease IN ('k1', 'k2')"),
	"k1:h1:$e1:true,k2:h2:$e2:true",
	'both tenures are unchanged and their locks held');
is( $node->safe_psql(
		'postgres', "SELECT tenure.leader_is('k1', 'h1'), tenure.leader_is('k2', 'h2')"),
	't|t',
	'both holders lead after the keeper came back');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM tenure.history WHERE lease IN ('k1', 'k2') AND ended IS NULL"),
	'2',
	'history: both tenures are still open');
is($node->safe_psql('postgres', "SELECT pg_try_advisory_lock(4242)"),
	'f', 'the lock_key is still taken for k2');

#
# 2. While the keeper is away a foreign session takes a lease's lock_key:
#    that tenure is revoked, the others go on.
#
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('k3', ttl => '10 min', holdoff => '0', lock_key => 777)");
my $e3 = $node->safe_psql('postgres', "SELECT tenure.acquire('k3', 'h3')");
like($e3, qr/^\d+$/, 'h3 acquires k3');
ok( $node->poll_query_until(
		'postgres', keeper_locks($keeper2, [$k1_id], [4242, 777]), '3'),
	'the keeper holds the locks of all three tenures');

my $foreign = $node->background_psql('postgres');
my $foreign_pid = $foreign->query_safe('SELECT pg_backend_pid()');

# Terminate the keeper and take its lock at once: its locks go when it
# exits, and it comes back only a second later.  Then ask at once whether
# h3 still leads, and whether the keeper is back yet.
my $out = $foreign->query_safe(
	qq{
	SELECT pg_terminate_backend($keeper2);
	DO \$\$
	BEGIN
		FOR i IN 1..5000 LOOP
			IF pg_try_advisory_lock(777) THEN
				RETURN;
			END IF;
			PERFORM pg_sleep(0.001);
		END LOOP;
		RAISE EXCEPTION 'the foreign session did not get advisory lock 777';
	END
	\$\$;
	SELECT tenure.leader_is('k3', 'h3'), count(*)
	  FROM pg_stat_activity WHERE backend_type = 'pg_tenure keeper';
});
my @lines = split /\n/, $out;
like($lines[-1], qr/^f\|/,
	'h3 no longer leads once a foreign session holds its lock_key'
	  . ' (keepers running at that moment: '
	  . (split /\|/, $lines[-1])[1] . ')');

my $keeper3 = wait_for_keeper($node, $keeper2);
ok($keeper3, 'keeper restarted again');
ok( $node->poll_query_until(
		'postgres',
		"SELECT holder IS NULL AND NOT lock_held FROM tenure.leases WHERE lease = 'k3'"),
	'the tenure of k3 ends');
# (the keeper writes the line just after it ended the tenure)
ok( $node->wait_for_log(qr/LOG:  tenure of lease "k3" at epoch $e3 revoked/),
	'the server log says the tenure was revoked');
is( $node->safe_psql(
		'postgres', "SELECT tenure.leader_is('k3', 'h3'), tenure.renew('k3', 'h3')"),
	'f|f',
	'the revoked holder neither leads nor can renew');
is( $node->safe_psql(
		'postgres',
		"SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
		  . " AND classid = 0 AND objid = 777 AND granted"),
	$foreign_pid,
	'the foreign session holds the lock_key');

ok( $node->poll_query_until(
		'postgres', keeper_locks($keeper3, [$k1_id], [4242]), '2'),
	'the new keeper holds the locks of the other tenures again');
is( $node->safe_psql(
		'postgres', "SELECT tenure.leader_is('k1', 'h1'), tenure.leader_is('k2', 'h2')"),
	't|t',
	'the other holders still lead');

is($node->safe_psql('postgres', "SELECT tenure.acquire('k3', 'h4')"),
	'', 'k3 cannot be acquired while the foreign session holds the lock_key');

is($foreign->query_safe('SELECT pg_advisory_unlock(777)'),
	't', 'the foreign session unlocks');
my $e4 = $node->safe_psql('postgres', "SELECT tenure.acquire('k3', 'h4')");
ok($e4 =~ /^\d+$/ && $e4 > $e3, 'k3 can be acquired again, at a greater epoch');
is( $node->safe_psql(
		'postgres', "SELECT tenure.leader_is('k3', 'h4')"),
	't', 'the new holder of k3 leads');
is( $node->safe_psql(
		'postgres',
		"SELECT holder, end_reason, ended IS NOT NULL FROM tenure.history"
		  . " WHERE lease = 'k3' AND epoch = $e3"),
	'h3|revoked|t',
	'history: the tenure of h3 ended as revoked');
ok( $node->poll_query_until(
		'postgres', keeper_locks($keeper3, [$k1_id], [4242, 777]), '3'),
	'the keeper holds the lock_key for the new tenure');
is($foreign->query_safe('SELECT pg_try_advisory_lock(777)'),
	'f', 'and the foreign session can no longer take it');

$foreign->quit;
$node->stop;

done_testing();
