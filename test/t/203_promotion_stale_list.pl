
# A list of live tenures that the keeper wrote when it died while the
# server ran, not at the shutdown (src/README, P5): a tenure on it that
# expired afterwards (its holder's renew refused, leader_is false), with
# the server shut down cleanly before the keeper was back, stays ended on
# the promoted standby, since the list is read as of its own time and
# the shutdown checkpoint's.  A tenure released and an epoch claimed past
# after the keeper's death stay ended and fenced too.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use TenureTest;

my $old = tenure_node('kd_old', init => { allows_streaming => 1 });
$old->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('e', ttl => '1 s');
	SELECT tenure.create_lease('r', ttl => '10 min');
	SELECT tenure.create_lease('c', ttl => '10 min', holdoff => '0');
	CREATE TABLE t (epoch bigint);
	SELECT tenure.fence_table('t', 'c');
});
my $mid = tenure_standby($old, 'kd_mid');

my $kp = wait_for_keeper($old);
my $r = $old->safe_psql('postgres', "SELECT tenure.acquire('r', 'a')");
my $c1 = $old->safe_psql('postgres', "SELECT tenure.acquire('c', 'a')");
my $e = $old->safe_psql('postgres', "SELECT tenure.acquire('e', 'a')");
# the keeper dies shortly before e expires; it lists e, r and c at c1
wait_until('e to be close to its expiry',
	sub {
		$old->safe_psql('postgres',
			"SELECT expires - clock_timestamp() < interval '0.2 s' FROM tenure.leases WHERE lease = 'e'"
		) eq 't';
	});
kill 'TERM', $kp;
my $t_kill = time();
is($old->safe_psql('postgres', "SELECT tenure.release('r', 'a')"), 't', 'r released');
my $c2 = $old->safe_psql('postgres', "SELECT tenure.claim_epoch('c', 'a')");
cmp_ok($c2, '>', $c1, 'c claimed a new epoch');
wait_until('e to expire',
	sub { $old->safe_psql('postgres', "SELECT tenure.leader_is('e', 'a')") eq 'f' });
is($old->safe_psql('postgres', "SELECT tenure.renew('e', 'a')"),
	'f', 'old primary: e expired, its renew is refused');
# normally the keeper is not back yet (it restarts after a second), and
# the list its death wrote is the last; either way e must stay ended
promote_after_keeper_death($old, $mid, $t_kill);

is($mid->safe_psql('postgres', "SELECT tenure.renew('e', 'a'), tenure.leader_is('e', 'a')"),
	'f|f', 'e, expired on the old primary, stays ended on the new primary');
is($mid->safe_psql('postgres', "SELECT tenure.renew('r', 'a'), tenure.leader_is('r', 'a')"),
	'f|f', 'r, released on the old primary, stays ended');
my ($rc, $err) = try_sql($mid, 'postgres', fenced_write('t', 'c', $c1));
isnt($rc, 0, 'a fenced write with c\'s claimed-past epoch fails on the new primary');
note "c: " . $mid->safe_psql('postgres', "SELECT holder, epoch FROM tenure.leases WHERE lease = 'c'");

$mid->stop;
done_testing();
