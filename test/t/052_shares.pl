# Shares of the lease slots: no role and no database can take every slot
# of tenure.max_leases (16 here), so others can still acquire.  A role's
# tenures may take tenure.role_share percent of the slots (50: 8 tenures),
# a database's tenure.database_share percent (75: 12).  A share used up
# fails acquire with SQLSTATE 53400 naming the limit; a superuser's
# tenures count toward its database's share but no role share limits
# them; releasing gives the share back; tenure.leases shows the role that
# acquired each tenure.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('shares', conf => "tenure.max_leases = 16\n");
is($node->safe_psql('postgres',
		'SELECT current_setting(\'tenure.role_share\') || \' \' || current_setting(\'tenure.database_share\')'),
	'50 75', 'the default shares');

$node->safe_psql('postgres', q{
CREATE ROLE mallory LOGIN;
CREATE ROLE alice LOGIN;
CREATE ROLE bob LOGIN;
GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text)
	TO mallory, alice, bob;
CREATE DATABASE other;
});
$node->safe_psql('other', q{
CREATE EXTENSION pg_tenure;
GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text) TO alice;
});

# As role, create leases prefix1 .. prefixN and acquire each, up to n or
# until an acquire fails; the number acquired and the error.
sub take
{
	my ($role, $prefix, $n) = @_;
	for my $i (1 .. $n)
	{
		my ($ret, $out, $stderr) = $node->psql('postgres',
			"SET ROLE $role; SELECT tenure.create_lease('$prefix$i', ttl => '1 day');"
			  . " SELECT tenure.acquire('$prefix$i', '$role') IS NOT NULL",
			on_error_stop => 1, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
		return ($i - 1, $stderr) if $ret != 0;
	}
	return ($n, '');
}

# mallory takes as many slots as she can, with a one-day ttl
my ($got, $err) = take('mallory', 'm', 16);
is($got, 8, 'one role holds at most its share: 8 of 16 slots');
like($err, qr/ERROR:  53400: role "mallory" holds its share of lease slots/,
	'the 9th acquire fails with 53400 naming the role');
like($err, qr/DETAIL:  A role may hold at most 8 tenures at a time \(tenure.role_share = 50% of tenure.max_leases = 16\)/,
	'the detail names the limit and the setting');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM tenure.leases WHERE holder_role = 'mallory'::regrole"),
	'8', 'tenure.leases shows the role that acquired each tenure');

# another database, another role: still room
$node->safe_psql('other', q{SET ROLE alice; SELECT tenure.create_lease('a1')});
is($node->safe_psql('other',
		q{SET ROLE alice; SELECT tenure.acquire('a1', 'alice') IS NOT NULL}),
	't', 'a role of another database acquires');
is($node->safe_psql('other',
		q{SELECT holder_role FROM tenure.leases WHERE lease = 'a1'}),
	'alice', 'its tenure shows its role');

# the database's share: bob takes 4 more in postgres (8 + 4 = 12 = 75%)
($got, $err) = take('bob', 'b', 8);
is($got, 4, 'a database holds at most its share: 12 of 16 slots');
like($err, qr/ERROR:  53400: database "postgres" holds its share of lease slots/,
	'then acquire fails with 53400 naming the database');

# a superuser is held to the database's share, but to no role share
$node->safe_psql('postgres', q{SELECT tenure.create_lease('s1')});
my ($ret, $out, $stderr) = $node->psql('postgres',
	q{SELECT tenure.acquire('s1', 'root')});
like($stderr, qr/database "postgres" holds its share/,
	'a superuser in the full database is refused too');
$node->safe_psql('other', q{SELECT tenure.create_lease('s2'); SELECT tenure.create_lease('s3')});
is($node->safe_psql('other', q{
	SELECT tenure.acquire('s2', 'root') IS NOT NULL AND tenure.acquire('s3', 'root') IS NOT NULL}),
	't', 'elsewhere the superuser acquires');

# renewing what one holds needs no new slot
is($node->safe_psql('postgres',
		q{SET ROLE mallory; SELECT tenure.acquire('m1', 'mallory') IS NOT NULL}),
	't', 'a role at its share still renews its tenures');

# releasing gives the share back
$node->safe_psql('postgres',
	q{SET ROLE mallory; SELECT tenure.release('m1', 'mallory')});
is($node->safe_psql('postgres',
		q{SET ROLE bob; SELECT tenure.acquire('b5', 'bob') IS NOT NULL}),
	't', 'after a release the database has room again');
my ($r2, $o2, $e2) = $node->psql('postgres',
	q{SET ROLE mallory; SELECT tenure.acquire('m1', 'mallory')});
like($e2, qr/database "postgres" holds its share/,
	'and the slot went to whoever asked first');

# the share is a reloadable setting
$node->safe_psql('postgres', q{
ALTER SYSTEM SET tenure.database_share = 100;
ALTER SYSTEM SET tenure.role_share = 100;
SELECT pg_reload_conf();
});
wait_until('the reload', sub {
	$node->safe_psql('postgres', 'SHOW tenure.role_share') eq '100';
});
is($node->safe_psql('postgres',
		q{SET ROLE mallory; SELECT tenure.acquire('m1', 'mallory') IS NOT NULL}),
	't', 'raised shares let the role acquire again');

$node->stop;

# Tenures ended by a disconnect keep their slots through their hold-off,
# and keep counting for their role meanwhile: a role cannot take every
# slot by holding its share, going away and acquiring again.
my $node2 = tenure_node('shares_holdoff', conf => "tenure.max_leases = 16\n");
$node2->safe_psql('postgres', q{
CREATE ROLE alice LOGIN;
GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text) TO alice;
SET ROLE alice;
SELECT tenure.create_lease('h' || i, ttl => '1 day') FROM generate_series(1, 9) i;
});
my $bg = $node2->background_psql('postgres');
$bg->query_safe(q{SET ROLE alice});
is($bg->query_safe(q{SELECT count(tenure.acquire('h' || i, 'alice', session_bound => true)) FROM generate_series(1, 8) i}),
	'8', 'alice holds her share, 8 session-bound tenures');
$bg->quit;
wait_until('her tenures end with her session', sub {
	$node2->safe_psql('postgres',
		q{SELECT count(*) FROM tenure.leases WHERE holder IS NOT NULL}) eq '0';
});
($ret, $out, $stderr) = $node2->psql('postgres',
	q{SET ROLE alice; SELECT tenure.acquire('h9', 'alice')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($stderr, qr/53400: role "alice" holds its share of lease slots/,
	'slots in a hold-off still count against the role\'s share');
is($node2->safe_psql('postgres',
		q{SET ROLE alice; SELECT tenure.acquire('h1', 'alice-again') IS NOT NULL}),
	't', 'but a new tenure of a lease in its own hold-off takes no new slot');

done_testing();
