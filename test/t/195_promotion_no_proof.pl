
# A hot standby's answers, then a promotion without the proof
# (immediate stop of the primary).
#
# doc/high-availability.md, "What a standby answers": tenure.leases shows
# the recorded holder with as_of; leader_is and await_active answer false;
# await_change compares the replicated epoch and holder, and returns when
# they differ (a release is recorded in its transaction, an expiry by the
# history writer within about a second).
# "Tenures through a promotion", without the proof: every tenure ends
# (promoted); "The old holder's renew through the new primary fails"; "A
# new tenure of such a lease on the new primary becomes active no earlier
# than the promotion plus the ttl plus tenure.demotion_bound".
# doc/reference.md: "a former holder whose tenure ended without a release
# keeps its hold-off bound, computed with the ttl it knew"; SECURITY.md,
# Lease owner: "drop_lease + create_lease keeps the hold-off bound of the
# dropped tenure".  So the lease owner shortening the ttl, or dropping and
# creating the lease, after the promotion must not shorten the wait.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use TenureTest;

my $bound = 3;    # tenure.demotion_bound, seconds
my $ttl = 20;

my $primary = tenure_node(
	'a4_primary',
	init => { allows_streaming => 1 },
	conf => "tenure.demotion_bound = '${bound}s'\n");
$primary->safe_psql(
	'postgres', qq{
	CREATE ROLE app LOGIN;
	CREATE ROLE nobody LOGIN;
	GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text) TO app;
	SET ROLE app;
	SELECT tenure.create_lease('sv', ttl => '10 min');
	SELECT tenure.create_lease('sx', ttl => '2 s');
	SELECT tenure.create_lease('plain', ttl => '$ttl s');
	SELECT tenure.create_lease('alt', ttl => '$ttl s');
	SELECT tenure.create_lease('drp', ttl => '$ttl s');
	SELECT tenure.create_lease('rel', ttl => '$ttl s');
});
my $standby = tenure_standby($primary, 'a4_standby');

my %e;
for my $l (qw(sv sx plain alt drp rel))
{
	$e{$l} = $primary->safe_psql('postgres',
		"SET ROLE app; SELECT tenure.acquire('$l', 'A')");
}
$primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.release('rel', 'A')");
$primary->wait_for_catchup($standby);

# --- the standby's answers
is( $standby->safe_psql(
		'postgres',
		"SET ROLE nobody; SELECT holder || ' ' || epoch || ' ' || (as_of > now() - interval '1 min') || ' ' || (expires IS NULL) FROM tenure.leases WHERE lease = 'sv'"
	),
	"A $e{sv} true true",
	'standby: recorded holder, epoch, a recent as_of, no expiry');
is($standby->safe_psql('postgres', "SELECT tenure.leader_is('sv', 'A')"),
	'f', 'standby: leader_is false');
my $t0 = time();
is( $standby->safe_psql(
		'postgres', "SELECT tenure.await_active('sv', 'A', '10 s')"),
	'f',
	'standby: await_active false');
ok(time() - $t0 < 5, 'standby: await_active answers at once');

# await_change on the standby sees a release and an expiry
my $aw = $standby->background_psql('postgres',
	extra_params => [ '-U', 'nobody' ]);
start_statement($aw,
	"SELECT changed, coalesce(holder, '-'), epoch FROM tenure.await_change('sv', $e{sv}, 'A', '60 s');"
);
$primary->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.release('sv', 'A')");
like($aw->query_safe("SELECT 'done'"),
	qr/^t\|-\|$e{sv}$/m, 'standby: await_change sees the release');
start_statement($aw,
	"BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT changed, coalesce(holder, '-'), epoch FROM tenure.await_change('sx', $e{sx}, 'A', '60 s'); COMMIT;"
);
# sx (ttl 2 s) expires on the primary: the history writer records it
like($aw->query_safe("SELECT 'done'"),
	qr/^t\|-\|$e{sx}$/m, 'standby: await_change (REPEATABLE READ) sees the expiry');
$aw->quit;

# --- a promotion without the proof
$primary->safe_psql('postgres', "SELECT 1");
my $a_sent = time();
is($primary->safe_psql('postgres', "SELECT tenure.renew('plain', 'A')"),
	't', 'A renews plain');
$primary->wait_for_catchup($standby);
$primary->stop('immediate');
my $before_promote = time();
promote_ready($standby, 'the standby');
$standby->wait_for_log(qr/pg_tenure: the promotion from timeline/);
like(slurp_file($standby->logfile), qr/may have lost transactions/,
	'no proof');

is($standby->safe_psql('postgres', "SELECT tenure.renew('plain', 'A')"),
	'f', 'A cannot renew on the new primary');
is($standby->safe_psql('postgres', "SELECT tenure.leader_is('plain', 'A')"),
	'f', 'A does not lead on the new primary');

# the lease owner shortens the ttl, or drops and creates the lease, before
# B acquires
$standby->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.alter_lease('alt', ttl => '1 s')");
$standby->safe_psql('postgres',
	"SET ROLE app; SELECT tenure.drop_lease('drp'); SELECT tenure.create_lease('drp', ttl => '1 s')"
);

for my $l (qw(plain alt drp rel))
{
	my $eb = $standby->safe_psql('postgres',
		"SET ROLE app; SELECT tenure.acquire('$l', 'B', wait => '5 s')");
	ok($eb > $e{$l}, "$l: B acquires at a newer epoch");
	my $af = $standby->safe_psql('postgres',
		"SELECT extract(epoch FROM active_from) FROM tenure.leases WHERE lease = '$l'"
	);
	ok( $af >= $before_promote + $ttl + $bound - 0.5,
		"$l: B active from $af >= promotion ($before_promote) + ttl $ttl + bound $bound"
	);
	is($standby->safe_psql('postgres', "SELECT tenure.leader_is('$l', 'B')"),
		'f', "$l: B does not lead yet");
}
ok(time() < $a_sent + $ttl, 'A may still believe it leads plain');

is( $standby->safe_psql(
		'postgres',
		"SELECT string_agg(lease || ':' || end_reason, ',' ORDER BY lease) FROM tenure.history WHERE holder = 'A' AND lease IN ('plain','alt')"
	),
	'alt:promoted,plain:promoted',
	'history: A\'s tenures ended as promoted');

done_testing();
