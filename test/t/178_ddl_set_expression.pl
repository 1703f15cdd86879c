
# ALTER TABLE ... ALTER COLUMN ... SET EXPRESSION (PostgreSQL 17 and
# later) recomputes a stored generated column in every row: on a fenced
# table it is a fenced write, checked when the command starts and, as a
# rewrite, when the table is rewritten.  The version-independent DDL cases
# are in section 9 of sql/fence_matrix.sql.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('set_expression', extension => 0);

if ($node->safe_psql('postgres', 'SHOW server_version_num') < 170000)
{
	$node->stop;
	plan skip_all => 'SET EXPRESSION appeared in PostgreSQL 17';
}

$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION pg_tenure;
	SELECT tenure.create_lease('se', ttl => '1 h');
	CREATE TABLE se_t (k int, g int GENERATED ALWAYS AS (k * 2) STORED);
	INSERT INTO se_t (k) VALUES (1), (2);
	SELECT tenure.fence_table('se_t', 'se');
});
my $epoch = $node->safe_psql('postgres', "SELECT tenure.acquire('se', 'w')");

my $alter = 'ALTER TABLE se_t ALTER COLUMN g SET EXPRESSION AS (k * 10)';
my $sum = 'SELECT sum(g) FROM se_t';

# no token, a stale token, and each check alone (the other one turned off
# by a superuser): rejected with TN002, nothing changed
my @cases = (
	[ 'no token', '', '' ],
	[ 'a stale token', "SET LOCAL tenure.tokens = 'se=" . ($epoch - 1) . "';", '' ],
	[
		'no token, checked on table_rewrite only', '',
		'ALTER EVENT TRIGGER tenure_fence_alter DISABLE;'
	],
	[
		'no token, checked on ddl_command_start only', '',
		'ALTER EVENT TRIGGER tenure_fence_rewrite DISABLE;'
	]);
foreach my $case (@cases)
{
	my ($name, $token, $disable) = @$case;
	my ($out, $err) = ('', '');
	$node->psql(
		'postgres', "BEGIN; $disable $token $alter; COMMIT;",
		stdout => \$out,
		stderr => \$err,
		extra_params => [ '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:  TN002: (?:table "se_t" is fenced by lease "se"|write to table "se_t" fenced by lease "se" rejected)/,
		"SET EXPRESSION with $name is rejected");
	is($node->safe_psql('postgres', $sum), '6', "$name: the rows are unchanged");
}

# with the current token it commits
$node->safe_psql('postgres',
	"BEGIN; SET LOCAL tenure.tokens = 'se=$epoch'; $alter; COMMIT;");
is($node->safe_psql('postgres', $sum), '30', 'SET EXPRESSION with the current token commits');

$node->stop;
done_testing();
