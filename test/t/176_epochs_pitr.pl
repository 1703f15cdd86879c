
# Point-in-time recovery onto a new timeline from a backup taken several
# timelines earlier.  A primary with WAL archiving issues an epoch, a base
# backup is taken, then the cluster moves on through two archive
# recoveries (timelines 2 and 3), issuing greater epochs on each.  A copy
# restored from the old backup, recovered to its consistency point on
# timeline 1, ends recovery on timeline 4 (greater than every timeline in
# the archive): its first epochs must exceed every epoch issued on
# timelines 1, 2 and 3, and the tokens issued there must fail at its fence.
# (Epochs that added the timeline to the stored "era" went 1 -> 3 -> 6 and
# then back to 1 + 4 = 5 here.)

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $primary = tenure_node('pitr_primary',
	init => { has_archiving => 1, allows_streaming => 1 });
$primary->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
	CREATE TABLE t (epoch bigint);
	SELECT tenure.fence_table('t', 'w');
});

my @issued;    # every epoch issued, on every timeline

# Issue an epoch on $node (a new tenure or a claim) and check it exceeds
# every earlier one.
sub issue
{
	my ($node, $sql, $what) = @_;
	my $epoch = $node->safe_psql('postgres', "SELECT $sql");
	like($epoch, qr/^\d+$/, "$what: epoch $epoch");
	my @higher = grep { $_ >= $epoch } @issued;
	is(scalar(@higher), 0, "$what: epoch $epoch exceeds every earlier one");
	push @issued, $epoch;
	return $epoch;
}

# Wait until a file shows up in the primary's WAL archive.
sub wait_for_archive
{
	my ($file) = @_;
	my $path = $primary->archive_dir . "/$file";
	ok(wait_until("$file to be archived", sub { -f $path }),
		"$file is archived");
	return;
}

# The timeline the node inserts WAL on.
sub timeline
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		'SELECT timeline_id FROM pg_control_checkpoint()');
}

# --- timeline 1: an epoch, then the backup
issue($primary, "tenure.acquire('w', 'tl1')", 'timeline 1');
$primary->backup('old');
issue($primary, "tenure.claim_epoch('w', 'tl1')", 'timeline 1, after the backup');

# --- two archive recoveries of the primary itself: timelines 2 and 3
for my $tli (2, 3)
{
	$primary->stop;
	$primary->enable_restoring($primary, 0);    # recovery.signal
	$primary->start;
	ok($primary->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
		"archive recovery $tli ended");
	$primary->safe_psql('postgres', 'CHECKPOINT');
	is(timeline($primary), $tli, "the primary is on timeline $tli");
	wait_for_archive(sprintf('%08X.history', $tli));
	issue($primary, "tenure.acquire('w', 'tl$tli')", "timeline $tli");
	issue($primary, "tenure.claim_epoch('w', 'tl$tli')", "timeline $tli, claim");
}
$primary->stop;

# --- the old backup recovered on timeline 1 to its consistency point
my $restored = PostgreSQL::Test::Cluster->new('pitr_restored');
$restored->init_from_backup($primary, 'old', has_restoring => 1, standby => 0);
$restored->append_conf(
	'postgresql.conf', q{
recovery_target_timeline = 'current'
recovery_target = 'immediate'
recovery_target_action = 'promote'
});
$restored->start;
ok($restored->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()'),
	'the restored copy ended recovery');
$restored->safe_psql('postgres', 'CHECKPOINT');
is(timeline($restored), 4, 'the restored copy is on timeline 4');
is($restored->safe_psql('postgres', "SELECT tenure.current_epoch('w')"),
	$issued[0], 'the restored copy has the epoch of the backup');

my $new = issue($restored, "tenure.acquire('w', 'tl4')",
	'timeline 4, from the old backup');
issue($restored, "tenure.claim_epoch('w', 'tl4')", 'timeline 4, claim');
$new = $issued[-1];

# the tokens of the earlier timelines are rejected, the new one works
for my $epoch (@issued[ 0 .. $#issued - 1 ])
{
	my (undef, $err) = try_sql($restored, 'postgres', fenced_write('t', 'w', $epoch));
	like(
		$err,
		qr/ERROR:  TN002: (commit of a )?write to table "t" fenced by lease "w" rejected/,
		"timeline 4: token $epoch is rejected with TN002");
}
$restored->safe_psql('postgres', fenced_write('t', 'w', $new));
is($restored->safe_psql('postgres', 'SELECT string_agg(epoch::text, \',\') FROM t'),
	$new, 'timeline 4: only the write with the current token is in the table');

$restored->stop;
done_testing();
