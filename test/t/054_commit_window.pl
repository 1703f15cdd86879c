
# A transaction is visible to other sessions as committed a moment before
# its COMMIT callback publishes its change of a lease to pg_tenure's shared
# memory (src/README, F1).  A call that takes the lease's row in that
# moment does not wait for the row, and must not act on the lease as it
# was before the change: it waits until the change is published.
#
# gdb stops a committing backend inside pg_tenure's COMMIT callback, so
# that the moment lasts until the test lets it go:
#
# - release() by the holder of a handoff stopped there must answer false
#   and leave the successor's tenure alone (it used to answer true and
#   end the successor's tenure as released, with no hold-off);
# - claim_epoch() by a holder whose other claim is stopped there must
#   commit (it used to fail its PRE_COMMIT check, TN001).

use strict;
use warnings;

use FindBin;
use lib $FindBin::Bin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use TenureTest;

plan skip_all => 'gdb is not installed'
  unless system('gdb --version >/dev/null 2>&1') == 0;

my $node = tenure_node('commit_window');
$node->safe_psql('postgres',
	"SELECT tenure.create_lease('cw', ttl => '10 min', holdoff => '0')");

# Feed gdb until its output matches $re; false after the default timeout.
sub gdb_until
{
	my ($g, $re) = @_;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;

	while ($g->{out} !~ $re)
	{
		return 0 if time() > $deadline || !$g->{h}->pumpable;
		$g->{h}->pump_nb;
		usleep(20_000);
	}
	return 1;
}

# Attach gdb to backend $pid with a breakpoint in pg_tenure's COMMIT
# callback, and let the backend run on until it gets there.
sub stop_at_commit
{
	my ($pid) = @_;
	my %g = (in => '', out => '', err => '');

	$g{h} = IPC::Run::start([ 'gdb', '-q', '-nx', '-p', $pid ],
		\$g{in}, \$g{out}, \$g{err});
	$g{in} .= "set pagination off\nset confirm off\n"
	  . "break tenure_xact_callback if event == XACT_EVENT_COMMIT\n"
	  . "continue\n";
	ok(gdb_until(\%g, qr/Continuing\./), "gdb attached to backend $pid")
	  or diag("gdb: $g{out}\n$g{err}");
	return \%g;
}

sub stopped
{
	my ($g, $what) = @_;
	ok(gdb_until($g, qr/Breakpoint 1, tenure_xact_callback/), $what)
	  or diag("gdb: $g->{out}\n$g->{err}");
}

sub let_go
{
	my ($g) = @_;
	$g->{in} .= "delete\ndetach\nquit\n";
	$g->{h}->finish;
}

# The first line of a statement's result that matches $re.
sub result_of
{
	my ($session, $re) = @_;
	my $out = $session->query_until($re, '');
	return $out =~ $re ? $1 : undef;
}

# --- release() while the holder's handoff is being published
my $e1 = $node->safe_psql('postgres', "SELECT tenure.acquire('cw', 'h')");
my $succ = $node->background_psql('postgres');
my $succ_pid = $succ->query_safe('SELECT pg_backend_pid()');
start_statement($succ, "SELECT tenure.acquire('cw', 's', wait => '5 min');");
waits_in_tenure($node, $succ_pid, 'the successor waits in acquire');

my $hander = $node->background_psql('postgres');
my $hander_pid = $hander->query_safe('SELECT pg_backend_pid()');
my $g = stop_at_commit($hander_pid);
start_statement($hander, "SELECT tenure.handoff('cw', 'h', 's');");
stopped($g, "the handoff's commit stops in the COMMIT callback");

my $releaser = $node->background_psql('postgres');
my $releaser_pid = $releaser->query_safe('SELECT pg_backend_pid()');
start_statement($releaser, "SELECT tenure.release('cw', 'h');");
waits_in_tenure($node, $releaser_pid,
	'release() by the old holder waits for the handoff to be published');

let_go($g);
my $e2 = result_of($hander, qr/^(\d+)\s*$/m);
ok(defined $e2 && $e2 > $e1, 'the handoff committed a new epoch');
is(result_of($succ, qr/^(\d+)\s*$/m), $e2, "the successor's acquire returns it");
is(result_of($releaser, qr/^([tf])\s*$/m),
	'f', 'release() by the old holder answers false');
my ($holder, $epoch) = tenure_of($node, 'cw');
is("$holder|$epoch", "s|$e2", 'the successor holds the lease');
is( $node->safe_psql(
		'postgres',
		"SELECT coalesce(end_reason, 'open') FROM tenure.history WHERE lease = 'cw' AND epoch = $e2"
	),
	'open',
	"the successor's tenure is open in the history");
$hander->quit;
$releaser->quit;

# --- claim_epoch() while another claim of the same holder is published
my $claimer = $node->background_psql('postgres');
my $claimer_pid = $claimer->query_safe('SELECT pg_backend_pid()');
$g = stop_at_commit($claimer_pid);
start_statement($claimer, "SELECT tenure.claim_epoch('cw', 's');");
stopped($g, "a claim's commit stops in the COMMIT callback");

my $second = $node->background_psql('postgres', on_error_stop => 0);
my $second_pid = $second->query_safe('SELECT pg_backend_pid()');
start_statement($second, "SELECT tenure.claim_epoch('cw', 's');");
waits_in_tenure($node, $second_pid,
	'a second claim of the same holder waits for the first to be published');

let_go($g);
my $c1 = result_of($claimer, qr/^(\d+)\s*$/m);
my $c2 = result_of($second, qr/^(\d+)\s*$/m);
ok(defined $c1 && $c1 > $e2, 'the first claim committed');
ok(defined $c2 && defined $c1 && $c2 > $c1,
	'the second claim committed, with a higher epoch');
is($node->safe_psql('postgres', "SELECT tenure.current_epoch('cw')"),
	$c2, 'the second claim is the current epoch');
$claimer->quit;
$second->quit;
$succ->quit;

unlike(slurp_file($node->logfile), qr/ended before the transaction committed/,
	'no claim failed its commit check');

$node->stop;
done_testing();
