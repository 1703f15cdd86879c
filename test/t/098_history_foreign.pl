# The history writer runs nobody else's code and obeys no database's
# settings.  It visits every database after a start; in one without
# pg_tenure it only looks the extension up, even where the database's
# owner made a schema tenure with look-alike tables and a trigger that
# would stall the run, so history in the other databases is still written.
# Where pg_tenure is installed, settings the database's owner chose
# (ALTER DATABASE ... SET: read-only transactions, a tiny lock timeout)
# do not apply to it.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('history_foreign');
$node->safe_psql('postgres', q{
CREATE ROLE mallory LOGIN;
CREATE DATABASE trap OWNER mallory;
CREATE DATABASE ro OWNER mallory;
SELECT tenure.create_lease('hf', ttl => '1 min', holdoff => '0');
});

# mallory's database without pg_tenure: look-alike tables whose triggers
# record that they ran, and would then wait for an hour
$node->safe_psql('trap', q{
SET ROLE mallory;
CREATE TABLE public.ran (what text);
CREATE SCHEMA tenure;
-- with every column pg_tenure's statements use, so that they would run
CREATE TABLE tenure.lease (name text, id bigint, owner regrole, ttl interval,
						   holdoff interval, lock_key bigint, epoch bigint,
						   base bigint, issued_sysid bigint, issued_tli bigint,
						   fence_lock smallint, created timestamptz,
						   preferred text);
CREATE TABLE tenure.history (lease text, epoch bigint, holder text,
							 session_bound boolean, started timestamptz,
							 ended timestamptz, end_reason text, boot_id bigint,
							 issued_sysid bigint, issued_tli bigint, open_tli bigint,
							 base bigint, ttl interval);
INSERT INTO tenure.history (lease, epoch, holder, session_bound, started, boot_id, base)
	VALUES ('hf', 1, 'x', false, now(), 1, 0);
CREATE FUNCTION public.trap() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.ran VALUES (TG_TABLE_NAME || ' ' || TG_OP);
	PERFORM pg_sleep(3600);
	RETURN NEW;
END
$$;
CREATE TRIGGER trap BEFORE INSERT OR UPDATE OR DELETE ON tenure.history
	FOR EACH ROW EXECUTE FUNCTION public.trap();
CREATE TRIGGER trap BEFORE INSERT OR UPDATE OR DELETE ON tenure.lease
	FOR EACH ROW EXECUTE FUNCTION public.trap();
});

# mallory's database with pg_tenure (installed by a superuser), whose
# settings would make every write of the history writer fail
$node->safe_psql('ro', q{
CREATE EXTENSION pg_tenure;
SELECT tenure.create_lease('hro', ttl => '1 min', holdoff => '0');
});
my $ero = $node->safe_psql('ro', "SELECT tenure.acquire('hro', 'r')");
$node->safe_psql('postgres', q{
ALTER DATABASE ro SET default_transaction_read_only = on;
ALTER DATABASE ro SET lock_timeout = '1ms';
});

my $e = $node->safe_psql('postgres', "SELECT tenure.acquire('hf', 'h')");

# a restart: every database is visited, and every open tenure closed
$node->restart;

wait_until('the history of postgres is written after the restart', sub {
	$node->safe_psql('postgres',
		"SELECT coalesce(end_reason, 'open') FROM tenure.history"
		  . " WHERE lease = 'hf' AND epoch = $e") eq 'server restart';
});
wait_until('the history of a database with read-only defaults is written', sub {
	$node->safe_psql('ro',
		"SET default_transaction_read_only = off;"
		  . " SELECT coalesce(end_reason, 'open') FROM tenure.history"
		  . " WHERE lease = 'hro' AND epoch = $ero") eq 'server restart';
});
is($node->safe_psql('ro',
		"SELECT coalesce(end_reason, 'open') FROM tenure.history"
		  . " WHERE lease = 'hro' AND epoch = $ero"),
	'server restart', 'database settings do not apply to the history writer');

# a session-bound tenure ending after mallory's database was visited is
# written too: the writer is not stuck there
my $bg = $node->background_psql('postgres');
my $e2 = $bg->query_safe("SELECT tenure.acquire('hf', 's', session_bound => true)");
$bg->quit;
wait_until('a later session end is written', sub {
	$node->safe_psql('postgres',
		"SELECT coalesce(end_reason, 'open') FROM tenure.history"
		  . " WHERE lease = 'hf' AND epoch = $e2") eq 'session ended';
});
is($node->safe_psql('postgres',
		"SELECT coalesce(end_reason, 'open') FROM tenure.history"
		  . " WHERE lease = 'hf' AND epoch = $e2"),
	'session ended', 'history goes on in the other databases');

is($node->safe_psql('trap', 'SELECT count(*) FROM public.ran'),
	'0', 'no trigger of the database without pg_tenure ran');
is($node->safe_psql('trap',
		'SELECT count(*) FROM tenure.history WHERE ended IS NULL'),
	'1', 'and its look-alike history was left as it was');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE datname = 'trap'"),
	'0', 'no process stays in it');

done_testing();
