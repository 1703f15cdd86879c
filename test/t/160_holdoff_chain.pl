
# The automatic hold-off survives an explicit release by a successor that
# was itself still waiting out its predecessor's hold-off: A's session ends
# (A may believe until its last renewal + ttl), B acquires and is not yet
# active, B releases; C must not lead before A's bound either.  And an
# explicit release by a holder that was never delayed frees the lease at
# once.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('holdoff_chain');
wait_for_keeper($node) or die "keeper did not start";
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('chain', ttl => '10 min')");

# A holds the lease session-bound, then its session is terminated
my $a = $node->background_psql('postgres');
$a->query_safe("SELECT tenure.acquire('chain', 'a', session_bound => true)");
my $a_pid = $a->query_safe('SELECT pg_backend_pid()');
chomp $a_pid;
my $a_expires = $node->safe_psql('postgres',
	"SELECT expires FROM tenure.leases WHERE lease = 'chain'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($a_pid)");
$node->poll_query_until('postgres',
	"SELECT holder IS NULL FROM tenure.leases WHERE lease = 'chain'")
  or die "A's tenure did not end";
$a->quit;

# B acquires, but A may still believe: B is not active before A's bound
like($node->safe_psql('postgres', "SELECT tenure.acquire('chain', 'b')"),
	qr/^\d+$/, 'B acquires after A\'s session ended');
is( $node->safe_psql(
		'postgres',
		"SELECT active_from >= '$a_expires'::timestamptz - interval '10 ms'"
		  . " FROM tenure.leases WHERE lease = 'chain'"),
	't',
	"B is active only from A's last renewal + ttl");
is($node->safe_psql('postgres', "SELECT tenure.leader_is('chain', 'b')"),
	'f', 'B does not lead yet');

# B releases explicitly; C acquires at once but A's bound still holds
is($node->safe_psql('postgres', "SELECT tenure.release('chain', 'b')"),
	't', 'B releases');
like($node->safe_psql('postgres', "SELECT tenure.acquire('chain', 'c')"),
	qr/^\d+$/, 'C acquires after B released');
is( $node->safe_psql(
		'postgres',
		"SELECT active_from >= '$a_expires'::timestamptz - interval '10 ms'"
		  . " FROM tenure.leases WHERE lease = 'chain'"),
	't',
	"C is still active only from A's last renewal + ttl");
is($node->safe_psql('postgres', "SELECT tenure.leader_is('chain', 'c')"),
	'f', 'C does not lead while A may believe');

# a release by a holder nobody delayed frees the lease at once
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('plain', ttl => '10 min')");
$node->safe_psql('postgres', "SELECT tenure.acquire('plain', 'x')");
$node->safe_psql('postgres', "SELECT tenure.release('plain', 'x')");
$node->safe_psql('postgres', "SELECT tenure.acquire('plain', 'y')");
is($node->safe_psql('postgres', "SELECT tenure.leader_is('plain', 'y')"),
	't', 'after a plain release the successor leads at once');

$node->stop;
done_testing();
