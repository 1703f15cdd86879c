
# lock_key interop: a lease with a lock_key and plain
# pg_try_advisory_lock(lock_key) callers in the lease's database exclude
# each other, both ways.  Leases without a lock_key use pg_tenure's private
# advisory key space and never conflict with anyone's advisory locks.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('lock_key');
$node->safe_psql('postgres', 'CREATE DATABASE other');

my $keeper = wait_for_keeper($node);
ok($keeper, 'keeper is running');

# 0x0123456789ABCDEF: both halves non-zero, the low one above 2^31
my $key = '81985529216486895';
my ($key_hi, $key_lo) = ('19088743', '2309737967');

$node->safe_psql('postgres',
	"SELECT tenure.create_lease('lk', ttl => '10 min', holdoff => '0', lock_key => $key)");

# Rows of pg_locks for a bigint advisory key, as pid|mode|granted|classid|objid|objsubid|in this database.
sub key_locks
{
	my ($hi, $lo) = @_;
	return $node->safe_psql(
		'postgres',
		"SELECT string_agg(concat_ws('|', pid, mode, granted, classid, objid, objsubid,"
		  . " database = (SELECT oid FROM pg_database WHERE datname = current_database())), ',')"
		  . " FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
		  . " AND classid = $hi AND objid = $lo");
}

#
# (a) A plain session holds the key: pg_tenure cannot acquire the lease.
#
my $plain = $node->background_psql('postgres');
my $plain_pid = $plain->query_safe('SELECT pg_backend_pid()');
is($plain->query_safe("SELECT pg_try_advisory_lock($key)"),
	't', 'a plain session takes the advisory lock');

is($node->safe_psql('postgres', "SELECT tenure.acquire('lk', 'h1')"),
	'', 'acquire returns NULL while a plain session holds the lock_key');

my ($ret, $stdout, $stderr) = $node->psql(
	'postgres', "\\set VERBOSITY verbose\nSELECT tenure.acquire_or_error('lk', 'h1');",
	on_error_stop => 0);
like(
	$stderr,
	qr/ERROR:  TN001: lease "lk" is held by another session's advisory lock/,
	'acquire_or_error raises TN001 naming the advisory lock');

is( $node->safe_psql(
		'postgres',
		"SELECT coalesce(holder, 'none'), lock_held, epoch FROM tenure.leases WHERE lease = 'lk'"
	),
	'none|f|0',
	'the failed acquisitions left the lease free at epoch 0');
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM tenure.history WHERE lease = 'lk'"),
	'0', 'and wrote no history');
is(key_locks($key_hi, $key_lo), "$plain_pid|ExclusiveLock|t|$key_hi|$key_lo|1|t",
	'only the plain session holds the key');

# a waiting acquirer gets the lease once the plain session unlocks
my $waiter = $node->background_psql('postgres');
my $waiter_pid = $waiter->query_safe('SELECT pg_backend_pid()');
start_statement($waiter, "SELECT tenure.acquire('lk', 'h1', wait => '30 s');");
waits_in_tenure($node, $waiter_pid, 'acquirer waits');
is($plain->query_safe("SELECT pg_advisory_unlock($key)"),
	't', 'the plain session unlocks');
my $out = $waiter->query_until(qr/^\d+\s*$/m, '');
my ($e1) = $out =~ /^(\d+)\s*$/m;
ok(defined $e1, 'the waiting acquirer gets the lease after the unlock');

#
# (b) pg_tenure holds the lease: plain sessions cannot take the key.
#
ok( $node->poll_query_until(
		'postgres', "SELECT tenure.leader_is('lk', 'h1')"),
	'h1 leads');
is(key_locks($key_hi, $key_lo), "$keeper|ExclusiveLock|t|$key_hi|$key_lo|1|t",
	'the keeper holds the key: ExclusiveLock, objsubid 1, the key\'s halves in classid/objid');
is( $plain->query_safe(
		"SELECT pg_try_advisory_lock($key), pg_try_advisory_lock_shared($key)"),
	'f|f',
	'a plain session cannot take the key, not even shared');
is($node->safe_psql('other', "SELECT pg_try_advisory_lock($key)"),
	't', 'the same key in another database does not conflict');

# the release takes effect at commit
$waiter->query_safe('BEGIN');
is($waiter->query_safe("SELECT tenure.release('lk', 'h1')"),
	't', 'h1 releases in an open transaction');
is($plain->query_safe("SELECT pg_try_advisory_lock($key)"),
	'f', 'the key stays taken until the release commits');
$waiter->query_safe('COMMIT');
ok( $node->poll_query_until(
		'postgres', "SELECT pg_try_advisory_lock($key)"),
	'after the release commits a plain session gets the key');
is( $node->safe_psql(
		'postgres',
		"SELECT coalesce(holder, 'none'), lock_held FROM tenure.leases WHERE lease = 'lk'"),
	'none|f',
	'the lease is free');
is( $node->safe_psql(
		'postgres',
		"SELECT end_reason FROM tenure.history WHERE lease = 'lk' AND epoch = $e1"),
	'released', 'history: released');

#
# (a) again, with a negative key and a plain acquire after the unlock.
#
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('neg', ttl => '10 min', holdoff => '0', lock_key => -2)");
is($plain->query_safe("SELECT pg_try_advisory_lock(-2)"),
	't', 'a plain session takes advisory lock -2');
is($node->safe_psql('postgres', "SELECT tenure.acquire('neg', 'h2')"),
	'', 'acquire of the lease with lock_key -2 returns NULL');
is($plain->query_safe("SELECT pg_advisory_unlock(-2)"), 't',
	'the plain session unlocks -2');
my $e2 = $node->safe_psql('postgres', "SELECT tenure.acquire('neg', 'h2')");
like($e2, qr/^\d+$/, 'acquire succeeds after the unlock');
is(key_locks('4294967295', '4294967294'),
	"$keeper|ExclusiveLock|t|4294967295|4294967294|1|t",
	'the keeper holds key -2');
is($plain->query_safe("SELECT pg_try_advisory_lock(-2)"),
	'f', 'and a plain session cannot take it');

#
# (c) Without a lock_key: private key space, no conflict with anyone's
#     advisory lock of the same number.
#
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('pl', ttl => '10 min', holdoff => '0')");
my $pl_id =
  $node->safe_psql('postgres', "SELECT id FROM tenure.lease WHERE name = 'pl'");

# a plain session holding the lease's id, in both SQL forms, blocks nothing
is( $plain->query_safe(
		"SELECT pg_try_advisory_lock($pl_id), pg_try_advisory_lock(0, $pl_id)"),
	't|t',
	'a plain session takes advisory locks numbered like the lease id');
my $e3 = $node->safe_psql('postgres', "SELECT tenure.acquire('pl', 'h3')");
like($e3, qr/^\d+$/, 'the lease without lock_key is acquired all the same');
ok( $node->poll_query_until(
		'postgres',
		"SELECT string_agg(concat_ws('|', pid, mode, granted, classid, objid), ',')"
		  . " FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 32321",
		"$keeper|ExclusiveLock|t|0|$pl_id"),
	'the keeper holds the lease in the private space (objsubid 32321, objid = lease id)');
is($plain->query_safe("SELECT pg_advisory_unlock_all()"), '',
	'the plain session drops its locks');
is( $node->safe_psql(
		'postgres',
		"SELECT pg_try_advisory_lock($pl_id), pg_try_advisory_lock(0, $pl_id),"
		  . " pg_try_advisory_lock(32321), pg_try_advisory_lock(32321::bigint << 32 | $pl_id)"),
	't|t|t|t',
	'while the lease is held, advisory locks of the same numbers are free');
is($node->safe_psql('postgres', "SELECT tenure.leader_is('pl', 'h3')"),
	't', 'and the holder still leads');

$plain->quit;
$waiter->quit;
$node->stop;

done_testing();
