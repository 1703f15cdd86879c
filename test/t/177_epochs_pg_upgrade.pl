# pg_upgrade gives the cluster a new system identifier (it carries the
# WAL position over, with pg_resetwal).  Every lease then counts as
# restored from another cluster and is imported at its next epoch (its
# base becomes its latest epoch), so its epochs continue above every epoch
# issued before the upgrade, old tokens stay fenced off, and the history
# comes along.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $old = tenure_node('upgrade_old');
$old->safe_psql('postgres', q{
SELECT tenure.create_lease('u', ttl => '10 min', holdoff => '0');
CREATE TABLE t (epoch bigint);
SELECT tenure.fence_table('t', 'u');
});
my $e1 = $old->safe_psql('postgres', "SELECT tenure.acquire('u', 'a')");
my $e2 = $old->safe_psql('postgres', "SELECT tenure.claim_epoch('u', 'a')");
my $old_sysid = $old->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');
$old->stop;

my $new = PostgreSQL::Test::Cluster->new('upgrade_new');
$new->init;
$new->append_conf('postgresql.conf', "shared_preload_libraries = 'pg_tenure'\n");
my $bindir = $old->config_data('--bindir');
my $workdir = "$PostgreSQL::Test::Utils::tmp_check/pg_upgrade_work";
mkdir $workdir;
chdir $workdir;
command_ok(
	[
		'pg_upgrade', '--no-sync',
		'-b', $bindir, '-B', $bindir,
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-s', $new->host, '-p', $old->port, '-P', $new->port
	],
	'pg_upgrade to a new cluster');
$new->start;

my $new_sysid = $new->safe_psql('postgres',
	'SELECT system_identifier FROM pg_control_system()');
isnt($new_sysid, $old_sysid, 'the new cluster has another system identifier');
is($new->safe_psql('postgres', "SELECT count(*) FROM tenure.history WHERE lease = 'u'"),
	'2', 'the history came along');

my $e3 = $new->safe_psql('postgres', "SELECT tenure.acquire('u', 'b')");
cmp_ok($e3, '>', $e2, "the first epoch after the upgrade ($e3) is above the last before it ($e2)");
is($new->safe_psql('postgres',
		"SELECT base = $e2 AND issued_sysid = $new_sysid FROM tenure.lease WHERE name = 'u'"),
	't', 'the lease was imported: its base is its latest epoch from before');
my $e4 = $new->safe_psql('postgres', "SELECT tenure.claim_epoch('u', 'b')");
cmp_ok($e4, '>', $e3, 'later epochs keep growing');

# the old tokens are fenced off, the new one writes
my ($ret, $out, $err) = $new->psql('postgres', fenced_write('t', 'u', $e2));
like($err, qr/rejected: epoch $e2 is not current/, 'a token from before the upgrade is rejected');
$new->safe_psql('postgres', fenced_write('t', 'u', $e4));
is($new->safe_psql('postgres', 'SELECT array_agg(epoch) FROM t'),
	"{$e4}", 'the current token writes');

$new->stop;
done_testing();
