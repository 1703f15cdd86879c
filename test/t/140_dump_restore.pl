
# pg_dump -Fc of a database that uses pg_tenure, restored with pg_restore
# into a fresh database of another cluster: the leases with their settings
# and owners, the epochs, the history, the fenced tables (trigger enabled
# ALWAYS) and the privileges arrive; the next epoch there exceeds the
# restored ones, and writes presenting old tokens are rejected.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

# the extension only in database app (the restore creates it on $dst)
my $src = tenure_node('dump_src', extension => 0);
my $dst = tenure_node('dump_dst', extension => 0);
for my $node ($src, $dst)
{
	# pg_dump does not dump roles: they must exist before the restore
	$node->safe_psql('postgres',
		'CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; CREATE DATABASE app;');
}

# A write to orders, as alice, presenting one token.
sub alice_write
{
	my ($epoch, $id) = @_;
	return "SET ROLE alice;\n"
	  . fenced_write('orders', 'orders-writer', $epoch, "$id, $epoch");
}

# --- a database using pg_tenure
$src->safe_psql(
	'app', q{
	CREATE EXTENSION pg_tenure;
	GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text) TO alice, bob;
	GRANT CREATE ON SCHEMA public TO alice, bob;
	SET ROLE alice;
	SELECT tenure.create_lease('orders-writer', ttl => '20 s', holdoff => '0');
	SELECT tenure.create_lease('jobs', ttl => '5 min', lock_key => 4242);
	CREATE TABLE orders (id int PRIMARY KEY, epoch bigint NOT NULL);
	SELECT tenure.fence_table('orders', 'orders-writer');
	SET ROLE bob;
	SELECT tenure.create_lease('shard-7', ttl => '1 min', holdoff => '30 s', lock_key => -17);
	SELECT tenure.create_lease('idle', ttl => '2 h');
	CREATE TABLE events (id int, at date) PARTITION BY RANGE (at);
	CREATE TABLE events_2025 PARTITION OF events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
	SELECT tenure.fence_table('events', 'shard-7');
	CREATE TABLE events_2026 PARTITION OF events FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
});

my %old;    # every epoch issued on the source, per lease
sub issue
{
	my ($lease, $role, $call) = @_;
	my $epoch = $src->safe_psql('app', "SET ROLE $role; SELECT $call");
	like($epoch, qr/^\d+$/, "source: $call returned $epoch");
	push @{ $old{$lease} }, $epoch;
	return $epoch;
}
issue('orders-writer', 'alice', "tenure.acquire('orders-writer', 'w1')");
issue('orders-writer', 'alice', "tenure.claim_epoch('orders-writer', 'w1')");
my $writer_epoch =
  issue('orders-writer', 'alice', "tenure.claim_epoch('orders-writer', 'w1')");
$src->safe_psql('app', alice_write($writer_epoch, $_)) for 1 .. 3;
issue('jobs', 'alice', "tenure.acquire('jobs', 'j1')");
is($src->safe_psql('app', "SET ROLE alice; SELECT tenure.release('jobs', 'j1')"),
	't', 'source: j1 releases jobs');
my $jobs_epoch = issue('jobs', 'alice', "tenure.acquire('jobs', 'j2')");
issue('shard-7', 'bob', "tenure.acquire('shard-7', 'b1')");
is($src->safe_psql('app', "SET ROLE bob; SELECT tenure.release('shard-7', 'b1')"),
	't', 'source: b1 releases shard-7');

# what must arrive
my %compare = (
	'leases' =>
	  'SELECT name, id, owner, ttl, holdoff, lock_key, epoch, created FROM tenure.lease ORDER BY name',
	'leases view' =>
	  'SELECT lease, epoch, ttl, holdoff, lock_key, owner, fences FROM tenure.leases ORDER BY lease',
	'history' =>
	  'SELECT lease, epoch, holder, session_bound, started, ended, end_reason, boot_id FROM tenure.history ORDER BY lease, epoch',
	'fenced tables' =>
	  'SELECT tbl::text, lease FROM tenure.fenced ORDER BY 1',
	'fence triggers' =>
	  "SELECT tgrelid::regclass, tgenabled, tgtype, tgargs FROM pg_trigger WHERE tgname = 'tenure_fence' ORDER BY tgrelid::regclass::text",
	'rows of orders' => 'SELECT * FROM orders ORDER BY id',
	'owners of tables' =>
	  "SELECT relname, relowner::regrole FROM pg_class WHERE relname ~ '^(orders|events)' AND relkind IN ('r', 'p') ORDER BY 1",
	'privileges' =>
	  "SELECT r, has_function_privilege(r, 'tenure.create_lease(text, interval, interval, bigint, text)', 'EXECUTE')"
	  . " FROM unnest(array['alice', 'bob', 'public']) r ORDER BY r");
my %before = map { $_ => $src->safe_psql('app', $compare{$_}) } keys %compare;

is( $src->safe_psql(
		'app',
		"SELECT string_agg(name || '=' || owner, ',' ORDER BY name) FROM tenure.lease"
	),
	'idle=bob,jobs=alice,orders-writer=alice,shard-7=bob',
	'source: leases owned by two roles');
is( $src->safe_psql(
		'app',
		"SELECT count(*) FILTER (WHERE ended IS NULL) || '/' || count(*) FROM tenure.history"
	),
	'2/6',
	'source: six history rows, two tenures open');
is( $src->safe_psql(
		'app',
		"SELECT string_agg(tbl || '=' || lease, ',' ORDER BY tbl::text) FROM tenure.fenced"),
	'events=shard-7,events_2025=shard-7,events_2026=shard-7,orders=orders-writer',
	'source: four tables fenced, partitions included');
is( $src->safe_psql(
		'app',
		"SELECT string_agg(DISTINCT tgenabled::text, ',') || '/' || count(*) FROM pg_trigger WHERE tgname = 'tenure_fence'"
	),
	'A/4',
	'source: the fence triggers are enabled ALWAYS');

# --- dump and restore
my $dump = "$PostgreSQL::Test::Utils::tmp_check/app.dump";
$src->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'app' ],
	'pg_dump -Fc of the database');
my ($stdout, $stderr);
my $restored = IPC::Run::run(
	[ 'pg_restore', '--exit-on-error', '-d', $dst->connstr('app'), $dump ],
	'>', \$stdout, '2>', \$stderr);
ok($restored, 'pg_restore into a fresh database of another cluster');
is($stderr, '', 'pg_restore reports nothing');

is($dst->safe_psql('app', "SELECT extversion FROM pg_extension WHERE extname = 'pg_tenure'"),
	'0.1', 'destination: the restore created the extension');
for my $what (sort keys %compare)
{
	is($dst->safe_psql('app', $compare{$what}),
		$before{$what}, "destination: $what arrived");
}
is( $dst->safe_psql(
		'app',
		"SELECT string_agg(DISTINCT tgenabled::text, ',') || '/' || count(*) FROM pg_trigger WHERE tgname = 'tenure_fence'"
	),
	'A/4',
	'destination: the fence triggers are enabled ALWAYS');
is( $dst->safe_psql(
		'app',
		"SELECT count(*) FROM tenure.leases WHERE holder IS NOT NULL OR lock_held"),
	'0',
	'destination: no tenure was restored');
is( $dst->safe_psql(
		'app',
		"SELECT tenure.leader_is('orders-writer', 'w1'), tenure.leader_is('jobs', 'j2')"
	),
	'f|f',
	'destination: the source\'s holders do not lead');
for my $lease (sort keys %old)
{
	is($dst->safe_psql('app', "SELECT tenure.current_epoch('$lease')"),
		$old{$lease}[-1], "destination: current_epoch of $lease arrived");
}

# --- old tokens before and after the next tenure
like(
	sql_error($dst, 'app', alice_write($writer_epoch, 10)),
	qr/ERROR:  TN002: write to table "orders" fenced by lease "orders-writer" rejected: the lease has no live tenure/,
	'destination, no tenure: the latest source token is rejected with TN002');
like(
	sql_error($dst, 'app', "SET ROLE alice;\nINSERT INTO orders VALUES (11, 0);"),
	qr/ERROR:  TN002: table "orders" is fenced by lease "orders-writer" and the transaction presents no epoch for it/,
	'destination: a write without a token is rejected with TN002');

my $new = $dst->safe_psql('app',
	"SET ROLE alice; SELECT tenure.acquire('orders-writer', 'w2')");
like($new, qr/^\d+$/, "destination: acquire returned $new");
cmp_ok($new, '>', $_, "destination: new epoch $new > source epoch $_")
  for @{ $old{'orders-writer'} };
for my $epoch (@{ $old{'orders-writer'} })
{
	like(
		sql_error($dst, 'app', alice_write($epoch, 12)),
		qr/ERROR:  TN002: write to table "orders" fenced by lease "orders-writer" rejected: epoch $epoch is not current/,
		"destination, new tenure: source token $epoch is rejected with TN002");
}
$dst->safe_psql('app', alice_write($new, 13));
is($dst->safe_psql('app', 'SELECT epoch FROM orders WHERE id = 13'),
	$new, 'destination: a write with the new token commits');

# the tenures open at dump time are closed by the next tenure
is( $dst->safe_psql(
		'app', qq{
	SELECT string_agg(format('%s/%s/%s', lease, holder, end_reason), ',' ORDER BY lease)
	  FROM tenure.history WHERE (lease, epoch) IN (('orders-writer', $writer_epoch), ('jobs', $jobs_epoch))}
	),
	'jobs/j2/server restart,orders-writer/w1/server restart',
	'destination: the tenures open at dump time end with server restart');
is( $dst->safe_psql(
		'app',
		"SELECT string_agg(format('%s/%s started %s, ended %s', lease, epoch, started, ended), '; ')"
		  . ' FROM tenure.history WHERE ended < started'),
	'',
	'destination: no tenure in the history ends before it started');

# --- settings, owners and lock keys work on the destination
my $shard = $dst->safe_psql('app',
	"SET ROLE bob; SELECT tenure.acquire('shard-7', 'b2')");
cmp_ok($shard, '>', $old{'shard-7'}[-1],
	'destination: bob acquires shard-7 at a greater epoch');
my $jobs = $dst->safe_psql('app',
	"SET ROLE alice; SELECT tenure.acquire('jobs', 'j3')");
cmp_ok($jobs, '>', $jobs_epoch,
	'destination: alice acquires jobs at a greater epoch');
is( $dst->safe_psql(
		'app', 'SELECT pg_try_advisory_lock(4242), pg_try_advisory_lock(-17)'),
	'f|f',
	'destination: the keeper holds the lock_keys 4242 and -17');
like(
	sql_error($dst, 'app',
		"SET ROLE bob;\n"
		  . fenced_write('events_2026', 'shard-7', $old{'shard-7'}[-1], "1, '2026-05-01'")),
	qr/ERROR:  TN002: write to table "events_2026" fenced by lease "shard-7" rejected: epoch $old{'shard-7'}[-1] is not current/,
	'destination: a partition rejects the old token of shard-7');
$dst->safe_psql('app',
	"SET ROLE bob;\n" . fenced_write('events', 'shard-7', $shard, "1, '2026-05-01'"));
is($dst->safe_psql('app', 'SELECT count(*) FROM events_2026'),
	'1', 'destination: a write through the parent with the new token commits');
like(
	sql_error($dst, 'app', "SET ROLE bob;\nSELECT tenure.acquire('orders-writer', 'b3');"),
	qr/ERROR:  42501: permission denied for lease "orders-writer"/,
	'destination: bob may not acquire alice\'s lease');
$dst->safe_psql('app', "SET ROLE bob; SELECT tenure.create_lease('fresh')");
cmp_ok(
	$dst->safe_psql('app', "SELECT id FROM tenure.lease WHERE name = 'fresh'"),
	'>',
	$dst->safe_psql(
		'app', "SELECT max(id) FROM tenure.lease WHERE name <> 'fresh'"),
	'destination: a new lease gets a new id');

$src->stop;
$dst->stop;
done_testing();
