
# The singleton-writer story.  Writer A holds the lease of a store and keeps
# a pool of three connections; each is inside a transaction that presented
# A's epoch with SET LOCAL and wrote a row.  Writer B takes over, first
# after A released the lease, then after A's tenure silently expired.
# Every one of A's pooled transactions fails at COMMIT with TN002, none of
# A's rows land, B's rows (written with B's token) do, and a pooled
# connection that presents A's epoch again is rejected at once.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('singleton_writer', extension => 0);

# (the test role may be named like the extension's schema: qualify tables)
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('orders-writer', ttl => '5 min');
	CREATE TABLE public.orders (id int PRIMARY KEY, writer text NOT NULL);
	SELECT tenure.fence_table('public.orders', 'orders-writer');
	SELECT tenure.create_lease('ledger-writer', ttl => '3 s');
	CREATE TABLE public.ledger (id int PRIMARY KEY, writer text NOT NULL);
	SELECT tenure.fence_table('public.ledger', 'ledger-writer');
});

# Start a psql session that reports SQLSTATEs and keeps going after errors.
sub pooled_connection
{
	my $session = $node->background_psql('postgres', on_error_stop => 0);
	$session->query_safe('\set VERBOSITY verbose');
	return $session;
}

# Run a statement that must fail; return its error output.
sub query_fails
{
	my ($session, $sql) = @_;
	my ($out, $failed) = $session->query($sql);
	my $stderr = $session->{stderr};
	$session->{stderr} = '';
	ok($failed, "fails: $sql");
	return $stderr;
}

my @pool = map { pooled_connection() } 1 .. 3;

# ---------------------------------------------------------------------
# Round 1: A releases, B acquires.
# ---------------------------------------------------------------------

my $epoch_a =
  $node->safe_psql('postgres',
	"SELECT tenure.acquire('orders-writer', 'writer-a')");
like($epoch_a, qr/^\d+$/, 'writer A acquires the lease');

for my $i (0 .. 2)
{
	$pool[$i]->query_safe('BEGIN');
	$pool[$i]->query_safe("SET LOCAL tenure.tokens = 'orders-writer=$epoch_a'");
	$pool[$i]->query_safe(
		"INSERT INTO public.orders VALUES ($i + 1, 'writer-a')");
}
pass("A's three pooled transactions presented A's epoch and wrote a row");

is( $node->safe_psql(
		'postgres', "SELECT tenure.release('orders-writer', 'writer-a')"),
	't',
	"A's control connection releases the lease");

my $epoch_b =
  $node->safe_psql('postgres',
	"SELECT tenure.acquire('orders-writer', 'writer-b')");
like($epoch_b, qr/^\d+$/, 'writer B acquires the lease');
cmp_ok($epoch_b, '>', $epoch_a, "B's epoch is newer than A's");

# B writes in a transaction that is still open while A's connections try
# to commit, and in one that commits before
$node->safe_psql(
	'postgres', qq{
	BEGIN;
	SET LOCAL tenure.tokens = 'orders-writer=$epoch_b';
	INSERT INTO public.orders VALUES (101, 'writer-b');
	COMMIT;
});
my $writer_b = pooled_connection();
$writer_b->query_safe('BEGIN');
$writer_b->query_safe("SET LOCAL tenure.tokens = 'orders-writer=$epoch_b'");
$writer_b->query_safe("INSERT INTO public.orders VALUES (102, 'writer-b')");

for my $i (0 .. 2)
{
	my $err = query_fails($pool[$i], 'COMMIT');
	like(
		$err,
		qr/ERROR:  TN002: commit of a write to table "orders" fenced by lease "orders-writer" rejected: epoch $epoch_a is not current/,
		"A's pooled connection " . ($i + 1) . " cannot commit after the takeover");
	like(
		$err,
		qr/DETAIL:  The transaction presented epoch $epoch_a; the current epoch is $epoch_b\./,
		'the error names the presented and the current epoch');
}

$writer_b->query_safe('COMMIT');

is( $node->safe_psql(
		'postgres', 'SELECT id, writer FROM public.orders ORDER BY id'),
	"101|writer-b\n102|writer-b",
	"none of A's rows landed, both of B's did");

# a stale pooled connection that presents A's epoch again, in a new
# transaction, is rejected at the INSERT itself
$pool[0]->query_safe('BEGIN');
$pool[0]->query_safe("SET LOCAL tenure.tokens = 'orders-writer=$epoch_a'");
like(
	query_fails($pool[0], "INSERT INTO public.orders VALUES (4, 'writer-a')"),
	qr/ERROR:  TN002: write to table "orders" fenced by lease "orders-writer" rejected: epoch $epoch_a is not current/,
	'a stale connection re-presenting A\'s epoch is rejected at once');
$pool[0]->query_safe('ROLLBACK');

# the SET LOCAL did not outlive its transaction: the next client of the
# pooled connection presents nothing
like(
	query_fails($pool[1], "INSERT INTO public.orders VALUES (5, 'next client')"),
	qr/ERROR:  TN002: table "orders" is fenced by lease "orders-writer" and the transaction presents no epoch for it/,
	'the next client of a pooled connection inherits no token');

is( $node->safe_psql(
		'postgres',
		"SELECT holder, end_reason FROM tenure.history WHERE lease = 'orders-writer' ORDER BY epoch"
	),
	"writer-a|released\nwriter-b|",
	'the history shows the handover');

# ---------------------------------------------------------------------
# Round 2: A's tenure expires (ttl 3 s, never renewed), then B acquires.
# ---------------------------------------------------------------------

my $ledger_a =
  $node->safe_psql('postgres',
	"SELECT tenure.acquire('ledger-writer', 'writer-a')");
like($ledger_a, qr/^\d+$/, 'writer A acquires the short lease');

for my $i (0 .. 2)
{
	$pool[$i]->query_safe('BEGIN');
	$pool[$i]->query_safe(
		"SELECT tenure.present('ledger-writer', $ledger_a, true)");
	$pool[$i]->query_safe(
		"INSERT INTO public.ledger VALUES ($i + 1, 'writer-a')");
}
pass("A's three pooled transactions wrote to the ledger");

# wait for the tenure to expire
ok( $node->poll_query_until(
		'postgres', "SELECT NOT tenure.leader_is('ledger-writer', 'writer-a')"),
	"A's tenure of the ledger expires");

# nobody holds the lease: the first pooled transaction fails at COMMIT
like(
	query_fails($pool[0], 'COMMIT'),
	qr/ERROR:  TN002: commit of a write to table "ledger" fenced by lease "ledger-writer" rejected: the lease has no live tenure/,
	"A's pooled connection 1 cannot commit after its tenure expired");

my $ledger_b =
  $node->safe_psql('postgres',
	"SELECT tenure.acquire('ledger-writer', 'writer-b')");
like($ledger_b, qr/^\d+$/, 'writer B acquires the expired lease');
cmp_ok($ledger_b, '>', $ledger_a, "B's epoch is newer than A's");

$node->safe_psql(
	'postgres', qq{
	BEGIN;
	SELECT tenure.present('ledger-writer', $ledger_b, true);
	INSERT INTO public.ledger VALUES (101, 'writer-b');
	COMMIT;
});

for my $i (1 .. 2)
{
	like(
		query_fails($pool[$i], 'COMMIT'),
		qr/ERROR:  TN002: commit of a write to table "ledger" fenced by lease "ledger-writer" rejected: epoch $ledger_a is not current/,
		"A's pooled connection " . ($i + 1) . " cannot commit after B took over");
}

is( $node->safe_psql(
		'postgres', 'SELECT id, writer FROM public.ledger ORDER BY id'),
	"101|writer-b",
	"none of A's ledger rows landed, B's did");

poll_is($node, 'postgres',
	"SELECT holder, end_reason FROM tenure.history WHERE lease = 'ledger-writer' ORDER BY epoch",
	"writer-a|expired\nwriter-b|",
	'the history shows the expiry and the new tenure');

$_->quit for @pool, $writer_b;
$node->stop;

done_testing();
