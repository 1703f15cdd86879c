
# A crash or restart of the new primary within tenure.demotion_bound of a
# promotion without the proof keeps the successor's wait, also for leases
# that had a tenure since the promotion (src/README, P3): the restart
# cannot tell any more what the promotion kept, nor which tenure was still
# waiting out the bound.  The old primary goes on serving A throughout.
#
#  rel:   B acquires (not active yet), B releases; restart; C acquires
#  open:  B acquires (not active yet); restart; C acquires
#  claim: B acquires, claims; restart; C acquires
#  none:  nobody; restart; C acquires
#
# Each C is active no earlier than the promotion + ttl + demotion_bound.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $ttl = 120;   # A outlives the promotions and restarts on a loaded machine
my $conf = "tenure.demotion_bound = '1h'\n";
my @leases = qw(rel open claim none);

my $old = tenure_node('lr_old', init => { allows_streaming => 1 }, conf => $conf);
for my $mode ('crash', 'restart')
{
	$old->safe_psql('postgres',
		"SELECT tenure.create_lease('${mode}_$_', ttl => '$ttl s')") for @leases;
}
my $new = tenure_standby($old, 'lr_new');
for my $mode ('crash', 'restart')
{
	$old->safe_psql('postgres', "SELECT tenure.acquire('${mode}_$_', 'A')") for @leases;
}
$old->wait_for_catchup($new);

promote_ready($new, 'new primary');
ok( $new->wait_for_log(
		qr/the promotion from timeline 1 may have lost transactions of the old primary; its tenures end/),
	'no proof');
# the keeper started after the promotion, and the server became ready
# after that: the promotion + ttl + demotion_bound, from below
my $promoted_at = keeper_started($new);
my $deadline = "'$promoted_at'::timestamptz + interval '$ttl s' + interval '1 h'";

for my $mode ('crash', 'restart')
{
	my $p = $mode . '_';
	$new->safe_psql(
		'postgres', qq{
		SELECT tenure.acquire('${p}rel', 'B');
		SELECT tenure.acquire('${p}open', 'B');
		SELECT tenure.acquire('${p}claim', 'B');
	});
	$new->safe_psql('postgres', "SELECT tenure.release('${p}rel', 'B')");
	$new->safe_psql('postgres', "SELECT tenure.claim_epoch('${p}claim', 'B')");
	is( $new->safe_psql(
			'postgres',
			"SELECT tenure.leader_is('${p}open', 'B'), tenure.leader_is('${p}claim', 'B')"),
		'f|f', "$mode: B does not lead before the restart");
	# before the restart, C cannot lead rel either (B's bound still applies)
	$new->safe_psql('postgres', "SELECT tenure.acquire('${p}rel', 'X'), tenure.release('${p}rel', 'X')");

	ok($old->safe_psql('postgres', "SELECT bool_and(tenure.renew(lease, 'A')) FROM tenure.leases WHERE lease LIKE '${p}%'") eq 't',
		"$mode: the old primary still serves A");

	if ($mode eq 'crash')
	{
		$new->stop('immediate');
		$new->start;
	}
	else
	{
		$new->restart;
	}
	ok(defined wait_for_keeper($new), "$mode: keeper runs again");
	is($new->safe_psql('postgres', "SELECT clock_timestamp() < $deadline - interval '10 min'"),
		't', "$mode: still well within the bound");

	for my $l (@leases)
	{
		my $e = $new->safe_psql('postgres', "SELECT tenure.acquire('$p$l', 'C')");
		ok($e ne '', "$mode/$l: C acquired");
		my $r = $new->safe_psql('postgres',
			"SELECT tenure.leader_is('$p$l', 'C'), active_from >= $deadline, active_from FROM tenure.leases WHERE lease = '$p$l'");
		my ($leads, $late, $af) = split /\|/, $r;
		is($leads, 'f', "$mode/$l: C does not lead while A may (active_from $af)");
		is($late, 't', "$mode/$l: C is active no earlier than the promotion plus ttl plus bound");
	}
}

$old->stop;
$new->stop;
done_testing();
