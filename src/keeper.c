/*-------------------------------------------------------------------------
 *
 * keeper.c
 *		The keeper: one background worker that holds a session advisory lock
 *		for every live tenure, in the tenure's database, and ends tenures
 *		whose ttl has passed.
 *
 * The keeper connects to no database: the lock manager does not check a
 * lock tag's database, so one process can hold advisory locks "in" every
 * database, and pg_locks shows them there under the keeper's pid.
 *
 * Backends ask for a lock by reserving a lease (tenure_state_reserve()),
 * which marks its entry as wanting the lock and sets the keeper's latch;
 * the keeper's pass (tenure_state_keeper_pass()) answers by taking the
 * lock or marking the request failed (telling a full shared lock table
 * from a foreign session in the way) and broadcasting the condition
 * variable.  All lock calls are conditional, made while holding the
 * tenure LWLock (see state.c).  This file runs the process: signals,
 * error recovery, the wait between passes and the log.
 *
 * When the keeper exits, its locks go with it.  It comes back after
 * bgw_restart_time, takes the locks of live tenures again, and ends as
 * revoked every tenure whose lock a foreign session took meanwhile.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"
#include "state.h"
#include "history.h"
#include "keeper.h"
#include "promotion.h"

/* longest sleep of the keeper when nothing expires sooner */
#define TENURE_KEEPER_IDLE_MS	10000L

/* how long before a history writer run that could not start is retried */
#define TENURE_HISTORY_RETRY_US	((int64) USECS_PER_SEC)

/* the running history writer (history.c), if any */
static BackgroundWorkerHandle *tenure_history_worker = NULL;

/*
 * Start the history writer when it has work due and is not running (one
 * run at a time); returns how long the keeper may sleep before it must
 * look again, at most "timeout".  A run's exit sets our latch.
 */
static long
tenure_keeper_history(long timeout)
{
	int64		now = tenure_mono_now();
	Oid			dbid;
	Oid			after;
	int64		due;

	if (tenure_history_worker != NULL)
	{
		pid_t		pid;

		if (GetBackgroundWorkerPid(tenure_history_worker, &pid) != BGWH_STOPPED)
			return timeout;
		pfree(tenure_history_worker);
		tenure_history_worker = NULL;
	}
	if (tenure_state_history_job(now, &dbid, &after, &due))
	{
		tenure_history_worker = tenure_history_launch(dbid, after);
		if (tenure_history_worker == NULL)
		{
			/* no free worker slot: later */
			tenure_state_history_retry(dbid, after, now + TENURE_HISTORY_RETRY_US);
			return Min(timeout, (long) (TENURE_HISTORY_RETRY_US / 1000));
		}
		return timeout;
	}
	if (due != 0)
		timeout = Min(timeout, (long) ((due - now + 999) / 1000));
	return timeout;
}

/*
 * Register the keeper; called from _PG_init.
 */
void
tenure_register_keeper(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "pg_tenure", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "tenure_keeper_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "pg_tenure keeper", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "pg_tenure keeper", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

/*
 * before_shmem_exit callback, run before our session locks are released
 * (see tenure_state_keeper_exit()).  Shared memory only; cannot fail
 * (src/README, F8).
 */
static void
tenure_keeper_exit(int code, Datum arg)
{
	tenure_state_keeper_exit();
}

/*
 * One pass over the lease table (tenure_state_keeper_pass()), and the log
 * of the tenures it revoked, written outside the LWLock.  Returns how long
 * the keeper may sleep, in milliseconds.
 */
static long
tenure_keeper_pass(void)
{
	int64		now = tenure_mono_now();
	int64		next;
	TenureRevoked revoked[16];
	int			nrevoked;
	int			i;

	next = tenure_state_keeper_pass(now, now + TENURE_KEEPER_IDLE_MS * 1000,
									revoked, lengthof(revoked), &nrevoked);

	for (i = 0; i < Min(nrevoked, (int) lengthof(revoked)); i++)
		ereport(LOG,
				(errmsg("tenure of lease \"%s\" at epoch " INT64_FORMAT " revoked",
						revoked[i].key.name, revoked[i].epoch),
				 errdetail("Another session took the lease's advisory lock while the pg_tenure keeper was not running.")));
	if (nrevoked > (int) lengthof(revoked))
		ereport(LOG,
				(errmsg_plural("%d more tenure revoked",
							   "%d more tenures revoked",
							   nrevoked - (int) lengthof(revoked),
							   nrevoked - (int) lengthof(revoked))));

	/* round up so that we wake after, not just before, an expiry */
	return (long) ((next - now + 999) / 1000);
}

/*
 * As the keeper exits on SIGTERM (at a clean shutdown, before the shutdown
 * checkpoint; or terminated while the server runs), write to the WAL the
 * tenures live in shared memory, each with how long it has to live, so
 * that a promotion that continues them leaves out those that ended here
 * (src/README, P5): the live entries, and the tenures that this server's
 * own promotion continued, that no backend has loaded since and whose ttl
 * from this server's ready time has not passed; and how long a primary
 * this server replaced without the proof may still serve (P3).
 */
static void
tenure_keeper_log_live(void)
{
	int64		now = tenure_mono_now();
	int64		ready;
	TenureTenureOf *known;
	TenureLive *carried;
	TenureLive *live;
	int			nknown;
	int			ncarried;
	int			n = 0;
	int			i;

	if (RecoveryInProgress())
		return;
	known = tenure_state_tenures(now, &ready, &nknown);
	carried = tenure_promotion_carried(&ncarried);
	live = palloc(sizeof(TenureLive) * Max(nknown + ncarried, 1));
	qsort(known, nknown, sizeof(TenureTenureOf), tenure_promotion_live_cmp);
	for (i = 0; i < nknown; i++)
		if (known[i].live)
			live[n++] = known[i].tenure;
	for (i = 0; i < ncarried; i++)
	{
		TenureTenureOf key;

		key.tenure = carried[i];
		if (ready + carried[i].ttl_us > now &&
			bsearch(&key, known, nknown, sizeof(TenureTenureOf),
					tenure_promotion_live_cmp) == NULL)
		{
			live[n] = carried[i];
			live[n].remaining_us = ready + carried[i].ttl_us - now;
			n++;
		}
	}
	tenure_promotion_log_live(live, n,
							  tenure_promotion_demotion_left(ready, now));
	ereport(LOG,
			(errmsg_plural("pg_tenure keeper exiting with %d live tenure",
						   "pg_tenure keeper exiting with %d live tenures",
						   n, n)));
}

/*
 * Entry point of the keeper.
 *//*
 * Entry point of the keeper.
 */
void
tenure_keeper_main(Datum arg)
{
	sigjmp_buf	local_sigjmp_buf;
	MemoryContext keeper_context;
	long		timeout = 0;
	volatile bool logged_live = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* no database: the keeper only holds locks */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	tenure_require_loaded();

	keeper_context = AllocSetContextCreate(TopMemoryContext,
										   "pg_tenure keeper",
										   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(keeper_context);

	/*
	 * What a promotion kept is known before the server is ready to hold
	 * tenures: loading a lease's entry needs it (promotion.c).
	 */
	tenure_promotion_examine();
	/* whatever locks an earlier keeper held died with it */
	tenure_state_keeper_start();
	before_shmem_exit(tenure_keeper_exit, (Datum) 0);

	/*
	 * Survive our own errors, and a cancel (pg_cancel_backend() of the
	 * keeper raises one at the next CHECK_FOR_INTERRUPTS): report, clean
	 * up, and go on.  Losing the process would drop every lease lock at
	 * once; session locks survive an error.  test/t/025_keeper_error.pl
	 * takes this path.
	 */
	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
	{
		/* not in PG_TRY: reset the error context stack by hand */
		error_context_stack = NULL;
		HOLD_INTERRUPTS();
		EmitErrorReport();
		LWLockReleaseAll();
		pgstat_report_wait_end();
		ConditionVariableCancelSleep();
		/* forget table scans the error interrupted */
		AtEOXact_HashTables(false);
		MemoryContextSwitchTo(keeper_context);
		FlushErrorState();
		MemoryContextReset(keeper_context);
		RESUME_INTERRUPTS();
		/* do not spin on a persistent error */
		(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000L,
						 TENURE_WAIT_EVENT);
	}
	PG_exception_stack = &local_sigjmp_buf;

	for (;;)
	{
		/*
		 * SIGTERM: the list of live tenures first, once (if writing it
		 * fails, the error brings us back here and we exit without it).
		 */
		if (ProcDiePending && !logged_live)
		{
			logged_live = true;
			HOLD_INTERRUPTS();
			tenure_keeper_log_live();
			RESUME_INTERRUPTS();
		}
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		timeout = tenure_keeper_pass();
		timeout = tenure_keeper_history(timeout);

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, TENURE_WAIT_EVENT);
		ResetLatch(MyLatch);
	}
}
