
# Epochs are never issued again after a crash, also when the transactions
# that issued them committed asynchronously and the crash lost them.
#
# With synchronous_commit = off and a WAL writer that rarely flushes, a
# client acquires, claims and releases a lease in a loop (autocommit: every
# epoch it prints was returned by a COMMIT), and the postmaster is killed
# with SIGKILL in the middle.  After crash recovery the lease's row may have
# lost the last epochs (the test checks that some iteration did, so that it
# exercises the case), yet every epoch issued afterwards must exceed every
# epoch the client saw before the crash.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node(
	'crash_async',
	conf => qq{
synchronous_commit = off
wal_writer_delay = 10s
wal_writer_flush_after = 1GB
restart_after_crash = on
});
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('ca', ttl => '10 min', holdoff => '0')");

my $rounds = 6;
my $lost_rounds = 0;
for my $round (1 .. $rounds)
{
	my $holder = "h$round";

	# acquire, claim twice, release: 3 epochs per loop
	my $script = '';
	$script .= "SELECT tenure.acquire('ca', '$holder');\n"
	  . "SELECT tenure.claim_epoch('ca', '$holder');\n"
	  . "SELECT tenure.claim_epoch('ca', '$holder');\n"
	  . "SELECT tenure.release('ca', '$holder');\n"
	  for 1 .. 5000;
	my $file = "${PostgreSQL::Test::Utils::tmp_check}/crash_async_$round.sql";
	PostgreSQL::Test::Utils::append_to_file($file, $script);
	my ($out, $err) = ('', '');
	my $client = IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t',
			'-d', $node->connstr('postgres'),
			'-f', $file
		],
		'>', \$out, '2>', \$err);

	# let it issue a few hundred epochs, then crash
	wait_until(
		"round $round issuing epochs",
		sub {
			$node->safe_psql('postgres',
				"SELECT count(*) >= 300 FROM tenure.history WHERE lease = 'ca' AND holder = '$holder'"
			) eq 't';
		});
	# a crash of the whole server: the postmaster and every child at once,
	# so that nothing flushes WAL afterwards
	my $postmaster = $node->{_pid};
	my @children = grep { /^\d+$/ } split /\s+/, `pgrep -P $postmaster`;
	$node->kill9;
	kill 'KILL', @children;
	$client->finish;
	wait_until('the old server processes to go',
		sub { !grep { kill(0, $_) } $postmaster, @children });

	# every number psql printed was returned by a COMMIT
	my @seen = grep { /^\d+$/ } split /\n/, $out;
	my $max_seen = 0;
	for (@seen) { $max_seen = $_ if $_ > $max_seen; }
	ok(@seen >= 300, "round $round: the client saw its epochs before the crash");

	$node->start;
	wait_for_keeper($node) or fail('timed out waiting for the keeper after the crash');

	my $stored = $node->safe_psql('postgres', "SELECT tenure.current_epoch('ca')");
	$lost_rounds++ if $stored < $max_seen;

	my ($after, $claimed) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT tenure.acquire('ca', 'after$round'), tenure.claim_epoch('ca', 'after$round')"
	  );
	cmp_ok($after, '>', $max_seen,
		"round $round: the first epoch after the crash exceeds every epoch seen before it");
	cmp_ok($claimed, '>', $after, "round $round: a claim after it is greater still");
	$node->safe_psql('postgres', "SELECT tenure.release('ca', 'after$round')");
}

# the crash must have lost committed epochs at least once, or this test
# would not exercise what it claims to
cmp_ok($lost_rounds, '>', 0,
	"a crash lost committed epochs in $lost_rounds of $rounds rounds");

$node->stop;

# wal_level = minimal: a table created in the transaction is not logged, so
# epochs issued there write no WAL for their rows; the clock must not run
# ahead of the WAL all the same.  One transaction creates the extension and
# issues a hundred epochs: the last is at most the clock of the WAL insert
# position (without the no-op record pg_tenure writes then, it would be
# ahead by about a hundred), and after a crash the next epoch exceeds it.
my $minimal = tenure_node(
	'crash_minimal',
	extension => 0,
	conf => qq{
wal_level = minimal
max_wal_senders = 0
restart_after_crash = on
});
my ($last, $wal_clock) = split /\|/, $minimal->safe_psql(
	'postgres', q{
	BEGIN;
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('cm', ttl => '10 min', holdoff => '0');
	SELECT FROM tenure.acquire('cm', 'm');
	DO $$BEGIN FOR i IN 1 .. 100 LOOP PERFORM tenure.claim_epoch('cm', 'm'); END LOOP; END$$;
	-- timeline 1: a new cluster
	SELECT e, (1::bigint << 50) | ((pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint >> 3)
	  FROM tenure.claim_epoch('cm', 'm') e;
	COMMIT;
});
cmp_ok($last, '<=', $wal_clock,
	'wal_level = minimal: epochs issued into an unlogged table stay within the WAL clock');
my $mpid = $minimal->{_pid};
my @mchildren = grep { /^\d+$/ } split /\s+/, `pgrep -P $mpid`;
$minimal->kill9;
kill 'KILL', @mchildren;
wait_until('the old server processes to go',
	sub { !grep { kill(0, $_) } $mpid, @mchildren });
$minimal->start;
my $next = $minimal->safe_psql('postgres',
	"SELECT tenure.acquire('cm', 'after')");
cmp_ok($next, '>', $last,
	'wal_level = minimal: the first epoch after a crash exceeds the last one before it');
$minimal->stop;

done_testing();
