
# Logical replication into fenced tables.  Apply presents no epoch, and
# fires row triggers only (statement triggers for TRUNCATE): a fenced table
# must never be a subscription target.
#
# - fence_table on a table a subscription writes is refused;
# - CREATE SUBSCRIPTION, and ALTER SUBSCRIPTION ... ADD PUBLICATION or
#   REFRESH PUBLICATION, that would write a fenced table are refused, and
#   so is attaching a subscribed table to a fenced tree;
# - the backstop: when a superuser gets past those checks anyway (here by
#   disabling the extension's event trigger), apply's INSERT, UPDATE,
#   DELETE and TRUNCATE of the fenced table fail with TN002 and never
#   land; the subscription goes on with other tables once the failed
#   transactions are skipped.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

# The extension is created after the tables, which so go in schema public
# (with schema tenure there, "$user" in search_path would put them in it
# when the tests run as a role named tenure; the messages name public).
my $pub = tenure_node(
	'apply_pub',
	init => { allows_streaming => 'logical' },
	extension => 0);

# verbose: the log shows each error's SQLSTATE
my $sub = tenure_node(
	'apply_sub',
	conf => "log_error_verbosity = verbose\n",
	extension => 0);

my $tables = q{
	CREATE TABLE la_sub (k int PRIMARY KEY, v text);
	CREATE TABLE la_f (k int PRIMARY KEY, v text);
	INSERT INTO la_f VALUES (1, 'seed'), (2, 'seed');
};
$pub->safe_psql('postgres', $tables . q{
	CREATE EXTENSION pg_tenure;
	CREATE PUBLICATION la_pub FOR TABLE la_sub;
	CREATE PUBLICATION la_pub_f FOR TABLE la_f;
});
$sub->safe_psql('postgres', $tables . q{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('la', ttl => '1 h');
	SELECT tenure.fence_table('la_f', 'la');
});
my $connstr = $pub->connstr . ' dbname=postgres';

$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION la_s CONNECTION '$connstr' PUBLICATION la_pub WITH (disable_on_error = true)"
);
ok( $sub->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_subscription_rel WHERE srsubstate IN ('r', 's')"),
	'la_sub is subscribed and synchronized');

my ($ret, $out, $err);

# a subscribed table cannot be fenced
($ret, $out, $err) =
  $sub->psql('postgres', "SELECT tenure.fence_table('la_sub', 'la')");
like(
	$err,
	qr/ERROR:  cannot fence table public\.la_sub because logical replication subscription "la_s" writes to table public\.la_sub\n.*DETAIL:  Logical replication applies changes without presenting an epoch/s,
	'fence_table refuses a subscribed table');

# nor attached to a fenced tree (which would fence it), even by a
# transaction that presents the tree's epoch (attaching is a fenced write)
$sub->safe_psql(
	'postgres', q{
	CREATE TABLE la_tree (k int PRIMARY KEY, v text) PARTITION BY RANGE (k);
	SELECT tenure.fence_table('la_tree', 'la');
	SELECT tenure.acquire('la', 'ddl');
});
($ret, $out, $err) = $sub->psql(
	'postgres', q{
	BEGIN;
	SELECT tenure.present('la', tenure.current_epoch('la'), true);
	ALTER TABLE la_tree ATTACH PARTITION la_sub FOR VALUES FROM (0) TO (1000);
	COMMIT;
});
like(
	$err,
	qr/ERROR:  logical replication subscription "la_s" cannot write fenced table public\.la_sub\n.*DETAIL:  Table public\.la_sub is fenced by lease "la"\./s,
	'attaching a subscribed table to a fenced tree is refused');

# a fenced table cannot be added to a subscription
my $refused =
  qr/ERROR:  logical replication subscription "la_s2?" cannot write fenced table public\.la_f\n.*DETAIL:  Table public\.la_f is fenced by lease "la"\..*\n.*HINT:  Leave the table out of the subscription's publications, or unfence it first\./s;
($ret, $out, $err) = $sub->psql('postgres',
	"CREATE SUBSCRIPTION la_s2 CONNECTION '$connstr' PUBLICATION la_pub_f WITH (create_slot = false, slot_name = NONE, enabled = false)"
);
like($err, $refused, 'CREATE SUBSCRIPTION of a fenced table is refused');
# (one that creates its slot leaves it on the publisher: README says so)
($ret, $out, $err) = $sub->psql('postgres',
	"CREATE SUBSCRIPTION la_s2 CONNECTION '$connstr' PUBLICATION la_pub_f");
like($err, $refused, 'CREATE SUBSCRIPTION creating its slot is refused too');
is($pub->safe_psql('postgres', "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'la_s2'"),
	'1', 'the refused subscription\'s slot is left on the publisher');
$pub->safe_psql('postgres', "SELECT pg_drop_replication_slot('la_s2')");
($ret, $out, $err) = $sub->psql('postgres',
	'ALTER SUBSCRIPTION la_s ADD PUBLICATION la_pub_f WITH (copy_data = false)');
like($err, $refused, 'ALTER SUBSCRIPTION ... ADD PUBLICATION of a fenced table is refused');
$pub->safe_psql('postgres', 'ALTER PUBLICATION la_pub ADD TABLE la_f');
($ret, $out, $err) = $sub->psql('postgres',
	'ALTER SUBSCRIPTION la_s REFRESH PUBLICATION WITH (copy_data = false)');
like($err, $refused, 'ALTER SUBSCRIPTION ... REFRESH PUBLICATION adding a fenced table is refused');
is( $sub->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_subscription_rel WHERE srrelid = 'la_f'::regclass"),
	'0',
	'no subscription writes la_f');

# The backstop.  A superuser disables the extension's event trigger and
# refreshes the subscription: la_f is now a subscription target.  (One
# statement at a time: REFRESH cannot run in a transaction block.)
my $bypass = sub {
	my ($sql) = @_;
	$sub->safe_psql(
		'postgres', qq{
	ALTER EVENT TRIGGER tenure_fence_children DISABLE;
	$sql;
	ALTER EVENT TRIGGER tenure_fence_children ENABLE ALWAYS;
});
};
$bypass->('ALTER SUBSCRIPTION la_s REFRESH PUBLICATION WITH (copy_data = false)');
is( $sub->safe_psql(
		'postgres',
		"SELECT srsubstate FROM pg_subscription_rel WHERE srrelid = 'la_f'::regclass"),
	'r',
	'past the checks, la_f is a ready subscription target');

my $apply_msg =
  qr/ERROR:  TN002: logical replication cannot write table "la_f", which is fenced by lease "la"/;
# (apply's TRUNCATE fires the statement trigger, which says the same)
my $truncate_msg = $apply_msg;

# Each change to la_f on the publisher fails to apply: the subscription
# is disabled on the error; the table is unchanged; the failed
# transaction is skipped and the subscription enabled again.  Other DDL
# goes on meanwhile: only the command that makes a fenced table a target
# is refused.
sub apply_fails
{
	my ($what, $sql, $msg) = @_;
	my $offset = -s $sub->logfile;

	$pub->safe_psql('postgres', $sql);
	$sub->wait_for_log($msg, $offset);
	pass("$what: apply fails with TN002");
	ok( $sub->poll_query_until(
			'postgres', "SELECT NOT subenabled FROM pg_subscription WHERE subname = 'la_s'"),
		"$what: the subscription is disabled on the error");
	is( $sub->safe_psql('postgres', 'SELECT k, v FROM la_f ORDER BY k'),
		"1|seed\n2|seed", "$what: la_f is unchanged");

	my $log = slurp_file($sub->logfile, $offset);
	my ($lsn) = $log =~ /in transaction \d+, finished at ([0-9A-F]+\/[0-9A-F]+)/;
	ok(defined $lsn, "$what: the log names the failed transaction's end")
	  or return;
	$offset = -s $sub->logfile;
	# (a subscription already writing a fenced table can still be altered)
	$sub->safe_psql('postgres',
		"ALTER SUBSCRIPTION la_s SKIP (lsn = '$lsn'); ALTER SUBSCRIPTION la_s ENABLE");
	$sub->wait_for_log(qr/logical replication completed skipping transaction at LSN \Q$lsn\E/,
		$offset);
}

apply_fails('INSERT', "INSERT INTO la_f VALUES (3, 'new')", $apply_msg);
apply_fails('UPDATE', "UPDATE la_f SET v = 'upd' WHERE k = 1", $apply_msg);
apply_fails('DELETE', 'DELETE FROM la_f WHERE k = 2', $apply_msg);
apply_fails('TRUNCATE', 'TRUNCATE la_f', $truncate_msg);

# the subscription still applies other tables
$pub->safe_psql('postgres', "INSERT INTO la_sub VALUES (1, 'replicated')");
ok( $sub->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM la_sub WHERE v = 'replicated'"),
	'other tables are still replicated');
is($sub->safe_psql('postgres', 'SELECT k, v FROM la_f ORDER BY k'),
	"1|seed\n2|seed", 'la_f never changed');

# The initial copy of a fenced table (tablesync's COPY fires the statement
# trigger, which finds no token) fails too.
$pub->safe_psql(
	'postgres', q{
	CREATE TABLE la_f2 (k int PRIMARY KEY, v text);
	INSERT INTO la_f2 VALUES (1, 'copied');
	ALTER PUBLICATION la_pub ADD TABLE la_f2;
});
$sub->safe_psql(
	'postgres', q{
	CREATE TABLE la_f2 (k int PRIMARY KEY, v text);
	SELECT tenure.fence_table('la_f2', 'la');
});
my $offset = -s $sub->logfile;
$bypass->('ALTER SUBSCRIPTION la_s REFRESH PUBLICATION');
$sub->wait_for_log(
	qr/ERROR:  TN002: logical replication cannot write table "la_f2", which is fenced by lease "la"/,
	$offset);
pass('the initial copy of a fenced table fails with TN002');
ok( $sub->poll_query_until(
		'postgres', "SELECT NOT subenabled FROM pg_subscription WHERE subname = 'la_s'"),
	'the subscription is disabled on the error');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM la_f2'),
	'0', 'nothing was copied into la_f2');

$sub->safe_psql('postgres', 'DROP SUBSCRIPTION la_s');
$sub->stop;
$pub->stop;

done_testing();
