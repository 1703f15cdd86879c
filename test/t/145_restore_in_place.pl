
# pg_restore --clean of an older dump over the same database, while the
# server keeps running: the server has issued epochs the dump does not
# know.  The next tenure must still get an epoch above every epoch issued
# before, the fence must accept its token, and every token from before the
# restore must be rejected (SQLSTATE TN002).

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('restore_in_place', extension => 0);
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql(
	'app', q{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
	CREATE TABLE t (epoch bigint);
	SELECT tenure.fence_table('t', 'w');
});

my @issued;
push @issued, $node->safe_psql('app', "SELECT tenure.acquire('w', 'a')");

my $dump = "$PostgreSQL::Test::Utils::tmp_check/app.dump";
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', 'app' ],
	'pg_dump -Fc while a holds w');

push @issued, $node->safe_psql('app', "SELECT tenure.claim_epoch('w', 'a')");
push @issued, $node->safe_psql('app', "SELECT tenure.claim_epoch('w', 'a')");
like($_, qr/^\d+$/, "epoch $_ issued before the restore") for @issued;
is($node->safe_psql('app', "SELECT tenure.release('w', 'a')"),
	't', 'a releases w');

$node->command_ok(
	[ 'pg_restore', '--clean', '--if-exists', '-d', 'app', $dump ],
	'pg_restore --clean of the older dump over the same database');

my $new = $node->safe_psql('app', "SELECT tenure.acquire('w', 'b')");
like($new, qr/^\d+$/, "after the restore, b acquires w at epoch $new");
cmp_ok($new, '>', $_, "the new epoch exceeds epoch $_ issued before the restore")
  for @issued;
is( $node->safe_psql(
		'app',
		"SELECT holder || '/' || epoch || '/' || tenure.current_epoch('w') FROM tenure.leases WHERE lease = 'w'"
	),
	"b/$new/$new",
	'tenure.leases and current_epoch show b at the new epoch');

my ($out, $err) = ('', '');
$node->psql(
	'app', fenced_write('t', 'w', $new),
	stdout => \$out,
	stderr => \$err);
is($err, '', 'a write with the new token commits');
for my $epoch (@issued)
{
	like(
		sql_error($node, 'app', fenced_write('t', 'w', $epoch)),
		qr/ERROR:  TN002: write to table "t" fenced by lease "w" rejected/,
		"a token from before the restore ($epoch) is rejected with TN002");
}
is($node->safe_psql('app', 'SELECT string_agg(epoch::text, \',\') FROM t'),
	$new, 'only the write with the new token is in the table');

$node->stop;
done_testing();
