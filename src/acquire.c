/*-------------------------------------------------------------------------
 *
 * acquire.c
 *		Starting a tenure: reserving the lease in shared memory, waiting
 *		for the keeper to take its advisory lock, waiting for a holder to
 *		go, and issuing the new tenure's epoch.
 *
 * An acquisition runs in four steps:
 *
 * 1. Its entry must be the lease's current one: an entry built from an
 *    older row, or for a lease of the same name that was dropped, is
 *    rebuilt from the latest committed row first (catalog.c).
 * 2. It reserves the lease (tenure_state_reserve()): a PENDING tenure
 *    that nobody else can reserve and that lasts at most the ttl unless
 *    its transaction commits (state.c).  The reservation is remembered by
 *    txn.c before it is made, so that an abort always gives it back.
 *    While someone else holds the lease, it sleeps on the lease table's
 *    condition variable until the holder's tenure ends or expires, or the
 *    wait is over.
 * 3. The keeper takes the lease's advisory lock (keeper.c); the backend
 *    waits for its answer.  A foreign session holding the lock_key ends
 *    the attempt, the reservation given back.
 * 4. The epoch is issued (catalog.c) and the history written; the
 *    reservation then carries the epoch and its transaction, and must
 *    commit within its ttl, counted from the issue (txn.c checks at
 *    PRE_COMMIT): while issuing, perhaps waiting for another transaction
 *    to free the lease's row, it is not taken over.  The new tenure
 *    becomes visible when the transaction commits (src/README, F3).  The
 *    commit is as durable as synchronous_commit makes it; the epoch is
 *    never issued again either way.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"

/* retry interval while a foreign session holds a lease's lock_key */
#define TENURE_FOREIGN_RETRY_MS	50L

/* numbers this backend's acquisitions */
static uint64 tenure_next_token = 0;

/*
 * Wait until the keeper holds the advisory lock of a lease we reserved.
 * Returns false, and the reservation is given back, if a foreign session
 * holds it or the lock table is full (*busy says which).
 */
static bool
tenure_wait_for_lock(const TenureKey *key, uint64 token, TenureBusy *busy)
{
	int64		deadline = tenure_mono_now() + TENURE_KEEPER_WAIT_US;
	TenureLockAnswer answer;

	memset(busy, 0, sizeof(TenureBusy));
	tenure_state_prepare_wait();
	while ((answer = tenure_state_lock_answer(key, token, busy)) == TENURE_LOCK_WAITING)
	{
		if (tenure_mono_now() >= deadline)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("pg_tenure keeper did not answer"),
					 errdetail("The keeper background worker holds the advisory locks of tenures; it is not running or not responding."),
					 errhint("Check the server log and max_worker_processes.")));
		tenure_wake_keeper();
		(void) tenure_state_wait(100);
	}
	tenure_state_cancel_wait();
	return answer == TENURE_LOCK_GRANTED;
}

/*
 * Make sure the transaction of an acquisition we took over (its reservation
 * outlived its ttl) has ended, before we issue our epoch.
 *
 * That transaction issued its epoch with an UPDATE of the lease's row in
 * tenure.lease and holds the row lock until it ends; our own UPDATE of the
 * row would wait for it, and a client idle in its transaction may never
 * end it: the lease would be ours in shared memory, yet nobody could issue
 * an epoch until that client came back.  Nothing short of ending the
 * transaction frees the row (the epoch counter lives in it), and
 * PostgreSQL cannot abort another session's transaction while that
 * session is idle.  So its backend is terminated, as pg_terminate_backend()
 * does: the transaction could not commit anyway (its PRE_COMMIT check
 * fails), so only its session is lost.  Like pg_terminate_backend(), only
 * a superuser terminates a superuser's backend.  If we may not, or the
 * transaction does not end within TENURE_KEEPER_WAIT_US, we fail with
 * 55P03 and our reservation is given back.  Its history rows are freed
 * with it, so the history statements that follow never wait for it.
 */
static void
tenure_end_abandoned(const char *name, const TenureAbandoned *abandoned)
{
	int64		deadline = tenure_mono_now() + TENURE_KEEPER_WAIT_US;
	bool		signalled = false;

	if (!TransactionIdIsValid(abandoned->xid))
		return;					/* it had issued nothing: nothing is locked */

	while (TransactionIdIsInProgress(abandoned->xid))
	{
		if (!signalled)
		{
			PGPROC	   *proc = BackendPidGetProc(abandoned->pid);

			if (proc != NULL && proc->xid == abandoned->xid)
			{
				if (superuser_arg(proc->roleId) && !superuser())
					ereport(ERROR,
							(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
							 errmsg("lease \"%s\" is locked by an expired acquisition", name),
							 errdetail("The transaction of superuser backend %d acquired the lease and has neither committed nor rolled back.",
									   abandoned->pid),
							 errhint("End that transaction, or set idle_in_transaction_session_timeout.")));
				ereport(LOG,
						(errmsg("terminating backend %d for an expired acquisition of lease \"%s\"",
								abandoned->pid, name),
						 errdetail("Its transaction did not commit within the lease's ttl and holds the lease's row lock, which the new holder needs.")));
#ifdef HAVE_SETSID
				(void) kill(-abandoned->pid, SIGTERM);
#else
				(void) kill(abandoned->pid, SIGTERM);
#endif
			}
			signalled = true;
		}
		if (tenure_mono_now() >= deadline)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("lease \"%s\" is locked by an expired acquisition", name),
					 errdetail("The transaction of backend %d acquired the lease and has not ended.",
							   abandoned->pid),
					 errhint("End that transaction, or set idle_in_transaction_session_timeout.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10L, TENURE_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Start a tenure of the lease for holder, waiting at most wait_us for
 * someone else's to end, or renew holder's own.  Returns the epoch, with
 * *started set for a new tenure, or 0 if the lease is held by someone
 * else (*busy says by whom).  The caller checked that this is a primary.
 */
int64
tenure_acquire_tenure(const char *name, const char *holder, int64 wait_us,
					  bool session_bound, TenureBusy *busy, bool *started)
{
	TenureSpi	spi;
	TenureRow	row;
	TenureRow	latest;
	TenureKey	key;
	TenureAbandoned abandoned;
	int64		epoch = 0;
	int64		deadline;
	uint64		token = ((uint64) MyProcPid << 32) | (uint32) ++tenure_next_token;
	bool		reserved = false;
	bool		stale;
	bool		exists = true;
	bool		open_at_shutdown = false;
	bool		waiting = false;
	TransactionId xid;

	*started = false;
	tenure_make_key(&key, MyDatabaseId, name);
	tenure_spi_begin(&spi);
	tenure_load_row(name, &row, false);
	tenure_check_owner(name, row.owner, spi.save_userid);
	stale = tenure_state_stale(&key, row.id);
	if (stale)
		exists = tenure_load_committed(name, &latest, true, &open_at_shutdown);
	tenure_spi_end(&spi);

	if (stale)
	{
		/* the entry follows the catalog, whatever our snapshot says */
		if (exists)
			tenure_load_entry(&key, &latest, open_at_shutdown);
		if (!exists || latest.id != row.id)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("lease \"%s\" was dropped and created again concurrently", name),
					 errhint("Retry the transaction.")));
	}
	if (session_bound)
		tenure_register_session_exit();

	/* remembered before reserving, so that an abort always gives it back */
	tenure_txn_remember(TENURE_ACT_ACQUIRE, &key, 0, token);
	memset(&abandoned, 0, sizeof(abandoned));

	/*
	 * Be on the condition variable's wait list before looking at the lease,
	 * so that a release between our look and our sleep still wakes us.
	 * (tenure_wait_for_lock cancels it; the next sleep then only prepares
	 * again and returns at once, and we look again.)
	 */
	deadline = tenure_mono_now() + wait_us;
	if (wait_us > 0)
		tenure_state_prepare_wait();
	for (;;)
	{
		TenureReserveResult r;
		int64		now;
		long		sleep_ms;

		r = tenure_state_reserve(&key, holder, session_bound, token,
								 &epoch, busy, &abandoned);
		if (r == TENURE_RESERVE_NO_ENTRY)
		{
			/* its slot went to another lease meanwhile */
			tenure_ensure_entry(name, &key);
			continue;
		}
		if (r == TENURE_RESERVE_DROPPED)
		{
			/* dropped under us: the caller's transaction is about to see it */
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("lease \"%s\" does not exist", name),
					 errhint("Create it with tenure.create_lease().")));
		}
		if (r == TENURE_RESERVE_RENEWED)
			break;
		if (r == TENURE_RESERVE_RESERVED)
		{
			reserved = tenure_wait_for_lock(&key, token, busy);
			/* it left the wait list: rejoin before looking again */
			if (wait_us > 0)
				tenure_state_prepare_wait();
			if (reserved)
				break;
		}
		if (busy->no_memory)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of shared memory for the advisory lock of lease \"%s\"", name),
					 errdetail("The keeper holds one lock per live tenure in the shared lock table, which is full."),
					 errhint("Increase max_locks_per_transaction and restart the server.")));

		now = tenure_mono_now();
		if (now >= deadline)
		{
			/*
			 * Leave the waiters, unless a handoff() to us is committing:
			 * then wait for its COMMIT or abort, which wakes us.
			 */
			if (!waiting || tenure_state_stop_waiting())
			{
				waiting = false;
				break;			/* held by someone else */
			}
			deadline = now + USECS_PER_SEC;
		}

		/* sleep until woken, the holder's expiry, or the deadline */
		sleep_ms = (long) ((deadline - now + 999) / 1000);
		if (busy->foreign)
			sleep_ms = Min(sleep_ms, TENURE_FOREIGN_RETRY_MS);
		else if (busy->until_mono > now)
			sleep_ms = Min(sleep_ms, (long) ((busy->until_mono - now + 999) / 1000));
		if (!waiting)
		{
			/* counted in tenure.lease_stats until we stop */
			tenure_state_waiting(&key, holder, session_bound);
			waiting = true;
		}
		(void) tenure_state_wait(sleep_ms);
		CHECK_FOR_INTERRUPTS();
	}
	if (wait_us > 0)
		tenure_state_cancel_wait();
	if (waiting)
		tenure_state_waiting(NULL, NULL, false);
	if (!reserved)
		return epoch;			/* the renewed tenure's, or 0 */

	/*
	 * Reserved, and the keeper holds the lock: issue the epoch.  Whatever
	 * transaction we wait for meanwhile (an abandoned acquisition, or a
	 * late claim, handoff or other change of the lease's row), our
	 * reservation is not taken over, and its ttl counts from the issue on
	 * (state.c; src/README, F10).
	 */
	if (!tenure_state_issuing(&key, token))
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("acquisition of lease \"%s\" expired before its transaction committed", name),
				 errdetail("Another holder took the lease over before its epoch was issued.")));
	tenure_end_abandoned(name, &abandoned);
	tenure_spi_begin(&spi);
	epoch = tenure_issue_epoch(name, tenure_state_cached_epoch(&key));

	tenure_history_close(name, &key);
	tenure_history_start(name, epoch, holder, session_bound);
	tenure_spi_end(&spi);

	/*
	 * Our reservation may have outlived its ttl meanwhile and been taken
	 * over; then its new holder waits for our row lock, so fail now.
	 */
	xid = GetTopTransactionIdIfAny();
	if (!tenure_state_issued(&key, token, epoch, xid))
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("acquisition of lease \"%s\" expired before its transaction committed", name),
				 errdetail("Another holder took the lease over while its epoch was being issued.")));
	tenure_txn_issued(token, epoch);
	*started = true;

	/*
	 * The transaction commits as synchronous_commit says: a crash may lose
	 * it under "off", but never makes its epoch reappear (catalog.c,
	 * tenure_issue_epoch()).
	 */
	return epoch;
}

