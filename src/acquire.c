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
 *    wait is over.  Another backend's reservation that outlived its ttl
 *    is taken over, after its transaction ended if it issued its epoch
 *    (tenure_end_abandoned(): it terminates that backend where
 *    pg_terminate_backend() would let the caller, or fails at once).
 * 3. The keeper takes the lease's advisory lock (keeper.c); the backend
 *    waits for its answer.  A foreign session holding the lock_key ends
 *    the attempt, the reservation given back.
 * 4. The epoch is issued (epoch.c) and the history written; the
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
#include "commands/dbcommands.h"
#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/acl.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"
#include "state.h"
#include "txn.h"
#include "catalog.h"
#include "epoch.h"
#include "history.h"
#include "acquire.h"

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
 * Whether the current user may terminate the backend of proc, by the rules
 * of pg_terminate_backend() (PostgreSQL's pg_signal_backend(), which is
 * static): a backend that belongs to a superuser or advertises no role
 * only if the current user is a superuser (but see
 * tenure_signal_exception_role()), any other if the current user has the
 * privileges of its role or of pg_signal_backend.  The current user is
 * GetUserId(), as pg_terminate_backend() called in its place would see it:
 * the owner of a SECURITY DEFINER function that calls acquire, the role
 * of SET ROLE.  *needed is the predefined role whose privileges were
 * missing for TENURE_TERMINATE_EXCEPTION.
 */
typedef enum TenureTerminateRight
{
	TENURE_TERMINATE_ALLOWED,
	TENURE_TERMINATE_SUPERUSER, /* a superuser's or roleless backend */
	TENURE_TERMINATE_EXCEPTION, /* ... that a predefined role may signal */
	TENURE_TERMINATE_ROLE		/* another role's backend */
} TenureTerminateRight;

static TenureTerminateRight
tenure_may_terminate(PGPROC *proc, Oid *needed)
{
	Oid			role = proc->roleId;

	*needed = InvalidOid;
	if (!OidIsValid(role) || superuser_arg(role))
	{
		*needed = tenure_signal_exception_role(proc);
		if (OidIsValid(*needed))
			return has_privs_of_role(GetUserId(), *needed) ?
				TENURE_TERMINATE_ALLOWED : TENURE_TERMINATE_EXCEPTION;
		return superuser() ? TENURE_TERMINATE_ALLOWED : TENURE_TERMINATE_SUPERUSER;
	}
	if (has_privs_of_role(GetUserId(), role) ||
		has_privs_of_role(GetUserId(), ROLE_PG_SIGNAL_BACKEND))
		return TENURE_TERMINATE_ALLOWED;
	return TENURE_TERMINATE_ROLE;
}

/*
 * Where tenure_end_abandoned() is with the transaction it is ending.
 */
typedef struct TenureEnding
{
	TransactionId xid;			/* signalled (or found gone), if valid */
	int64		deadline;		/* it must have ended by then */
} TenureEnding;

/*
 * Another backend's acquisition of the lease outlived its ttl after it
 * had issued its epoch (tenure_state_reserve() said so).  Returns its
 * token once its transaction has ended: the caller may then take its
 * reservation over.  Until then returns 0 after a short sleep, and the
 * caller looks again.
 *
 * That transaction issued its epoch with an UPDATE of the lease's row in
 * tenure.lease and holds the row lock until it ends; our own UPDATE of the
 * row would wait for it, and a client idle in its transaction may never
 * end it.  Nothing short of ending the transaction frees the row (the
 * epoch counter lives in it), and PostgreSQL cannot abort another
 * session's transaction while that session is idle.  So its backend is
 * terminated, as pg_terminate_backend() would terminate it for the current
 * user, and only where it would (tenure_may_terminate()): the transaction
 * could not commit anyway (its PRE_COMMIT check fails), so only its
 * session is lost.  Where the current user may not, we fail at once with
 * 55P03 naming the backend, whether or not the call was to wait; if the
 * transaction does not end within TENURE_KEEPER_WAIT_US, we fail with
 * 55P03 too.  Either way the expired reservation stays as it is: every
 * later acquirer finds it again and decides for itself, and none of them
 * ever waits for the row lock.  Its history rows are freed with it, so
 * the history statements that follow never wait for it.
 */
static uint64
tenure_end_abandoned(const char *name, const TenureAbandoned *abandoned,
					 TenureEnding *ending)
{
	if (!TransactionIdIsInProgress(abandoned->xid))
		return abandoned->token;

	if (ending->xid != abandoned->xid)
	{
		PGPROC	   *proc = BackendPidGetProc(abandoned->pid);
		Oid			needed;

		ending->xid = abandoned->xid;
		ending->deadline = tenure_mono_now() + TENURE_KEEPER_WAIT_US;
		/* not found: its backend is exiting, which ends the transaction */
		if (proc != NULL && proc->xid == abandoned->xid)
		{
			switch (tenure_may_terminate(proc, &needed))
			{
				case TENURE_TERMINATE_ALLOWED:
					break;
				case TENURE_TERMINATE_SUPERUSER:
					ereport(ERROR,
							(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
							 errmsg("lease \"%s\" is locked by an expired acquisition of backend %d",
									name, abandoned->pid),
							 errdetail("Its transaction has neither committed nor rolled back. Only roles with the %s attribute may terminate backends of roles with the %s attribute.",
									   "SUPERUSER", "SUPERUSER"),
							 errhint("End that transaction, or set idle_in_transaction_session_timeout.")));
					break;
				case TENURE_TERMINATE_EXCEPTION:
					ereport(ERROR,
							(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
							 errmsg("lease \"%s\" is locked by an expired acquisition of backend %d",
									name, abandoned->pid),
							 errdetail("Its transaction has neither committed nor rolled back. Only roles with privileges of the \"%s\" role may terminate that backend.",
									   GetUserNameFromId(needed, false)),
							 errhint("End that transaction, or set idle_in_transaction_session_timeout.")));
					break;
				case TENURE_TERMINATE_ROLE:
					ereport(ERROR,
							(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
							 errmsg("lease \"%s\" is locked by an expired acquisition of backend %d",
									name, abandoned->pid),
							 errdetail("Its transaction has neither committed nor rolled back. Only roles with privileges of the role of that backend or of the \"%s\" role may terminate it.",
									   "pg_signal_backend"),
							 errhint("End that transaction, or set idle_in_transaction_session_timeout.")));
					break;
			}
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
	}
	else if (tenure_mono_now() >= ending->deadline)
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("lease \"%s\" is locked by an expired acquisition of backend %d",
						name, abandoned->pid),
				 errdetail("Its transaction has not ended within %d seconds.",
						   (int) (TENURE_KEEPER_WAIT_US / USECS_PER_SEC)),
				 errhint("End that transaction, or set idle_in_transaction_session_timeout.")));

	/* its end gives the reservation back, which wakes us */
	(void) tenure_state_wait(10L);
	CHECK_FOR_INTERRUPTS();
	return 0;
}

/*
 * Raise the error of a share of lease slots that is used up (r says whose).
 */
static void
tenure_share_used_up(TenureReserveResult r, int limit)
{
	if (r == TENURE_RESERVE_ROLE_SHARE)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("role \"%s\" holds its share of lease slots",
						GetUserNameFromId(GetUserId(), false)),
				 errdetail_plural("A role may hold at most %d tenure at a time (tenure.role_share = %d%% of tenure.max_leases = %d).",
								  "A role may hold at most %d tenures at a time (tenure.role_share = %d%% of tenure.max_leases = %d).",
								  limit, limit,
								  tenure_role_share, tenure_max_leases),
				 errhint("Release tenures the role no longer needs, or raise tenure.role_share.")));
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("database \"%s\" holds its share of lease slots",
					get_database_name(MyDatabaseId)),
			 errdetail_plural("A database may hold at most %d tenure at a time (tenure.database_share = %d%% of tenure.max_leases = %d).",
							  "A database may hold at most %d tenures at a time (tenure.database_share = %d%% of tenure.max_leases = %d).",
							  limit, limit,
							  tenure_database_share, tenure_max_leases),
			 errhint("Release tenures the database no longer needs, or raise tenure.database_share.")));
}

/*
 * Check the caller's rights on the lease, and bring its shared entry up to
 * its committed row if the entry is stale.
 */
static void
tenure_acquire_entry(const char *name, const TenureKey *key)
{
	TenureSpi	spi;
	TenureRow	row;
	TenureRow	latest;
	TenureCarry carry;
	bool		exists;

	tenure_load_row(name, &row, false);
	tenure_check_owner(name, row.owner, GetUserId());
	if (!tenure_state_stale(key, row.id))
		return;
	tenure_spi_begin(&spi);
	exists = tenure_load_committed(name, &latest, true, &carry);
	tenure_spi_end(&spi);

	/* the entry follows the catalog, whatever our snapshot says */
	if (exists)
		tenure_load_entry(key, &latest, &carry);
	if (!exists || latest.id != row.id)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("lease \"%s\" was dropped and created again concurrently", name),
				 errhint("Retry the transaction.")));
}

/*
 * Reserved, and the keeper holds the lock: issue the epoch and write the
 * history.  Returns the epoch with *started set, or 0 if the lease's row
 * is locked and the caller does not wait (busy says so).
 */
static int64
tenure_acquire_issue(const char *name, const char *holder,
					 const TenureKey *key, uint64 token, bool session_bound,
					 bool nowait, TenureBusy *busy, bool *started)
{
	int64		epoch;
	bool		locked = false;
	TransactionId xid;

	/*
	 * Reserved, and the keeper holds the lock: issue the epoch.  Whatever
	 * transaction we wait for meanwhile (an abandoned acquisition, or a
	 * late claim, handoff or other change of the lease's row), our
	 * reservation is not taken over, and its ttl counts from the issue on
	 * (state.c; src/README, F10).
	 */
	if (!tenure_state_issuing(key, token))
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("acquisition of lease \"%s\" expired before its transaction committed", name),
				 errdetail("Another holder took the lease over before its epoch was issued.")));
	epoch = tenure_issue_epoch(name, tenure_state_cached_epoch(key),
							   nowait ? &locked : NULL);
	if (locked)
	{
		/*
		 * A call that does not wait never waits for a row lock either: a
		 * transaction that changes the lease (a claim, release, handoff,
		 * drop or alter, perhaps idle) holds its row, and the lease is
		 * busy.  Give the reservation back.
		 */
		tenure_state_begin_update();
		(void) tenure_state_cancel(key, token);
		tenure_state_end_update(true);
		tenure_txn_forget_acquire(token);
		memset(busy, 0, sizeof(TenureBusy));
		busy->row_locked = true;
		return 0;
	}

	/*
	 * tenure_issue_epoch() waited until a claim of the tenure before is
	 * published: its end covers the claim.
	 */
	tenure_history_close(name, key);
	tenure_history_start(name, epoch, holder, session_bound);

	/*
	 * Our reservation may have outlived its ttl meanwhile and been taken
	 * over; then its new holder waits for our row lock, so fail now.
	 */
	xid = GetTopTransactionIdIfAny();
	if (!tenure_state_issued(key, token, epoch, xid))
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("acquisition of lease \"%s\" expired before its transaction committed", name),
				 errdetail("Another holder took the lease over while its epoch was being issued.")));
	tenure_txn_issued(token, epoch);
	*started = true;

	/*
	 * The transaction commits as synchronous_commit says: a crash may lose
	 * it under "off", but never makes its epoch reappear (src/README,
	 * "Issuing epochs").
	 */
	return epoch;
}

/*
 * Start a tenure of the lease for holder, waiting at most wait_us for
 * someone else's to end, or renew holder's own.  Returns the epoch, with
 * *started set for a new tenure, or 0 if the lease is held by someone
 * else (*busy says by whom).  The caller checked that this is a primary.
 */
int64
tenure_acquire_lease(const char *name, const char *holder, int64 wait_us,
					 bool session_bound, TenureBusy *busy, bool *started)
{
	TenureKey	key;
	TenureAbandoned abandoned;
	TenureEnding ending;
	uint64		takeover = 0;
	int64		epoch = 0;
	int64		deadline;
	uint64		token = ((uint64) MyProcPid << 32) | (uint32) ++tenure_next_token;
	bool		reserved = false;
	bool		waiting = false;
	Oid			share_role;

	*started = false;
	memset(busy, 0, sizeof(TenureBusy));
	/* a superuser's tenures count, but no role share limits them */
	share_role = superuser() ? InvalidOid : GetUserId();
	tenure_make_key(&key, MyDatabaseId, name);
	tenure_acquire_entry(name, &key);
	if (session_bound)
		tenure_register_session_exit();

	/* remembered before reserving, so that an abort always gives it back */
	tenure_txn_remember(TENURE_ACT_ACQUIRE, &key, 0, token);
	memset(&ending, 0, sizeof(ending));

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

		r = tenure_state_reserve(&key, holder, session_bound, share_role,
								 token, takeover, &epoch, busy, &abandoned);
		if (r == TENURE_RESERVE_ROLE_SHARE || r == TENURE_RESERVE_DATABASE_SHARE)
			tenure_share_used_up(r, busy->share_limit);
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
		if (r == TENURE_RESERVE_ABANDONED)
		{
			/* an expired acquisition holds the row lock: end it first */
			takeover = tenure_end_abandoned(name, &abandoned, &ending);
			continue;
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
			if (!waiting || tenure_state_stop_waiting(true))
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
	/* (tenure_end_abandoned may have slept on it even if we did not wait) */
	tenure_state_cancel_wait();
	if (waiting)
		(void) tenure_state_stop_waiting(false);
	if (!reserved)
	{
		/* nothing to publish or give back: remember nothing of this call */
		tenure_txn_forget_acquire(token);
		return epoch;			/* the renewed tenure's, or 0 */
	}

	return tenure_acquire_issue(name, holder, &key, token, session_bound,
								wait_us == 0, busy, started);
}

