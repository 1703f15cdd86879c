/*-------------------------------------------------------------------------
 *
 * state_wait.c
 *		The waiters and the hand-off: the sessions that wait in
 *		acquire(wait) for a lease someone else holds, and handoff(), which
 *		gives a tenure to one of them.
 *
 * Part of the state module (state_internal.h); the locking protocol is
 * stated in state.c.  Each backend has a slot in tenure_waiter_slots
 * (state.c sets it up), which it writes itself under the LWLock in
 * exclusive mode; a handoff() past its PRE_COMMIT check marks the slot of
 * its successor (handed) under the same lock, so that the successor does
 * not give up until that transaction's COMMIT makes it the holder or its
 * abort cancels the hand-off.  tenure.lease_stats and tenure.waiters read
 * the slots under the LWLock in shared mode.
 *
 * INTERFACE ROUTINES, by the lock mode they take
 *
 *	LWLock in shared mode:
 *		tenure_state_waiters()			the waiting sessions of a database
 *		tenure_state_handoff_check()	whether a handoff() may go ahead
 *
 *	LWLock in exclusive mode:
 *		tenure_state_waiting()			start waiting in acquire(wait)
 *		tenure_state_stop_waiting()		stop, unless (if asked) handed a
 *										tenure; the only way to stop
 *		tenure_state_handoff_commit()	PRE_COMMIT check of a handoff()
 *
 *	under the caller's exclusive hold (tenure_state_begin_update()):
 *		tenure_state_publish_handoff()	a handoff() committed
 *		tenure_state_cancel_handoff()	a checked handoff() aborted
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/timestamp.h"

#include "state_internal.h"

/* whether this backend registered tenure_waiter_exit(), and waits now */
static bool tenure_waiter_registered = false;
static bool tenure_waiting = false;

/*
 * before_shmem_exit callback: leave the waiters, whatever ended the wait.
 * Cannot fail (src/README, F8).
 */
static void
tenure_waiter_exit(int code, Datum arg)
{
	(void) tenure_state_stop_waiting(false);
}

/*
 * Waiting in acquire(wait) for a lease someone else holds: the slot of
 * this backend in tenure_waiter_slots says which (tenure.lease_stats
 * counts them) until tenure_state_stop_waiting(), which the end of the
 * transaction and the backend's exit call too.  Takes the LWLock in
 * exclusive mode.
 */
void
tenure_state_waiting(const TenureKey *key, const char *holder,
					 bool session_bound)
{
	int			slot = TENURE_MY_SLOT();
	TenureWaiter *w;

	Assert(key != NULL);
	if (slot < 0 || slot >= MaxBackends)
		return;					/* not a backend that can wait */
	if (!tenure_waiter_registered)
	{
		before_shmem_exit(tenure_waiter_exit, (Datum) 0);
		tenure_waiter_registered = true;
	}
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	w = &tenure_waiter_slots[slot];
	w->key = *key;
	strlcpy(w->holder, holder, sizeof(w->holder));
	w->role = GetUserId();
	w->session_bound = session_bound;
	w->start = MyStartTimestamp;
	w->since_mono = tenure_mono_now();
	w->handed = false;
	w->pid = MyProcPid;
	/* a handoff() may make this backend the lease's holder */
	tenure_note_mine(key);
	LWLockRelease(tenure_shared->lock);
	tenure_waiting = true;
}

/*
 * Stop waiting, and return true once this backend waits no more (also if
 * it did not wait).  A handoff() to this backend may be committing (it is
 * about to hold the lease):
 *
 * - unless_handed (acquire(wait) reached its deadline): then stay, and
 *   return false; one hold of the lock, so that no handoff can pass its
 *   PRE_COMMIT check between the look and the leaving.
 * - otherwise (the wait ended otherwise, the transaction or
 *   subtransaction ended, or the backend exits): leave all the same, and
 *   wake whoever waits on the lease table, since the handoff finds its
 *   successor gone.  Cannot fail (src/README, F8).
 *
 * Takes the LWLock in exclusive mode.
 */
bool
tenure_state_stop_waiting(bool unless_handed)
{
	int			slot = TENURE_MY_SLOT();
	TenureWaiter *w;
	bool		handed;

	if (!tenure_waiting || slot < 0 || slot >= MaxBackends ||
		!tenure_state_attached())
		return true;
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	w = &tenure_waiter_slots[slot];
	handed = w->pid == MyProcPid && w->handed;
	if (!(handed && unless_handed))
	{
		w->pid = 0;
		w->handed = false;
	}
	LWLockRelease(tenure_shared->lock);
	if (handed && unless_handed)
		return false;
	tenure_waiting = false;
	/* a handoff to us that was committing finds us gone: let it finish */
	if (handed)
		ConditionVariableBroadcast(&tenure_shared->cv);
	return true;
}

/*
 * The sessions of database dbid waiting in acquire(wait); a palloc'd array
 * of *count elements, copied under the LWLock in shared mode.
 */
TenureWaiterInfo *
tenure_state_waiters(Oid dbid, int *count)
{
	TenureWaiterInfo *infos = palloc(sizeof(TenureWaiterInfo) * MaxBackends);
	int			n = 0;
	int			i;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	for (i = 0; i < MaxBackends; i++)
	{
		TenureWaiter *w = &tenure_waiter_slots[i];

		if (w->pid == 0 || w->key.dbid != dbid)
			continue;
		memcpy(infos[n].lease, w->key.name, sizeof(infos[n].lease));
		memcpy(infos[n].holder, w->holder, sizeof(infos[n].holder));
		infos[n].session_bound = w->session_bound;
		infos[n].pid = w->pid;
		infos[n].since_mono = w->since_mono;
		infos[n].handed = w->handed;
		n++;
	}
	LWLockRelease(tenure_shared->lock);
	*count = n;
	return infos;
}

/*
 * The waiter in acquire(wait) for the lease under holder name "successor",
 * as a slot number, or -1.  Under the LWLock.
 */
static int
tenure_find_waiter(const TenureKey *key, const char *successor)
{
	int			i;

	AssertLocked();
	for (i = 0; i < MaxBackends; i++)
	{
		TenureWaiter *w = &tenure_waiter_slots[i];

		if (w->pid != 0 && memcmp(&w->key, key, sizeof(TenureKey)) == 0 &&
			strcmp(w->holder, successor) == 0)
			return i;
	}
	return -1;
}

/*
 * Whether holder may hand the lease over to successor now: holder's tenure
 * is live (not one this transaction is acquiring), no other handoff of it
 * is committing, and successor waits in acquire(wait) for it.  Under the
 * LWLock in shared mode.
 */
TenureHandoffCheck
tenure_state_handoff_check(const TenureKey *key, const char *holder,
						   const char *successor, int64 *epoch,
						   bool *session_bound)
{
	TenureLease *lease;
	TenureHandoffCheck result;
	int64		now = tenure_mono_now();
	int			slot;

	*epoch = 0;
	*session_bound = false;
	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = tenure_find(key);
	if (lease == NULL || lease->dropped || !tenure_is_live(lease, now) ||
		strcmp(lease->holder, holder) != 0)
		result = TENURE_HANDOFF_NOT_HOLDER;
	else if (lease->handoff_pending)
		result = TENURE_HANDOFF_BUSY;
	else if ((slot = tenure_find_waiter(key, successor)) < 0)
		result = TENURE_HANDOFF_NOT_WAITING;
	else
	{
		result = TENURE_HANDOFF_OK;
		*epoch = lease->epoch;
		*session_bound = tenure_waiter_slots[slot].session_bound;
	}
	LWLockRelease(tenure_shared->lock);
	return result;
}

/*
 * PRE_COMMIT of a handoff() that issued "epoch": the same checks again,
 * and holder's tenure must still be the one at old_epoch.  On success the
 * handoff is committing: the tenure neither expires nor can be reserved
 * until its COMMIT (tenure_state_publish_handoff()) or abort
 * (tenure_state_cancel_handoff()), and the waiter does not give up.  Takes
 * the LWLock in exclusive mode.
 */
TenureHandoffCheck
tenure_state_handoff_commit(const TenureKey *key, const char *holder,
							const char *successor, int64 old_epoch,
							bool session_bound)
{
	TenureLease *lease;
	TenureHandoffCheck result;
	int64		now = tenure_mono_now();
	int			slot = -1;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = tenure_find(key);
	if (lease == NULL || lease->dropped || !tenure_is_live(lease, now) ||
		strcmp(lease->holder, holder) != 0 || lease->epoch != old_epoch)
		result = TENURE_HANDOFF_NOT_HOLDER;
	else if (lease->handoff_pending)
		result = TENURE_HANDOFF_BUSY;
	else if ((slot = tenure_find_waiter(key, successor)) < 0 ||
			 tenure_waiter_slots[slot].session_bound != session_bound)
		result = TENURE_HANDOFF_NOT_WAITING;
	else
	{
		result = TENURE_HANDOFF_OK;
		lease->handoff_pending = true;
		lease->handoff_pid = MyProcPid;
		lease->handoff_slot = slot;
		lease->handoff_to = tenure_waiter_slots[slot];
		tenure_waiter_slots[slot].handed = true;
	}
	LWLockRelease(tenure_shared->lock);
	return result;
}

/*
 * A handoff() committed: holder's tenure ends ("handed over", already in
 * the history) and the waiter becomes the holder at "epoch", active at
 * once: the holder gave up explicitly, so its own tenure leaves no
 * hold-off; one it was still waiting out (an earlier holder's belief,
 * pred_expiry_mono) applies to the successor too, as after a release.
 * If the waiter left meanwhile (its wait was cancelled), the tenure is
 * still its holder name's.  Between begin_update and end_update; cannot
 * fail (src/README, F8).
 */
void
tenure_state_publish_handoff(const TenureKey *key, int64 epoch)
{
	TenureLease *lease;
	TenureWaiter *w;
	TenureTransition *t;
	int64		now = tenure_mono_now();
	char		prev_holder[TENURE_HOLDER_MAX + 1];
	int64		prev_epoch;
	int64		active;

	AssertLockedExclusive();
	lease = tenure_find(key);
	if (lease == NULL || !lease->handoff_pending || lease->handoff_pid != MyProcPid)
		return;
	/* a hold-off the holder was still waiting out passes to its successor */
	active = lease->state == TENURE_HELD ? Max(now, lease->active_mono) : now;
	w = &lease->handoff_to;
	lease->handoff_pending = false;
	memcpy(prev_holder, lease->holder, sizeof(prev_holder));
	prev_epoch = lease->epoch;
	if (lease->state == TENURE_HELD)
		tenure_end(lease, TENURE_END_HANDED, now);
	/* handoff() wrote both rows of the history */
	lease->ended_reason = TENURE_END_NONE;

	lease->state = TENURE_HELD;
	strlcpy(lease->holder, w->holder, sizeof(lease->holder));
	lease->session_bound = w->session_bound;
	tenure_share_give(lease);	/* a hold-off the holder was waiting out */
	lease->holder_role = w->role;
	tenure_share_take(lease);
	lease->holder_pid = w->pid;
	lease->holder_start = w->start;
	lease->committing = false;
	lease->pending_xid = InvalidTransactionId;
	lease->pending_epoch = 0;
	lease->acquired_mono = now;
	lease->acquired_wall = GetCurrentTimestamp();
	pg_atomic_write_u64(&lease->renewed_mono, (uint64) now);
	lease->active_mono = Max(active, lease->pred_expiry_mono);
	lease->epoch = Max(lease->epoch, epoch);
	lease->lock_wanted = true;
	lease->lock_failed = false;
	if (!tenure_lease_tag_held(lease))
		tenure_keeper_notice(lease);
	tenure_keeper_due(tenure_expiry(lease));
	lease->transitions++;
	lease->history_starts++;
	lease->counters.started++;
	lease->counters.last_gap_us = lease->active_mono - now;
	lease->counters.last_change = lease->acquired_wall;
	lease->ended_mono = 0;
	if (tenure_waiter_slots[lease->handoff_slot].pid == w->pid &&
		tenure_waiter_slots[lease->handoff_slot].start == w->start)
		tenure_waiter_slots[lease->handoff_slot].handed = false;
	else if (w->session_bound)
	{
		/*
		 * The successor stopped waiting after the PRE_COMMIT check (its
		 * wait was cancelled, or its session ended): a session-bound
		 * tenure has no session to live in.
		 */
		tenure_end(lease, TENURE_END_SESSION, now);
	}

	t = tenure_transition(TENURE_TRANSITION_START, lease);
	if (t != NULL)
	{
		memcpy(t->holder, lease->holder, sizeof(t->holder));
		t->epoch = lease->epoch;
		t->has_prev = true;
		memcpy(t->prev_holder, prev_holder, sizeof(t->prev_holder));
		t->prev_epoch = prev_epoch;
		t->prev_reason = TENURE_END_HANDED;
		t->gap_us = lease->active_mono - now;
	}
}

/*
 * A handoff() that passed its PRE_COMMIT check aborted: nothing changes.
 * Returns whether it had passed it.  Between begin_update and end_update;
 * cannot fail (src/README, F8).
 */
bool
tenure_state_cancel_handoff(const TenureKey *key)
{
	TenureLease *lease;

	AssertLockedExclusive();
	lease = tenure_find(key);
	if (lease == NULL || !lease->handoff_pending || lease->handoff_pid != MyProcPid)
		return false;
	lease->handoff_pending = false;
	if (tenure_waiter_slots[lease->handoff_slot].pid == lease->handoff_to.pid)
		tenure_waiter_slots[lease->handoff_slot].handed = false;
	/* its expiry counts again */
	if (lease->state == TENURE_HELD)
		tenure_keeper_due(tenure_expiry(lease));
	return true;
}
