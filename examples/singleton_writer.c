/*
 * singleton_writer.c
 *		A process that must be the only one writing a store, with pg_tenure.
 *
 * It refuses to start while another writer holds the lease, and once it
 * has lost write authority it cannot commit a write, not even on the
 * pooled connections it still holds: the database checks its epoch at
 * COMMIT.  Copy this file and replace write_row() with your writes.
 *
 *	 singleton_writer [OPTIONS] [CONNINFO]
 *
 *	 CONNINFO			 libpq connection string; default "" (PGHOST, PGDATABASE, ...)
 *	 --lease NAME		 the writer lease (default orders-writer)
 *	 --holder NAME		 this writer's name (default host:pid)
 *	 --table NAME		 table to write (default orders): writer text, epoch bigint, seq bigint
 *	 --pool N			 connections that write, besides the control one (default 3)
 *	 --rows N			 rows to write, then release and exit; 0 = until SIGTERM (default 0)
 *	 --interval-ms N	 pause between rows (default 100)
 *	 --pause-before-commit-ms N
 *						 stop N ms between a row's INSERT and its COMMIT, like a
 *						 writer frozen by a GC pause; SIGUSR1 ends a pause early
 *	 --pause-at-row K	 ... only before the COMMIT of row K (default: every row)
 *
 * Setup, once (the table owner fences the table by the lease):
 *
 *	 SELECT tenure.create_lease('orders-writer', ttl => '10 s', holdoff => '0');
 *	 CREATE TABLE orders (writer text, epoch bigint, seq bigint);
 *	 SELECT tenure.fence_table('orders', 'orders-writer');
 *
 * How it works.  At start, on a control connection:
 *
 *	 SELECT tenure.acquire_or_error(lease, holder, session_bound => true);
 *
 * fails at once with SQLSTATE TN001 if another writer holds the lease; the
 * message names the holder, its epoch and since when, and we exit with
 * status 3.  Otherwise we keep the control connection open for as long as
 * we write (the tenure ends when its session does) and renew the tenure on
 * it every ttl/3.  The writes go through a pool of other connections, as
 * they would through a connection pool or a transaction-mode pooler; every
 * transaction presents the epoch:
 *
 *	 BEGIN;
 *	 SET LOCAL tenure.tokens = 'orders-writer=<epoch>';
 *	 INSERT INTO orders ...;
 *	 COMMIT;
 *
 * If another writer has taken over meanwhile (say this process was frozen
 * and its tenure ended), the COMMIT fails with SQLSTATE TN002: we log
 * "fenced at commit: <message>" and exit with status 4, without retrying.
 *
 * Exit status: 0 done (lease released), 1 error, 2 usage, 3 the lease is
 * held by another writer, 4 fenced or lost the lease.
 *
 * Build: cc -std=c99 -I$(pg_config --includedir) singleton_writer.c -L$(pg_config --libdir) -lpq
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
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

#define EXIT_HELD		3
#define EXIT_FENCED		4
#define MAX_POOL		64

/* settings */
static const char *conninfo = "";
static const char *lease = "orders-writer";
static char holder[128];
static const char *table = "orders";
static int	pool_size = 3;
static long long rows = 0;
static int	interval_ms = 100;
static int	pause_ms = 0;
static long long pause_at_row = 0;

static volatile sig_atomic_t stop_requested = 0;
static volatile sig_atomic_t resume_requested = 0;

static void
on_stop(int signo)
{
	(void) signo;
	stop_requested = 1;
}

static void
on_resume(int signo)
{
	(void) signo;
	resume_requested = 1;
}

/* Milliseconds on CLOCK_MONOTONIC. */
static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Sleep ms milliseconds; SIGTERM and SIGINT cut it short, and so does
 * SIGUSR1 if resumable.
 */
static void
nap(int64_t ms, bool resumable)
{
	int64_t		until = mono_ms() + ms;
	int64_t		left;

	while (!stop_requested && !(resumable && resume_requested) &&
		   (left = until - mono_ms()) > 0)
	{
		struct timespec ts = {left / 1000, (left % 1000) * 1000000};

		nanosleep(&ts, NULL);
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

static bool
failed(const PGresult *res)
{
	ExecStatusType st = PQresultStatus(res);

	return st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK;
}

static const char *
sqlstate(const PGresult *res)
{
	const char *s = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	return s ? s : "";
}

/*
 * "<primary message> (<detail>)", or the first line of libpq's message for
 * a client-side error (res may be NULL).
 */
static const char *
message(PGconn *conn, const PGresult *res)
{
	static char buf[1024];
	const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	const char *detail = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;

	if (primary == NULL)
	{
		snprintf(buf, sizeof(buf), "%s", PQerrorMessage(conn));
		buf[strcspn(buf, "\n")] = '\0';
	}
	else if (detail == NULL)
		snprintf(buf, sizeof(buf), "%s", primary);
	else
		snprintf(buf, sizeof(buf), "%s (%s)", primary, detail);
	return buf;
}

static PGconn *
connect_db(void)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
	{
		say("cannot connect: %s", message(conn, NULL));
		exit(1);
	}
	return conn;
}

/* Run a statement that must succeed; exit 1 if it does not. */
static PGresult *
must(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
	PGresult   *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);

	if (failed(res))
	{
		say("%s: %s", sql, message(conn, res));
		exit(1);
	}
	return res;
}

/*
 * Write one row in its own transaction on a pool connection, presenting
 * our epoch; false if we were told to stop during a pause.  Exits with
 * status 4 when the fence rejects the row.
 */
static bool
write_row(PGconn *conn, const char *token_literal, const char *insert_sql,
		  long long epoch, long long seq)
{
	char		epoch_text[24];
	char		seq_text[24];
	const char *params[3] = {holder, epoch_text, seq_text};
	char		set_sql[256];
	PGresult   *res;

	snprintf(epoch_text, sizeof(epoch_text), "%lld", epoch);
	snprintf(seq_text, sizeof(seq_text), "%lld", seq);
	snprintf(set_sql, sizeof(set_sql), "SET LOCAL tenure.tokens = %s", token_literal);

	PQclear(must(conn, "BEGIN", 0, NULL));
	PQclear(must(conn, set_sql, 0, NULL));
	res = PQexecParams(conn, insert_sql, 3, NULL, params, NULL, NULL, 0);
	if (failed(res))
	{
		if (strcmp(sqlstate(res), "TN002") == 0)
		{
			say("fenced: %s", message(conn, res));
			exit(EXIT_FENCED);
		}
		say("insert failed: %s", message(conn, res));
		exit(1);
	}
	PQclear(res);

	if (pause_ms > 0 && (pause_at_row == 0 || pause_at_row == seq))
	{
		resume_requested = 0;	/* before we say so: SIGUSR1 may follow at once */
		say("paused before COMMIT of row seq=%lld for up to %d ms", seq, pause_ms);
		nap(pause_ms, true);
		if (stop_requested)
		{
			PQclear(must(conn, "ROLLBACK", 0, NULL));
			return false;
		}
		say("resuming: COMMIT of row seq=%lld", seq);
	}

	res = PQexec(conn, "COMMIT");
	if (failed(res))
	{
		if (strcmp(sqlstate(res), "TN002") == 0)
		{
			/* another tenure or epoch replaced ours: never retry */
			say("fenced at commit: %s", message(conn, res));
			exit(EXIT_FENCED);
		}
		say("commit failed: %s", message(conn, res));
		exit(1);
	}
	PQclear(res);
	return true;
}

static void
usage(void)
{
	fprintf(stderr,
			"usage: singleton_writer [--lease NAME] [--holder NAME] [--table NAME] [--pool N]\n"
			"                        [--rows N] [--interval-ms N] [--pause-before-commit-ms N]\n"
			"                        [--pause-at-row K] [CONNINFO]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
		{"lease", required_argument, NULL, 'l'},
		{"holder", required_argument, NULL, 'H'},
		{"table", required_argument, NULL, 'T'},
		{"pool", required_argument, NULL, 'p'},
		{"rows", required_argument, NULL, 'r'},
		{"interval-ms", required_argument, NULL, 'i'},
		{"pause-before-commit-ms", required_argument, NULL, 'P'},
		{"pause-at-row", required_argument, NULL, 'k'},
		{NULL, 0, NULL, 0}
	};
	const char *params[2];
	struct sigaction sa;
	PGconn	   *control;
	PGconn	   *pool[MAX_POOL];
	PGresult   *res;
	long long	epoch;
	int64_t		renew_every;
	int64_t		next_renew;
	char		token[200];
	char	   *token_literal;
	char	   *table_ident;
	char		insert_sql[300];
	long long	seq;
	int			opt;
	int			i;

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
			case 'T':
				table = optarg;
				break;
			case 'p':
				pool_size = atoi(optarg);
				break;
			case 'r':
				rows = atoll(optarg);
				break;
			case 'i':
				interval_ms = atoi(optarg);
				break;
			case 'P':
				pause_ms = atoi(optarg);
				break;
			case 'k':
				pause_at_row = atoll(optarg);
				break;
			default:
				usage();
		}
	}
	if (optind < argc)
		conninfo = argv[optind++];
	if (optind < argc || pool_size < 1 || pool_size > MAX_POOL || rows < 0 ||
		interval_ms < 0 || pause_ms < 0 || pause_at_row < 0)
		usage();

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;	/* no SA_RESTART: signals cut sleeps short */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_resume;
	sigaction(SIGUSR1, &sa, NULL);

	/* refuse to start if another writer holds the lease */
	control = connect_db();
	params[0] = lease;
	params[1] = holder;
	res = PQexecParams(control,
					   "SELECT tenure.acquire_or_error($1, $2, session_bound => true)",
					   2, NULL, params, NULL, NULL, 0);
	if (failed(res))
	{
		bool		held = strcmp(sqlstate(res), "TN001") == 0;

		say("%s: %s", held ? "refusing to start" : "cannot acquire the lease",
			message(control, res));
		return held ? EXIT_HELD : 1;
	}
	epoch = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);

	res = must(control, "SELECT (extract(epoch FROM ttl) * 1000)::bigint"
			   " FROM tenure.leases WHERE lease = $1", 1, params);
	renew_every = atoll(PQgetvalue(res, 0, 0)) / 3;
	PQclear(res);
	next_renew = mono_ms() + renew_every;

	for (i = 0; i < pool_size; i++)
		pool[i] = connect_db();
	snprintf(token, sizeof(token), "%s=%lld", lease, epoch);
	token_literal = PQescapeLiteral(control, token, strlen(token));
	table_ident = PQescapeIdentifier(control, table, strlen(table));
	if (token_literal == NULL || table_ident == NULL)
	{
		say("%s", message(control, NULL));
		return 1;
	}
	snprintf(insert_sql, sizeof(insert_sql),
			 "INSERT INTO %s (writer, epoch, seq) VALUES ($1, $2, $3)", table_ident);
	say("started epoch=%lld pool=%d", epoch, pool_size);

	for (seq = 1; !stop_requested && (rows == 0 || seq <= rows); seq++)
	{
		if (mono_ms() >= next_renew)
		{
			/* keep the tenure alive; its session is our control connection */
			res = PQexecParams(control, "SELECT tenure.renew($1, $2)", 2, NULL,
							   params, NULL, NULL, 0);
			if (failed(res) || strcmp(PQgetvalue(res, 0, 0), "t") != 0)
			{
				say("lost the lease epoch=%lld: %s", epoch,
					failed(res) ? message(control, res) : "renew returned false");
				return EXIT_FENCED;
			}
			PQclear(res);
			next_renew = mono_ms() + renew_every;
		}

		if (!write_row(pool[(seq - 1) % pool_size], token_literal, insert_sql,
					   epoch, seq))
			break;
		say("wrote row seq=%lld epoch=%lld conn=%lld", seq, epoch,
			(seq - 1) % pool_size + 1);
		if (rows == 0 || seq < rows)
			nap(interval_ms, false);
	}

	/* done: release, so that the next writer needs no hold-off */
	res = must(control, "SELECT tenure.release($1, $2)", 2, params);
	say("stopping; released epoch=%lld", epoch);
	PQclear(res);
	PQfreemem(token_literal);
	PQfreemem(table_ident);
	for (i = 0; i < pool_size; i++)
		PQfinish(pool[i]);
	PQfinish(control);
	return 0;
}
