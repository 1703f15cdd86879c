
# A role granted pg_logical_emit_message writes a logical message with the
# keeper's list prefix and layout, naming a tenure that had expired on the
# old primary, where no keeper's list follows it (the keeper died, and the
# server shuts down before it is back).  The promotion does not take it
# for the list (src/README, P5; SECURITY.md, Streaming replication).

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use TenureTest;

my $old = tenure_node('fl_old', init => { allows_streaming => 1 });
$old->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('e', ttl => '1 s');
	CREATE ROLE emitter LOGIN;
	-- every signature (17 added a flush argument)
	DO $$
	DECLARE
		f regprocedure;
	BEGIN
		FOR f IN SELECT oid FROM pg_proc WHERE proname = 'pg_logical_emit_message' LOOP
			EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO emitter', f);
		END LOOP;
	END
	$$;
});
my $mid = tenure_standby($old, 'fl_mid');
my $dboid = $old->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'postgres'");

my $e = $old->safe_psql('postgres', "SELECT tenure.acquire('e', 'a')");
wait_until('e to expire',
	sub { $old->safe_psql('postgres', "SELECT tenure.leader_is('e', 'a')") eq 'f' });
is($old->safe_psql('postgres', "SELECT tenure.renew('e', 'a')"), 'f', 'e expired on the old primary');

# the list's layout (version 2): version, count, written (microseconds
# since 2000), demotion left; one entry: database, padding, epoch, ttl,
# remaining
my $written = int((time() - 946_684_800) * 1_000_000);
my $payload = unpack('H*',
	pack('V V q< q< V V q< q< q<', 2, 1, $written, 0, $dboid, 0, $e, 600_000_000, 600_000_000));
my $kp = wait_for_keeper($old);
kill 'TERM', $kp;
my $t_kill = time();
$old->safe_psql('postgres',
	"SET ROLE emitter; SELECT pg_logical_emit_message(false, 'pg_tenure.live', '\\x$payload'::bytea)");
$old->safe_psql('postgres',
	"SET ROLE emitter; SELECT pg_logical_emit_message(true, 'pg_tenure.live', '\\x$payload'::bytea)");
# normally the keeper is not back yet (it restarts after a second)
promote_after_keeper_death($old, $mid, $t_kill);
is($mid->safe_psql('postgres', "SELECT tenure.renew('e', 'a'), tenure.leader_is('e', 'a')"),
	'f|f', 'the forged list does not bring e back');

$mid->stop;
done_testing();
