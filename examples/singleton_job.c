/*
 * singleton_job.c
 *		Run a periodic job on exactly one of N replicas, with pg_tenure.
 *
 * Start one copy per replica; they campaign for one lease and only the
 * leader runs the job.  When the leader dies, the others notice within
 * milliseconds and one of them takes over.  Copy this file and replace
 * run_builtin_job() with your own job.
 *
 *	 singleton_job [OPTIONS] [CONNINFO]
 *
 *	 CONNINFO			 libpq connection string; default "" (PGHOST, PGDATABASE, ...)
 *	 --lease NAME		 lease to campaign for (default $TENURE_LEASE or nightly-job)
 *	 --holder NAME		 this replica's name (default $TENURE_HOLDER or host:pid)
 *	 --ttl-ms N			 the lease's ttl; default: read it from tenure.leases
 *	 --command CMD		 the job: run CMD with /bin/sh, with TENURE_LEASE,
 *						 TENURE_HOLDER, TENURE_EPOCH and TENURE_TOKENS set
 *	 --job-ms N			 without --command, the built-in job: a transaction that
 *						 works N ms (pg_sleep) and records the run (default 100)
 *	 --job-table NAME	 ... in this table (default job_runs):
 *						 holder text, epoch bigint, started/finished timestamptz
 *
 * The lease must exist: SELECT tenure.create_lease('nightly-job', '2 s', '0');
 * and the role must be allowed to acquire it (its owner or a member).
 *
 * How it works.  Every ttl/3 the campaign loop calls
 *
 *	 SELECT tenure.acquire(lease, holder, wait => ..., session_bound => true)
 *
 * which renews our tenure if we hold the lease and otherwise tries to
 * take it.  A follower passes wait => ttl/3 and sleeps inside the call, so
 * the server wakes it the moment the lease frees up.  The tenure is bound
 * to our session: if this process dies, its backend exits and the tenure
 * ends at once instead of at its ttl.  Before each run of the job we ask
 * tenure.leader_is(), which is true only once the lease's hold-off, if
 * any, has passed.
 *
 * The client rule (README): we act as leader only until the moment we sent
 * our last successful renewal plus the ttl, by our own CLOCK_MONOTONIC.
 * The server counts the ttl from when it received the call, later, so we
 * always stop believing first.  Keep a job shorter than that margin, or
 * make its effects fenced writes: the built-in job presents its epoch
 * (SET LOCAL tenure.tokens), so if its table is fenced by the lease
 * (tenure.fence_table) a run that outlives its tenure cannot commit.
 *
 * Hand-off.  A lease may name a preferred holder (create_lease(...,
 * preferred => ...) or tenure.set_preferred()).  At every step the active
 * leader reads it from tenure.leases; if it is another holder and that
 * holder waits in acquire() (tenure.waiters), the leader calls
 *
 *	 SELECT tenure.handoff(lease, holder, preferred)
 *
 * and becomes a follower, campaigning like any other.  The preferred
 * holder's waiting acquire() returns the new epoch and it leads at once.
 * If it stopped waiting in the meantime, the handoff fails with SQLSTATE
 * 55000 and changes nothing: we stay leader and try again at the next
 * step.  Only an active leader hands over: a successor is active at once,
 * so a tenure still waiting out its predecessor's hold-off keeps the lease
 * until the hold-off has passed.
 *
 * Losing the lease (another holder, a fenced commit, a lost connection)
 * demotes the process; it never exits for that.  It reconnects with
 * backoff.  SIGTERM or SIGINT release the lease and exit with status 0.
 *
 * Log lines on stdout: "<ISO time> <holder> became leader epoch=N",
 * "... lost leadership epoch=N (<why>)", "... job run epoch=N",
 * "... handed over to <successor> epoch=N" (N: the successor's epoch).
 *
 * Build: cc -std=c99 -I$(pg_config --includedir) singleton_job.c -L$(pg_config --libdir) -lpq
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	5000

/* settings */
static const char *conninfo = "";
static const char *lease = "nightly-job";
static char holder[128];
static int64_t ttl_ms = 0;
static const char *command = NULL;
static int	job_ms = 100;
static const char *job_table = "job_runs";

/* state */
static PGconn *conn = NULL;
static long long epoch = 0;		/* epoch of the tenure we hold, 0 if none */
static bool leader = false;		/* acting as leader */
static bool waiting_logged = false;	/* said we wait for the hold-off */
static int64_t deadline = 0;	/* client rule: lead only before this (ms) */

static volatile sig_atomic_t stop_requested = 0;

static void
on_stop(int signo)
{
	(void) signo;
	stop_requested = 1;
}

/* Milliseconds on CLOCK_MONOTONIC: for every duration and deadline. */
static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleep until a CLOCK_MONOTONIC time, or until SIGTERM/SIGINT. */
static void
sleep_until(int64_t when_ms)
{
	int64_t		left;

	while (!stop_requested && (left = when_ms - mono_ms()) > 0)
	{
		struct timespec ts = {left / 1000, (left % 1000) * 1000000};

		nanosleep(&ts, NULL);	/* a signal cuts it short */
	}
}

/* Print "<ISO time> <holder> <message>" on stdout, at once. */
static void
say(const char *fmt,...)
{
	struct timespec ts;
	struct tm	tm;
	char		stamp[32];
	va_list		ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	printf("%s.%03ldZ %s ", stamp, ts.tv_nsec / 1000000, holder);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/*
 * Run one statement with text parameters; returns its result (check it
 * with failed()).  We wait in poll() instead of inside libpq so that a
 * SIGTERM can cancel a long statement, such as acquire's wait.
 */
static PGresult *
run(const char *sql, int nparams, const char *const *params)
{
	PGresult   *res = NULL;
	PGresult   *next;
	bool		cancelled = false;

	if (!PQsendQueryParams(conn, sql, nparams, NULL, params, NULL, NULL, 0))
		return PQmakeEmptyPGresult(conn, PGRES_FATAL_ERROR);

	for (;;)
	{
		while (PQisBusy(conn))
		{
			struct pollfd pfd = {PQsocket(conn), POLLIN, 0};

			if (stop_requested && !cancelled)
			{
				PGcancel   *c = PQgetCancel(conn);
				char		errbuf[256];

				if (c != NULL)
				{
					PQcancel(c, errbuf, sizeof(errbuf));
					PQfreeCancel(c);
				}
				cancelled = true;
			}
			if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
				break;
			if (!PQconsumeInput(conn))
				break;
		}
		next = PQgetResult(conn);
		if (next == NULL)
			break;
		PQclear(res);
		res = next;
	}
	return res ? res : PQmakeEmptyPGresult(conn, PGRES_FATAL_ERROR);
}

static bool
failed(const PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	return st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK;
}

/* The error's SQLSTATE, or "" */
static const char *
sqlstate(const PGresult *res)
{
	const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	return s ? s : "";
}

/*
 * The error's primary message, or the first line of libpq's last message
 * (res may be NULL).
 */
static const char *
message(const PGresult *res)
{
	const char *s = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	static char buf[512];

	if (s != NULL)
		return s;
	snprintf(buf, sizeof(buf), "%s", PQerrorMessage(conn));
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

/* End a failed transaction, if one is open. */
static void
rollback(void)
{
	if (conn != NULL && PQtransactionStatus(conn) == PQTRANS_INERROR)
		PQclear(PQexec(conn, "ROLLBACK"));
}

/* Stop acting as leader and forget our tenure. */
static void
demote(const char *why)
{
	if (leader)
		say("lost leadership epoch=%lld (%s)", epoch, why);
	else if (epoch != 0)
		say("lost lease epoch=%lld before leading (%s)", epoch, why);
	leader = false;
	epoch = 0;
	waiting_logged = false;
}

/*
 * Deal with a failed statement: demote if the connection is gone (its
 * session-bound tenure is gone with it) and drop the connection, so that
 * the main loop reconnects.
 */
static void
report(const char *what, const PGresult *res)
{
	const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);

	/* after a FATAL error the server closes the session */
	if (PQstatus(conn) == CONNECTION_BAD ||
		(severity != NULL && strcmp(severity, "FATAL") == 0))
	{
		char		why[600];

		snprintf(why, sizeof(why), "connection lost: %s", message(res));
		demote(why);
		PQfinish(conn);
		conn = NULL;
		return;
	}
	if (!(stop_requested && strcmp(sqlstate(res), "57014") == 0))
		say("%s failed: %s", what, message(res));
	rollback();
}

/* Read the lease's ttl from tenure.leases. */
static bool
read_ttl(void)
{
	const char *params[1] = {lease};
	PGresult   *res;

	res = run("SELECT (extract(epoch FROM ttl) * 1000)::bigint"
			  " FROM tenure.leases WHERE lease = $1", 1, params);
	if (failed(res))
	{
		report("reading the ttl", res);
		PQclear(res);
		return false;
	}
	if (PQntuples(res) == 0)
	{
		fprintf(stderr, "singleton_job: lease \"%s\" does not exist; create it with tenure.create_lease()\n",
				lease);
		exit(2);
	}
	ttl_ms = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return true;
}

/*
 * Connect, and read the ttl if we do not know it yet.  On failure sleep
 * the backoff (100 ms doubling to 5 s) and return false.
 */
static bool
connect_db(void)
{
	static int	backoff_ms = BACKOFF_MIN_MS;
	static bool connected_before = false;

	conn = PQconnectdb(conninfo);
	if (PQstatus(conn) != CONNECTION_OK)
		say("cannot connect, retrying in %d ms: %s", backoff_ms,
			message(NULL));
	else if (ttl_ms > 0 || read_ttl())
	{
		if (connected_before)
			say("reconnected");
		connected_before = true;
		backoff_ms = BACKOFF_MIN_MS;
		return true;
	}
	PQfinish(conn);
	conn = NULL;
	sleep_until(mono_ms() + backoff_ms);
	backoff_ms = backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff_ms * 2;
	return false;
}

/*
 * One campaign step: acquire the lease, or renew our tenure.  A follower
 * waits up to ttl/3 inside the call for the lease to free up.
 */
static void
campaign(void)
{
	char		wait[32];
	const char *params[3] = {lease, holder, wait};
	PGresult   *res;
	int64_t		sent;

	snprintf(wait, sizeof(wait), "%lld ms", epoch != 0 ? 0LL : (long long) (ttl_ms / 3));
	sent = mono_ms();
	res = run("SELECT tenure.acquire($1, $2, wait => $3::interval, session_bound => true)",
			  3, params);
	if (failed(res))
		report("acquire", res);
	else if (PQgetisnull(res, 0, 0))
	{
		if (epoch != 0)
			demote("another holder has the lease");
	}
	else
	{
		long long	e = atoll(PQgetvalue(res, 0, 0));

		if (epoch != 0 && e != epoch)
			demote("our tenure ended");
		epoch = e;
		deadline = sent + ttl_ms;
	}
	PQclear(res);
}

/*
 * The active leader hands the lease over to its preferred holder, if the
 * lease names another holder and that holder waits in acquire().  Then we
 * are a follower (epoch 0) and the next campaign step waits in acquire()
 * like any follower's.  If the successor stopped waiting meanwhile
 * (SQLSTATE 55000), nothing changed and we stay leader.
 */
static void
hand_over(void)
{
	const char *params[3] = {lease, holder, NULL};
	char		successor[128];
	PGresult   *res;

	res = run("SELECT preferred FROM tenure.leases"
			  " WHERE lease = $1 AND preferred <> $2"
			  " AND preferred IN (SELECT holder FROM tenure.waiters WHERE lease = $1)",
			  2, params);
	if (failed(res))
		report("reading the preferred holder", res);
	else if (PQntuples(res) == 1)
	{
		snprintf(successor, sizeof(successor), "%s", PQgetvalue(res, 0, 0));
		PQclear(res);
		params[2] = successor;
		res = run("SELECT tenure.handoff($1, $2, $3)", 3, params);
		if (!failed(res))
		{
			say("handed over to %s epoch=%s", successor, PQgetvalue(res, 0, 0));
			leader = false;
			epoch = 0;
			waiting_logged = false;
		}
		else if (strcmp(sqlstate(res), "55000") == 0)
			say("handoff to %s failed, still leading: %s", successor, message(res));
		else if (strcmp(sqlstate(res), "TN001") == 0)
			demote("our tenure ended");	/* expired before the handoff */
		else
			report("handoff", res);
	}
	PQclear(res);
}

/*
 * One statement of the built-in job; copies the first value into out if
 * given.  On failure ends the transaction and returns false: a TN002
 * (fenced) means that a newer leader exists, so we demote.
 */
static bool
job_step(const char *sql, int nparams, const char *const *params,
		 char *out, size_t outlen)
{
	PGresult   *res = run(sql, nparams, params);
	bool		ok = !failed(res);

	if (ok && out != NULL)
		snprintf(out, outlen, "%s", PQgetvalue(res, 0, 0));
	else if (!ok && strcmp(sqlstate(res), "TN002") == 0)
	{
		say("job run fenced: %s", message(res));
		rollback();
		demote("fenced");
	}
	else if (!ok)
		report("job run", res);
	PQclear(res);
	return ok;
}

/*
 * The built-in job: one transaction that presents our epoch, works job_ms
 * and records the run.  Returns false if it did not commit.
 */
static bool
run_builtin_job(void)
{
	char		token[200];
	char	   *literal = NULL;
	char	   *table = NULL;
	char		set_tokens[300];
	char		insert[300];
	char		epoch_text[24];
	char		work[24];
	char		started[64];
	const char *work_params[1] = {work};
	const char *insert_params[3] = {holder, epoch_text, started};
	bool		ok = false;

	snprintf(token, sizeof(token), "%s=%lld", lease, epoch);
	snprintf(epoch_text, sizeof(epoch_text), "%lld", epoch);
	snprintf(work, sizeof(work), "%.3f", job_ms / 1000.0);
	literal = PQescapeLiteral(conn, token, strlen(token));
	table = PQescapeIdentifier(conn, job_table, strlen(job_table));
	if (literal != NULL && table != NULL)
	{
		snprintf(set_tokens, sizeof(set_tokens), "SET LOCAL tenure.tokens = %s", literal);
		snprintf(insert, sizeof(insert),
				 "INSERT INTO %s (holder, epoch, started, finished)"
				 " VALUES ($1, $2, $3, clock_timestamp())", table);

		ok = job_step("BEGIN", 0, NULL, NULL, 0) &&
			job_step(set_tokens, 0, NULL, NULL, 0) &&
			job_step("SELECT clock_timestamp()", 0, NULL, started, sizeof(started)) &&
			job_step("SELECT pg_sleep($1)", 1, work_params, NULL, 0) &&	/* the work */
			job_step(insert, 3, insert_params, NULL, 0) &&
			job_step("COMMIT", 0, NULL, NULL, 0);
	}
	PQfreemem(literal);
	PQfreemem(table);
	return ok;
}

/* The --command job: run it with /bin/sh, our tenure in its environment. */
static bool
run_command_job(void)
{
	char		value[200];
	int			status;

	setenv("TENURE_LEASE", lease, 1);
	setenv("TENURE_HOLDER", holder, 1);
	snprintf(value, sizeof(value), "%lld", epoch);
	setenv("TENURE_EPOCH", value, 1);
	snprintf(value, sizeof(value), "%s=%lld", lease, epoch);
	setenv("TENURE_TOKENS", value, 1);
	status = system(command);
	if (status != 0)
		say("job command failed with status %d", status);
	return status == 0;
}

/*
 * Before each run of the job: are we the active leader, and is our last
 * renewal recent enough (client rule)?  Then run the job.
 */
static void
lead(void)
{
	const char *params[2] = {lease, holder};
	PGresult   *res;
	bool		active;

	res = run("SELECT tenure.leader_is($1, $2)", 2, params);
	if (failed(res))
	{
		report("leader_is", res);
		PQclear(res);
		return;
	}
	active = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);

	/* client rule: the job must end before our last renewal's send time + ttl */
	if (active && mono_ms() + (command ? 0 : job_ms) >= deadline)
		active = false;
	if (!active)
	{
		if (leader)
			demote("no longer the active leader");
		else if (!waiting_logged)
		{
			say("holding epoch=%lld, waiting for the hold-off", epoch);
			waiting_logged = true;
		}
		return;
	}
	if (!leader)
	{
		leader = true;
		say("became leader epoch=%lld", epoch);
	}

	if (command ? run_command_job() : run_builtin_job())
		say("job run epoch=%lld", epoch);
}

/* Release our tenure, if any, so that a successor needs no hold-off. */
static void
release(void)
{
	const char *params[2] = {lease, holder};
	PGresult   *res;
	int			attempt;

	if (conn == NULL || epoch == 0)
	{
		say("stopping");
		return;
	}
	for (attempt = 0; attempt < 2; attempt++)
	{
		/* a cancel we sent may still hit this statement: retry once */
		res = PQexecParams(conn, "SELECT tenure.release($1, $2)", 2, NULL,
						   params, NULL, NULL, 0);
		if (!failed(res) || strcmp(sqlstate(res), "57014") != 0)
			break;
		PQclear(res);
	}
	if (failed(res))
		say("stopping; release failed: %s", message(res));
	else
		say("stopping; released epoch=%lld", epoch);
	PQclear(res);
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: singleton_job [--lease NAME] [--holder NAME] [--ttl-ms N]\n"
			"                     [--command CMD | --job-ms N --job-table NAME] [CONNINFO]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
		{"lease", required_argument, NULL, 'l'},
		{"holder", required_argument, NULL, 'H'},
		{"ttl-ms", required_argument, NULL, 't'},
		{"command", required_argument, NULL, 'c'},
		{"job-ms", required_argument, NULL, 'j'},
		{"job-table", required_argument, NULL, 'T'},
		{NULL, 0, NULL, 0}
	};
	struct sigaction sa;
	int			opt;

	if (getenv("TENURE_LEASE"))
		lease = getenv("TENURE_LEASE");
	if (getenv("TENURE_HOLDER"))
		snprintf(holder, sizeof(holder), "%s", getenv("TENURE_HOLDER"));
	else
	{
		char		host[64] = "localhost";

		gethostname(host, sizeof(host) - 1);
		snprintf(holder, sizeof(holder), "%s:%ld", host, (long) getpid());
	}

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1)
	{
		switch (opt)
		{
			case 'l':
				lease = optarg;
				break;
			case 'H':
				snprintf(holder, sizeof(holder), "%s", optarg);
				break;
			case 't':
				ttl_ms = atoll(optarg);
				break;
			case 'c':
				command = optarg;
				break;
			case 'j':
				job_ms = atoi(optarg);
				break;
			case 'T':
				job_table = optarg;
				break;
			default:
				usage();
		}
	}
	if (optind < argc)
		conninfo = argv[optind++];
	if (optind < argc || ttl_ms < 0 || (ttl_ms > 0 && ttl_ms < 3) || job_ms < 0)
		usage();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;	/* no SA_RESTART: signals wake poll() and sleeps */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	while (!stop_requested && !connect_db())
		;
	if (!stop_requested)
	{
		say("campaigning for lease \"%s\" (ttl %lld ms)", lease, (long long) ttl_ms);
		if (!command && job_ms >= ttl_ms / 3)
			say("warning: --job-ms %d is not shorter than ttl/3: runs will be skipped", job_ms);
	}

	while (!stop_requested)
	{
		int64_t		step = mono_ms();

		if (conn == NULL && !connect_db())
			continue;
		campaign();
		if (conn != NULL && leader && !stop_requested)
			hand_over();
		if (conn != NULL && epoch != 0 && !stop_requested)
			lead();
		sleep_until(step + ttl_ms / 3);
	}

	release();
	PQfinish(conn);
	return 0;
}
