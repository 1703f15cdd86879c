
# A crash restart (a backend killed with SIGKILL, restart_after_crash = on)
# and then a clean restart: each time no tenure survives (no holder, nobody
# leads, the keeper holds no lease lock), epochs survive and the next ones
# are greater than every earlier one, the history closes the tenures that
# were open with "server restart", and a fenced table rejects the tokens
# issued before the restart (SQLSTATE TN002).  Commits are synchronous
# (the default), so what they wrote survives; 179_epochs_crash_async.pl
# covers asynchronous commits, which a crash may lose, but whose epochs it
# never lets anyone issue again.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

# private advisory key space of the keeper's lease locks (objsubid in pg_locks)
my $lease_lock = "locktype = 'advisory' AND objsubid = 32321";

my $node = tenure_node(
	'restart', conf => q{
restart_after_crash = on
});
$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('sb', ttl => '10 min', holdoff => '0');
	SELECT tenure.create_lease('pl', ttl => '10 min', holdoff => '0');
	CREATE TABLE fenced_sb (epoch bigint);
	CREATE TABLE fenced_pl (epoch bigint);
	SELECT tenure.fence_table('fenced_sb', 'sb');
	SELECT tenure.fence_table('fenced_pl', 'pl');
});
ok(wait_for_keeper($node), 'the keeper runs');

# every epoch issued so far, per lease
my %issued = (sb => [], pl => []);

# Check that a new epoch exceeds every epoch issued before for the lease,
# then remember it.
sub new_epoch
{
	my ($lease, $epoch, $what) = @_;
	like($epoch, qr/^\d+$/, "$what: epoch $epoch for $lease");
	my @higher = grep { $_ >= $epoch } @{ $issued{$lease} };
	is(scalar(@higher), 0,
		"$what: $lease epoch $epoch exceeds every earlier one (@{ $issued{$lease} })"
	);
	push @{ $issued{$lease} }, $epoch;
	return $epoch;
}

# Start a session-bound tenure of sb (in a session kept open) and a plain
# tenure of pl with one claim; check they work.  Returns the holder session.
sub start_tenures
{
	my ($round) = @_;
	my $holder = $node->background_psql('postgres');
	new_epoch(
		'sb',
		$holder->query_safe(
			"SELECT tenure.acquire('sb', 'sb-$round', session_bound => true)"),
		"$round: session-bound acquire");
	new_epoch('pl',
		$node->safe_psql('postgres', "SELECT tenure.acquire('pl', 'pl-$round')"),
		"$round: plain acquire");
	new_epoch(
		'pl',
		$node->safe_psql(
			'postgres', "SELECT tenure.claim_epoch('pl', 'pl-$round')"),
		"$round: claim");

	is( $node->safe_psql(
			'postgres',
			"SELECT tenure.leader_is('sb', 'sb-$round'), tenure.leader_is('pl', 'pl-$round')"
		),
		't|t',
		"$round: both holders lead");
	is($node->safe_psql('postgres', "SELECT count(*) FROM pg_locks WHERE $lease_lock"),
		'2', "$round: the keeper holds two lease locks");

	# the fences accept the current tokens, presented in the transaction,
	# also from the session-bound holder's own session
	$node->safe_psql('postgres', fenced_write('fenced_pl', 'pl', $issued{pl}[-1]));
	$holder->query_safe(fenced_write('fenced_sb', 'sb', $issued{sb}[-1]));
	is( $node->safe_psql(
			'postgres',
			"SELECT (SELECT max(epoch) FROM fenced_sb) || '|' || (SELECT max(epoch) FROM fenced_pl)"
		),
		"$issued{sb}[-1]|$issued{pl}[-1]",
		"$round: writes with the current tokens commit");
	return $holder;
}

# After a restart: nothing survives but the epochs and the history; the next
# tenures start above every earlier epoch and close the history of the ones
# the restart ended.
sub check_after_restart
{
	my ($round, $open) = @_;

	is( $node->safe_psql(
			'postgres',
			"SELECT string_agg(lease || '=' || coalesce(holder, 'none') || '/' || lock_held, ',' ORDER BY lease)"
			  . ' FROM tenure.leases'),
		'pl=none/false,sb=none/false',
		"$round: tenure.leases shows no holder and no lock");
	is( $node->safe_psql(
			'postgres',
			"SELECT tenure.leader_is('sb', 'sb-$round'), tenure.leader_is('pl', 'pl-$round')"
		),
		'f|f',
		"$round: nobody leads");
	is($node->safe_psql('postgres', "SELECT count(*) FROM pg_locks WHERE $lease_lock"),
		'0', "$round: pg_locks shows no lease lock");
	is( $node->safe_psql(
			'postgres',
			"SELECT tenure.current_epoch('sb') || '|' || tenure.current_epoch('pl')"),
		"$issued{sb}[-1]|$issued{pl}[-1]",
		"$round: current_epoch survived");

	# tokens from before the restart, with no tenure alive
	for my $lease ('sb', 'pl')
	{
		for my $epoch (@{ $issued{$lease} })
		{
			like(
				sql_error($node, 'postgres', fenced_write("fenced_$lease", $lease, $epoch)),
				qr/ERROR:  TN002: write to table "fenced_$lease" fenced by lease "$lease" rejected: the lease has no live tenure/,
				"$round, no tenure: pre-restart token $lease=$epoch rejected with TN002"
			);
		}
	}
	like(
		sql_error($node, 'postgres', fenced_write('fenced_pl', 'pl', $issued{pl}[-1])),
		qr/DETAIL:  The transaction presented epoch $issued{pl}[-1]; the latest epoch is $issued{pl}[-1]\./,
		"$round: the detail names the latest epoch, which survived");

	# the next acquisition of one lease
	my $pl = new_epoch('pl',
		$node->safe_psql('postgres', "SELECT tenure.acquire('pl', 'pl-next')"),
		"$round: first acquire after the restart");
	# the tenures open before the restart, of every lease of the database
	my $in = join(', ', map { my ($l, $e) = split m{/}; "('$l', $e)" } @$open);
	poll_is($node, 'postgres', qq{
		SELECT string_agg(format('%s/%s/%s', lease, epoch, coalesce(end_reason, 'open')), ',' ORDER BY lease, epoch)
		  FROM tenure.history WHERE (lease, epoch) IN ($in)},
		join(',', map { "$_/server restart" } @$open),
		"$round: after the next acquire, the tenures the restart ended say 'server restart'"
	);
	is( $node->safe_psql(
			'postgres', qq{
		SELECT string_agg(format('%s/%s started %s, ended %s', lease, epoch, started, ended), '; ')
		  FROM tenure.history WHERE (lease, epoch) IN ($in) AND NOT (ended >= started)}
		),
		'',
		"$round: those tenures did not end before they started");

	new_epoch('sb',
		$node->safe_psql('postgres', "SELECT tenure.acquire('sb', 'sb-next')"),
		"$round: acquire of sb after the restart");

	# tokens from before the restart, with a new tenure alive
	for my $lease ('sb', 'pl')
	{
		for my $epoch (@{ $issued{$lease} }[ 0 .. $#{ $issued{$lease} } - 1 ])
		{
			like(
				sql_error($node, 'postgres', fenced_write("fenced_$lease", $lease, $epoch)),
				qr/ERROR:  TN002: write to table "fenced_$lease" fenced by lease "$lease" rejected/,
				"$round, new tenure: pre-restart token $lease=$epoch rejected with TN002"
			);
		}
	}
	$node->safe_psql('postgres', fenced_write('fenced_pl', 'pl', $pl));
	is($node->safe_psql('postgres', 'SELECT max(epoch) FROM fenced_pl'),
		$pl, "$round: a write with the new token commits");
	is( $node->safe_psql(
			'postgres',
			"SELECT tenure.release('pl', 'pl-next'), tenure.release('sb', 'sb-next')"
		),
		't|t',
		"$round: the new tenures are released");
	return;
}

# The tenures open in tenure.history, as "lease/epoch" strings.
sub open_tenures
{
	return [
		split /\n/,
		$node->safe_psql('postgres',
			"SELECT lease || '/' || epoch FROM tenure.history WHERE ended IS NULL ORDER BY lease, epoch"
		) ];
}

# --- crash restart
my $holder = start_tenures('crash');
my $open = open_tenures();
is_deeply(
	$open,
	[ "pl/$issued{pl}[-1]", "sb/$issued{sb}[-1]" ],
	'crash: two tenures are open in the history');
my $old_keeper = keeper_pid($node);

my $victim = $node->background_psql('postgres');
my $victim_pid = $victim->query_safe('SELECT pg_backend_pid()');
my $log_offset = -s $node->logfile;
ok(kill('KILL', $victim_pid), "crash: backend $victim_pid killed with SIGKILL");
$node->wait_for_log(qr/all server processes terminated; reinitializing/,
	$log_offset);
ok($node->poll_query_until('postgres', undef, ''),
	'crash: the server accepts connections again');
ok(wait_for_keeper($node), 'crash: a keeper runs again');
isnt(keeper_pid($node), $old_keeper, 'crash: it is a new keeper');
$victim->quit;
$holder->quit;

check_after_restart('crash', $open);

# --- clean restart
$holder = start_tenures('restart');
$open = open_tenures();
is_deeply(
	$open,
	[ "pl/$issued{pl}[-1]", "sb/$issued{sb}[-1]" ],
	'restart: two tenures are open in the history');

$node->restart;
ok(wait_for_keeper($node), 'restart: the keeper runs');
$holder->quit;

check_after_restart('restart', $open);

$node->stop;
done_testing();
