/*-------------------------------------------------------------------------
 *
 * state.c
 *		pg_tenure's shared state: the lease table and its lock protocol, and
 *		the end of session-bound tenures when their backend exits.
 *
 * This file is the core of the state module, the only code that reads or
 * changes the lease table: state.c (the table, its entries, the lock
 * protocol, the readers and writers), state_wait.c (the waiters and the
 * hand-off), state_keeper.c (the keeper's pass) and state_notify.c (the
 * LISTEN/NOTIFY handshake), which share state_internal.h and which no
 * other file includes.  Other files call the module's verbs: readers copy
 * what they need under the LWLock in shared mode, writers change an entry
 * under it in exclusive mode; renew changes only the renewal time, an
 * atomic, under it in shared mode.  No pointer to an entry leaves the
 * module.
 *
 * INTERFACE ROUTINES, by the lock mode they take (the files of the module
 * other than this one are named)
 *
 *	no LWLock:
 *		tenure_shmem_size(), tenure_shmem_init()	(under AddinShmemInitLock)
 *		tenure_state_attached(), tenure_require_loaded(),
 *		tenure_require_primary(), tenure_mono_now(), tenure_mono_to_wall(),
 *		tenure_make_key()
 *		tenure_boot_id(), tenure_ready_time()	(written once: see below)
 *		tenure_wake_keeper()					(the keeper's latch)
 *		tenure_state_prepare_wait(), tenure_state_wait(),
 *		tenure_state_cancel_wait()				(the condition variable)
 *		tenure_state_settings_gen()				(an atomic)
 *		tenure_state_history_room()				(a constant)
 *		tenure_register_session_exit()
 *		state_notify.c: tenure_state_notify_needed(),
 *		tenure_state_notify_done(), tenure_state_listening()	(atomics)
 *
 *	LWLock in shared mode:
 *		tenure_state_leads(), tenure_state_active(),
 *		tenure_state_held_epoch(), tenure_state_cached_epoch(),
 *		tenure_state_stale(), tenure_state_stats(), tenure_state_watch(),
 *		tenure_state_list(), tenure_state_ended(), tenure_state_reserved(),
 *		tenure_state_history_trim_due(), tenure_state_history_pending()
 *		tenure_state_tenures()					(the keeper, as it exits)
 *		tenure_state_fence(), tenure_state_fence_rejected()
 *												(also count fenced writes,
 *												 atomics)
 *		tenure_state_renew()					(raises an atomic)
 *		tenure_state_await_published()			(and sleeps between looks)
 *		state_wait.c: tenure_state_waiters(), tenure_state_handoff_check()
 *
 *	LWLock in exclusive mode:
 *		tenure_state_load(), tenure_state_reserve(),
 *		tenure_state_lock_answer(), tenure_state_issuing(),
 *		tenure_state_issued()
 *		tenure_state_commit_reservation(), tenure_state_claim_commit(),
 *		tenure_state_alter_pin()				(PRE_COMMIT checks and pins)
 *		tenure_state_stats_reset()
 *		tenure_state_history_job(), tenure_state_history_retry(),
 *		tenure_state_history_add_dbs(), tenure_state_history_written()
 *		the exit of a backend (tenure_register_session_exit())
 *		state_wait.c: tenure_state_waiting(), tenure_state_stop_waiting(),
 *		tenure_state_handoff_commit()
 *		state_keeper.c: tenure_state_keeper_start(),
 *		tenure_state_keeper_exit(), tenure_state_keeper_pass()
 *
 *	under one exclusive hold, from tenure_state_begin_update() to
 *	tenure_state_end_update() (txn.c publishes a transaction's changes):
 *		tenure_state_cancel(), tenure_state_publish_acquire(),
 *		tenure_state_cancel_claim(), tenure_state_publish_claim(),
 *		tenure_state_publish_release(), tenure_state_publish_drop(),
 *		tenure_state_drop_database(), tenure_state_publish_alter(),
 *		tenure_state_cancel_alter()
 *		state_wait.c: tenure_state_publish_handoff(),
 *		tenure_state_cancel_handoff()
 *
 * Shared memory holds one TenureShared struct and a fixed-size hash table
 * of TenureLease entries keyed by (database, lease name), sized by
 * tenure.max_leases, a table of the slots they count against each role's
 * and database's share, a waiter slot per backend (state_wait.c), and
 * the handshake's slots (state_notify.c, its own).
 *
 * Locking protocol:
 *
 * - tenure_shared->lock (our only LWLock) protects the hash table and every
 *   field of every entry, the waiter slots, the share counts and the
 *   keeper_* and history_* fields of TenureShared, except an entry's
 *   renewed_mono, which renew raises under the lock in shared mode with a
 *   compare-and-swap (it only ever grows while a tenure lasts; readers
 *   read it once).  settings_gen is an atomic that only grows, raised
 *   under the lock in exclusive mode and read without it by
 *   tenure_state_settings_gen() (see "Settings" below).  Verbs
 *   that run under a lock their caller took (the publish_* verbs, between
 *   tenure_state_begin_update() and tenure_state_end_update()) and the
 *   static helpers that need it assert that it is held, and in which mode.
 *   boot_id is written once at initialization, ready_time and ready_mono
 *   once by the keeper's first start; backends read them without the lock
 *   only after the keeper answered them.
 * - No ereport(ERROR) and no catalog or table access happens while it is
 *   held, so exit and transaction callbacks can always take it.  Verbs
 *   return what they found; their callers raise the errors.
 * - The keeper takes and releases heavyweight advisory locks while holding
 *   it exclusive (tenure_state_keeper_pass(), state_keeper.c), always with
 *   dontWait; the heavyweight lock manager never calls back into
 *   pg_tenure, so the order "tenure LWLock, then lock partition LWLock" is
 *   the only one that occurs.
 * - Every change of an entry that someone may wait for (a tenure ending, the
 *   keeper answering a lock request) is followed by a broadcast on
 *   tenure_shared->cv after the LWLock is released.  Waiters sleep on it
 *   through tenure_state_prepare_wait() and tenure_state_wait().
 *
 * Field ownership: backends' verbs write the tenure fields and lock_wanted;
 * the keeper's verbs write lock_held, held_tag, lock_failed and
 * lock_no_memory, and clear lock_wanted when a lock cannot be had.  A new
 * reservation or tenure clears lock_failed; rebuilding an entry
 * (tenure_state_load) keeps lock_held and held_tag and queues the entry,
 * so that the keeper lets an earlier lease's lock go.  A lock that no
 * tenure wants any more may linger (TENURE_LOCK_LINGER_US): the next
 * tenure of the lease finds it held and needs no word to the keeper.
 *
 * Entries and slots (tenure_enter_entry): an entry is built from the
 * lease's latest committed row, never from an older snapshot, and an entry
 * of a lease that was dropped (or created again under its name) is never
 * taken for the new lease.  When all tenure.max_leases slots are taken, a
 * new entry replaces one that nobody needs: FREE (no tenure, no pending
 * acquisition), no advisory lock held or wanted, and no hold-off bound
 * (pred_expiry_mono) still in the future, dropped or not, and no
 * alter_lease pinning it.  The replaced entry's lease is
 * rebuilt from its row when it is next used.  What that loses: an end
 * reason and time not yet written to the history (the next tenure of the
 * lease closes the row as "expired", with the time it does so), the
 * transitions counter, and the latest epoch shared memory saw (its row has
 * the same one unless an older dump was restored over it).  Entries of
 * dropped leases (dropped) are kept until their slot is needed, and
 * evicted first: when the name is created again, its next epoch still
 * exceeds the dropped lease's latest, also after DROP EXTENSION and a
 * restore of an older dump, and its first tenure waits out the hold-off
 * bound of the dropped lease's last one (src/README, H1).
 *
 * Settings: an entry takes its settings from a row read by
 * tenure_load_committed() and from the alter_lease transactions that
 * commit afterwards (tenure_state_publish_alter()).  Each such commit
 * raises settings_gen; a load whose row was read before the latest raise
 * is refused (TENURE_LOAD_RETRY) and reads the row again, so a row read
 * before an alter_lease committed never overwrites what it published.
 * alter_lease changes that need a lease nobody uses (a new lock_key, a
 * shorter ttl) pin the entry (altering_pid) from the call until its
 * transaction ends: nobody reserves or evicts it meanwhile.
 *
 * A PENDING reservation lasts at most the ttl from acquired_mono.  Past
 * that, another backend may take the lease over, unless the reservation
 * is "committing": its transaction passed the PRE_COMMIT check (txn.c),
 * which sets the flag under the LWLock exclusive after checking the
 * expiry (tenure_state_commit_reservation), so a reservation is either
 * taken over or allowed to commit, never both.  A reservation that issued
 * its epoch (pending_xid) is taken over only once its transaction has
 * ended, which the taker checks outside the lock (acquire.c,
 * tenure_end_abandoned()); until then it stays as it is.  Nor is it taken
 * over while its backend is "issuing" its epoch: from
 * tenure_state_issuing() to tenure_state_issued() the backend runs the
 * acquisition's own statement, perhaps waiting for another transaction to
 * free the lease's row; the ttl then counts again from the end of that
 * wait (src/README, F10).  Every way a reservation ends without becoming a
 * tenure goes through tenure_unreserve().
 *
 * A held tenure whose claim_epoch() or handoff() passed its PRE_COMMIT
 * check (claim_pid, handoff_pending) neither expires nor can be reserved
 * until that transaction's COMMIT publishes the change or its abort
 * cancels it: the check and the publication see the same tenure, however
 * long the commit takes (a synchronous standby).  Both clear the flag and
 * let the keeper look at the expiry again.
 *
 * keeper_latch may be read without the lock to set it: latches live in
 * shared memory, so setting a stale one (the keeper just exited) is
 * harmless.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "access/transam.h"
#include "access/xlog.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "state_internal.h"

static const char *tenure_end_reason_name(TenureEndReason reason);
static int64 tenure_ready_mono(int64 now);

/* the lease table; state_internal.h declares them for the module */
TenureShared *tenure_shared = NULL;
HTAB	   *tenure_leases = NULL;
TenureWaiter *tenure_waiter_slots = NULL;

/*
 * Shares of the lease slots: how many slots the tenures of each role and
 * each database take, so that none takes more than its share
 * (tenure.role_share, tenure.database_share percent of tenure.max_leases).
 * A tenure counts from its reservation until it ends and, if it leaves a
 * hold-off, until the hold-off has passed (its slot cannot be given to
 * another lease before): given back then lazily, by the next reservation
 * of the same lease, the eviction of its slot, or a look at the table when
 * a share is used up (tenure_share_check()).
 * An entry per role and per database with a tenure; under the LWLock in
 * exclusive mode, like the entries whose tenures it counts.
 */
typedef struct TenureShareKey
{
	uint32		kind;			/* TENURE_SHARE_ROLE or _DATABASE */
	Oid			oid;
} TenureShareKey;

typedef struct TenureShare
{
	TenureShareKey key;
	int			tenures;
} TenureShare;

#define TENURE_SHARE_ROLE		1
#define TENURE_SHARE_DATABASE	2

static HTAB *tenure_shares = NULL;

#define TENURE_TRANSITIONS_KEPT	8
static TenureTransition tenure_transitions[TENURE_TRANSITIONS_KEPT];
static int	tenure_ntransitions = 0;
static int	tenure_transitions_lost = 0;

static bool tenure_exit_registered = false;

/*
 * The leases this backend reserved or waited for: a superset of those it
 * may hold session-bound or have reserved when it exits, so that its exit
 * looks these few up instead of scanning every slot of the table under
 * the LWLock in exclusive mode (on the failover path: the waiters wake
 * only once the exiting holder is done).  Entries for leases it no longer
 * holds are dropped when the list is full; should it fill with leases it
 * does hold, the exit scans the whole table, as it would without a list.
 */
#define TENURE_MINE_MAX			32
static TenureKey tenure_mine[TENURE_MINE_MAX];
static int	tenure_nmine = 0;
static bool tenure_mine_overflow = false;

/*
 * Renew the lease's tenure as of "now", unless a renewal by another
 * session sharing its holder name got further: the renewal time of a
 * tenure never goes back.  Under the LWLock in either mode.
 */
static inline void
tenure_renew_to(TenureLease *lease, int64 now)
{
	uint64		old = pg_atomic_read_u64(&lease->renewed_mono);

	while (old < (uint64) now &&
		   !pg_atomic_compare_exchange_u64(&lease->renewed_mono, &old,
										   (uint64) now))
		;
}

/*
 * Zero an entry but its key, the atomics included.
 */
static void
tenure_entry_zero(TenureLease *lease)
{
	int			i;

	memset(((char *) lease) + sizeof(TenureKey), 0,
		   sizeof(TenureLease) - sizeof(TenureKey));
	pg_atomic_init_u64(&lease->renewed_mono, 0);
	for (i = 0; i < TENURE_FENCED_KINDS; i++)
		pg_atomic_init_u64(&lease->fenced[i], 0);
	lease->counters.last_gap_us = -1;
}

/*
 * The count of tenures of a role or database; NULL if it has none and
 * create is false.  With create, never NULL: the table has room for a role
 * and a database per slot.
 */
static TenureShare *
tenure_share(uint32 kind, Oid oid, bool create)
{
	TenureShareKey key;
	TenureShare *share;
	bool		found;

	AssertLockedExclusive();
	memset(&key, 0, sizeof(key));
	key.kind = kind;
	key.oid = oid;
	share = hash_search(tenure_shares, &key, create ? HASH_ENTER_NULL : HASH_FIND,
						&found);
	Assert(share != NULL || !create);
	if (share != NULL && !found)
		share->tenures = 0;
	return share;
}

static void
tenure_share_add(uint32 kind, Oid oid, int delta)
{
	TenureShare *share = tenure_share(kind, oid, delta > 0);

	if (share == NULL)
		return;
	share->tenures += delta;
	Assert(share->tenures >= 0);
	if (share->tenures <= 0)
		hash_search(tenure_shares, &share->key, HASH_REMOVE, NULL);
}

/*
 * Count the lease's tenure, now PENDING or HELD, for its holder's role and
 * its database.  Cannot fail (src/README, F8).
 */
void
tenure_share_take(TenureLease *lease)
{
	AssertLockedExclusive();
	Assert(!lease->share_taken);
	tenure_share_add(TENURE_SHARE_ROLE, lease->holder_role, 1);
	tenure_share_add(TENURE_SHARE_DATABASE, lease->key.dbid, 1);
	lease->share_taken = true;
}

/*
 * The lease's tenure ended or was given up: count it no more.  Cannot fail
 * (src/README, F8).
 */
void
tenure_share_give(TenureLease *lease)
{
	AssertLockedExclusive();
	if (!lease->share_taken)
		return;
	tenure_share_add(TENURE_SHARE_ROLE, lease->holder_role, -1);
	tenure_share_add(TENURE_SHARE_DATABASE, lease->key.dbid, -1);
	lease->share_taken = false;
}

/*
 * Whether a new tenure of role (InvalidOid: exempt, a superuser) in
 * database dbid fits in their shares; otherwise the result saying which
 * share is used up, with *limit set to it.
 */
static TenureReserveResult
tenure_share_check(Oid role, Oid dbid, int64 now, int *limit)
{
	TenureShare *share;
	int			role_limit = Max(1, (int) ((int64) tenure_max_leases * tenure_role_share / 100));
	int			db_limit = Max(1, (int) ((int64) tenure_max_leases * tenure_database_share / 100));

	AssertLockedExclusive();

	/*
	 * A share used up may hold slots whose hold-off has passed since: give
	 * those back first.  Only then, so a scan of the table is paid only by
	 * a role or database at its limit.
	 */
	if ((OidIsValid(role) && (share = tenure_share(TENURE_SHARE_ROLE, role, false)) != NULL &&
		 share->tenures >= role_limit) ||
		((share = tenure_share(TENURE_SHARE_DATABASE, dbid, false)) != NULL &&
		 share->tenures >= db_limit))
	{
		HASH_SEQ_STATUS scan;
		TenureLease *lease;

		hash_seq_init(&scan, tenure_leases);
		while ((lease = hash_seq_search(&scan)) != NULL)
			if (lease->share_taken && lease->state == TENURE_FREE &&
				lease->pred_expiry_mono <= now)
				tenure_share_give(lease);
	}

	share = OidIsValid(role) ? tenure_share(TENURE_SHARE_ROLE, role, false) : NULL;
	if (share != NULL && share->tenures >= role_limit)
	{
		*limit = role_limit;
		return TENURE_RESERVE_ROLE_SHARE;
	}
	share = tenure_share(TENURE_SHARE_DATABASE, dbid, false);
	if (share != NULL && share->tenures >= db_limit)
	{
		*limit = db_limit;
		return TENURE_RESERVE_DATABASE_SHARE;
	}
	return TENURE_RESERVE_RESERVED;
}

/*
 * tenure_share_check() for a new tenure of this very lease: the slot a
 * former holder's hold-off still charges (to whatever role) is the one the
 * new tenure takes, so that charge is given back first, and charged again
 * only if the new tenure is refused.
 */
static TenureReserveResult
tenure_share_reserve_check(TenureLease *lease, Oid role, int64 now, int *limit)
{
	bool		had = lease->share_taken;
	TenureReserveResult result;

	tenure_share_give(lease);
	result = tenure_share_check(role, lease->key.dbid, now, limit);
	if (result != TENURE_RESERVE_RESERVED && had && lease->pred_expiry_mono > now)
		tenure_share_take(lease);
	return result;
}

/*
 * Note a leadership change for the log, if tenure.log_transitions is on;
 * under the LWLock exclusive.  tenure_log_transitions_now() writes it.
 */
TenureTransition *
tenure_transition(TenureTransitionKind kind, const TenureLease *lease)
{
	TenureTransition *t;

	AssertLockedExclusive();
	if (!tenure_log_transitions)
		return NULL;
	if (tenure_ntransitions >= TENURE_TRANSITIONS_KEPT)
	{
		tenure_transitions_lost++;
		return NULL;
	}
	t = &tenure_transitions[tenure_ntransitions++];
	memset(t, 0, sizeof(TenureTransition));
	t->kind = kind;
	memcpy(t->lease, lease->key.name, sizeof(t->lease));
	return t;
}

/*
 * Write the noted leadership changes to the server log, with the LWLock
 * released.  Only LOG messages: cannot fail (src/README, F8).
 */
static void
tenure_log_transitions_now(void)
{
	int			n = tenure_ntransitions;
	int			lost = tenure_transitions_lost;
	int			i;

	tenure_ntransitions = 0;
	tenure_transitions_lost = 0;
	for (i = 0; i < n; i++)
	{
		TenureTransition *t = &tenure_transitions[i];

		switch (t->kind)
		{
			case TENURE_TRANSITION_START:
				if (t->has_prev)
					ereport(LOG,
							(errmsg("lease \"%s\": tenure of \"%s\" at epoch " INT64_FORMAT " started after \"%s\" at epoch " INT64_FORMAT " ended (%s); gap %.3f ms",
									t->lease, t->holder, t->epoch,
									t->prev_holder, t->prev_epoch,
									tenure_end_reason_name(t->prev_reason),
									(double) t->gap_us / 1000.0),
							 errhidestmt(true), errhidecontext(true)));
				else
					ereport(LOG,
							(errmsg("lease \"%s\": tenure of \"%s\" at epoch " INT64_FORMAT " started",
									t->lease, t->holder, t->epoch),
							 errhidestmt(true), errhidecontext(true)));
				break;
			case TENURE_TRANSITION_END:
				ereport(LOG,
						(errmsg("lease \"%s\": tenure of \"%s\" at epoch " INT64_FORMAT " ended (%s)",
								t->lease, t->prev_holder, t->prev_epoch,
								tenure_end_reason_name(t->prev_reason)),
						 errhidestmt(true), errhidecontext(true)));
				break;
			case TENURE_TRANSITION_CLAIM:
				ereport(LOG,
						(errmsg("lease \"%s\": \"%s\" claimed epoch " INT64_FORMAT " after epoch " INT64_FORMAT,
								t->lease, t->holder, t->epoch, t->prev_epoch),
						 errhidestmt(true), errhidecontext(true)));
				break;
		}
	}
	if (lost > 0)
		ereport(LOG,
				(errmsg_plural("%d more lease transition not logged",
							   "%d more lease transitions not logged",
							   lost, lost)));
}

/*
 * Database dbid has an end of a tenure to write to the history: the keeper
 * starts the history writer for it from now + TENURE_HISTORY_DELAY_US.
 */
static void
tenure_history_due(Oid dbid, int64 now)
{
	int			i;
	int64		due = now + TENURE_HISTORY_DELAY_US;

	AssertLockedExclusive();
	for (i = 0; i < tenure_shared->history_ndbs; i++)
		if (tenure_shared->history_dbs[i] == dbid)
			break;
	if (i == tenure_shared->history_ndbs)
	{
		if (i < TENURE_HISTORY_DBS)
			tenure_shared->history_dbs[tenure_shared->history_ndbs++] = dbid;
		else if (!tenure_shared->history_list)
		{
			/* no room: list every database again once the queue drained */
			tenure_shared->history_list = true;
			tenure_shared->history_list_after = InvalidOid;
		}
	}
	if (tenure_shared->history_due_mono == 0 ||
		due < tenure_shared->history_due_mono)
		tenure_shared->history_due_mono = due;
	if (due < tenure_shared->keeper_sleep_until)
		tenure_shared->keeper_wake = true;
}

/*
 * Tell the keeper that the lease's advisory lock may have to be taken or
 * let go: queue it for the next pass, or make that pass look at every
 * entry when the queue is full.  Work that must be done now (a lock
 * wanted, or one to let go at once) wakes the keeper when the caller
 * releases the LWLock (tenure_state_end_update(), tenure_changed());
 * a lingering lock only needs the keeper back by lock_linger_mono.
 */
void
tenure_keeper_notice(TenureLease *lease)
{
	AssertLockedExclusive();
	if (!lease->keeper_queued)
	{
		if (tenure_shared->keeper_nqueued < TENURE_KEEPER_QUEUE)
		{
			tenure_shared->keeper_queue[tenure_shared->keeper_nqueued++] = lease->key;
			lease->keeper_queued = true;
		}
		else
			tenure_shared->keeper_scan = true;
	}
	if (!lease->lock_wanted && lease->lock_held &&
		lease->lock_linger_mono != 0 &&
		++tenure_shared->keeper_nlinger > TENURE_LOCK_LINGER_MAX)
		lease->lock_linger_mono = 0;	/* too many linger: it goes now */
	if (lease->lock_wanted || lease->lock_linger_mono == 0 ||
		!lease->lock_held)
		tenure_shared->keeper_urgent = true;
	else if (lease->lock_linger_mono < tenure_shared->keeper_sleep_until)
		tenure_shared->keeper_wake = true;
}

/*
 * When the keeper may let go of the lease's lock once no tenure wants it:
 * after TENURE_LOCK_LINGER_US, or at once for a lease with lock_key or
 * one that was dropped.  Called where lock_wanted is cleared.
 */
static void
tenure_linger(TenureLease *lease, int64 now)
{
	lease->lock_linger_mono = (lease->has_lock_key || lease->dropped) ? 0 :
		now + TENURE_LOCK_LINGER_US;
}

/*
 * A held tenure may expire at "expiry": the keeper must look by then.
 */
void
tenure_keeper_due(int64 expiry)
{
	AssertLockedExclusive();
	tenure_shared->keeper_due_mono = Min(tenure_shared->keeper_due_mono, expiry);
	if (expiry < tenure_shared->keeper_sleep_until)
		tenure_shared->keeper_wake = true;
}

/* ---------------------------------------------------------------------
 * Set-up, and the verbs that take no LWLock.
 * ---------------------------------------------------------------------
 */

/*
 * Bytes of shared memory pg_tenure needs.
 */
Size
tenure_shmem_size(void)
{
	Size		size;

	size = MAXALIGN(sizeof(TenureShared));
	size = add_size(size, hash_estimate_size(tenure_max_leases,
											 sizeof(TenureLease)));
	size = add_size(size, hash_estimate_size(mul_size(tenure_max_leases, 2),
											 sizeof(TenureShare)));
	size = add_size(size, mul_size(MaxBackends, sizeof(TenureWaiter)));
	size = add_size(size, tenure_notify_shmem_size());
	return size;
}

/*
 * Create or attach to the shared state; called from shmem_startup_hook.
 */
void
tenure_shmem_init(void)
{
	bool		found;
	HASHCTL		info;

	tenure_shared = NULL;
	tenure_leases = NULL;
	tenure_shares = NULL;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);

	tenure_shared = ShmemInitStruct("pg_tenure", sizeof(TenureShared), &found);
	if (!found)
	{
		uint64		boot_id = 0;

		memset(tenure_shared, 0, sizeof(TenureShared));
		tenure_shared->lock = &(GetNamedLWLockTranche("pg_tenure"))->lock;
		ConditionVariableInit(&tenure_shared->cv);
		if (!pg_strong_random(&boot_id, sizeof(boot_id)))
			boot_id = (uint64) GetCurrentTimestamp() ^ ((uint64) MyProcPid << 32);
		/* keep it positive: it is stored in a bigint column */
		tenure_shared->boot_id = (int64) (boot_id & PG_INT64_MAX);
		pg_atomic_init_u64(&tenure_shared->settings_gen, 0);
	}

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(TenureKey);
	info.entrysize = sizeof(TenureLease);
	tenure_leases = ShmemInitHash("pg_tenure leases",
								  tenure_max_leases, tenure_max_leases,
								  &info,
								  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);

	/* a tenure counts for one role and one database */
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(TenureShareKey);
	info.entrysize = sizeof(TenureShare);
	tenure_shares = ShmemInitHash("pg_tenure shares",
								  tenure_max_leases * 2, tenure_max_leases * 2,
								  &info,
								  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);

	tenure_waiter_slots = ShmemInitStruct("pg_tenure waiters",
										  mul_size(MaxBackends,
												   sizeof(TenureWaiter)),
										  &found);
	if (!found)
		memset(tenure_waiter_slots, 0,
			   mul_size(MaxBackends, sizeof(TenureWaiter)));

	/* the LISTEN/NOTIFY handshake's slots (state_notify.c) */
	tenure_notify_shmem_init();

	LWLockRelease(AddinShmemInitLock);
}

/*
 * Whether this process is attached to pg_tenure's shared memory (the
 * module was preloaded).
 */
bool
tenure_state_attached(void)
{
	return tenure_shared != NULL && tenure_leases != NULL;
}

/*
 * Fail unless the module was preloaded and its shared memory exists.
 */
void
tenure_require_loaded(void)
{
	if (!tenure_state_attached())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pg_tenure must be loaded via shared_preload_libraries"),
				 errhint("Add pg_tenure to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/*
 * Refuse to change leases or fences on a hot standby, naming the function
 * called.
 */
void
tenure_require_primary(FunctionCallInfo fcinfo)
{
	Oid			fn = fcinfo->flinfo->fn_oid;

	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot execute %s() during recovery",
						quote_qualified_identifier(get_namespace_name(get_func_namespace(fn)),
												   get_func_name(fn))),
				 errhint("Leases and fences are changed on the primary.")));
}

/*
 * The server's monotonic clock in microseconds.  CLOCK_MONOTONIC is shared
 * by all processes of the machine, so values compare across backends.
 */
int64
tenure_mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * USECS_PER_SEC + ts.tv_nsec / 1000;
}

/*
 * Wall-clock time of a monotonic instant, for display only.
 */
TimestampTz
tenure_mono_to_wall(int64 mono, int64 now_mono, TimestampTz now_wall)
{
	return now_wall - (now_mono - mono);
}

/*
 * Build the hash key of a lease; name must already be validated.
 */
void
tenure_make_key(TenureKey *key, Oid dbid, const char *name)
{
	memset(key, 0, sizeof(TenureKey));
	key->dbid = dbid;
	strlcpy(key->name, name, sizeof(key->name));
}

/*
 * The random number that identifies this start of the server in
 * tenure.history.
 */
int64
tenure_boot_id(void)
{
	return tenure_shared->boot_id;
}

/*
 * When the server could first hold tenures: the keeper's first start
 * after startup or promotion.  Only read once the keeper answered a
 * request, which happens after it set the time.
 */
TimestampTz
tenure_ready_time(void)
{
	return tenure_shared->ready_time;
}

/*
 * Ask the keeper to look at the lease table.
 */
void
tenure_wake_keeper(void)
{
	Latch	   *latch = tenure_shared->keeper_latch;

	if (latch != NULL)
		SetLatch(latch);
}

/*
 * Waiting for a change of the lease table: prepare before looking, so that
 * a change between the look and the sleep still wakes the waiter; sleep at
 * most timeout_ms (true if it timed out); cancel when done.
 */
void
tenure_state_prepare_wait(void)
{
	ConditionVariablePrepareToSleep(&tenure_shared->cv);
}

bool
tenure_state_wait(long timeout_ms)
{
	return ConditionVariableTimedSleep(&tenure_shared->cv, Max(timeout_ms, 1),
									   TENURE_WAIT_EVENT);
}

void
tenure_state_cancel_wait(void)
{
	ConditionVariableCancelSleep();
}

/*
 * How many alter_lease transactions have committed since the server
 * started.  tenure_load_committed() reads it before its snapshot (see the
 * header, "Settings").
 */
uint64
tenure_state_settings_gen(void)
{
	uint64		gen = pg_atomic_read_u64(&tenure_shared->settings_gen);

	/* read before the snapshot that reads the row */
	pg_memory_barrier();
	return gen;
}

/*
 * Room the listing run has for databases before it must stop.
 */
int
tenure_state_history_room(void)
{
	return TENURE_HISTORY_DBS;
}

/* ---------------------------------------------------------------------
 * Helpers of the verbs; state_internal.h shares some with the module's
 * other files.  Those that change an entry assert the LWLock exclusive.
 * ---------------------------------------------------------------------
 */

/*
 * After a change that someone may wait for, with the LWLock released.
 */
void
tenure_changed(bool wake_keeper)
{
	/* the waiters first: neither the keeper's work nor the log concerns them */
	ConditionVariableBroadcast(&tenure_shared->cv);
	if (wake_keeper)
		tenure_wake_keeper();
	tenure_log_transitions_now();
}

/*
 * The advisory lock tag the keeper holds for a lease: the bigint advisory
 * key space of the lease's database when the lease has a lock_key, so that
 * pg_try_advisory_lock(lock_key) and pg_tenure exclude each other, or
 * pg_tenure's private field4 with the lease's id otherwise.
 */
void
tenure_lease_tag(const TenureLease *lease, LOCKTAG *tag)
{
	if (lease->has_lock_key)
		SET_LOCKTAG_ADVISORY(*tag, lease->key.dbid,
							 (uint32) ((uint64) lease->lock_key >> 32),
							 (uint32) lease->lock_key,
							 1);
	else
		SET_LOCKTAG_ADVISORY(*tag, lease->key.dbid,
							 (uint32) ((uint64) lease->lease_id >> 32),
							 (uint32) lease->lease_id,
							 TENURE_LEASE_LOCK_FIELD4);
}

/*
 * Whether the keeper's lock is the one the lease needs now (the lease may
 * have been dropped and created again with another id or lock_key).
 */
bool
tenure_lease_tag_held(const TenureLease *lease)
{
	LOCKTAG		tag;

	AssertLocked();
	tenure_lease_tag(lease, &tag);
	return lease->lock_held &&
		memcmp(&tag, &lease->held_tag, sizeof(LOCKTAG)) == 0;
}

/*
 * Whether the lease holds a tenure that has not expired at "now".
 */
bool
tenure_is_live(const TenureLease *lease, int64 now)
{
	return lease->state == TENURE_HELD &&
		now < tenure_expiry(lease);
}

/*
 * Whether the lease is being acquired by this backend's transaction.
 */
static bool
tenure_pending_mine(const TenureLease *lease)
{
	return lease->state == TENURE_PENDING &&
		lease->holder_pid == MyProcPid &&
		lease->holder_start == MyStartTimestamp;
}

/*
 * Whether the reservation with the given token is still this backend's.
 */
static bool
tenure_reserved_by_me(const TenureLease *lease, uint64 token)
{
	return lease->state == TENURE_PENDING &&
		lease->pending_token == token &&
		lease->holder_pid == MyProcPid;
}

/*
 * The epoch at which holder holds the lease at "now": that of its live
 * tenure, or of the tenure this very transaction is acquiring; 0 if it
 * holds none.
 */
static int64
tenure_epoch_of(const TenureLease *lease, const char *holder, int64 now)
{
	AssertLocked();
	if (strcmp(lease->holder, holder) != 0)
		return 0;
	if (tenure_is_live(lease, now))
		return lease->epoch;
	if (tenure_pending_mine(lease))
		return lease->pending_epoch;	/* 0 until the epoch is issued */
	return 0;
}

/*
 * Whether a PENDING reservation has outlived its ttl and may be taken
 * over by another backend.
 */
static bool
tenure_pending_expired(const TenureLease *lease, int64 now)
{
	return lease->state == TENURE_PENDING && !lease->committing &&
		!lease->issuing && now >= lease->acquired_mono + lease->ttl_us;
}

/*
 * Whether an entry's slot may be given to another lease (see the header):
 * nobody holds, acquires or locks the lease, and no former holder's belief
 * still delays its next tenure.  Sets *soon if the keeper only has to let
 * go of the lease's lock first.
 */
static bool
tenure_evictable(const TenureLease *lease, int64 now, bool *soon)
{
	AssertLockedExclusive();
	if (lease->lock_wanted || tenure_change_committing(lease) ||
		lease->altering_pid != 0)
		return false;
	/* a dropped lease's bound waits for the name's next lease */
	if (lease->pred_expiry_mono > now)
		return false;
	if (!lease->dropped && lease->state != TENURE_FREE)
		return false;
	if (lease->lock_held)
	{
		*soon = true;
		return false;
	}
	return true;
}

/*
 * Find or create the entry of a lease.  When the table is full, an
 * evictable entry (preferably one with no end reason left to write) makes
 * room.  Returns NULL if there is none; *soon then says whether one will
 * be once the keeper has released the locks it no longer needs.  A new
 * entry is zeroed except for its key.  Cannot fail (src/README, F8).
 */
static TenureLease *
tenure_enter_entry(const TenureKey *key, int64 now, bool *found, bool *soon)
{
	TenureLease *lease;
	TenureLease *victim = NULL;
	HASH_SEQ_STATUS scan;

	AssertLockedExclusive();

	*soon = false;
	lease = hash_search(tenure_leases, key, HASH_ENTER_NULL, found);
	if (lease == NULL)
	{
		hash_seq_init(&scan, tenure_leases);
		while ((lease = hash_seq_search(&scan)) != NULL)
		{
			if (!tenure_evictable(lease, now, soon))
				continue;
			victim = lease;
			if (lease->dropped || lease->ended_reason == TENURE_END_NONE)
			{
				hash_seq_term(&scan);
				break;
			}
		}
		if (victim == NULL)
			return NULL;
		tenure_share_give(victim);
		hash_search(tenure_leases, &victim->key, HASH_REMOVE, NULL);
		lease = hash_search(tenure_leases, key, HASH_ENTER_NULL, found);
		if (lease == NULL)
			return NULL;		/* cannot happen: we just freed a slot */
	}
	if (!*found)
	{
		tenure_entry_zero(lease);
	}
	return lease;
}

/*
 * The entry of a lease, or NULL.
 */
TenureLease *
tenure_find(const TenureKey *key)
{
	AssertLocked();
	return hash_search(tenure_leases, key, HASH_FIND, NULL);
}

/*
 * End the lease's current tenure for the given reason.  The caller wakes
 * the keeper and broadcasts after releasing the LWLock.  Cannot fail
 * (src/README, F8).
 */
void
tenure_end(TenureLease *lease, TenureEndReason reason, int64 now)
{
	int64		expiry = tenure_expiry(lease);

	AssertLockedExclusive();
	Assert(lease->state == TENURE_HELD);

	lease->ended_epoch = lease->epoch;
	lease->ended_reason = reason;
	memcpy(lease->ended_holder, lease->holder, sizeof(lease->holder));

	/*
	 * A former holder may believe in its tenure until its last renewal plus
	 * the ttl, unless it said it was done; a drop is not its word, and the
	 * bound outlives the drop (tenure_state_load()).  An earlier holder
	 * whose belief delayed this tenure's start may still believe: keep its
	 * bound.
	 */
	if (reason != TENURE_END_RELEASED && reason != TENURE_END_HANDED)
		lease->pred_expiry_mono = Max(lease->pred_expiry_mono, expiry);

	lease->ended_mono = reason == TENURE_END_EXPIRED ? Min(expiry, now) : now;
	lease->last_end_reason = reason;
	/* ends outside a transaction reach the history soon (history.c) */
	if (reason != TENURE_END_RELEASED && reason != TENURE_END_DROPPED &&
		reason != TENURE_END_HANDED)
		tenure_history_due(lease->key.dbid, now);
	lease->ended_wall = tenure_mono_to_wall(lease->ended_mono, now,
											GetCurrentTimestamp());
	lease->counters.last_change = lease->ended_wall;
	switch (reason)
	{
		case TENURE_END_RELEASED:
			lease->counters.released++;
			break;
		case TENURE_END_EXPIRED:
			lease->counters.expired++;
			break;
		case TENURE_END_SESSION:
			lease->counters.session_ended++;
			break;
		case TENURE_END_REVOKED:
			lease->counters.revoked++;
			break;
		case TENURE_END_HANDED:
			lease->counters.handed_over++;
			break;
		case TENURE_END_DROPPED:
		case TENURE_END_NONE:
		case TENURE_END_CLAIMED:	/* reasons only the history records */
		case TENURE_END_RESTARTED:
		case TENURE_END_PROMOTED:
			break;
	}
	{
		TenureTransition *t = tenure_transition(TENURE_TRANSITION_END, lease);

		if (t != NULL)
		{
			memcpy(t->prev_holder, lease->holder, sizeof(t->prev_holder));
			t->prev_epoch = lease->epoch;
			t->prev_reason = reason;
		}
	}
	/* a hold-off keeps the slot: it counts for the holder's role until then */
	if (lease->pred_expiry_mono <= now)
		tenure_share_give(lease);
	lease->state = TENURE_FREE;
	lease->holder[0] = '\0';
	lease->session_bound = false;
	lease->holder_pid = 0;
	lease->holder_start = 0;
	lease->lock_wanted = false;
	tenure_linger(lease, now);
	tenure_keeper_notice(lease);
}

/*
 * End a PENDING reservation that will not become a tenure: its transaction
 * aborted, its backend exited, it was taken over, the keeper could not get
 * its lock, or its database went away.  It never led, so it leaves no
 * hold-off and nothing for the history.  Cannot fail (src/README, F8).
 */
static void
tenure_unreserve(TenureLease *lease)
{
	AssertLockedExclusive();
	Assert(lease->state == TENURE_PENDING);

	tenure_share_give(lease);
	lease->state = TENURE_FREE;
	lease->holder[0] = '\0';
	lease->session_bound = false;
	lease->holder_pid = 0;
	lease->holder_start = 0;
	lease->pending_epoch = 0;
	lease->pending_xid = InvalidTransactionId;
	lease->committing = false;
	lease->issuing = false;
	lease->lock_wanted = false;
	lease->lock_linger_mono = 0;	/* no tenure came of it */
	tenure_keeper_notice(lease);
}

/*
 * Name of an end reason, as stored in tenure.history (the table is
 * tenure_end_reason_text(), history.h).
 */
static const char *
tenure_end_reason_name(TenureEndReason reason)
{
	return tenure_end_reason_text(reason);
}

/* ---------------------------------------------------------------------
 * Readers: copy what the caller needs under the LWLock in shared mode.
 * ---------------------------------------------------------------------
 */

/*
 * leader_is(): whether holder holds a live, active tenure of the lease
 * (past its hold-off, and with its lock_key's lock held by the keeper).
 */
bool
tenure_state_leads(const TenureKey *key, const char *holder, int64 now)
{
	TenureLease *lease;
	bool		result = false;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	if (lease != NULL &&
		tenure_is_live(lease, now) &&
		now >= lease->active_mono &&
		(lease->lock_held || !lease->has_lock_key) &&
		strcmp(lease->holder, holder) == 0)
		result = true;
	LWLockRelease(tenure_shared->lock);
	return result;
}

/*
 * How holder stands with the lease at "now", for await_active(); same rule
 * as tenure_state_leads().  *active_mono is set to when a waiting tenure
 * becomes active.
 */
TenureActiveState
tenure_state_active(const TenureKey *key, const char *holder, int64 now,
					int64 *active_mono)
{
	TenureLease *lease;
	TenureActiveState result = TENURE_AS_NOT_HOLDER;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	if (lease != NULL && !lease->dropped &&
		strcmp(lease->holder, holder) == 0)
	{
		if (tenure_is_live(lease, now))
		{
			*active_mono = lease->active_mono;
			if (now >= lease->active_mono &&
				(lease->lock_held || !lease->has_lock_key))
				result = TENURE_AS_ACTIVE;
			else
				result = TENURE_AS_WAITING;
		}
		else if (tenure_pending_mine(lease))
			result = TENURE_AS_OWN_PENDING;
	}
	LWLockRelease(tenure_shared->lock);
	return result;
}

/*
 * The epoch at which holder holds the lease now: that of its live tenure,
 * or of the tenure this very transaction is acquiring once its epoch is
 * issued; 0 if it holds none.  If it holds one and session_bound is not
 * NULL, sets *session_bound.
 */
int64
tenure_state_held_epoch(const TenureKey *key, const char *holder,
						bool *session_bound)
{
	TenureLease *lease;
	int64		now = tenure_mono_now();
	int64		epoch = 0;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	if (lease != NULL)
		epoch = tenure_epoch_of(lease, holder, now);
	if (epoch != 0 && session_bound != NULL)
		*session_bound = lease->session_bound;
	LWLockRelease(tenure_shared->lock);
	return epoch;
}

/*
 * A call that holds the lease's row lock (taking the row runs this:
 * catalog.c's tenure_await_row_published()): wait until no other backend's
 * transaction that changed the lease is still publishing its commit or
 * abort.  PostgreSQL shows a transaction as ended to others before its
 * COMMIT or ABORT callback (txn.c) publishes it here; an UPDATE of the
 * row in between does not wait for it, and without this the caller would
 * read the holder's tenure as it was before, and fail its own PRE_COMMIT
 * check although its tenure is live (a claim right after another of the
 * same holder).  Bounded: such a backend is past its commit or abort
 * record and waits for nothing of this one's.
 */
void
tenure_state_await_published(const TenureKey *key)
{
	bool		prepared = false;

	for (;;)
	{
		TenureLease *lease;
		bool		busy;

		LWLockAcquire(tenure_shared->lock, LW_SHARED);
		lease = tenure_find(key);
		busy = lease != NULL &&
			((lease->claim_pid != 0 && lease->claim_pid != MyProcPid) ||
			 (lease->handoff_pending && lease->handoff_pid != MyProcPid) ||
			 (lease->committing && !tenure_pending_mine(lease)));
		LWLockRelease(tenure_shared->lock);
		if (!busy)
			break;
		/* look again once prepared, so that a broadcast in between counts */
		if (!prepared)
		{
			ConditionVariablePrepareToSleep(&tenure_shared->cv);
			prepared = true;
			continue;
		}
		/* the publication broadcasts (tenure_changed()); the timeout is a floor */
		(void) ConditionVariableTimedSleep(&tenure_shared->cv, 10,
										   TENURE_WAIT_EVENT);
	}
	if (prepared)
		ConditionVariableCancelSleep();
}

/*
 * The latest epoch shared memory has seen for the lease, 0 if none (or if
 * it was cached during recovery, when replay could not keep it current).
 */
int64
tenure_state_cached_epoch(const TenureKey *key)
{
	TenureLease *lease;
	int64		epoch = 0;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	if (lease != NULL && !lease->dropped && !lease->loaded_in_recovery)
		epoch = lease->epoch;
	LWLockRelease(tenure_shared->lock);
	return epoch;
}

/*
 * Whether the lease's entry must be (re)built from its row: it does not
 * exist, it was dropped, it belongs to another lease of the same name
 * (id, if not 0, differs), or it was built during recovery.
 */
bool
tenure_state_stale(const TenureKey *key, int64 id)
{
	TenureLease *lease;
	bool		stale;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	stale = lease == NULL || lease->dropped ||
		(id != 0 && lease->lease_id != id) ||
		(lease->loaded_in_recovery && !RecoveryInProgress());
	LWLockRelease(tenure_shared->lock);
	return stale;
}

/*
 * What the fence check reads of a lease (src/README, F2): whether it is
 * known (has an entry and was not dropped), and then its published epoch
 * and whether its tenure is live; and the fence lock its entry names,
 * also when it was dropped (-1 without an entry).
 */
void
tenure_state_fence(const TenureKey *key, int64 now, int64 presented,
				   TenureFencedKind accepted_as, TenureFenceView *view)
{
	TenureLease *lease;

	memset(view, 0, sizeof(TenureFenceView));
	view->fence_lock = -1;
	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	if (lease != NULL)
	{
		view->has_entry = true;
		view->fence_lock = lease->fence_lock;
		if (!lease->dropped)
		{
			view->known = true;
			view->epoch = lease->epoch;
			view->live = tenure_is_live(lease, now);
			/* the caller accepts exactly this (tenure_fence_check()) */
			if (accepted_as != TENURE_FENCED_NONE && presented != 0 &&
				presented == view->epoch && view->live)
				pg_atomic_fetch_add_u64(&lease->fenced[accepted_as], 1);
		}
	}
	LWLockRelease(tenure_shared->lock);
}

/*
 * Count a fenced write the caller rejects (tenure.lease_stats).
 */
void
tenure_state_fence_rejected(const TenureKey *key, TenureFencedKind kind)
{
	TenureLease *lease;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	if (lease != NULL && !lease->dropped)
		pg_atomic_fetch_add_u64(&lease->fenced[kind], 1);
	LWLockRelease(tenure_shared->lock);
}


/*
 * Copy something of every entry of database dbid, or of every database if
 * dbid is InvalidOid (dropped leases' aside)
 * into a palloc'd array of elements of elemsize bytes, all under one hold
 * of the shared lock: copy() fills the element for an entry and returns
 * whether it is to be kept; begin(), if given, runs first under the same
 * hold.  Returns the array, with *count elements.
 *
 * Nothing is allocated under the lock: the array is sized from the
 * table's count, which is read again under the hold that copies; if the
 * table grew in between, the array grows and the copy starts over.  Every
 * try that fails saw a larger count, which never exceeds
 * tenure.max_leases, so this ends.
 */
typedef bool (*TenureCopyFunc) (TenureLease *lease, void *elem, void *arg);

static void *
tenure_copy_entries(Oid dbid, Size elemsize, TenureCopyFunc copy,
					void (*begin) (void *arg), void *arg, int *count)
{
	HASH_SEQ_STATUS scan;
	TenureLease *lease;
	char	   *elems;
	long		room;
	int			n;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	room = hash_get_num_entries(tenure_leases) + 16;
	LWLockRelease(tenure_shared->lock);
	for (;;)
	{
		long		entries;

		elems = palloc_extended(elemsize * room, MCXT_ALLOC_HUGE);
		n = 0;
		LWLockAcquire(tenure_shared->lock, LW_SHARED);
		entries = hash_get_num_entries(tenure_leases);
		if (entries <= room)
		{
			if (begin != NULL)
				begin(arg);
			hash_seq_init(&scan, tenure_leases);
			while ((lease = hash_seq_search(&scan)) != NULL)
			{
				if ((!OidIsValid(dbid) || lease->key.dbid == dbid) &&
					!lease->dropped &&
					copy(lease, elems + elemsize * n, arg))
					n++;
			}
		}
		LWLockRelease(tenure_shared->lock);
		if (entries <= room)
			break;
		pfree(elems);
		room = entries + 16;
	}
	*count = n;
	return elems;
}

/* tenure_state_stats(): the waiters of the database, then each entry's */
typedef struct TenureStatsCopy
{
	Oid			dbid;
	TenureKey  *waiting;		/* MaxBackends of them */
	int			nwaiting;
} TenureStatsCopy;

static void
tenure_stats_begin(void *arg)
{
	TenureStatsCopy *c = arg;
	int			i;

	c->nwaiting = 0;
	for (i = 0; i < MaxBackends; i++)
		if (tenure_waiter_slots[i].pid != 0 &&
			tenure_waiter_slots[i].key.dbid == c->dbid)
			c->waiting[c->nwaiting++] = tenure_waiter_slots[i].key;
}

static bool
tenure_stats_copy(TenureLease *lease, void *elem, void *arg)
{
	TenureStatsCopy *c = arg;
	TenureLeaseStats *st = elem;
	int			j;

	memcpy(st->name, lease->key.name, sizeof(st->name));
	st->counters = lease->counters;
	for (j = 0; j < TENURE_FENCED_KINDS; j++)
		st->fenced[j] = pg_atomic_read_u64(&lease->fenced[j]);
	st->waiters = 0;
	for (j = 0; j < c->nwaiting; j++)
		if (strcmp(c->waiting[j].name, lease->key.name) == 0)
			st->waiters++;
	return true;
}

/*
 * The counters of the leases of database dbid that have an entry, for
 * tenure.lease_stats; a palloc'd array of *count elements.
 */
TenureLeaseStats *
tenure_state_stats(Oid dbid, int *count)
{
	TenureStatsCopy c;
	TenureLeaseStats *stats;

	c.dbid = dbid;
	c.waiting = palloc(sizeof(TenureKey) * MaxBackends);
	c.nwaiting = 0;
	stats = tenure_copy_entries(dbid, sizeof(TenureLeaseStats), tenure_stats_copy,
								tenure_stats_begin, &c, count);
	pfree(c.waiting);
	return stats;
}

/*
 * What await_change() watches: the lease's latest epoch and live holder,
 * and when that holder's tenure expires.  False if the lease has no entry
 * of the lease with id "id".
 */
bool
tenure_state_watch(const TenureKey *key, int64 id, int64 now,
				   TenureWatch *watch)
{
	TenureLease *lease;
	bool		found = false;

	memset(watch, 0, sizeof(TenureWatch));
	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	if (lease != NULL && !lease->dropped && lease->lease_id == id)
	{
		found = true;
		watch->epoch = lease->epoch;
		if (tenure_is_live(lease, now))
		{
			watch->held = true;
			strlcpy(watch->holder, lease->holder, sizeof(watch->holder));
			watch->expiry_mono = tenure_expiry(lease);
		}
	}
	LWLockRelease(tenure_shared->lock);
	return found;
}

static void
tenure_info_of(const TenureLease *lease, int64 now, TenureLeaseInfo *info)
{
	memcpy(info->name, lease->key.name, sizeof(info->name));
	info->state = lease->state;
	memcpy(info->holder, lease->holder, sizeof(info->holder));
	info->epoch = lease->epoch;
	info->session_bound = lease->session_bound;
	info->acquired_wall = lease->acquired_wall;
	/* the renewal time read once: a renew may change it meanwhile */
	info->renewed_mono = tenure_renewed(lease);
	info->expiry_mono = info->renewed_mono + lease->ttl_us;
	info->live = lease->state == TENURE_HELD && now < info->expiry_mono;
	info->active_mono = lease->active_mono;
	info->holder_pid = lease->holder_pid;
	info->holder_role = lease->state != TENURE_FREE ? lease->holder_role : InvalidOid;
	info->lock_held = lease->lock_held;
	info->transitions = lease->transitions;
}

static bool
tenure_info_copy(TenureLease *lease, void *elem, void *arg)
{
	tenure_info_of(lease, *(int64 *) arg, elem);
	return true;
}

/*
 * The leases of database dbid that have an entry, for tenure.leases; a
 * palloc'd array of *count elements, all read under one hold of the lock.
 */
TenureLeaseInfo *
tenure_state_list(Oid dbid, int64 now, int *count)
{
	return tenure_copy_entries(dbid, sizeof(TenureLeaseInfo), tenure_info_copy,
							   NULL, &now, count);
}

/*
 * The end of the lease's previous tenure that the history does not show
 * yet: its reason as tenure.history names it (NULL if none), epoch and
 * time.
 */
const char *
tenure_state_ended(const TenureKey *key, int64 *epoch, TimestampTz *ended)
{
	TenureLease *lease;
	const char *reason = NULL;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	if (lease != NULL && lease->ended_reason != TENURE_END_NONE)
	{
		reason = tenure_end_reason_name(lease->ended_reason);
		*epoch = lease->ended_epoch;
		*ended = lease->ended_wall;
	}
	LWLockRelease(tenure_shared->lock);
	return reason;
}

/*
 * Whether this backend's reservation with the given token still stands
 * (an acquisition that neither renewed nor lost its race).
 */
bool
tenure_state_reserved(const TenureKey *key, uint64 token)
{
	TenureLease *lease;
	bool		result;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	result = lease != NULL && tenure_reserved_by_me(lease, token);
	LWLockRelease(tenure_shared->lock);
	return result;
}

/*
 * Whether the lease's history is due to be trimmed: when the number of
 * tenures and claims committed since its entry was loaded is a multiple of
 * TENURE_HISTORY_TRIM_EVERY (so also at the first).  Only committed ones
 * count (publish_acquire, publish_claim): a trim whose transaction rolls
 * back is made again by the next.
 */
bool
tenure_state_history_trim_due(const TenureKey *key)
{
	TenureLease *lease;
	bool		due = true;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	if (lease != NULL)
		due = lease->history_starts % TENURE_HISTORY_TRIM_EVERY == 0;
	LWLockRelease(tenure_shared->lock);
	return due;
}

static bool
tenure_ended_copy(TenureLease *lease, void *elem, void *arg)
{
	TenureEnded *e = elem;

	if (lease->ended_reason == TENURE_END_NONE)
		return false;
	e->key = lease->key;
	e->epoch = lease->ended_epoch;
	e->reason = tenure_end_reason_name(lease->ended_reason);
	e->ended = lease->ended_wall;
	return true;
}

/*
 * The ends of tenures of database dbid not yet in the history; a palloc'd
 * array of *count elements.
 */
TenureEnded *
tenure_state_history_pending(Oid dbid, int *count)
{
	return tenure_copy_entries(dbid, sizeof(TenureEnded), tenure_ended_copy,
							   NULL, NULL, count);
}

/* tenure_state_tenures(): when the server became ready, and each entry's */
typedef struct TenureTenuresCopy
{
	int64		now;
	int64		ready_mono;
} TenureTenuresCopy;

static void
tenure_tenures_begin(void *arg)
{
	TenureTenuresCopy *c = arg;

	c->ready_mono = tenure_ready_mono(c->now);
}

static bool
tenure_tenures_copy(TenureLease *lease, void *elem, void *arg)
{
	TenureTenureOf *t = elem;
	int64		now = ((TenureTenuresCopy *) arg)->now;

	t->tenure.dbid = lease->key.dbid;
	t->tenure.ttl_us = lease->ttl_us;
	t->tenure.epoch = lease->epoch;
	t->live = lease->state == TENURE_HELD && !lease->session_bound &&
		(tenure_is_live(lease, now) || tenure_change_committing(lease));
	/* a committing claim or hand-off keeps it from expiring meanwhile */
	t->tenure.remaining_us = tenure_change_committing(lease) ? lease->ttl_us :
		Max(tenure_expiry(lease) - now, 0);
	/* an acquisition past its checks may commit yet */
	if (lease->state == TENURE_PENDING && lease->pending_epoch != 0 &&
		(lease->committing || lease->issuing))
	{
		t->tenure.epoch = lease->pending_epoch;
		t->live = !lease->session_bound;
		t->tenure.remaining_us = lease->ttl_us;
	}
	return t->tenure.epoch != 0;
}

/*
 * The latest epoch of every entry of every database that has one, and
 * whether its tenure is live, not session-bound, at "now" (or an
 * acquisition of it committing): the keeper's list as it exits (src/README,
 * P5).  *ready_mono: when the server became ready.  A palloc'd array of
 * *count elements.
 */
TenureTenureOf *
tenure_state_tenures(int64 now, int64 *ready_mono, int *count)
{
	TenureTenuresCopy c;
	TenureTenureOf *tenures;

	c.now = now;
	c.ready_mono = now;
	tenures = tenure_copy_entries(InvalidOid, sizeof(TenureTenureOf),
								  tenure_tenures_copy, tenure_tenures_begin,
								  &c, count);
	*ready_mono = c.ready_mono;
	return tenures;
}

/* ---------------------------------------------------------------------
 * Renewal: changes only the renewal time, an atomic, under the LWLock in
 * shared mode.
 * ---------------------------------------------------------------------
 */

/*
 * renew(): extend holder's tenure to now + ttl, if the caller may: only
 * when the lease's owner is allowed_owner, which the caller found it acts
 * for (InvalidOid: not known).  Returns false, with *owner set to the
 * lease's owner (InvalidOid if it has no entry), when the caller must
 * check its rights first; otherwise true, with *renewed.
 *
 * Under the LWLock in shared mode, so that renewals of different leases do
 * not queue behind each other: the renewal time is an atomic that only
 * grows.  Whoever ends or takes over a tenure holds the lock exclusively,
 * so a renewal never revives a tenure that ended; a later expiry needs no
 * word to the keeper, which only looks earlier than it had to.
 */
bool
tenure_state_renew(const TenureKey *key, const char *holder,
				   Oid allowed_owner, Oid *owner, bool *renewed)
{
	TenureLease *lease;
	int64		now = tenure_mono_now();
	bool		allowed = false;

	*renewed = false;
	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	*owner = (lease != NULL && !lease->dropped) ? lease->owner : InvalidOid;
	if (OidIsValid(*owner) && *owner == allowed_owner)
	{
		allowed = true;
		if (tenure_epoch_of(lease, holder, now) != 0)
		{
			tenure_renew_to(lease, now);
			*renewed = true;
		}
	}
	LWLockRelease(tenure_shared->lock);
	return allowed;
}

/* ---------------------------------------------------------------------
 * Writers: change entries, the share counts and the history writer's
 * queue under the LWLock in exclusive mode.
 * ---------------------------------------------------------------------
 */

/*
 * When the server became ready to hold tenures (the keeper's first start
 * after startup or promotion), or now if that is still to come.  Under
 * the LWLock.
 */
static int64
tenure_ready_mono(int64 now)
{
	return tenure_shared->ready_mono != 0 ? tenure_shared->ready_mono : now;
}

/*
 * A tenure of the old primary continues in a new entry, after a promotion
 * that kept every transaction (src/README, P2): same holder and epoch, not
 * session-bound, renewed at the moment the server became ready, so that
 * it ends no earlier than that plus its ttl; active at once if it was
 * surely active on the old primary, else no earlier than ready plus its
 * hold-off (ttl for the automatic one).  It counts against its lease
 * owner's share, and the keeper takes its lock before it leads.  Under
 * the LWLock exclusive.
 */
static void
tenure_continue(TenureLease *lease, const TenureCarry *carry,
				const TenureRow *row, int64 now)
{
	int64		ready = tenure_ready_mono(now);
	int64		holdoff = row->holdoff_us >= 0 ? row->holdoff_us :
		Max(row->ttl_us, row->restart_ttl_us);

	AssertLockedExclusive();
	Assert(lease->state == TENURE_FREE);
	lease->state = TENURE_HELD;
	strlcpy(lease->holder, carry->holder, sizeof(lease->holder));
	lease->epoch = Max(lease->epoch, carry->epoch);
	lease->session_bound = false;
	lease->holder_pid = 0;
	tenure_share_give(lease);
	lease->holder_role = row->owner;
	tenure_share_take(lease);
	lease->acquired_mono = ready;
	lease->acquired_wall = carry->started;
	pg_atomic_write_u64(&lease->renewed_mono, (uint64) ready);
	lease->active_mono = carry->active ? ready : ready + holdoff;
	lease->pred_expiry_mono = 0;
	lease->lock_wanted = true;
	lease->lock_failed = false;
	if (!tenure_lease_tag_held(lease))
		tenure_keeper_notice(lease);
	lease->counters.last_change = GetCurrentTimestamp();
}

/*
 * Build or refresh the lease's entry from its latest committed row
 * (catalog.c reads it).  carry: what a new entry carries over from before
 * the server became ready (a holder who may still believe in a tenure
 * that ended then, or a tenure that continues; see TenureCarry).
 * Returns TENURE_LOAD_FULL if every slot is taken by a lease in use, and
 * TENURE_LOAD_SOON if one will be free once the keeper lets go of a lock.
 */
TenureLoadResult
tenure_state_load(const TenureKey *key, const TenureRow *row,
				  const TenureCarry *carry, int64 now)
{
	TenureLease *lease;
	bool		found;
	bool		soon;
	bool		built = false;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	/* an alter_lease committed after the row was read: it may be older */
	if (row->settings_gen != pg_atomic_read_u64(&tenure_shared->settings_gen))
	{
		LWLockRelease(tenure_shared->lock);
		return TENURE_LOAD_RETRY;
	}
	lease = tenure_enter_entry(key, now, &found, &soon);
	if (lease == NULL)
	{
		/* a slot is free once the keeper lets go of a lingering lock */
		if (soon)
			tenure_shared->keeper_let_go = true;
		LWLockRelease(tenure_shared->lock);
		return soon ? TENURE_LOAD_SOON : TENURE_LOAD_FULL;
	}
	if (found && !lease->dropped && lease->lease_id != row->id &&
		lease->state != TENURE_FREE && row->own)
	{
		/*
		 * This transaction dropped the lease and created it again, and the
		 * old lease is still held or being acquired.  The drop ends that
		 * tenure when it commits; until then the entry stays the old
		 * lease's, and the lease is busy.
		 */
		LWLockRelease(tenure_shared->lock);
		return TENURE_LOAD_DONE;
	}
	if (!found || lease->lease_id != row->id || lease->dropped ||
		(lease->loaded_in_recovery && !RecoveryInProgress() &&
		 lease->state == TENURE_FREE))
	{
		/*
		 * A new entry, or one of a lease dropped (and perhaps created
		 * again under its name, or its extension dropped and created
		 * again): nothing of it carries over but the latest epoch, a floor
		 * for the name's next epoch even after a restore of an older dump,
		 * and the hold-off bound of its former holders, who may believe
		 * in their tenures whatever became of the lease.
		 */
		bool		lock_held = found && lease->lock_held;
		LOCKTAG		held_tag;
		int64		floor = found ? lease->epoch : 0;
		int64		bound;
		bool		share_taken;
		Oid			share_role;

		if (found && lease->state == TENURE_HELD)
			tenure_end(lease, TENURE_END_DROPPED, now);
		bound = found ? lease->pred_expiry_mono : 0;
		/* the slot counts for the former holder's role while bound lasts */
		if (found && bound <= now)
			tenure_share_give(lease);
		share_taken = found && lease->share_taken;
		share_role = found ? lease->holder_role : InvalidOid;
		if (lock_held)
			held_tag = lease->held_tag;
		/* keep lock_held and held_tag: they belong to the keeper */
		tenure_entry_zero(lease);
		lease->share_taken = share_taken;
		lease->holder_role = share_role;
		lease->lock_held = lock_held;
		if (lock_held)
		{
			lease->held_tag = held_tag;
			/* the keeper lets the old lease's lock go */
			tenure_keeper_notice(lease);
		}
		/* except the name's epochs, which never go back */
		lease->epoch = floor;
		lease->pred_expiry_mono = bound;
		lease->loaded_in_recovery = RecoveryInProgress();

		/*
		 * A holder from before the server went down may still believe, by
		 * the ttl it knew: that of its tenure's history row if longer (a
		 * lease dropped and created again with a shorter one); after a
		 * promotion that may have lost transactions, also while the old
		 * primary goes on serving (src/README, P3).
		 */
		if (carry->kind == TENURE_CARRY_RESTART ||
			carry->kind == TENURE_CARRY_PROMOTED)
		{
			int64		believed = tenure_ready_mono(now) +
				Max(row->ttl_us, row->restart_ttl_us);

			if (carry->kind == TENURE_CARRY_PROMOTED)
				believed += (int64) tenure_demotion_bound * 1000;
			lease->pred_expiry_mono = Max(bound, believed);
			/* its tenure ended when the server went down */
			lease->counters.restarted++;
		}
		built = true;
	}
	/* epochs only grow; the row may be ahead of an idle entry */
	lease->epoch = Max(lease->epoch, row->epoch);
	lease->lease_id = row->id;
	lease->fence_lock = row->fence_lock;
	lease->owner = row->owner;
	lease->ttl_us = row->ttl_us;
	lease->holdoff_us = row->holdoff_us;
	lease->has_lock_key = row->has_lock_key;
	lease->lock_key = row->lock_key;
	lease->dropped = false;
	if (built && carry->kind == TENURE_CARRY_CONTINUED)
		tenure_continue(lease, carry, row, now);
	if (lease->state == TENURE_HELD)
		tenure_keeper_due(tenure_expiry(lease));
	LWLockRelease(tenure_shared->lock);
	tenure_log_transitions_now();
	return TENURE_LOAD_DONE;
}

/*
 * Try to reserve the lease for a new tenure of holder, or renew holder's
 * own.  See TenureReserveResult.  An expired tenure is ended on the way.
 * A reservation of another backend that outlived its ttl is taken over if
 * it issued no epoch (it locks nothing), or if it is the one with the
 * token takeover, whose transaction the caller saw end; otherwise the
 * result is TENURE_RESERVE_ABANDONED, *abandoned says whose it is, and
 * nothing changes.  A new tenure counts against the share of role
 * (InvalidOid: a superuser, exempt from the role share) and of the lease's
 * database; busy->share_limit then says the share that is used up.
 */
TenureReserveResult
tenure_state_reserve(const TenureKey *key, const char *holder,
					 bool session_bound, Oid role, uint64 token,
					 uint64 takeover, int64 *epoch, TenureBusy *busy,
					 TenureAbandoned *abandoned)
{
	TenureLease *lease;
	int64		now = tenure_mono_now();
	TenureReserveResult result;
	bool		ended = false;
	bool		wake = false;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = tenure_find(key);
	if (lease == NULL || lease->dropped)
	{
		LWLockRelease(tenure_shared->lock);
		return lease == NULL ? TENURE_RESERVE_NO_ENTRY : TENURE_RESERVE_DROPPED;
	}

	/* (a claim or handoff committing holds it: its COMMIT or abort wakes us) */
	if (lease->state == TENURE_HELD && !tenure_is_live(lease, now) &&
		!tenure_change_committing(lease))
	{
		tenure_end(lease, TENURE_END_EXPIRED, now);
		ended = true;
	}

	if (lease->handoff_pending)
	{
		/* being handed over: its commit wakes us */
		memset(busy, 0, sizeof(TenureBusy));
		strlcpy(busy->holder, lease->holder, sizeof(busy->holder));
		busy->epoch = lease->epoch;
		busy->since = lease->acquired_wall;
		LWLockRelease(tenure_shared->lock);
		if (ended)
			tenure_changed(false);
		return TENURE_RESERVE_BUSY;
	}

	if (lease->altering_pid != 0 && lease->state == TENURE_FREE)
	{
		/* alter_lease changes what a lease nobody uses may change: its end wakes us */
		Assert(lease->altering_pid != MyProcPid);
		memset(busy, 0, sizeof(TenureBusy));
		busy->altering = true;
		LWLockRelease(tenure_shared->lock);
		if (ended)
			tenure_changed(false);
		return TENURE_RESERVE_BUSY;
	}

	if (tenure_pending_expired(lease, now) && !tenure_pending_mine(lease))
	{
		/*
		 * Another backend's acquisition outlived its ttl without
		 * committing: it is void, and its COMMIT will fail at PRE_COMMIT.
		 * If it issued its epoch, its transaction holds the lease's row
		 * lock, which our own issue would wait for: the caller makes sure
		 * that transaction has ended before it takes the reservation over.
		 */
		if (TransactionIdIsValid(lease->pending_xid) &&
			lease->pending_token != takeover)
		{
			abandoned->pid = lease->holder_pid;
			abandoned->xid = lease->pending_xid;
			abandoned->token = lease->pending_token;
			LWLockRelease(tenure_shared->lock);
			if (ended)
				tenure_changed(false);
			return TENURE_RESERVE_ABANDONED;
		}
		tenure_unreserve(lease);
	}

	if (lease->state != TENURE_FREE)
	{
		/* ours (perhaps acquired earlier in this very transaction): renew */
		int64		held = tenure_epoch_of(lease, holder, now);

		if (held != 0)
		{
			tenure_renew_to(lease, now);
			*epoch = held;
			result = TENURE_RESERVE_RENEWED;
		}
		else
		{
			busy->foreign = false;
			busy->no_memory = false;
			busy->altering = false;
			strlcpy(busy->holder, lease->holder, sizeof(busy->holder));
			busy->epoch = lease->state == TENURE_HELD ? lease->epoch : 0;
			busy->since = lease->acquired_wall;
			if (lease->state == TENURE_HELD && !tenure_change_committing(lease))
				busy->until_mono = tenure_expiry(lease);
			else if (lease->state == TENURE_PENDING && !lease->committing &&
					 !lease->issuing)
				busy->until_mono = lease->acquired_mono + lease->ttl_us;
			else
				busy->until_mono = 0;	/* its commit, or issue, wakes us */
			result = TENURE_RESERVE_BUSY;
		}
	}
	else if ((result = tenure_share_reserve_check(lease, role, now,
												  &busy->share_limit)) != TENURE_RESERVE_RESERVED)
	{
		/* result says which share is used up */
	}
	else
	{
		lease->state = TENURE_PENDING;
		strlcpy(lease->holder, holder, sizeof(lease->holder));
		lease->session_bound = session_bound;
		lease->holder_role = OidIsValid(role) ? role : GetUserId();
		tenure_share_take(lease);
		lease->holder_pid = MyProcPid;
		lease->holder_start = MyStartTimestamp;
		tenure_note_mine(&lease->key);
		lease->pending_token = token;
		lease->pending_epoch = 0;
		lease->pending_xid = InvalidTransactionId;
		lease->committing = false;
		lease->issuing = false;
		lease->acquired_mono = now;
		lease->acquired_wall = GetCurrentTimestamp();
		pg_atomic_write_u64(&lease->renewed_mono, (uint64) now);
		if (lease->holdoff_us >= 0)
			lease->active_mono = now + lease->holdoff_us;
		else
			lease->active_mono = Max(now, lease->pred_expiry_mono);
		lease->lock_wanted = true;
		lease->lock_failed = false;
		/* a lock the keeper still holds from the last tenure will do */
		if (!tenure_lease_tag_held(lease))
		{
			tenure_keeper_notice(lease);
			wake = true;
		}
		result = TENURE_RESERVE_RESERVED;
	}
	LWLockRelease(tenure_shared->lock);

	if (wake)
		tenure_wake_keeper();
	if (ended)
		tenure_changed(false);
	return result;
}

/*
 * The keeper's answer to the lock request of a reservation: granted (it
 * holds the lease's lock), refused (a foreign session holds it, or the
 * lock table is full: the reservation is given back and *busy says
 * which), or not yet.
 */
TenureLockAnswer
tenure_state_lock_answer(const TenureKey *key, uint64 token, TenureBusy *busy)
{
	TenureLease *lease;
	TenureLockAnswer answer = TENURE_LOCK_WAITING;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = tenure_find(key);
	if (lease == NULL || lease->state != TENURE_PENDING ||
		lease->pending_token != token)
		answer = TENURE_LOCK_GONE;	/* cannot happen while our transaction
									 * runs */
	else if (tenure_lease_tag_held(lease))
		answer = TENURE_LOCK_GRANTED;
	else if (lease->lock_failed)
	{
		tenure_unreserve(lease);
		memset(busy, 0, sizeof(TenureBusy));
		busy->foreign = true;
		busy->no_memory = lease->lock_no_memory;
		answer = TENURE_LOCK_REFUSED;
	}
	LWLockRelease(tenure_shared->lock);
	if (answer == TENURE_LOCK_REFUSED)
		tenure_changed(false);
	return answer;
}

/*
 * The reservation with the given token is about to issue its epoch: until
 * tenure_state_issued() nobody takes it over, whatever its age (see the
 * header).  False if it is not ours any more: it outlived its ttl before
 * (the keeper was slow to answer) and was taken over.
 */
bool
tenure_state_issuing(const TenureKey *key, uint64 token)
{
	TenureLease *lease;
	bool		ours = false;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = tenure_find(key);
	if (lease != NULL && tenure_reserved_by_me(lease, token))
	{
		lease->issuing = true;
		ours = true;
	}
	LWLockRelease(tenure_shared->lock);
	return ours;
}

/*
 * The reservation with the given token issued its epoch in transaction
 * xid.  Its ttl counts from now on: the time it spent issuing, waiting for
 * whatever transaction held the lease's row, is not counted against it.
 * Also renews it, so that its tenure, once committed, lasts a ttl from at
 * least now.  False if it is not ours any more (cannot happen after
 * tenure_state_issuing(), but the caller fails cleanly if it does).
 */
bool
tenure_state_issued(const TenureKey *key, uint64 token, int64 epoch,
					TransactionId xid)
{
	TenureLease *lease;
	int64		now = tenure_mono_now();
	bool		ours = false;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = tenure_find(key);
	if (lease != NULL && tenure_reserved_by_me(lease, token))
	{
		lease->pending_epoch = epoch;
		lease->pending_xid = xid;
		lease->issuing = false;
		lease->acquired_mono = Max(lease->acquired_mono, now);
		tenure_renew_to(lease, now);
		ours = true;
	}
	LWLockRelease(tenure_shared->lock);
	/* acquirers waiting for the issue to end may now wait for its ttl */
	if (ours)
		ConditionVariableBroadcast(&tenure_shared->cv);
	return ours;
}

/*
 * PRE_COMMIT of an acquisition that issued its epoch: if its reservation
 * is still ours and within its ttl, mark it committing, after which
 * nobody takes it over, and return true.  Otherwise return false with
 * *ttl_us the lease's ttl (0 if it has no entry).
 */
bool
tenure_state_commit_reservation(const TenureKey *key, uint64 token,
								int64 *ttl_us)
{
	TenureLease *lease;
	int64		now = tenure_mono_now();
	bool		valid = false;

	*ttl_us = 0;
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = tenure_find(key);
	if (lease != NULL && tenure_reserved_by_me(lease, token) &&
		now < lease->acquired_mono + lease->ttl_us)
	{
		lease->committing = true;
		valid = true;
	}
	else if (lease != NULL)
		*ttl_us = lease->ttl_us;
	LWLockRelease(tenure_shared->lock);
	return valid;
}

/*
 * PRE_COMMIT of a claim_epoch() by holder, whose tenure was at old_epoch
 * when it claimed: true if that tenure is still live (or is the one this
 * very transaction is acquiring, whose own check covers it); the claim is
 * then committing, and the tenure neither expires nor can be reserved
 * until tenure_state_publish_claim() or tenure_state_cancel_claim().
 */
bool
tenure_state_claim_commit(const TenureKey *key, const char *holder,
						  int64 old_epoch)
{
	TenureLease *lease;
	int64		now = tenure_mono_now();
	bool		valid = false;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = tenure_find(key);
	if (lease != NULL && !lease->dropped &&
		strcmp(lease->holder, holder) == 0)
	{
		if (tenure_pending_mine(lease))
			valid = lease->pending_epoch == old_epoch;
		else if (tenure_is_live(lease, now) && lease->epoch == old_epoch &&
				 (lease->claim_pid == 0 || lease->claim_pid == MyProcPid))
		{
			lease->claim_pid = MyProcPid;
			valid = true;
		}
	}
	LWLockRelease(tenure_shared->lock);
	return valid;
}

/*
 * alter_lease() of the lease with the given id is about to change what
 * needs a lease nobody uses (its lock_key, or a shorter ttl): if nobody
 * holds, acquires or hands it over now, pin its entry until the
 * transaction ends (tenure_state_publish_alter(),
 * tenure_state_cancel_alter()), so that nobody reserves or evicts it
 * meanwhile.  A former holder's hold-off bound is kept: it was computed
 * with the ttl that holder knew.
 */
TenureAlterCheck
tenure_state_alter_pin(const TenureKey *key, int64 lease_id)
{
	TenureLease *lease;
	TenureAlterCheck result = TENURE_ALTER_OK;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = tenure_find(key);
	if (lease == NULL || lease->dropped || lease->lease_id != lease_id)
		result = TENURE_ALTER_NO_ENTRY;
	else if (lease->state != TENURE_FREE || lease->handoff_pending ||
			 lease->lock_wanted || lease->altering_pid != 0)
		result = TENURE_ALTER_IN_USE;
	else
		lease->altering_pid = MyProcPid;
	LWLockRelease(tenure_shared->lock);
	return result;
}

/*
 * tenure.stats_reset(): zero the counters of one lease of database dbid,
 * or of all of them (name NULL).
 */
void
tenure_state_stats_reset(Oid dbid, const char *name)
{
	HASH_SEQ_STATUS scan;
	TenureLease *lease;
	int			j;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&scan, tenure_leases);
	while ((lease = hash_seq_search(&scan)) != NULL)
	{
		if (lease->key.dbid != dbid ||
			(name != NULL && strcmp(lease->key.name, name) != 0))
			continue;
		memset(&lease->counters, 0, sizeof(TenureCounters));
		lease->counters.last_gap_us = -1;
		for (j = 0; j < TENURE_FENCED_KINDS; j++)
			pg_atomic_write_u64(&lease->fenced[j], 0);
	}
	LWLockRelease(tenure_shared->lock);
}

/*
 * The keeper's question: which run of the history writer to start now.
 * Returns true with *dbid (InvalidOid: list the databases, from *after
 * on) when one is due; otherwise false, with *due the time one will be
 * (0: none).
 */
bool
tenure_state_history_job(int64 now, Oid *dbid, Oid *after, int64 *due)
{
	bool		job = false;

	*dbid = InvalidOid;
	*after = InvalidOid;
	*due = 0;
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	if (tenure_shared->history_list || tenure_shared->history_ndbs > 0)
	{
		if (now < tenure_shared->history_due_mono)
			*due = tenure_shared->history_due_mono;
		else if (tenure_shared->history_ndbs > 0)
		{
			/* the queued databases first: a listing adds only what fits */
			*dbid = tenure_shared->history_dbs[0];
			tenure_shared->history_dbs[0] =
				tenure_shared->history_dbs[--tenure_shared->history_ndbs];
			job = true;
		}
		else
		{
			*after = tenure_shared->history_list_after;
			tenure_shared->history_list = false;
			job = true;
		}
		if (tenure_shared->history_ndbs == 0 && !tenure_shared->history_list)
			tenure_shared->history_due_mono = 0;
	}
	LWLockRelease(tenure_shared->lock);
	return job;
}

/*
 * A run of the history writer could not start (no free background worker
 * slot): try the database again at "retry" (InvalidOid: the list).
 */
void
tenure_state_history_retry(Oid dbid, Oid after, int64 retry)
{
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	if (OidIsValid(dbid))
		tenure_history_due(dbid, retry - TENURE_HISTORY_DELAY_US);
	else
	{
		tenure_shared->history_list = true;
		tenure_shared->history_list_after = after;
		if (tenure_shared->history_due_mono == 0 ||
			retry < tenure_shared->history_due_mono)
			tenure_shared->history_due_mono = retry;
	}
	LWLockRelease(tenure_shared->lock);
}

/*
 * The listing run found these databases (in increasing OID order); if
 * there were more than fit, it lists again from the last one given.
 */
void
tenure_state_history_add_dbs(const Oid *dbids, int n, bool more)
{
	int			i;
	int64		now = tenure_mono_now();

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	/* as many as the queue has room for; the listing goes on after them */
	for (i = 0; i < n && tenure_shared->history_ndbs < TENURE_HISTORY_DBS; i++)
		tenure_history_due(dbids[i], now - TENURE_HISTORY_DELAY_US);
	if ((more || i < n) && i > 0)
	{
		tenure_shared->history_list = true;
		tenure_shared->history_list_after = dbids[i - 1];
	}
	else if (more || i < n)
	{
		/* no room at all: list again from here once the queue drained */
		tenure_shared->history_list = true;
	}
	LWLockRelease(tenure_shared->lock);
	tenure_wake_keeper();
}

/*
 * The end of the lease's tenure at "epoch" is in the history (its
 * transaction committed): nothing left to write, unless another tenure
 * has ended since.
 */
void
tenure_state_history_written(const TenureKey *key, int64 epoch)
{
	TenureLease *lease;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = tenure_find(key);
	if (lease != NULL && lease->ended_reason != TENURE_END_NONE &&
		lease->ended_epoch == epoch)
		lease->ended_reason = TENURE_END_NONE;
	LWLockRelease(tenure_shared->lock);
}

/*
 * Whether this backend holds the lease session-bound or has reserved it.
 */
static inline bool
tenure_is_mine(const TenureLease *lease)
{
	return lease->holder_pid == MyProcPid &&
		lease->holder_start == MyStartTimestamp &&
		((lease->state == TENURE_HELD && lease->session_bound) ||
		 lease->state == TENURE_PENDING);
}

/*
 * Note that this backend reserves, or waits for, the lease with this key
 * (tenure_mine above).  Under the LWLock exclusive; cannot fail (src/README,
 * F8): a fixed array, and at worst the exit scans.
 */
void
tenure_note_mine(const TenureKey *key)
{
	int			i;
	int			kept = 0;

	AssertLockedExclusive();
	for (i = 0; i < tenure_nmine; i++)
		if (memcmp(&tenure_mine[i], key, sizeof(TenureKey)) == 0)
			return;
	if (tenure_nmine == TENURE_MINE_MAX)
	{
		/* keep only the leases still ours */
		for (i = 0; i < tenure_nmine; i++)
		{
			TenureLease *lease = tenure_find(&tenure_mine[i]);

			if (lease != NULL && tenure_is_mine(lease))
				tenure_mine[kept++] = tenure_mine[i];
		}
		tenure_nmine = kept;
	}
	if (tenure_nmine < TENURE_MINE_MAX)
		tenure_mine[tenure_nmine++] = *key;
	else
		tenure_mine_overflow = true;
}

/*
 * End the lease's tenure if this backend holds it session-bound, or give
 * it back if this backend has reserved it.  True if it did either.
 */
static bool
tenure_let_go_mine(TenureLease *lease, int64 now)
{
	if (!tenure_is_mine(lease))
		return false;
	if (lease->state == TENURE_HELD)
		tenure_end(lease, TENURE_END_SESSION, now);
	else
		tenure_unreserve(lease);
	return true;
}

/*
 * before_shmem_exit callback: end the session-bound tenures this backend
 * holds and cancel its pending acquisitions.  Shared memory only; cannot
 * fail (src/README, F8).
 */
static void
tenure_session_exit(int code, Datum arg)
{
	TenureLease *lease;
	int64		now;
	bool		changed = false;

	if (!tenure_state_attached())
		return;

	now = tenure_mono_now();
	tenure_state_begin_update();
	if (tenure_mine_overflow)
	{
		HASH_SEQ_STATUS scan;

		hash_seq_init(&scan, tenure_leases);
		while ((lease = hash_seq_search(&scan)) != NULL)
			changed |= tenure_let_go_mine(lease, now);
	}
	else
	{
		int			i;

		for (i = 0; i < tenure_nmine; i++)
			if ((lease = tenure_find(&tenure_mine[i])) != NULL)
				changed |= tenure_let_go_mine(lease, now);
	}
	tenure_state_end_update(changed);
}

/*
 * Make sure this backend ends its session-bound tenures when it exits.
 */
void
tenure_register_session_exit(void)
{
	if (tenure_exit_registered)
		return;
	before_shmem_exit(tenure_session_exit, (Datum) 0);
	tenure_exit_registered = true;
}

/* ---------------------------------------------------------------------
 * Publishing a transaction's changes (txn.c): under one hold of the
 * LWLock in exclusive mode, taken by tenure_state_begin_update() and
 * released by tenure_state_end_update(); the verbs in between assert it.
 * ---------------------------------------------------------------------
 */

/*
 * Publishing a transaction's actions (txn.c): take the LWLock exclusive,
 * apply every action with the verbs below, release it and wake whoever
 * waits.  Readers see all of a transaction's changes or none.  Nothing in
 * between can fail (src/README, F8); txn.c publishes a commit's changes in
 * a critical section, so that an assertion build catches an allocation.
 */
void
tenure_state_begin_update(void)
{
	/* an ERROR or FATAL is never raised while we hold it, but be sure */
	if (LWLockHeldByMe(tenure_shared->lock))
		LWLockRelease(tenure_shared->lock);
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
}

void
tenure_state_end_update(bool changed)
{
	bool		keeper_work = tenure_shared->keeper_urgent ||
		tenure_shared->keeper_scan || tenure_shared->keeper_wake;

	LWLockRelease(tenure_shared->lock);
	if (changed)
		tenure_changed(keeper_work);
	else
		tenure_log_transitions_now();
}

/*
 * Give back this backend's reservation with the given token (its
 * transaction or subtransaction aborted).  True if there was one.
 */
bool
tenure_state_cancel(const TenureKey *key, uint64 token)
{
	TenureLease *lease;

	AssertLockedExclusive();
	lease = tenure_find(key);
	if (lease == NULL || !tenure_reserved_by_me(lease, token))
		return false;
	tenure_unreserve(lease);
	return true;
}

/*
 * The acquisition with the given token committed: its reservation becomes
 * the tenure, at the epoch it issued.
 */
void
tenure_state_publish_acquire(const TenureKey *key, uint64 token)
{
	TenureLease *lease;

	AssertLockedExclusive();
	lease = tenure_find(key);
	if (lease == NULL || !tenure_reserved_by_me(lease, token))
		return;
	lease->state = TENURE_HELD;
	lease->committing = false;
	lease->pending_xid = InvalidTransactionId;
	/* the keeper keeps its lock, or revokes us if it lost it */
	lease->lock_wanted = true;
	lease->lock_failed = false;
	if (!tenure_lease_tag_held(lease))
		tenure_keeper_notice(lease);
	tenure_keeper_due(tenure_expiry(lease));
	lease->epoch = Max(lease->epoch, lease->pending_epoch);
	lease->pending_epoch = 0;
	{
		TenureTransition *t = tenure_transition(TENURE_TRANSITION_START, lease);
		/* the hand-over gap: from the end of the last tenure to this one's start */
		int64		gap = lease->ended_mono != 0 ?
			Max(lease->active_mono - lease->ended_mono, 0) : -1;

		if (t != NULL)
		{
			memcpy(t->holder, lease->holder, sizeof(t->holder));
			t->epoch = lease->epoch;
			t->has_prev = lease->ended_mono != 0;
			memcpy(t->prev_holder, lease->ended_holder, sizeof(t->prev_holder));
			t->prev_epoch = lease->ended_epoch;
			t->prev_reason = lease->last_end_reason;
			t->gap_us = gap;
		}
		if (gap >= 0)
			lease->counters.last_gap_us = gap;
		lease->ended_mono = 0;
	}
	lease->ended_reason = TENURE_END_NONE;
	lease->transitions++;
	lease->history_starts++;
	lease->counters.started++;
	lease->counters.last_change = GetCurrentTimestamp();
}

/*
 * The end of a claim that passed its PRE_COMMIT check: the tenure's expiry
 * counts again.  Under the LWLock exclusive.
 */
static bool
tenure_claim_done(TenureLease *lease)
{
	AssertLockedExclusive();
	if (lease->claim_pid != MyProcPid)
		return false;
	lease->claim_pid = 0;
	if (lease->state == TENURE_HELD)
		tenure_keeper_due(tenure_expiry(lease));
	return true;
}

/*
 * A claim that passed its PRE_COMMIT check aborted: nothing changes.
 * Returns whether it had passed it.  Between begin_update and end_update;
 * cannot fail (src/README, F8).
 */
bool
tenure_state_cancel_claim(const TenureKey *key)
{
	TenureLease *lease;

	AssertLockedExclusive();
	lease = tenure_find(key);
	return lease != NULL && tenure_claim_done(lease);
}

/*
 * Claims committed: "claims" epochs claimed in a row by holder, the given
 * epoch the last of them.  Its PRE_COMMIT check
 * kept holder's tenure from expiring or being reserved since; if it ended
 * all the same (its session-bound holder's backend exited, the keeper
 * revoked it), the end covers the claimed epoch, so that the history
 * writer closes the claim's row too.
 */
void
tenure_state_publish_claim(const TenureKey *key, int64 epoch, int64 claims,
						   const char *holder)
{
	TenureLease *lease;

	AssertLockedExclusive();
	lease = tenure_find(key);
	if (lease == NULL)
		return;
	(void) tenure_claim_done(lease);
	if (lease->state != TENURE_HELD && lease->ended_reason != TENURE_END_NONE &&
		lease->ended_epoch == lease->epoch && lease->ended_epoch < epoch &&
		strcmp(lease->ended_holder, holder) == 0)
	{
		lease->ended_epoch = epoch;
		tenure_history_due(lease->key.dbid, tenure_mono_now());
	}
	{
		TenureTransition *t = tenure_transition(TENURE_TRANSITION_CLAIM, lease);

		if (t != NULL)
		{
			strlcpy(t->holder, holder, sizeof(t->holder));
			t->epoch = Max(lease->epoch, epoch);
			t->prev_epoch = lease->epoch;
		}
	}
	lease->epoch = Max(lease->epoch, epoch);
	lease->transitions += claims;
	lease->history_starts += (uint32) claims;
	lease->counters.claims += claims;
	lease->counters.last_change = GetCurrentTimestamp();
}

/*
 * A release committed; its transaction already wrote the history.
 */
void
tenure_state_publish_release(const TenureKey *key, int64 now)
{
	TenureLease *lease;

	AssertLockedExclusive();
	lease = tenure_find(key);
	if (lease == NULL)
		return;
	if (lease->state == TENURE_HELD)
		tenure_end(lease, TENURE_END_RELEASED, now);
	lease->ended_reason = TENURE_END_NONE;
}

/*
 * drop_lease() of the lease with the given id committed.  Its entry stays,
 * marked dropped, until its slot is needed (see the header).
 */
void
tenure_state_publish_drop(const TenureKey *key, int64 lease_id, int64 now)
{
	TenureLease *lease;

	AssertLockedExclusive();
	lease = tenure_find(key);
	/* not a lease created again under the name since */
	if (lease == NULL || lease->lease_id != lease_id)
		return;
	if (lease->state == TENURE_HELD)
		tenure_end(lease, TENURE_END_DROPPED, now);
	else if (lease->state == TENURE_PENDING)
		tenure_unreserve(lease);
	lease->dropped = true;
	/* its lock goes at once */
	lease->lock_linger_mono = 0;
	if (lease->lock_held)
		tenure_keeper_notice(lease);
}

/*
 * DROP EXTENSION or DROP DATABASE committed: end every tenure and pending
 * acquisition of database dbid and mark its entries dropped; the keeper
 * lets their locks go, and the entries of a dropped database go as soon as
 * their slots are needed.  A pending acquisition's COMMIT then fails at
 * PRE_COMMIT.
 */
void
tenure_state_drop_database(Oid dbid, int64 now)
{
	HASH_SEQ_STATUS scan;
	TenureLease *lease;

	AssertLockedExclusive();
	hash_seq_init(&scan, tenure_leases);
	while ((lease = hash_seq_search(&scan)) != NULL)
	{
		if (lease->key.dbid != dbid)
			continue;
		if (lease->state == TENURE_HELD)
			tenure_end(lease, TENURE_END_DROPPED, now);
		else if (lease->state == TENURE_PENDING)
			tenure_unreserve(lease);
		/* the history went with the extension, or there is none to write */
		lease->ended_reason = TENURE_END_NONE;
		lease->dropped = true;

		/*
		 * A dropped database's leases have no successor (a database created
		 * again has a new OID): their hold-off bounds keep no slot.  After
		 * DROP EXTENSION, which runs in its own database (DROP DATABASE never
		 * does), leases created again under the names inherit them.
		 */
		if (dbid != MyDatabaseId)
			lease->pred_expiry_mono = 0;
		/* its lock goes at once */
		lease->lock_linger_mono = 0;
		if (lease->lock_held)
			tenure_keeper_notice(lease);
	}
}

/*
 * alter_lease() committed the settings in row (the lease's new row): its
 * entry, if it has one, takes them, and loads of rows read before now must
 * read them again.  A longer ttl applies to the current tenure at once; a
 * hold-off applies to tenures that start from now on.  A new lock_key or a
 * shorter ttl came with the entry pinned (pinned), nobody using it.
 */
void
tenure_state_publish_alter(const TenureKey *key, const TenureRow *row,
						   bool pinned)
{
	TenureLease *lease;

	AssertLockedExclusive();
	pg_atomic_fetch_add_u64(&tenure_shared->settings_gen, 1);
	lease = tenure_find(key);
	if (lease == NULL || lease->dropped || lease->lease_id != row->id)
		return;
	if (pinned && lease->altering_pid == MyProcPid)
		lease->altering_pid = 0;
	Assert(lease->state == TENURE_FREE || row->ttl_us >= lease->ttl_us);
	lease->ttl_us = row->ttl_us;
	lease->holdoff_us = row->holdoff_us;
	if (lease->has_lock_key != row->has_lock_key ||
		(row->has_lock_key && lease->lock_key != row->lock_key))
	{
		Assert(lease->state == TENURE_FREE && !lease->lock_wanted);
		lease->has_lock_key = row->has_lock_key;
		lease->lock_key = row->has_lock_key ? row->lock_key : 0;
		/* a lingering lock under the old key goes at once */
		lease->lock_linger_mono = 0;
		if (lease->lock_held)
			tenure_keeper_notice(lease);
	}
	if (lease->state == TENURE_HELD)
		tenure_keeper_due(tenure_expiry(lease));
}

/*
 * An alter_lease() that pinned the lease's entry (pinned) will not commit:
 * unpin it.  True if it was pinned.
 */
bool
tenure_state_cancel_alter(const TenureKey *key, bool pinned)
{
	TenureLease *lease;

	AssertLockedExclusive();
	if (!pinned)
		return false;
	lease = tenure_find(key);
	if (lease == NULL || lease->altering_pid != MyProcPid)
		return false;
	lease->altering_pid = 0;
	return true;
}
