
# A silent client: the psql process holding a session-bound tenure is
# frozen (SIGSTOP) in an idle session.  Its backend stays connected, so
# nothing ends the tenure but its ttl: the holder stops leading, a candidate
# waiting in acquire() takes over, and the history says the frozen holder's
# tenure expired.  When the client wakes up it leads nothing, cannot renew,
# and cannot write to the fenced table.  Only the order of events is
# asserted, never how long anything took.

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('silent');
$node->safe_psql(
	'postgres', q{
	SELECT tenure.create_lease('quiet', ttl => '2 s', holdoff => '0');
	CREATE TABLE ledger (epoch bigint);
	SELECT tenure.fence_table('ledger', 'quiet');
});

# --- the client that will go silent, in a psql we can freeze
my ($in, $out, $err) = ('', '', '');
my $timer = IPC::Run::timer($PostgreSQL::Test::Utils::timeout_default);
my $client = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-f', '-' ],
	'<', \$in, '>', \$out, '2>', \$err, $timer);

# Send SQL to the client's psql and return its output.
sub client_query
{
	my ($sql) = @_;
	($out, $err) = ('', '');
	$in .= "$sql\n\\echo END-OF-QUERY\n";
	$timer->start($PostgreSQL::Test::Utils::timeout_default);
	$client->pump until $out =~ /END-OF-QUERY\n/ || $timer->is_expired;
	die "client psql timed out" if $timer->is_expired;
	$out =~ s/END-OF-QUERY\n//;
	chomp $out;
	return $out;
}

my $backend = client_query('SELECT pg_backend_pid();');
my ($epoch, $leads) = split /\n/,
  client_query(
	"SELECT tenure.acquire('quiet', 'frozen', session_bound => true);\n"
	  . "SELECT tenure.leader_is('quiet', 'frozen');");
like($epoch, qr/^\d+$/, "the client holds quiet at epoch $epoch");
is($leads, 't', 'the client leads');

# IPC::Run knows the pid of the process it started
my $psql_pid = $client->{KIDS}[0]{PID};
ok(kill('STOP', $psql_pid), "client psql $psql_pid frozen with SIGSTOP");
# never leave it frozen, even if the test dies
END { kill('CONT', $psql_pid) if $psql_pid; }

# --- a candidate waits; the frozen holder's ttl runs out
my $candidate = $node->background_psql('postgres');
my ($leader_before, $new_epoch, $leader_after) = split /\|/,
  $candidate->query_safe(
	"SELECT tenure.leader_is('quiet', 'frozen'),"
	  . " tenure.acquire('quiet', 'candidate', wait => '30 s'),"
	  . " tenure.leader_is('quiet', 'frozen')");
is($leader_before, 't',
	'the frozen client still led when the candidate started waiting');
like($new_epoch, qr/^\d+$/,
	"the waiting candidate took over at epoch $new_epoch");
cmp_ok($new_epoch, '>', $epoch, 'the new epoch is greater');
is($leader_after, 'f', 'the frozen client no longer leads');

is( $node->safe_psql(
		'postgres',
		"SELECT state FROM pg_stat_activity WHERE pid = $backend"),
	'idle',
	'the frozen client\'s backend is still connected, idle');
is( $node->safe_psql(
		'postgres',
		"SELECT holder || '/' || epoch || '/' || tenure.leader_is('quiet', 'frozen') || '/' || tenure.leader_is('quiet', 'candidate')"
		  . " FROM tenure.leases WHERE lease = 'quiet'"),
	"candidate/$new_epoch/false/true",
	'the candidate leads quiet, the frozen client does not');
poll_is($node, 'postgres', qq{
	SELECT h1.holder || '/' || h1.end_reason || '/' || (h1.started <= h1.ended)
	       || '/' || (h1.ended <= h2.started) || '/' || h2.holder || '/' || coalesce(h2.end_reason, 'open')
	  FROM tenure.history h1, tenure.history h2
	 WHERE h1.lease = 'quiet' AND h1.epoch = $epoch
	   AND h2.lease = 'quiet' AND h2.epoch = $new_epoch},
	'frozen/expired/true/true/candidate/open',
	'history: the frozen tenure expired, then the candidate\'s started');

# --- the client wakes up
is($candidate->query_safe("SELECT tenure.renew('quiet', 'candidate')"),
	't', 'the candidate renews');
ok(kill('CONT', $psql_pid), 'client psql resumed with SIGCONT');
is( client_query(
		"SELECT tenure.leader_is('quiet', 'frozen'), tenure.renew('quiet', 'frozen');"),
	'f|f',
	'the woken client does not lead and cannot renew');
client_query(
	"\\set VERBOSITY verbose\nINSERT INTO ledger VALUES ($epoch);");
like(
	$err,
	qr/ERROR:  TN002: table "ledger" is fenced by lease "quiet" and the transaction presents no epoch for it/,
	'the woken client presents nothing without saying so');
client_query(
	"BEGIN;\nSET LOCAL tenure.tokens = 'quiet=$epoch';\nINSERT INTO ledger VALUES ($epoch);\nROLLBACK;"
);
like(
	$err,
	qr/ERROR:  TN002: write to table "ledger" fenced by lease "quiet" rejected: epoch $epoch is not current/,
	'the woken client\'s old token is rejected');

$in .= "\\q\n";
$client->finish;
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $backend"),
	'the client disconnected');
is( $candidate->query_safe(
		"SELECT tenure.leader_is('quiet', 'candidate'), tenure.renew('quiet', 'candidate')"
	),
	't|t',
	'the client\'s exit did not end the candidate\'s tenure');
is( $node->safe_psql(
		'postgres',
		"SELECT end_reason FROM tenure.history WHERE lease = 'quiet' AND epoch = $epoch"
	),
	'expired',
	'history: the frozen tenure still says expired');
is($node->safe_psql('postgres', 'SELECT count(*) FROM ledger'),
	'0', 'nothing was written to the ledger');

$candidate->quit;
$node->stop;
done_testing();
