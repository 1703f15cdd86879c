
# NOTIFY on channel "tenure": a session that LISTENs sees one notification
# per committed acquisition of a new tenure, claim and release, with a JSON
# payload {"event", "lease", "holder", "epoch"} sent by the backend that made
# the change, in commit order; nothing for a renewal, a failed release, an
# acquisition, claim or release whose transaction or savepoint rolls back,
# or any change while tenure.notify is off.  Claims of a lease in a row in
# one (sub)transaction send one, of the last epoch; a release repeated in a
# transaction sends one.
#
# psql prints 'Asynchronous notification "tenure" with payload "..."
# received from server process with PID n.' after a command once the
# notification has reached it; the listener runs cheap commands until the
# expected number has arrived, with a bound.  Absence is checked against a
# later committed change: notifications arrive in commit order, so once the
# later one is there, an earlier one would have been too.

use strict;
use warnings FATAL => 'all';

use FindBin;
use lib $FindBin::Bin;

use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use TenureTest;

my $node = tenure_node('notify');
$node->safe_psql('postgres',
	q{SELECT tenure.create_lease('n_lease', ttl => '10 min')});

my $listener = $node->background_psql('postgres');
$listener->query_safe('LISTEN tenure');

my $notifier = $node->background_psql('postgres');
my $notifier_pid = $notifier->query_safe('SELECT pg_backend_pid()');

# Return the next $n notifications on channel "tenure" as hashes with the
# decoded payload and the sender's pid; fails if more than $n arrive.
my @pending;

sub next_notifications
{
	my ($n) = @_;

	for (my $i = 0; $i < 300 && @pending < $n; $i++)
	{
		# the first round without sleeping; then give delivery a moment
		my $out =
		  $listener->query_safe($i == 0 ? 'SELECT 1' : 'SELECT pg_sleep(0.1)');
		for my $line (split /\n/, $out)
		{
			next
			  unless $line =~
			  /^Asynchronous notification "(\w+)" with payload "(.*)" received from server process with PID (\d+)\.$/;
			push @pending,
			  {
				channel => $1,
				payload => $2,
				pid => $3,
				data => JSON::PP->new->decode($2)
			  };
		}
	}
	my @got = splice(@pending, 0, $n);
	is(scalar(@got), $n, "$n notification(s) arrived");
	is(scalar(@pending), 0, 'and no more');
	return @got;
}

# Check one notification's channel, sender and payload fields.
sub check_notification
{
	my ($note, $event, $holder, $epoch, $what) = @_;

	is($note->{channel}, 'tenure', "$what: channel tenure");
	is($note->{pid}, $notifier_pid, "$what: sent by the backend that made the change");
	is(join(',', sort keys %{ $note->{data} }),
		'epoch,event,holder,lease', "$what: payload fields");
	is($note->{data}{event}, $event, "$what: event $event");
	is($note->{data}{lease}, 'n_lease', "$what: lease");
	is($note->{data}{holder}, $holder, "$what: holder");
	is($note->{data}{epoch}, $epoch, "$what: epoch");
	ok($note->{payload} =~ /"epoch": \d+\}$/, "$what: epoch is a JSON number");
}

# acquire, renewal (silent), claim, release
my $e1 = $notifier->query_safe(q{SELECT tenure.acquire('n_lease', 'alpha')});
my ($n) = next_notifications(1);
check_notification($n, 'acquired', 'alpha', $e1, 'acquire');

is($notifier->query_safe(q{SELECT tenure.acquire('n_lease', 'alpha')}),
	$e1, 'acquire by the holder renews at the same epoch');
my $e2 = $notifier->query_safe(q{SELECT tenure.claim_epoch('n_lease', 'alpha')});
cmp_ok($e2, '>', $e1, 'the claim issues a newer epoch');
is($notifier->query_safe(q{SELECT tenure.release('n_lease', 'alpha')}),
	't', 'alpha releases');
my ($n_claim, $n_release) = next_notifications(2);
check_notification($n_claim, 'claimed', 'alpha', $e2, 'claim (the renewal sent nothing)');
check_notification($n_release, 'released', 'alpha', $e2, 'release');

# nothing for rolled-back changes or a release that does not hold
$notifier->query_safe(
	q{BEGIN;
	  SELECT tenure.acquire('n_lease', 'beta');
	  ROLLBACK});
$notifier->query_safe(
	q{BEGIN;
	  SAVEPOINT s;
	  SELECT tenure.acquire('n_lease', 'beta');
	  ROLLBACK TO SAVEPOINT s;
	  COMMIT});
is($notifier->query_safe(q{SELECT tenure.release('n_lease', 'nobody')}),
	'f', 'a release by a non-holder does nothing');
my $e3 = $notifier->query_safe(q{SELECT tenure.acquire('n_lease', 'gamma')});
$notifier->query_safe(
	q{BEGIN;
	  SELECT tenure.claim_epoch('n_lease', 'gamma');
	  SELECT tenure.release('n_lease', 'gamma');
	  ROLLBACK});
# a holder name that needs escaping in JSON, acquired after gamma's release
is($notifier->query_safe(q{SELECT tenure.release('n_lease', 'gamma')}),
	't', 'gamma releases');
my $e4 = $notifier->query_safe(q{SELECT tenure.acquire('n_lease', 'o"brien\x')});
my ($n_gamma, $n_gamma_rel, $n_odd) = next_notifications(3);
check_notification($n_gamma, 'acquired', 'gamma', $e3,
	'first notification after the rolled-back acquisitions: gamma');
cmp_ok($e3, '>', $e2, "gamma's epoch is newer");
check_notification($n_gamma_rel, 'released', 'gamma', $e3,
	"gamma's committed release, not the rolled-back claim and release");
check_notification($n_odd, 'acquired', 'o"brien\x', $e4,
	'a holder with a quote and a backslash');

# tenure.notify = off sends nothing; the next change with it on is the
# next notification
$notifier->query_safe(q{SET tenure.notify = off});
is($notifier->query_safe(q{SELECT tenure.release('n_lease', 'o"brien\x')}),
	't', 'a release with tenure.notify off');
my $e5 = $notifier->query_safe(q{SELECT tenure.acquire('n_lease', 'delta')});
$notifier->query_safe(q{RESET tenure.notify});
my $e6 = $notifier->query_safe(q{SELECT tenure.claim_epoch('n_lease', 'delta')});
my ($n_delta) = next_notifications(1);
check_notification($n_delta, 'claimed', 'delta', $e6,
	'with tenure.notify off nothing was sent; the claim after RESET was');

# Claims of a lease in a row, in one (sub)transaction, are announced once,
# with the last epoch: the ones before it were never current outside the
# transaction (tenure.history and tenure.lease_stats still count each).  A
# claim in a savepoint that rolls back is not announced; one in a
# savepoint that commits is announced on its own.  A release repeated in
# a transaction is announced once.  (What a transaction keeps stays
# bounded however often it claims or releases: sql/resources.sql.)
my $claims_before = $notifier->query_safe(
	q{SELECT claims FROM tenure.lease_stats WHERE lease = 'n_lease'});
$notifier->query_safe('BEGIN');
my @claimed = map {
	$notifier->query_safe(q{SELECT tenure.claim_epoch('n_lease', 'delta')})
} 1 .. 3;
$notifier->query_safe('COMMIT');
my ($n_three) = next_notifications(1);
check_notification($n_three, 'claimed', 'delta', $claimed[2],
	'three claims in one transaction: one notification, the last epoch');
cmp_ok($claimed[2], '>', $claimed[0], 'the last claim has the newest epoch');
is( $notifier->query_safe(
		q{SELECT claims FROM tenure.lease_stats WHERE lease = 'n_lease'}),
	$claims_before + 3,
	'each of the three claims is counted');
is( $notifier->query_safe(
		qq{SELECT count(*) FROM tenure.history WHERE lease = 'n_lease'
		   AND epoch IN ($claimed[0], $claimed[1], $claimed[2])}),
	3, 'each of the three claims has its history row');

$notifier->query_safe('BEGIN');
my $e7 =
  $notifier->query_safe(q{SELECT tenure.claim_epoch('n_lease', 'delta')});
$notifier->query_safe('SAVEPOINT s');
$notifier->query_safe(q{SELECT tenure.claim_epoch('n_lease', 'delta')});
$notifier->query_safe('ROLLBACK TO SAVEPOINT s');
$notifier->query_safe('SAVEPOINT t');
my $e8 =
  $notifier->query_safe(q{SELECT tenure.claim_epoch('n_lease', 'delta')});
$notifier->query_safe('RELEASE SAVEPOINT t');
$notifier->query_safe('COMMIT');
$notifier->query_safe('BEGIN');
is( $notifier->query_safe(
		q{SELECT tenure.release('n_lease', 'delta'),
				 tenure.release('n_lease', 'delta')}),
	't|t', 'a release repeated in one transaction holds both times');
$notifier->query_safe('COMMIT');
my ($n_e7, $n_e8, $n_rel) = next_notifications(3);
check_notification($n_e7, 'claimed', 'delta', $e7,
	'the claim before the savepoints');
check_notification($n_e8, 'claimed', 'delta', $e8,
	'the claim of the committed savepoint, not the rolled-back one');
check_notification($n_rel, 'released', 'delta', $e8,
	'the repeated release, once');

# only a superuser turns it off: listeners rely on every writer's setting
my ($ret, $out, $err) = $node->psql('postgres',
	q{CREATE ROLE notify_user; SET ROLE notify_user; SET tenure.notify = off});
like($err, qr/permission denied to set parameter "tenure\.notify"/,
	'a role without superuser cannot turn tenure.notify off');

$listener->quit;
$notifier->quit;
$node->stop;
done_testing();
