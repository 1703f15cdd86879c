
# A fenced write made after pg_tenure's commit-time check ran fails with
# TN002, even with the current token: it could not be checked at COMMIT.
# Only another extension's PRE_COMMIT transaction callback that runs after
# pg_tenure's can write then (deferred triggers run before it;
# sql/fence_matrix.sql shows them checked).  Callbacks run in the reverse
# order of registration, so this test builds a small module, late_writer,
# preloaded before pg_tenure, whose PRE_COMMIT callback runs the statement
# in the setting late_writer.sql.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

# build the module with PGXS, in the test's own directory
my $dir = PostgreSQL::Test::Utils::tempdir;
open(my $c, '>', "$dir/late_writer.c") or die "could not write late_writer.c: $!";
print $c <<'EOC';
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static char *late_writer_sql = NULL;

/* at PRE_COMMIT and PRE_PREPARE, run late_writer.sql if it is set */
static void
late_writer_callback(XactEvent event, void *arg)
{
	if ((event != XACT_EVENT_PRE_COMMIT && event != XACT_EVENT_PRE_PREPARE) ||
		late_writer_sql == NULL ||
		late_writer_sql[0] == '\0')
		return;
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute(late_writer_sql, false, 0) < 0)
		elog(ERROR, "SPI_execute failed");
	SPI_finish();
	PopActiveSnapshot();
}

void
_PG_init(void)
{
	DefineCustomStringVariable("late_writer.sql", "Statement run at PRE_COMMIT.",
							   NULL, &late_writer_sql, "", PGC_USERSET, 0,
							   NULL, NULL, NULL);
	RegisterXactCallback(late_writer_callback, NULL);
}
EOC
close($c);
open(my $m, '>', "$dir/Makefile") or die "could not write Makefile: $!";
print $m "MODULES = late_writer\nPG_CONFIG ?= pg_config\nPGXS := \$(shell \$(PG_CONFIG) --pgxs)\ninclude \$(PGXS)\n";
close($m);
# (the tests run with the installation's bindir first in PATH)
my ($stdout, $stderr);
my $built = IPC::Run::run [ 'make', '-C', $dir, 'PG_CONFIG=pg_config', 'with_llvm=no' ],
  '>', \$stdout, '2>', \$stderr;
ok($built, 'the late_writer module builds') or diag($stderr);

# late_writer first: its callback is registered first, so it runs last
# (this shared_preload_libraries comes after tenure_node's, and wins)
my $node = tenure_node('write_after_check',
	conf => "shared_preload_libraries = '$dir/late_writer.so, pg_tenure'\n"
	  . "max_prepared_transactions = 2\n");

$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('lw', ttl => '1 h');
	CREATE TABLE lw_t (x int);
	CREATE TABLE lw_plain (x int);
	SELECT tenure.fence_table('lw_t', 'lw');
});
my $epoch = $node->safe_psql('postgres', "SELECT tenure.acquire('lw', 'writer')");
like($epoch, qr/^\d+$/, 'the writer holds lease lw');

my ($ret, $out, $err);

# the module works: a late write to an unfenced table commits
$node->safe_psql(
	'postgres', qq{
	BEGIN;
	SET LOCAL tenure.tokens = 'lw=$epoch';
	SET LOCAL late_writer.sql = 'INSERT INTO lw_plain VALUES (1)';
	INSERT INTO lw_t VALUES (1);
	COMMIT;
});
is($node->safe_psql('postgres', 'SELECT (SELECT count(*) FROM lw_t)::text || (SELECT count(*) FROM lw_plain)::text'),
	'11', 'a late write to an unfenced table commits, with the fenced write');

# a late write to the fenced table fails the COMMIT, token or not
($ret, $out, $err) = $node->psql(
	'postgres', qq{
	BEGIN;
	SET LOCAL tenure.tokens = 'lw=$epoch';
	SET LOCAL late_writer.sql = 'INSERT INTO lw_t VALUES (2)';
	INSERT INTO lw_t VALUES (2);
	COMMIT;
});
like(
	$err,
	qr/ERROR:  write to table "lw_t" fenced by lease "lw" after the commit-time check\nDETAIL:  The transaction's fences were checked when it began to commit; nothing done later can be checked\./,
	'a fenced write after the check fails, with the current token');
($ret, $out, $err) = $node->psql(
	'postgres', qq{
	BEGIN;
	SET LOCAL tenure.tokens = 'lw=$epoch';
	SET LOCAL late_writer.sql = 'INSERT INTO lw_t VALUES (3)';
	COMMIT;
});
like(
	$err,
	qr/ERROR:  write to table "lw_t" fenced by lease "lw" after the commit-time check/,
	'so does one in a transaction that wrote no fenced table before');
is($node->safe_psql('postgres', 'SELECT x FROM lw_t ORDER BY x'),
	'1', 'neither transaction committed');

# the check is reset for the next transaction
$node->safe_psql(
	'postgres', qq{
	BEGIN;
	SET LOCAL tenure.tokens = 'lw=$epoch';
	INSERT INTO lw_t VALUES (4);
	COMMIT;
});
is($node->safe_psql('postgres', 'SELECT x FROM lw_t ORDER BY x'),
	"1\n4", 'the next fenced write commits');

# the same after PREPARE TRANSACTION's check: COMMIT PREPARED checks
# nothing, so a fenced write made later must not be prepared
($ret, $out, $err) = $node->psql(
	'postgres', qq{
	BEGIN;
	SET LOCAL tenure.tokens = 'lw=$epoch';
	SET LOCAL late_writer.sql = 'INSERT INTO lw_t VALUES (5)';
	INSERT INTO lw_plain VALUES (5);
	PREPARE TRANSACTION 'lw_p';
});
like(
	$err,
	qr/ERROR:  write to table "lw_t" fenced by lease "lw" after the commit-time check/,
	'a fenced write after PREPARE TRANSACTION\'s check fails');
is($node->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'),
	'0', 'nothing was prepared');
is($node->safe_psql('postgres', 'SELECT x FROM lw_t ORDER BY x'),
	"1\n4", 'and the row is not there');

$node->stop;

done_testing();
