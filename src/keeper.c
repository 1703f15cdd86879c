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
 * Backends ask for a lock by setting lock_wanted on an entry and setting
 * the keeper's latch; the keeper answers by setting lock_held or
 * lock_failed (with lock_no_memory when the shared lock table is full
 * rather than a foreign session in the way) and broadcasting the condition
 * variable.  All lock calls are
 * conditional, made while holding the tenure LWLock (see state.c).
 *
 * When the keeper exits, its locks go with it.  It comes back after
 * bgw_restart_time, takes the locks of live tenures again, and ends as
 * revoked every tenure whose lock a foreign session took meanwhile.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"

/* longest sleep of the keeper when nothing expires sooner */
#define TENURE_KEEPER_IDLE_MS	10000L

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
 * before_shmem_exit callback, run before our session locks are released:
 * say that we hold no lock any more (leader_is then answers false for
 * lock_key tenures until a new keeper has their locks again) and stop
 * backends from setting our latch.  Shared memory only; cannot fail.
 */
static void
tenure_keeper_exit(int code, Datum arg)
{
	HASH_SEQ_STATUS scan;
	TenureLease *lease;

	if (tenure_shared == NULL)
		return;
	if (LWLockHeldByMe(tenure_shared->lock))
		LWLockRelease(tenure_shared->lock);
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&scan, tenure_leases);
	while ((lease = hash_seq_search(&scan)) != NULL)
		lease->lock_held = false;
	if (tenure_shared->keeper_pid == MyProcPid)
	{
		tenure_shared->keeper_pid = 0;
		tenure_shared->keeper_latch = NULL;
	}
	LWLockRelease(tenure_shared->lock);
	ConditionVariableBroadcast(&tenure_shared->cv);
}

/*
 * Whether the shared lock table is full: a lock on a tag nobody else ever
 * uses cannot be had either.  Distinguishes a full table from a foreign
 * holder after a conditional lock failed.
 */
static bool
tenure_keeper_table_full(void)
{
	LOCKTAG		probe;

	SET_LOCKTAG_ADVISORY(probe, InvalidOid, 0, (uint32) MyProcPid,
						 TENURE_PROBE_LOCK_FIELD4);
	if (tenure_lock_try(&probe, ExclusiveLock, true) == LOCKACQUIRE_NOT_AVAIL)
		return true;
	LockRelease(&probe, ExclusiveLock, true);
	return false;
}

/*
 * One pass over the lease table: end expired tenures, release locks nobody
 * wants, take wanted ones.  (Entries of dropped leases stay until their
 * slot is needed: they remember the name's latest epoch, see state.c.)
 * Returns how long the
 * keeper may sleep, in milliseconds.
 */
static long
tenure_keeper_pass(void)
{
	HASH_SEQ_STATUS scan;
	TenureLease *lease;
	int64		now = tenure_mono_now();
	int64		next = now + TENURE_KEEPER_IDLE_MS * 1000;
	bool		changed = false;
	struct
	{
		TenureKey	key;
		int64		epoch;
	}			revoked[16];
	int			nrevoked = 0;
	int			i;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&scan, tenure_leases);
	while ((lease = hash_seq_search(&scan)) != NULL)
	{
		LOCKTAG		tag;

		if (lease->state == TENURE_HELD)
		{
			int64		expiry = lease->renewed_mono + lease->ttl_us;

			if (now >= expiry)
			{
				tenure_end(lease, TENURE_END_EXPIRED, now);
				changed = true;
			}
			else
				next = Min(next, expiry);
		}

		tenure_lease_tag(lease, &tag);

		if (lease->lock_held &&
			(!lease->lock_wanted || !tenure_lease_tag_held(lease)))
		{
			LockRelease(&lease->held_tag, ExclusiveLock, true);
			lease->lock_held = false;
			changed = true;
		}

		if (lease->lock_wanted && !lease->lock_held && !lease->lock_failed)
		{
			if (tenure_lock_try(&tag, ExclusiveLock, true) != LOCKACQUIRE_NOT_AVAIL)
			{
				lease->lock_held = true;
				lease->held_tag = tag;
			}
			else if (lease->state == TENURE_HELD)
			{
				/* we lost it while we were away: the tenure is over */
				tenure_end(lease, TENURE_END_REVOKED, now);
				if (nrevoked < (int) lengthof(revoked))
				{
					revoked[nrevoked].key = lease->key;
					revoked[nrevoked].epoch = lease->ended_epoch;
				}
				nrevoked++;
			}
			else
			{
				lease->lock_no_memory = tenure_keeper_table_full();
				lease->lock_failed = true;
				lease->lock_wanted = false;
			}
			changed = true;
		}

	}
	LWLockRelease(tenure_shared->lock);

	if (changed)
		ConditionVariableBroadcast(&tenure_shared->cv);

	/* log outside the LWLock */
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
 * Entry point of the keeper.
 */
void
tenure_keeper_main(Datum arg)
{
	sigjmp_buf	local_sigjmp_buf;
	MemoryContext keeper_context;
	HASH_SEQ_STATUS scan;
	TenureLease *lease;
	long		timeout = 0;

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
	 * Whatever locks an earlier keeper held died with it.  Clear the flags
	 * so that the first pass takes the locks of live tenures again.
	 */
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&scan, tenure_leases);
	while ((lease = hash_seq_search(&scan)) != NULL)
	{
		lease->lock_held = false;
		lease->lock_failed = false;
	}
	tenure_shared->keeper_pid = MyProcPid;
	tenure_shared->keeper_latch = MyLatch;
	if (tenure_shared->keeper_starts++ == 0)
	{
		/* the server can hold tenures from now on (startup or promotion) */
		tenure_shared->ready_time = GetCurrentTimestamp();
		tenure_shared->ready_mono = tenure_mono_now();
	}
	LWLockRelease(tenure_shared->lock);
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
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		timeout = tenure_keeper_pass();

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, TENURE_WAIT_EVENT);
		ResetLatch(MyLatch);
	}
}
