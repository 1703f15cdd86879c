/*-------------------------------------------------------------------------
 *
 * state_keeper.c
 *		The keeper's side of the lease table: its start and exit, and its
 *		pass over the entries, which ends expired tenures and takes and
 *		lets go of the leases' advisory locks.  keeper.c runs the process.
 *
 * Part of the state module (state_internal.h); the locking protocol is
 * stated in state.c.  The keeper alone writes an entry's lock_held,
 * held_tag, lock_failed and lock_no_memory; it takes and releases
 * heavyweight advisory locks while holding the LWLock exclusive, always
 * with dontWait, so that the order "tenure LWLock, then lock partition
 * LWLock" is the only one that occurs.
 *
 * INTERFACE ROUTINES, by the lock mode they take
 *
 *	LWLock in exclusive mode:
 *		tenure_state_keeper_start()		a keeper starts, holding no lock
 *		tenure_state_keeper_exit()		a keeper exits, its locks gone
 *		tenure_state_keeper_pass()		a pass over the queued entries, or
 *										over all of them
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/timestamp.h"

#include "state_internal.h"

/*
 * A keeper starts: whatever locks an earlier keeper held died with it, so
 * clear the flags and let the first pass take the locks of live tenures
 * again.  The first start after startup or promotion makes the server
 * ready to hold tenures.  Takes the LWLock in exclusive mode.
 */
void
tenure_state_keeper_start(void)
{
	HASH_SEQ_STATUS scan;
	TenureLease *lease;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&scan, tenure_leases);
	while ((lease = hash_seq_search(&scan)) != NULL)
	{
		lease->lock_held = false;
		lease->lock_failed = false;
	}
	tenure_shared->keeper_pid = MyProcPid;
	tenure_shared->keeper_latch = MyLatch;
	tenure_shared->keeper_scan = true;
	if (tenure_shared->keeper_starts++ == 0)
	{
		tenure_shared->ready_time = GetCurrentTimestamp();
		tenure_shared->ready_mono = tenure_mono_now();
		/* tenures open when the server went down end in the history now */
		tenure_shared->history_list = true;
		tenure_shared->history_list_after = InvalidOid;
		tenure_shared->history_due_mono = tenure_shared->ready_mono;
	}
	LWLockRelease(tenure_shared->lock);
}

/*
 * The keeper exits, before its session locks are released: it holds no
 * lock any more (leader_is then answers false for lock_key tenures until
 * a new keeper has their locks again), and backends stop setting its
 * latch.  Takes the LWLock in exclusive mode; cannot fail (src/README,
 * F8).
 */
void
tenure_state_keeper_exit(void)
{
	HASH_SEQ_STATUS scan;
	TenureLease *lease;

	if (!tenure_state_attached())
		return;
	tenure_state_begin_update();
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
tenure_lock_table_full(void)
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
 * Whether the shared lock table is nearly full, found out once per pass of
 * the keeper and again after it took a lock: then no lock lingers and no
 * new tenure gets a lock, since backends need room too (a new connection
 * locks its database, a COMMIT takes a fence lock and maybe NOTIFY's lock).
 * It has room while TENURE_LOCK_ROOM locks on tags nobody else uses can be
 * had.
 */
#define TENURE_LOCK_ROOM	8

static int	tenure_pass_tight = -1; /* -1: not known yet in this pass */
static bool tenure_pass_took = false;	/* the pass took a lock */

static bool
tenure_lock_table_tight(void)
{
	LOCKTAG		probe[TENURE_LOCK_ROOM];
	int			n;
	int			i;

	if (tenure_pass_tight >= 0)
		return tenure_pass_tight;
	for (n = 0; n < TENURE_LOCK_ROOM; n++)
	{
		SET_LOCKTAG_ADVISORY(probe[n], InvalidOid, (uint32) n,
							 (uint32) MyProcPid, TENURE_PROBE_LOCK_FIELD4);
		if (tenure_lock_try(&probe[n], ExclusiveLock, true) == LOCKACQUIRE_NOT_AVAIL)
			break;
	}
	for (i = 0; i < n; i++)
		LockRelease(&probe[i], ExclusiveLock, true);
	tenure_pass_tight = (n < TENURE_LOCK_ROOM);
	return tenure_pass_tight;
}

/*
 * Let go of the lease's lock now; the keeper's.
 */
static void
tenure_keeper_let_go(TenureLease *lease)
{
	AssertLockedExclusive();
	LockRelease(&lease->held_tag, ExclusiveLock, true);
	lease->lock_held = false;
	tenure_pass_tight = -1;		/* one entry more spare */
}

/*
 * Let go of every lock that no tenure wants, lingering or not: the shared
 * lock table is full, and a wanted lock needs the room.  Returns whether
 * there was any.
 */
static bool
tenure_keeper_let_go_all(void)
{
	HASH_SEQ_STATUS scan;
	TenureLease *lease;
	bool		any = false;

	AssertLockedExclusive();
	hash_seq_init(&scan, tenure_leases);
	while ((lease = hash_seq_search(&scan)) != NULL)
	{
		if (lease->lock_held && !lease->lock_wanted)
		{
			tenure_keeper_let_go(lease);
			any = true;
		}
	}
	return any;
}

/*
 * Queue an entry again for a later pass of the keeper: it keeps a lock
 * that lingers (see TENURE_LOCK_LINGER_US).
 */
static void
tenure_keeper_requeue(TenureLease *lease)
{
	AssertLockedExclusive();
	if (lease->keeper_queued)
		return;
	if (tenure_shared->keeper_nqueued < TENURE_KEEPER_QUEUE)
	{
		tenure_shared->keeper_queue[tenure_shared->keeper_nqueued++] = lease->key;
		lease->keeper_queued = true;
	}
	else
		tenure_shared->keeper_scan = true;
}

/*
 * The keeper's work on one entry: end its tenure if it expired, let go of
 * a lock nobody wants (or that belongs to an earlier lease of the name)
 * unless it may still linger (let_go: not even then), take a wanted one.
 * A tenure whose lock a foreign session took while no keeper ran is
 * revoked and noted in revoked[] (up to maxrevoked; *nrevoked counts all).
 * Sets *linger to when a lingering lock may go (0 if none).  Returns
 * whether anything changed.
 */
static bool
tenure_keeper_tend(TenureLease *lease, int64 now, bool let_go,
				   TenureRevoked *revoked, int maxrevoked, int *nrevoked,
				   int64 *linger)
{
	LOCKTAG		tag;
	bool		changed = false;

	AssertLockedExclusive();
	*linger = 0;
	if (lease->state == TENURE_HELD && now >= tenure_expiry(lease) &&
		!tenure_change_committing(lease))
	{
		tenure_end(lease, TENURE_END_EXPIRED, now);
		changed = true;
	}

	tenure_lease_tag(lease, &tag);

	if (lease->lock_held && !tenure_lease_tag_held(lease))
	{
		/* an earlier lease's of the name */
		tenure_keeper_let_go(lease);
		changed = true;
	}
	else if (lease->lock_held && !lease->lock_wanted)
	{
		if (!let_go && now < lease->lock_linger_mono &&
			tenure_shared->keeper_nlinger < TENURE_LOCK_LINGER_MAX &&
			!tenure_lock_table_tight())
		{
			*linger = lease->lock_linger_mono;
			tenure_shared->keeper_nlinger++;
		}
		else
		{
			tenure_keeper_let_go(lease);
			changed = true;
		}
	}

	if (lease->lock_wanted && !lease->lock_held && !lease->lock_failed)
	{
		LockAcquireResult r = LOCKACQUIRE_NOT_AVAIL;
		bool		room = true;

		/*
		 * A new tenure's lock only while the table keeps TENURE_LOCK_ROOM
		 * spare, so that new connections and COMMITs still find room;
		 * first make room from locks nobody wants.  A held tenure's lock
		 * (the keeper restarted) is taken back whatever the room.
		 */
		if (lease->state != TENURE_HELD && tenure_lock_table_tight())
		{
			/*
			 * Look again after letting go, even of nothing: locks this
			 * pass let go of earlier (released leases ahead in the queue)
			 * may have made the room already.
			 */
			(void) tenure_keeper_let_go_all();
			room = !tenure_lock_table_tight();
		}
		if (room)
		{
			r = tenure_lock_try(&tag, ExclusiveLock, true);
			/* a full lock table: first make room from locks nobody wants */
			if (r == LOCKACQUIRE_NOT_AVAIL && tenure_keeper_let_go_all())
				r = tenure_lock_try(&tag, ExclusiveLock, true);
		}
		if (r != LOCKACQUIRE_NOT_AVAIL)
		{
			lease->lock_held = true;
			lease->held_tag = tag;
			tenure_pass_took = true;
			tenure_pass_tight = -1;		/* one entry less spare */
		}
		else if (lease->state == TENURE_HELD)
		{
			/* we lost it while we were away: the tenure is over */
			tenure_end(lease, TENURE_END_REVOKED, now);
			if (*nrevoked < maxrevoked)
			{
				revoked[*nrevoked].key = lease->key;
				revoked[*nrevoked].epoch = lease->ended_epoch;
			}
			(*nrevoked)++;
		}
		else
		{
			lease->lock_no_memory = !room || tenure_lock_table_full();
			lease->lock_failed = true;
			lease->lock_wanted = false;
		}
		changed = true;
	}
	return changed;
}

/*
 * One pass of the keeper (see tenure_keeper_tend() for its work on an
 * entry).  It looks only at the entries backends queued for it, unless
 * the queue overflowed, the keeper just started, a held tenure may have
 * expired (keeper_due_mono), or a backend needs a slot that a lingering
 * lock keeps (keeper_let_go): then it looks at every entry and finds the
 * next earliest expiry.  So an idle keeper costs nothing per lease, and
 * one acquisition costs it one entry, however many leases there are.
 * Entries whose lock lingers stay queued.  Returns when the keeper must
 * look again at the latest: the earliest of "next", keeper_due_mono and
 * the lingering locks' ends.  (Entries of dropped leases stay until their
 * slot is needed: they remember the name's latest epoch.)  Takes the
 * LWLock in exclusive mode.
 */
int64
tenure_state_keeper_pass(int64 now, int64 next, TenureRevoked *revoked,
						 int maxrevoked, int *nrevoked)
{
	static TenureKey work[TENURE_KEEPER_QUEUE];
	TenureLease *lease;
	bool		changed = false;
	bool		let_go;
	int64		linger;
	int64		linger_next = PG_INT64_MAX;

	*nrevoked = 0;
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	let_go = tenure_shared->keeper_let_go;
	tenure_shared->keeper_let_go = false;
	tenure_shared->keeper_urgent = false;
	/* counted again: the locks this pass keeps */
	tenure_shared->keeper_nlinger = 0;
	tenure_pass_tight = -1;
	tenure_pass_took = false;
	if (tenure_shared->keeper_scan || let_go ||
		now >= tenure_shared->keeper_due_mono)
	{
		HASH_SEQ_STATUS scan;
		int64		due = PG_INT64_MAX;

		/* the queue's entries are all looked at below */
		tenure_shared->keeper_nqueued = 0;
		tenure_shared->keeper_scan = false;
		hash_seq_init(&scan, tenure_leases);
		while ((lease = hash_seq_search(&scan)) != NULL)
		{
			lease->keeper_queued = false;
			changed |= tenure_keeper_tend(lease, now, let_go, revoked,
										  maxrevoked, nrevoked, &linger);
			/*
			 * (A tenure being handed over or claimed does not expire until
			 * the handoff or claim commits, perhaps after a synchronous
			 * replication wait; its publication or cancellation sets the
			 * keeper's next look.)
			 */
			if (lease->state == TENURE_HELD && !tenure_change_committing(lease))
				due = Min(due, tenure_expiry(lease));
			if (linger != 0)
			{
				tenure_keeper_requeue(lease);
				linger_next = Min(linger_next, linger);
			}
		}
		tenure_shared->keeper_due_mono = due;
	}
	else
	{
		int			nwork = tenure_shared->keeper_nqueued;
		int			i;

		/* entries whose lock lingers go back into the queue */
		memcpy(work, tenure_shared->keeper_queue, nwork * sizeof(TenureKey));
		tenure_shared->keeper_nqueued = 0;
		for (i = 0; i < nwork; i++)
		{
			lease = tenure_find(&work[i]);
			if (lease == NULL)
				continue;
			lease->keeper_queued = false;
			changed |= tenure_keeper_tend(lease, now, false, revoked,
										  maxrevoked, nrevoked, &linger);
			if (linger != 0)
			{
				tenure_keeper_requeue(lease);
				linger_next = Min(linger_next, linger);
			}
		}
	}
	/* locks taken after others were kept lingering may have filled it */
	if (tenure_pass_took && tenure_shared->keeper_nlinger > 0)
	{
		tenure_pass_tight = -1;
		if (tenure_lock_table_tight() && tenure_keeper_let_go_all())
		{
			tenure_shared->keeper_nlinger = 0;
			changed = true;
		}
	}
	/* work queued during this pass (an expiry's) is not urgent: it was done */
	tenure_shared->keeper_urgent = false;
	next = Min(next, tenure_shared->keeper_due_mono);
	next = Min(next, linger_next);
	tenure_shared->keeper_sleep_until = next;
	tenure_shared->keeper_wake = false;
	LWLockRelease(tenure_shared->lock);

	if (changed)
		tenure_changed(false);
	return next;
}
