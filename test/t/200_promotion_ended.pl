
# Tenures that ended on the old primary stay ended through a promotion
# (src/README, P5), also when their rows in tenure.history are still open:
# the old primary's history writer cannot start here (max_worker_processes
# leaves a slot to the keeper only), so no end is ever written there.
#
# - e expired on the old primary before its clean shutdown: its holder's
#   renew, refused there, is refused on the new primary too;
# - r's tenure ended with a crash and restart of the old primary, which
#   then shut down cleanly: it does not come back either;
# - c, live at the shutdown, continues, as in 192_promotion.pl;
# - through a second switchover, a continued tenure that nobody loaded on
#   the middle server (its history writer cannot start either) continues
#   again (k): the middle keeper lists it too.
#
# Each case fails without the keeper's list of live tenures.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $no_writer = "max_worker_processes = 1\nmax_logical_replication_workers = 0\n";
my $old = tenure_node(
	'ended_old',
	init => { allows_streaming => 1 },
	conf => $no_writer);
$old->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('e', ttl => '1 s');
	SELECT tenure.create_lease('c', ttl => '10 min');
	SELECT tenure.create_lease('k', ttl => '10 min');
});
# r in a database of its own: an acquisition closes the rows that a
# restart left open in its database (history_rows.c)
$old->safe_psql('postgres', 'CREATE DATABASE rdb');
$old->safe_psql('rdb',
	"CREATE EXTENSION pg_tenure; SELECT tenure.create_lease('r', ttl => '10 min')");
my $mid = tenure_standby($old, 'ended_mid', start => 0);
$mid->append_conf('postgresql.conf', $no_writer);
$mid->start;

# r: held when the old primary crashes; its row stays open
my $r = $old->safe_psql('rdb', "SELECT tenure.acquire('r', 'a')");
$old->stop('immediate');
$old->start;
ok(defined wait_for_keeper($old), 'old primary: restarted after a crash');
is($old->safe_psql('rdb', "SELECT tenure.renew('r', 'a')"),
	'f', 'old primary: r ended with the crash');

my $e = $old->safe_psql('postgres', "SELECT tenure.acquire('e', 'a')");
my $c = $old->safe_psql('postgres', "SELECT tenure.acquire('c', 'a')");
my $k = $old->safe_psql('postgres', "SELECT tenure.acquire('k', 'a')");
wait_until('e to expire',
	sub { $old->safe_psql('postgres', "SELECT tenure.leader_is('e', 'a')") eq 'f' });
is($old->safe_psql('postgres', "SELECT tenure.renew('e', 'a')"),
	'f', 'old primary: e expired, its renew is refused');
my $open = "SELECT string_agg(lease, ',' ORDER BY lease) FROM tenure.history WHERE ended IS NULL";
is($old->safe_psql('postgres', $open), 'c,e,k',
	'old primary: the row of e is still open (no history writer)');
is($old->safe_psql('rdb', $open), 'r', 'and so is the row of r');

$old->wait_for_catchup($mid);
stop_for_switchover($old, $mid);
ok($old->log_contains(qr/pg_tenure keeper exiting with 2 live tenures/),
	'the old keeper listed c and k as it exited');
promote_ready($mid, 'the standby');
ok( $mid->wait_for_log(
		qr/the promotion from timeline 1 kept every transaction of the old primary/),
	'it found the proof');

is($mid->safe_psql('postgres', "SELECT tenure.renew('e', 'a'), tenure.leader_is('e', 'a')"),
	'f|f', 'e stays expired: its holder cannot renew it back');
is($mid->safe_psql('rdb', "SELECT tenure.renew('r', 'a'), tenure.leader_is('r', 'a')"),
	'f|f', 'r stays ended by the crash');
is( $mid->safe_psql(
		'postgres',
		"SELECT tenure.leader_is('c', 'a'), tenure.renew('c', 'a'), tenure.current_epoch('c')"),
	"t|t|$c",
	'c continues at the same epoch');

# --- a second switchover; k never loaded on the middle server -------------

$mid->backup('mid_base');
my $new = PostgreSQL::Test::Cluster->new('ended_new');
$new->init_from_backup($mid, 'mid_base', has_streaming => 1);
$new->start;
$mid->wait_for_catchup($new);
stop_for_switchover($mid, $new);
ok($mid->log_contains(qr/pg_tenure keeper exiting with 2 live tenures/),
	'the middle keeper listed c and k (k carried over unloaded)');
promote_ready($new, 'the second standby');
ok( $new->wait_for_log(
		qr/the promotion from timeline 2 kept every transaction of the old primary/),
	'it found the proof');
is( $new->safe_psql(
		'postgres',
		"SELECT tenure.leader_is('k', 'a'), tenure.renew('k', 'a'), tenure.current_epoch('k')"),
	"t|t|$k",
	'k continues through both switchovers, unloaded in between');
is($new->safe_psql('postgres', "SELECT tenure.renew('e', 'a')"),
	'f', 'e stays ended');

done_testing();
