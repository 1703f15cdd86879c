
# DROP EXTENSION + CREATE EXTENSION loses pg_tenure's tables: a lease
# created again starts from an empty row.  Its epochs must still exceed
# every epoch issued for that lease name in the database before, with the
# server running (shared memory still knows the old epochs) and after a
# restart (nothing remembers them but the cluster's WAL position).

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('extension_recreate', extension => 0);
$node->safe_psql('postgres', 'CREATE DATABASE app');

my @issued;    # every epoch issued for lease w in database app

# Create the extension and lease w, acquire it, claim twice and release.
sub round
{
	my ($what) = @_;
	$node->safe_psql(
		'app', q{
		CREATE EXTENSION pg_tenure;
		SELECT tenure.create_lease('w', ttl => '10 min', holdoff => '0');
	});
	my @new = ($node->safe_psql('app', "SELECT tenure.acquire('w', '$what')"));
	push @new, $node->safe_psql('app', "SELECT tenure.claim_epoch('w', '$what')")
	  for 1 .. 2;
	like($_, qr/^\d+$/, "$what: epoch $_ issued") for @new;
	for my $epoch (@new)
	{
		my @higher = grep { $_ >= $epoch } @issued;
		is(scalar(@higher), 0,
			"$what: epoch $epoch exceeds every earlier epoch of w (@issued)");
		push @issued, $epoch;
	}
	is($node->safe_psql('app', "SELECT tenure.release('w', '$what')"),
		't', "$what: the tenure is released");
	return;
}

round('first');

# --- dropped and created again, server running
$node->safe_psql('app', 'DROP EXTENSION pg_tenure');
round('recreated');

# --- dropped, restart, created again
$node->safe_psql('app', 'DROP EXTENSION pg_tenure');
$node->restart;
round('recreated after a restart');

# --- dropped and created again after a restart, then once more running
$node->restart;
$node->safe_psql('app', 'DROP EXTENSION pg_tenure');
round('restart, then recreated');

$node->stop;
done_testing();
