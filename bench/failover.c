/*
 * failover.c
 *		Measure how long a waiting candidate takes to lead after the
 *		holder's backend exits, with pg_tenure and with today's design.
 *
 * Usage: failover MODE TRIALS [TTL_MS]
 *
 *   MODE holdoff0   lease with holdoff '0': the time from terminating the
 *                   holder's backend to the candidate's acquire returning.
 *   MODE automatic  lease with the automatic hold-off and ttl TTL_MS: the
 *                   time from terminating the holder to the candidate's
 *                   tenure becoming active, minus the predecessor's last
 *                   renewal + ttl (the spec's bound: at most 50 ms).
 *   MODE defaults   lease with the defaults (automatic hold-off) and ttl
 *                   TTL_MS, renewed every ttl/3 as the examples do; the
 *                   holder is terminated at a random point of its renewal
 *                   period: the time from terminating it to the candidate's
 *                   tenure becoming active (tenure.await_active returning),
 *                   the failover a client of the defaults sees.
 *   MODE today      pg_try_advisory_lock polled every RENEW_MS by the
 *                   candidate, then a fixed hold-off of HOLDOFF_MS, the
 *                   usual hand-rolled design scaled down by 100 (5 s renew,
 *                   30 s hold-off become 50 ms and 300 ms).
 *   MODE floor      PostgreSQL's own floor beside holdoff0, trial by trial
 *                   in the same run: a candidate blocked in
 *                   pg_advisory_lock(k) while the holder's backend (which
 *                   holds k) is terminated, and pg_tenure's holdoff0 with
 *                   synchronous_commit off and on (the candidate's and
 *                   the holder's sessions); each round runs the three
 *                   once, the order rotated from round to round.  The time
 *                   from terminating the holder to the candidate's call
 *                   returning.  TRIALS rounds.
 *   MODE first      a new connection's first acquire + release against a
 *                   warm one's, taking turns: each trial connects, times
 *                   its first tenure.acquire and tenure.release and then a
 *                   second pair on the same connection, then a pair on a
 *                   connection kept across trials.  PostgreSQL's floor
 *                   beside it: another new connection's first and second
 *                   statement writing the rows of an acquisition by plain
 *                   SQL (setup.sql's bench_cycle_row and
 *                   bench_cycle_history: the lease row's epoch, the open
 *                   history row closed, a new one inserted), the two new
 *                   connections' order swapped every trial.
 *
 * Connection parameters come from the PG* environment.  Prints one line
 * per trial ("trial N ms") and a summary line:
 *   MODE n=N p50=.. p99=.. max=.. (milliseconds)
 * floor prints a summary line per kind, the last three lines:
 *   floor advisory n=N p50=.. p99=.. max=..
 *   floor tenure_off n=N p50=.. p99=.. max=.. p50_ratio=.. p99_ratio=..
 *   floor tenure_on ...
 * (ratio: pg_tenure's percentile / the advisory waiter's); first prints
 * one per step, the last seven lines:
 *   first connect|first_acquire|first_release|second_acquire|warm_acquire|
 *         first_sql|second_sql n=N p50=.. p99=.. max=..
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#define TODAY_RENEW_MS		50
#define TODAY_HOLDOFF_MS	300
/* the floor's advisory lock (today's trials take 424242) */
#define FLOOR_KEY			"424243"

/* the kinds of a floor round, in the order of its first round */
typedef enum FloorKind
{
	FLOOR_ADVISORY,
	FLOOR_TENURE_OFF,
	FLOOR_TENURE_ON,
	FLOOR_KINDS
} FloorKind;

static const char *const floor_names[FLOOR_KINDS] = {"advisory", "tenure_off", "tenure_on"};

/* the steps a trial of mode first times */
typedef enum FirstStep
{
	FIRST_CONNECT,
	FIRST_ACQUIRE,
	FIRST_RELEASE,
	FIRST_SECOND_ACQUIRE,
	FIRST_WARM_ACQUIRE,
	FIRST_SQL,
	FIRST_SECOND_SQL,
	FIRST_STEPS
} FirstStep;

static const char *const first_names[FIRST_STEPS] = {
	"connect", "first_acquire", "first_release", "second_acquire", "warm_acquire",
	"first_sql", "second_sql"
};

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static PGconn *
connect_or_die(void)
{
	PGconn	   *conn = PQconnectdb("");

	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "failover: connection failed: %s", PQerrorMessage(conn));
		exit(1);
	}
	return conn;
}

/* Run a query that returns one value (or none); die on error. */
static char *
query1(PGconn *conn, const char *sql)
{
	static char value[256];
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_TUPLES_OK &&
		PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		fprintf(stderr, "failover: %s: %s", sql, PQerrorMessage(conn));
		exit(1);
	}
	value[0] = '\0';
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0 &&
		!PQgetisnull(res, 0, 0))
		snprintf(value, sizeof(value), "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return value;
}

/*
 * Wait, with a deadline, until backend pid sleeps in a wait of event_type
 * ("Extension": pg_tenure's; "Lock": a heavyweight lock's).
 */
static void
wait_asleep(PGconn *mon, int pid, const char *event_type)
{
	char		sql[256];
	double		deadline = now_ms() + 10000;

	snprintf(sql, sizeof(sql),
			 "SELECT count(*) FROM pg_stat_activity WHERE pid = %d"
			 " AND wait_event_type = '%s'", pid, event_type);
	while (strcmp(query1(mon, sql), "1") != 0)
	{
		if (now_ms() > deadline)
		{
			fprintf(stderr, "failover: candidate %d never went to sleep\n", pid);
			exit(1);
		}
		usleep(200);
	}
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

/*
 * Sort the n values of v and print "LABEL n=N p50=.. p99=.. max=..",
 * without the newline; *p50 and *p99 get the percentiles.
 */
static void
summarize(const char *label, double *v, int n, double *p50, double *p99)
{
	qsort(v, n, sizeof(double), cmp_double);
	*p50 = v[n / 2];
	*p99 = v[(int) ((n - 1) * 0.99)];
	printf("%s n=%d p50=%.3f p99=%.3f max=%.3f", label, n, *p50, *p99, v[n - 1]);
}

/*
 * Send sql on cand, wait until its backend sleeps (wait_event_type
 * event_type), terminate the holder's backend and return the milliseconds
 * from the termination to cand's call returning a value.
 */
static double
time_takeover(PGconn *mon, PGconn *cand, int holder_pid, const char *sql,
			  const char *event_type)
{
	char		kill[64];
	double		t_kill;
	double		t_got;
	PGresult   *res;

	if (!PQsendQuery(cand, sql))
	{
		fprintf(stderr, "failover: %s", PQerrorMessage(cand));
		exit(1);
	}
	wait_asleep(mon, PQbackendPID(cand), event_type);
	snprintf(kill, sizeof(kill), "SELECT pg_terminate_backend(%d)", holder_pid);
	t_kill = now_ms();
	query1(mon, kill);
	res = PQgetResult(cand);
	t_got = now_ms();
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
		PQgetisnull(res, 0, 0))
	{
		fprintf(stderr, "failover: candidate's %s failed: %s", sql, PQerrorMessage(cand));
		exit(1);
	}
	PQclear(res);
	while ((res = PQgetResult(cand)) != NULL)
		PQclear(res);
	return t_got - t_kill;
}

/*
 * One trial of mode floor: a new holder takes the advisory lock or a
 * session-bound tenure, cand waits for it, the holder's backend is
 * terminated.  Returns the milliseconds until cand has it.
 */
static double
floor_trial(PGconn *mon, PGconn *cand, FloorKind kind)
{
	PGconn	   *holder = connect_or_die();
	int			holder_pid = PQbackendPID(holder);
	double		ms;

	if (kind == FLOOR_ADVISORY)
	{
		query1(holder, "SELECT pg_advisory_lock(" FLOOR_KEY ")");
		ms = time_takeover(mon, cand, holder_pid,
						   "SELECT pg_advisory_lock(" FLOOR_KEY ")", "Lock");
		if (strcmp(query1(cand, "SELECT pg_advisory_unlock(" FLOOR_KEY ")"), "t") != 0)
		{
			fprintf(stderr, "failover: candidate did not hold the advisory lock\n");
			exit(1);
		}
	}
	else
	{
		const char *set = kind == FLOOR_TENURE_OFF ?
			"SET synchronous_commit = off" : "SET synchronous_commit = on";

		query1(holder, set);
		query1(cand, set);
		if (query1(holder, "SELECT tenure.acquire('bench-failover', 'holder', session_bound => true)")[0] == '\0')
		{
			fprintf(stderr, "failover: holder did not acquire\n");
			exit(1);
		}
		ms = time_takeover(mon, cand, holder_pid,
						   "SELECT tenure.acquire('bench-failover', 'candidate', wait => '30 s')",
						   "Extension");
		query1(cand, "SELECT tenure.release('bench-failover', 'candidate')");
	}
	PQfinish(holder);
	return ms;
}

/*
 * Mode floor: rounds of the three kinds, the order rotated each round;
 * prints every trial and a summary line per kind, with pg_tenure's
 * percentiles over the advisory waiter's.
 */
static void
run_floor(PGconn *mon, PGconn *cand, int rounds)
{
	double	   *ms[FLOOR_KINDS];
	double		p50[FLOOR_KINDS];
	double		p99[FLOOR_KINDS];
	int			r;
	int			k;

	for (k = 0; k < FLOOR_KINDS; k++)
		ms[k] = calloc(rounds, sizeof(double));
	for (r = 0; r < rounds; r++)
	{
		for (k = 0; k < FLOOR_KINDS; k++)
		{
			FloorKind	kind = (FloorKind) ((r + k) % FLOOR_KINDS);

			ms[kind][r] = floor_trial(mon, cand, kind);
			printf("trial %d %s %.3f ms\n", r + 1, floor_names[kind], ms[kind][r]);
		}
	}
	for (k = 0; k < FLOOR_KINDS; k++)
	{
		char		label[32];

		snprintf(label, sizeof(label), "floor %s", floor_names[k]);
		summarize(label, ms[k], rounds, &p50[k], &p99[k]);
		if (k != FLOOR_ADVISORY)
			printf(" p50_ratio=%.3f p99_ratio=%.3f", p50[k] / p50[FLOOR_ADVISORY],
				   p99[k] / p99[FLOOR_ADVISORY]);
		printf("\n");
	}
	for (k = 0; k < FLOOR_KINDS; k++)
		free(ms[k]);
}

/* Milliseconds that sql takes on conn; it must return a value. */
static double
timed1(PGconn *conn, const char *sql)
{
	double		t0 = now_ms();

	if (query1(conn, sql)[0] == '\0')
	{
		fprintf(stderr, "failover: %s returned nothing\n", sql);
		exit(1);
	}
	return now_ms() - t0;
}

#define FIRST_ACQUIRE_SQL "SELECT tenure.acquire('bench-failover', 'h')"
#define FIRST_RELEASE_SQL "SELECT tenure.release('bench-failover', 'h')"
/* the floor: an acquisition's rows by plain SQL, in one statement */
#define FIRST_PLAIN_SQL \
	"WITH u AS (UPDATE bench_cycle_row SET epoch = epoch + 1" \
	"  WHERE name = 'bench-cycle-first' RETURNING epoch)," \
	" c AS (UPDATE bench_cycle_history SET ended = clock_timestamp()," \
	"  end_reason = 'released' WHERE lease = 'bench-cycle-first' AND ended IS NULL)" \
	" INSERT INTO bench_cycle_history (lease, epoch, holder, started)" \
	" SELECT 'bench-cycle-first', epoch, 'h', clock_timestamp() FROM u RETURNING epoch"

/* a new connection's first and second plain-SQL acquisition */
static void
first_plain(double *first, double *second)
{
	PGconn	   *conn = connect_or_die();

	*first = timed1(conn, FIRST_PLAIN_SQL);
	*second = timed1(conn, FIRST_PLAIN_SQL);
	PQfinish(conn);
}

/*
 * Mode first: a new connection's first acquire and release, its second
 * acquire, then a connection kept across trials; prints every trial and a
 * summary line per step.
 */
static void
run_first(int trials)
{
	double	   *ms[FIRST_STEPS];
	double		p50;
	double		p99;
	PGconn	   *warm = connect_or_die();
	int			i;
	int			k;

	for (k = 0; k < FIRST_STEPS; k++)
		ms[k] = calloc(trials, sizeof(double));
	/* warm up the kept connection */
	timed1(warm, FIRST_ACQUIRE_SQL);
	timed1(warm, FIRST_RELEASE_SQL);
	for (i = 0; i < trials; i++)
	{
		double		t0;
		PGconn	   *conn;

		if (i % 2)
			first_plain(&ms[FIRST_SQL][i], &ms[FIRST_SECOND_SQL][i]);
		t0 = now_ms();
		conn = connect_or_die();
		ms[FIRST_CONNECT][i] = now_ms() - t0;
		ms[FIRST_ACQUIRE][i] = timed1(conn, FIRST_ACQUIRE_SQL);
		ms[FIRST_RELEASE][i] = timed1(conn, FIRST_RELEASE_SQL);
		ms[FIRST_SECOND_ACQUIRE][i] = timed1(conn, FIRST_ACQUIRE_SQL);
		timed1(conn, FIRST_RELEASE_SQL);
		PQfinish(conn);
		if (i % 2 == 0)
			first_plain(&ms[FIRST_SQL][i], &ms[FIRST_SECOND_SQL][i]);
		ms[FIRST_WARM_ACQUIRE][i] = timed1(warm, FIRST_ACQUIRE_SQL);
		timed1(warm, FIRST_RELEASE_SQL);
		printf("trial %d", i + 1);
		for (k = 0; k < FIRST_STEPS; k++)
			printf(" %s %.3f", first_names[k], ms[k][i]);
		printf(" ms\n");
	}
	for (k = 0; k < FIRST_STEPS; k++)
	{
		char		label[32];

		snprintf(label, sizeof(label), "first %s", first_names[k]);
		summarize(label, ms[k], trials, &p50, &p99);
		printf("\n");
		free(ms[k]);
	}
	PQfinish(warm);
}

int
main(int argc, char **argv)
{
	const char *mode;
	int			trials;
	int			ttl_ms;
	double	   *ms;
	PGconn	   *mon;
	PGconn	   *cand;
	char		sql[512];
	int			i;

	if (argc < 3)
	{
		fprintf(stderr, "usage: failover holdoff0|automatic|defaults|today|floor|first TRIALS [TTL_MS]\n");
		return 2;
	}
	mode = argv[1];
	trials = atoi(argv[2]);
	ttl_ms = argc > 3 ? atoi(argv[3]) : 200;
	ms = calloc(trials, sizeof(double));

	mon = connect_or_die();
	cand = connect_or_die();
	srand(4711);				/* the same random phases in every run */

	if (strcmp(mode, "today") != 0)
	{
		query1(mon, "SELECT tenure.drop_lease(lease) FROM tenure.leases WHERE lease = 'bench-failover'");
		snprintf(sql, sizeof(sql),
				 "SELECT tenure.create_lease('bench-failover', ttl => '%d ms', holdoff => %s)",
				 ttl_ms, strcmp(mode, "automatic") == 0 || strcmp(mode, "defaults") == 0 ? "NULL" : "'0'");
		query1(mon, sql);
	}
	if (strcmp(mode, "floor") == 0 || strcmp(mode, "first") == 0)
	{
		if (strcmp(mode, "floor") == 0)
			run_floor(mon, cand, trials);
		else
			run_first(trials);
		query1(mon, "SELECT tenure.drop_lease('bench-failover')");
		PQfinish(cand);
		PQfinish(mon);
		free(ms);
		return 0;
	}

	for (i = 0; i < trials; i++)
	{
		PGconn	   *holder = connect_or_die();
		int			holder_pid = PQbackendPID(holder);
		int			cand_pid = PQbackendPID(cand);
		double		t_renew;
		double		t_kill;
		double		t_got = 0;
		double		t_lead;
		PGresult   *res;

		if (strcmp(mode, "today") == 0)
		{
			t_renew = now_ms();
			if (strcmp(query1(holder, "SELECT pg_try_advisory_lock(424242)"), "t") != 0)
			{
				fprintf(stderr, "failover: holder did not get the advisory lock\n");
				return 1;
			}
			/* the candidate polls every renew interval */
			t_kill = now_ms();
			snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d)", holder_pid);
			query1(mon, sql);
			for (;;)
			{
				if (strcmp(query1(cand, "SELECT pg_try_advisory_lock(424242)"), "t") == 0)
					break;
				usleep(TODAY_RENEW_MS * 1000);
			}
			t_got = now_ms();
			usleep(TODAY_HOLDOFF_MS * 1000);
			t_lead = now_ms();
			query1(cand, "SELECT pg_advisory_unlock(424242)");
			ms[i] = t_lead - t_kill;
		}
		else
		{
			double		remaining;

			t_renew = now_ms();
			if (query1(holder, "SELECT tenure.acquire('bench-failover', 'holder', session_bound => true)")[0] == '\0')
			{
				fprintf(stderr, "failover: holder did not acquire\n");
				return 1;
			}
			if (strcmp(mode, "defaults") == 0)
			{
				/* renew every ttl/3 for a while, then die at a random point */
				int			renewals = 1 + rand() % 3;
				int			r;

				for (r = 0; r < renewals; r++)
				{
					usleep(ttl_ms * 1000 / 3);
					t_renew = now_ms();
					if (strcmp(query1(holder, "SELECT tenure.renew('bench-failover', 'holder')"), "t") != 0)
					{
						fprintf(stderr, "failover: holder could not renew\n");
						return 1;
					}
				}
			}
			if (!PQsendQuery(cand, "SELECT tenure.acquire('bench-failover', 'candidate', wait => '30 s')"))
			{
				fprintf(stderr, "failover: %s", PQerrorMessage(cand));
				return 1;
			}
			wait_asleep(mon, cand_pid, "Extension");
			if (strcmp(mode, "defaults") == 0)
			{
				double		die_at = t_renew + (rand() % 1000) / 1000.0 * ttl_ms / 3;

				if (die_at > now_ms())
					usleep((useconds_t) ((die_at - now_ms()) * 1000));
			}

			t_kill = now_ms();
			snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d)", holder_pid);
			query1(mon, sql);
			res = PQgetResult(cand);
			t_got = now_ms();
			if (PQresultStatus(res) != PGRES_TUPLES_OK || PQgetisnull(res, 0, 0))
			{
				fprintf(stderr, "failover: candidate did not acquire: %s", PQerrorMessage(cand));
				return 1;
			}
			PQclear(res);
			while ((res = PQgetResult(cand)) != NULL)
				PQclear(res);

			if (strcmp(mode, "defaults") == 0)
			{
				/* as a client of the defaults does: wait until it leads */
				if (strcmp(query1(cand, "SELECT tenure.await_active('bench-failover', 'candidate', '1 min')"), "t") != 0)
				{
					fprintf(stderr, "failover: candidate never became active\n");
					return 1;
				}
				ms[i] = now_ms() - t_kill;
				query1(cand, "SELECT tenure.release('bench-failover', 'candidate')");
				PQfinish(holder);
				printf("trial %d %.3f ms\n", i + 1, ms[i]);
				continue;
			}
			/* when does the candidate's tenure become active? */
			remaining = atof(query1(cand,
									"SELECT greatest(0, extract(epoch FROM active_from - clock_timestamp()) * 1000)"
									" FROM tenure.leases WHERE lease = 'bench-failover'"));
			t_lead = t_got + remaining;
			if (strcmp(mode, "automatic") == 0)
				ms[i] = t_lead - (t_renew + ttl_ms);	/* against the bound */
			else
				ms[i] = t_lead - t_kill;
			query1(cand, "SELECT tenure.release('bench-failover', 'candidate')");
		}
		PQfinish(holder);
		printf("trial %d %.3f ms\n", i + 1, ms[i]);
	}

	qsort(ms, trials, sizeof(double), cmp_double);
	printf("%s n=%d p50=%.3f p99=%.3f max=%.3f\n", mode, trials,
		   ms[trials / 2], ms[(int) ((trials - 1) * 0.99)], ms[trials - 1]);

	if (strcmp(mode, "today") != 0)
		query1(mon, "SELECT tenure.drop_lease('bench-failover')");
	PQfinish(cand);
	PQfinish(mon);
	free(ms);
	return 0;
}
