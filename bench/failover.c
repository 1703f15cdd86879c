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
 *
 * Connection parameters come from the PG* environment.  Prints one line
 * per trial ("trial N ms") and a summary line:
 *   MODE n=N p50=.. p99=.. max=.. (milliseconds)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "libpq-fe.h"

#define TODAY_RENEW_MS		50
#define TODAY_HOLDOFF_MS	300

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

/* Wait, with a deadline, until backend pid sleeps in pg_tenure's wait. */
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
		fprintf(stderr, "usage: failover holdoff0|automatic|defaults|today TRIALS [TTL_MS]\n");
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
				 ttl_ms, strcmp(mode, "holdoff0") == 0 ? "'0'" : "NULL");
		query1(mon, sql);
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
