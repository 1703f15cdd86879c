
# A dump of cluster X restored into cluster Y: the restored leases' next
# epochs exceed every epoch X issued up to the dump, whether Y's own clock
# is behind X's epochs or ahead of them, and X's tokens fail at Y's fence.
# Then Y fails over to an asynchronous standby that received the restore
# but not the transaction that first issued an epoch from the restored
# rows (the import): the promoted standby's epochs still exceed every
# epoch the old primary issued.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $x = tenure_node('foreign_x', extension => 0);
my $y = tenure_node(
	'foreign_y',
	init => { allows_streaming => 1 },
	extension => 0);
isnt(
	$x->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	$y->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	'X and Y are different clusters');

# The cluster clock now: (timeline << 50) + (WAL insert position >> 3).
sub clock
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT ((SELECT timeline_id FROM pg_control_checkpoint())::bigint << 50)"
		  . " + ((pg_current_wal_insert_lsn() - '0/0') / 8)::bigint");
}

# Move a cluster's WAL position on by a few segments.
sub advance_wal
{
	my ($node, $segments) = @_;
	$node->safe_psql('postgres', 'SELECT txid_current(); SELECT pg_switch_wal();')
	  for 1 .. $segments;
	return;
}

# Run a fenced write in database $db of $node presenting one token; return
# psql's verbose stderr ('' if it committed).
sub write_error
{
	my ($node, $db, $epoch) = @_;
	my (undef, $err) = try_sql($node, $db, fenced_write('t', 'w', $epoch));
	return $err;
}

# Restore $dump into a new database $db of Y; the next epochs there must
# exceed @foreign, and X's tokens must fail with TN002.
sub restore_into_y
{
	my ($db, $dump, @foreign) = @_;
	$y->safe_psql('postgres', "CREATE DATABASE $db");
	$y->command_ok([ 'pg_restore', '--exit-on-error', '-d', $db, $dump ],
		"$db: pg_restore of X's dump into Y");
	my @new = ($y->safe_psql($db, "SELECT tenure.acquire('w', 'y')"));
	push @new, $y->safe_psql($db, "SELECT tenure.claim_epoch('w', 'y')");
	like($_, qr/^\d+$/, "$db: Y issues epoch $_") for @new;
	cmp_ok($new[1], '>', $new[0], "$db: Y's claim issues a greater epoch");
	cmp_ok($new[0], '>', $_, "$db: Y's epoch $new[0] exceeds X's epoch $_")
	  for @foreign;
	like(write_error($y, $db, $_),
		qr/ERROR:  TN002: (commit of a )?write to table "t" fenced by lease "w" rejected/,
		"$db: X's token $_ is rejected with TN002")
	  for @foreign;
	is(write_error($y, $db, $new[1]), '', "$db: Y's current token commits");
	return @new;
}

# --- X: lease w fencing t, epochs issued far ahead of Y's clock
$x->safe_psql('postgres', 'CREATE DATABASE src');
$x->safe_psql(
	'src', q{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
	CREATE TABLE t (epoch bigint);
	SELECT tenure.fence_table('t', 'w');
});
advance_wal($x, 4);
my @x_epochs = ($x->safe_psql('src', "SELECT tenure.acquire('w', 'x')"));
push @x_epochs, $x->safe_psql('src', "SELECT tenure.claim_epoch('w', 'x')");
my $dump_ahead = "$PostgreSQL::Test::Utils::tmp_check/x_ahead.dump";
$x->command_ok([ 'pg_dump', '-Fc', '-f', $dump_ahead, '-d', 'src' ],
	'pg_dump of X');

# --- restored into Y while Y's clock is behind X's epochs
cmp_ok(clock($y), '<', $x_epochs[-1], "Y's clock is behind X's epochs");
restore_into_y('behind', $dump_ahead, @x_epochs);

# --- restored into Y while Y's clock is ahead of X's epochs
push @x_epochs, $x->safe_psql('src', "SELECT tenure.claim_epoch('w', 'x')");
my $dump_later = "$PostgreSQL::Test::Utils::tmp_check/x_later.dump";
$x->command_ok([ 'pg_dump', '-Fc', '-f', $dump_later, '-d', 'src' ],
	'a later pg_dump of X');
advance_wal($y, 8);
cmp_ok(clock($y), '>', $x_epochs[-1], "Y's clock is now ahead of X's epochs");
restore_into_y('ahead', $dump_later, @x_epochs);
$x->stop;

# --- Y fails over to a standby that missed the import
my $standby = tenure_standby($y, 'foreign_y_standby');
$y->safe_psql('postgres', 'CREATE DATABASE failover');
$y->command_ok([ 'pg_restore', '--exit-on-error', '-d', 'failover', $dump_later ],
	'failover: pg_restore of X\'s dump into Y');
$y->wait_for_catchup($standby);
is($standby->safe_psql('failover', "SELECT tenure.current_epoch('w')"),
	$x_epochs[-1], 'failover: the standby has the restored rows');
$standby->stop;

# the import and later epochs, never received by the standby
my @old = ($y->safe_psql('failover', "SELECT tenure.acquire('w', 'y')"));
push @old, $y->safe_psql('failover', "SELECT tenure.claim_epoch('w', 'y')");
like($_, qr/^\d+$/, "failover: the old primary issues epoch $_") for @old;
cmp_ok($old[0], '>', $x_epochs[-1], 'failover: the old primary imported X\'s epochs');
$y->stop('immediate');

$standby->start;
$standby->promote;
ok($standby->poll_query_until('failover', 'SELECT NOT pg_is_in_recovery()'),
	'failover: the standby is promoted');
is($standby->safe_psql('failover', "SELECT tenure.current_epoch('w')"),
	$x_epochs[-1], 'failover: the import never reached the new primary');
my $new = $standby->safe_psql('failover', "SELECT tenure.acquire('w', 's')");
like($new, qr/^\d+$/, "failover: the new primary issues epoch $new");
cmp_ok($new, '>', $_, "failover: new epoch $new exceeds the old primary's $_")
  for @old, @x_epochs;
like(write_error($standby, 'failover', $_),
	qr/ERROR:  TN002: (commit of a )?write to table "t" fenced by lease "w" rejected/,
	"failover: the old primary's token $_ is rejected with TN002")
  for @old;
is(write_error($standby, 'failover', $new), '',
	'failover: the new primary\'s token commits');

$standby->stop;
done_testing();
