
# A fenced COMMIT holds its lease's fence lock, a relation lock on the view
# tenure.leases.fence_lock, in ROW EXCLUSIVE mode through the lock
# manager's fast path.  A backend caches the views' OIDs: after DROP and
# CREATE EXTENSION in another session it must lock the new views, or claims
# (which lock the new ones) would no longer wait for its commits.
# create_lease spreads leases over the sixteen views.
#
# A COMMIT is held half-way, past pg_tenure's pre-commit check, by an armed
# temporary table ON COMMIT DELETE ROWS that another session keeps locked.
# (The session is a superuser's: for other roles pg_tenure runs the ON
# COMMIT actions before the check, src/README F11.)

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('fence_lock', extension => 0);

# Create the extension, a lease "fl" fencing public.fl_t, and a tenure of
# it; return the epoch.
sub install
{
	$node->safe_psql(
		'postgres', q{
CREATE EXTENSION pg_tenure;
SELECT tenure.create_lease('fl', ttl => '10 min', holdoff => '0');
SELECT tenure.fence_table('public.fl_t', 'fl');
});
	return $node->safe_psql('postgres', "SELECT tenure.acquire('fl', 'writer')");
}

$node->safe_psql('postgres', 'CREATE TABLE public.fl_t (who text NOT NULL)');
my $epoch = install();
like($epoch, qr/^\d+$/, 'the writer holds lease fl');

my $w = $node->background_psql('postgres');
$w->query_safe('CREATE TEMP TABLE fl_pause (x int) ON COMMIT DELETE ROWS');
my $w_pid = $w->query_safe('SELECT pg_backend_pid()');
$w_pid =~ s/\s+//g;

# Write with the current epoch and stop inside COMMIT; check the fence
# lock the COMMIT holds; let it finish.
sub paused_commit
{
	my ($epoch, $who, $what) = @_;

	# a committed write first, so that the catalog lookups of a cold cache
	# do not fill the backend's fast-path slots in the paused transaction
	$w->query_safe(
		"BEGIN; SELECT tenure.present('fl', $epoch, true); INSERT INTO public.fl_t VALUES ('warm'); COMMIT;"
	);
	$w->query_safe(
		"BEGIN; SELECT tenure.present('fl', $epoch, true); INSERT INTO public.fl_t VALUES ('$who'); INSERT INTO fl_pause VALUES (1);"
	);
	my $p = $node->background_psql('postgres');
	$p->query_safe(
		q{BEGIN; DO $$ BEGIN EXECUTE format('LOCK TABLE %s IN ACCESS SHARE MODE', (SELECT c.oid::regclass FROM pg_class c WHERE c.relname = 'fl_pause' AND c.relpersistence = 't')); END $$;}
	);
	start_statement($w, 'COMMIT;');
	ok( $node->poll_query_until(
			'postgres',
			"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $w_pid"),
		"$what: COMMIT waits inside");
	is( $node->safe_psql(
			'postgres', qq{
SELECT k.mode || ' ' || k.granted || ' ' || k.fastpath
  FROM pg_locks k JOIN tenure.leases l ON k.relation = l.fence_lock
 WHERE l.lease = 'fl' AND k.pid = $w_pid AND k.locktype = 'relation'
}),
		'RowExclusiveLock true true',
		"$what: the COMMIT holds the lease's fence lock by the fast path");
	$p->query_safe('COMMIT');
	$p->quit;
	$w->query_safe('SELECT 1');
	is($node->safe_psql('postgres', "SELECT count(*) FROM public.fl_t WHERE who = '$who'"),
		'1', "$what: the row landed");
	return;
}

paused_commit($epoch, 'second', 'cached views');

# the extension is dropped and created again in another session
$node->safe_psql('postgres', 'DROP EXTENSION pg_tenure CASCADE');
my $epoch2 = install();
like($epoch2, qr/^\d+$/, 'the writer holds the new lease fl');

paused_commit($epoch2, 'third', 'after CREATE EXTENSION again');

$w->quit;

# sixteen leases take sixteen views; the seventeenth shares the least used
# (the lowest-numbered on a tie); a dropped lease's view is used again next
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('s' || i) FROM generate_series(1, 15) i");
is( $node->safe_psql(
		'postgres',
		'SELECT count(*) || \' \' || count(DISTINCT fence_lock) FROM tenure.leases'),
	'16 16',
	'sixteen leases, sixteen fence lock views');
sub view_of
{
	my ($lease) = @_;
	return $node->safe_psql('postgres',
		"SELECT c.relname FROM tenure.leases l JOIN pg_class c ON c.oid = l.fence_lock WHERE l.lease = '$lease'"
	);
}
$node->safe_psql('postgres', "SELECT tenure.create_lease('s16')");
is(view_of('s16'), view_of('fl'), 'the seventeenth lease shares the view of the first');
my $freed = view_of('s7');
$node->safe_psql('postgres',
	"SELECT tenure.drop_lease('s7'); SELECT tenure.create_lease('s17')");
is(view_of('s17'), $freed, 'a new lease takes the view a dropped one left');

# a row whose fence_lock is out of range (only possible once a superuser
# drops the CHECK constraint) is refused when the lease is loaded
my ($ret, $out, $err) = $node->psql(
	'postgres', q{
\set VERBOSITY verbose
ALTER TABLE tenure.lease DROP CONSTRAINT lease_fence_lock_check;
UPDATE tenure.lease SET fence_lock = 16 WHERE name = 's1';
SELECT tenure.acquire('s1', 'h');
});
like($err, qr/ERROR:  XX001: lease "s1" has an invalid fence_lock 16/,
	'an out-of-range fence_lock fails with XX001');
like($err, qr/DETAIL:  tenure.lease.fence_lock must be between 0 and 15/,
	'the detail gives the range');
is($node->safe_psql('postgres', "SELECT holder IS NULL FROM tenure.leases WHERE lease = 's1'"),
	't', 'the refused acquire left s1 free');

# a fenced write whose transaction drops the extension before COMMIT finds
# no fence lock view and fails closed
($ret, $out, $err) = $node->psql(
	'postgres', qq{
\\set VERBOSITY verbose
BEGIN;
SELECT tenure.present('fl', $epoch2, true);
INSERT INTO public.fl_t VALUES ('dropped');
DROP EXTENSION pg_tenure CASCADE;
COMMIT;
});
like(
	$err,
	qr/ERROR:  42P01: pg_tenure is not installed in this database/,
	'a fenced commit after its extension was dropped fails with 42P01');
is($node->safe_psql('postgres', "SELECT count(*) FROM public.fl_t WHERE who = 'dropped'"),
	'0', "the write did not land");
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'pg_tenure'"),
	'1', 'nor did the DROP EXTENSION');

$node->stop;

done_testing();
