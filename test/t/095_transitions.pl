# tenure.log_transitions: one LOG line per tenure started, tenure ended and
# epoch claimed, whoever noticed the change (the committing backend, the
# keeper for an expiry, the exiting backend for a session-bound tenure);
# none when it is off.  tenure.lease_stats counts the same changes.
use strict;
use warnings;
use FindBin;
use lib $FindBin::Bin;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('transitions');
$node->safe_psql('postgres', q{
SELECT tenure.create_lease('tr', ttl => '1 s', holdoff => '0');
SELECT tenure.create_lease('tr_quiet', ttl => '1 min', holdoff => '0');
});

# Wait for a line matching $re in the log written after $offset; returns
# the offset after it.
sub log_line
{
	my ($what, $re, $offset) = @_;
	my $found;
	wait_until($what, sub {
		my $log = slurp_file($node->logfile, $offset);
		$found = $log =~ $re;
		return $found;
	});
	return -s $node->logfile;
}

my $offset = -s $node->logfile;
my $e1 = $node->safe_psql('postgres', "SELECT tenure.acquire('tr', 'a')");
$offset = log_line('a start is logged',
	qr/LOG:  lease "tr": tenure of "a" at epoch $e1 started\n/, $offset);

my $e2 = $node->safe_psql('postgres', "SELECT tenure.claim_epoch('tr', 'a')");
$offset = log_line('a claim is logged',
	qr/LOG:  lease "tr": "a" claimed epoch $e2 after epoch $e1\n/, $offset);

$node->safe_psql('postgres', "SELECT tenure.release('tr', 'a')");
$offset = log_line('a release is logged',
	qr/LOG:  lease "tr": tenure of "a" at epoch $e2 ended \(released\)\n/, $offset);

my $e3 = $node->safe_psql('postgres', "SELECT tenure.acquire('tr', 'b')");
$offset = log_line('the next tenure names its predecessor, why it ended and the gap',
	qr/LOG:  lease "tr": tenure of "b" at epoch $e3 started after "a" at epoch $e2 ended \(released\); gap \d+\.\d{3} ms\n/,
	$offset);

# b does not renew: the keeper ends its tenure at expiry and says so
$offset = log_line('an expiry is logged by the keeper',
	qr/LOG:  lease "tr": tenure of "b" at epoch $e3 ended \(expired\)\n/, $offset);

# a session-bound holder's backend exits
my $bg = $node->background_psql('postgres');
my $e4 = $bg->query_safe("SELECT tenure.acquire('tr', 'c', session_bound => true)");
$bg->quit;
$offset = log_line('the end of a session-bound tenure is logged',
	qr/LOG:  lease "tr": tenure of "c" at epoch $e4 ended \(session ended\)\n/, $offset);

# A claim past its COMMIT check is logged under its own holder, also when
# its tenure's ttl runs out while the commit waits (here for the fence
# lock, held as a committing fenced writer holds it): the tenure does not
# expire, and nobody acquires the lease, until the claim is published.
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('tr_late', ttl => '1 s', holdoff => '0')");
my $ca = $node->background_psql('postgres');
my $l1 = $ca->query_safe("SELECT tenure.acquire('tr_late', 'a')");
my $lk = $node->background_psql('postgres');
$lk->query_safe('BEGIN');
$lk->query_safe(
	"DO \$\$ BEGIN EXECUTE format('LOCK TABLE %s IN ROW EXCLUSIVE MODE',"
	  . " (SELECT fence_lock FROM tenure.leases WHERE lease = 'tr_late')); END \$\$");
my $ca_pid = $ca->query_safe('SELECT pg_backend_pid()');
$ca->query_safe('BEGIN');
my $l2 = $ca->query_safe("SELECT tenure.claim_epoch('tr_late', 'a')");
$offset = -s $node->logfile;
start_statement($ca, 'COMMIT;');
ok( $node->poll_query_until(
		'postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $ca_pid"),
	'the claim waits at COMMIT for the fence lock');
ok( $node->poll_query_until(
		'postgres',
		"SELECT NOT EXISTS (SELECT FROM tenure.leases WHERE lease = 'tr_late' AND holder = 'a')"),
	"a's ttl has passed");
# (an acquisition that waited for the claim's row lock instead would fail)
is( $node->safe_psql(
		'postgres',
		"SET lock_timeout = '30 s';"
		  . " SELECT coalesce(tenure.acquire('tr_late', 'b'), 0)"),
	'0', 'b finds the lease busy while the claim commits');
$lk->query_safe('COMMIT');
$offset = log_line('the claim is logged under the holder that claimed',
	qr/LOG:  lease "tr_late": "a" claimed epoch $l2 after epoch $l1\n/, $offset);
$_->quit for ($lk, $ca);

is( $node->safe_psql(
		'postgres',
		"SELECT tenures || '/' || released || '/' || expired || '/' || session_ended || '/' || claims"
		  . " FROM tenure.lease_stats WHERE lease = 'tr'"),
	'3/1/1/1/1', 'tenure.lease_stats counts the same changes');

# off: nothing is logged, by backends or the keeper
$node->append_conf('postgresql.conf', "tenure.log_transitions = off\n");
$node->reload;
$offset = -s $node->logfile;
my $e5 = $node->safe_psql('postgres', "SELECT tenure.acquire('tr_quiet', 'q')");
$node->safe_psql('postgres', "SELECT tenure.release('tr_quiet', 'q')");
# a marker after the calls: everything before it is in the log
$node->safe_psql('postgres', "DO \$\$ BEGIN RAISE LOG 'transitions marker'; END \$\$");
log_line('the marker is logged', qr/transitions marker/, $offset);
unlike(slurp_file($node->logfile, $offset), qr/lease "tr_quiet"/,
	'with tenure.log_transitions off no transition is logged');

# only superusers may turn it off for their session
$node->safe_psql('postgres', 'CREATE ROLE tr_user LOGIN');
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	'SET tenure.log_transitions = off', extra_params => [ '-U', 'tr_user' ]);
like($stderr, qr/permission denied to set parameter "tenure.log_transitions"/,
	'an ordinary role may not turn the log off');

$node->stop;
done_testing();
