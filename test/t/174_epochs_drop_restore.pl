
# Epochs are never issued twice in a database, whatever happens to it
# while the cluster lives: a writer claims an epoch after a pg_dump, then
# the database is dropped, created again and the dump restored (the new
# database has a new OID, so shared memory's latest epochs do not apply to
# it), with the server running and with a restart in between; and the same
# dump restored in place with pg_restore --clean after a restart.  Each
# time the next acquisition's epoch exceeds every epoch issued before, and
# the stale writer's token is rejected by the fence (SQLSTATE TN002).

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('drop_restore', extension => 0);

# Create database $db with lease w fencing table t, start a tenure, dump
# the database, and claim new epochs after the dump.  Returns the dump and
# every epoch issued; the last one is the stale writer's.
sub prepare
{
	my ($db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql(
		$db, q{
		CREATE EXTENSION pg_tenure;
		SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
		CREATE TABLE t (epoch bigint);
		SELECT tenure.fence_table('t', 'w');
	});
	my @issued = ($node->safe_psql($db, "SELECT tenure.acquire('w', 'a')"));
	my $dump = "$PostgreSQL::Test::Utils::tmp_check/$db.dump";
	$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $db ],
		"$db: pg_dump -Fc while a holds w at epoch $issued[0]");
	push @issued,
	  $node->safe_psql($db, "SELECT tenure.claim_epoch('w', 'a')")
	  for 1 .. 2;
	like($_, qr/^\d+$/, "$db: epoch $_ issued") for @issued;
	ok($issued[1] > $issued[0] && $issued[2] > $issued[1],
		"$db: the claims after the dump issued greater epochs (@issued)");

	# the stale writer's token works until the database is rolled back
	my ($rc, $err) = try_sql($node, $db, fenced_write('t', 'w', $issued[-1]));
	is($rc, 0, "$db: the writer's token $issued[-1] commits before the restore")
	  or diag($err);
	return ($dump, @issued);
}

# After the rollback: the next acquisition exceeds every earlier epoch,
# the stale writer is fenced out, and the new holder can write.
sub check_after
{
	my ($db, $what, @issued) = @_;
	my $new = $node->safe_psql($db, "SELECT tenure.acquire('w', 'b')");
	like($new, qr/^\d+$/, "$db, $what: b acquires w at epoch $new");
	cmp_ok($new, '>', $_, "$db, $what: epoch $new exceeds epoch $_ issued before")
	  for @issued;

	for my $epoch (@issued)
	{
		my ($rc, $err) = try_sql($node, $db, fenced_write('t', 'w', $epoch));
		isnt($rc, 0, "$db, $what: a write with token $epoch fails");
		like(
			$err,
			qr/ERROR:  TN002: (commit of a )?write to table "t" fenced by lease "w" rejected/,
			"$db, $what: token $epoch is rejected with TN002");
	}
	my ($rc, $err) = try_sql($node, $db, fenced_write('t', 'w', $new));
	is($rc, 0, "$db, $what: a write with the new token $new commits")
	  or diag($err);
	is( $node->safe_psql(
			$db, "SELECT string_agg(epoch::text, ',' ORDER BY epoch) FROM t"),
		$new,
		"$db, $what: only the new token's write is in the table");
	return;
}

# Drop the database, create it again, restore the dump into it.
sub recreate
{
	my ($db, $dump, $restart, $dumped_epoch) = @_;
	$node->safe_psql('postgres', "DROP DATABASE $db");
	$node->restart if $restart;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $db, $dump ],
		"$db: pg_restore into the new database");
	is($node->safe_psql($db, "SELECT tenure.current_epoch('w')"),
		$dumped_epoch, "$db: the restored lease is back at the dump's epoch");
	return;
}

# --- DROP DATABASE + CREATE DATABASE + pg_restore, server running
my ($dump, @issued) = prepare('app1');
recreate('app1', $dump, 0, $issued[0]);
check_after('app1', 'drop and restore while running', @issued);

# --- the same with a restart between the drop and the restore
($dump, @issued) = prepare('app2');
recreate('app2', $dump, 1, $issued[0]);
check_after('app2', 'restart between drop and restore', @issued);

# --- pg_restore --clean in place, after a restart
($dump, @issued) = prepare('app3');
$node->restart;
$node->command_ok(
	[ 'pg_restore', '--clean', '--if-exists', '-d', 'app3', $dump ],
	'app3: pg_restore --clean of the older dump in place after a restart');
is($node->safe_psql('app3', "SELECT tenure.current_epoch('w')"),
	$issued[0], 'app3: the lease is back at the dump\'s epoch');
check_after('app3', 'restore --clean after a restart', @issued);

$node->stop;
done_testing();
