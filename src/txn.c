/*-------------------------------------------------------------------------
 *
 * txn.c
 *		Transaction-bound lease actions: acquisitions, claims, releases and
 *		drops take effect in shared memory only when their transaction
 *		commits, and vanish when it (or their subtransaction) aborts.
 *
 * The ordering this relies on, and why fenced writes are linearizable
 * with new epochs, is argued in src/README (F1, F3, F5, F8).
 *
 * An SQL function that starts such an action first makes its durable
 * change (the epoch row, the history) and then remembers the action here.
 * At XACT_EVENT_COMMIT, after the commit record is flushed and the
 * transaction is visible, the actions are published to the lease table.
 * That callback runs after the point of no return: it takes the LWLock,
 * copies a few fields and broadcasts, and nothing in it can fail.
 *
 * An acquisition reserves its lease for at most the lease's ttl (see
 * state.c).  At PRE_COMMIT, before the commit record, a transaction whose
 * reservation expired (or was taken over) fails; one whose reservation is
 * still valid marks it committing, after which nobody takes it over.
 *
 * DROP EXTENSION pg_tenure and DROP DATABASE (seen by the object access
 * hook, tenure.c) end every tenure of their database when they commit and
 * mark its entries dropped, so that nothing from before the drop leads or
 * counts as an epoch afterwards, and their slots are freed.
 *
 * Actions live in TopTransactionContext, so forgetting them is resetting
 * the list pointer.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "pg_tenure.h"

typedef struct TenureAction
{
	TenureActionKind kind;
	TenureKey	key;
	int64		epoch;			/* CLAIM: the new epoch; ACQUIRE: the epoch
								 * issued (0 until then); DROP: the dropped
								 * lease's id */
	uint64		token;			/* ACQUIRE: the pending reservation */
	SubTransactionId subid;		/* subtransaction that made it */
} TenureAction;

static List *tenure_actions = NIL;

/*
 * Remember an action of the current (sub)transaction.
 */
void
tenure_txn_remember(TenureActionKind kind, const TenureKey *key,
					int64 epoch, uint64 token)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	TenureAction *act = palloc0(sizeof(TenureAction));

	act->kind = kind;
	act->key = *key;
	act->epoch = epoch;
	act->token = token;
	act->subid = GetCurrentSubTransactionId();
	tenure_actions = lappend(tenure_actions, act);
	MemoryContextSwitchTo(old);
}

/*
 * Note that the acquisition with the given token issued its epoch: its
 * transaction must now commit within the reservation's ttl.
 */
void
tenure_txn_issued(uint64 token, int64 epoch)
{
	ListCell   *lc;

	foreach(lc, tenure_actions)
	{
		TenureAction *act = lfirst(lc);

		if (act->kind == TENURE_ACT_ACQUIRE && act->token == token)
			act->epoch = epoch;
	}
}

/*
 * Remember that this transaction drops the extension in database dbid, or
 * database dbid itself: when it commits, every tenure of that database
 * ends.  Called from the object access hook.
 */
void
tenure_txn_drop_database_leases(Oid dbid)
{
	TenureKey	key;

	memset(&key, 0, sizeof(key));
	key.dbid = dbid;
	tenure_txn_remember(TENURE_ACT_DROP_DATABASE_LEASES, &key, 0, 0);
}

/*
 * Undo an acquisition that will not commit: give the reservation back.
 * Caller holds the LWLock exclusive.  Cannot fail.
 */
static bool
tenure_txn_cancel(TenureAction *act)
{
	TenureLease *lease;

	if (act->kind != TENURE_ACT_ACQUIRE)
		return false;
	lease = hash_search(tenure_leases, &act->key, HASH_FIND, NULL);
	if (lease == NULL || lease->state != TENURE_PENDING ||
		lease->pending_token != act->token ||
		lease->holder_pid != MyProcPid)
		return false;
	lease->state = TENURE_FREE;
	lease->holder[0] = '\0';
	lease->holder_pid = 0;
	lease->holder_start = 0;
	lease->session_bound = false;
	lease->pending_xid = InvalidTransactionId;
	lease->committing = false;
	lease->lock_wanted = false;
	return true;
}

/*
 * End every tenure and pending acquisition of database dbid and mark its
 * entries dropped; the keeper lets their locks go and frees their slots.
 * Caller holds the LWLock exclusive.  Cannot fail.
 */
static void
tenure_txn_drop_database(Oid dbid, int64 now)
{
	HASH_SEQ_STATUS scan;
	TenureLease *lease;

	hash_seq_init(&scan, tenure_leases);
	while ((lease = hash_seq_search(&scan)) != NULL)
	{
		if (lease->key.dbid != dbid)
			continue;
		if (lease->state == TENURE_HELD)
			tenure_end(lease, TENURE_END_DROPPED, now);
		/* a pending acquisition's COMMIT now fails at PRE_COMMIT */
		lease->state = TENURE_FREE;
		lease->holder[0] = '\0';
		lease->holder_pid = 0;
		lease->holder_start = 0;
		lease->session_bound = false;
		lease->pending_xid = InvalidTransactionId;
		lease->committing = false;
		lease->lock_wanted = false;
		/* the history went with the extension, or there is none to write */
		lease->ended_reason = TENURE_END_NONE;
		lease->dropped = true;
	}
}

/*
 * Publish a committed action.  Caller holds the LWLock exclusive.  Cannot
 * fail.
 */
static void
tenure_txn_publish(TenureAction *act, int64 now)
{
	TenureLease *lease;

	if (act->kind == TENURE_ACT_DROP_DATABASE_LEASES)
	{
		tenure_txn_drop_database(act->key.dbid, now);
		return;
	}

	lease = hash_search(tenure_leases, &act->key, HASH_FIND, NULL);
	if (lease == NULL)
		return;

	switch (act->kind)
	{
		case TENURE_ACT_ACQUIRE:
			if (lease->state == TENURE_PENDING &&
				lease->pending_token == act->token &&
				lease->holder_pid == MyProcPid)
			{
				lease->state = TENURE_HELD;
				lease->committing = false;
				lease->pending_xid = InvalidTransactionId;
				/* the keeper keeps its lock, or revokes us if it lost it */
				lease->lock_wanted = true;
				lease->lock_failed = false;
				lease->epoch = Max(lease->epoch, lease->pending_epoch);
				lease->pending_epoch = 0;
				lease->ended_reason = TENURE_END_NONE;
				lease->transitions++;
			}
			break;
		case TENURE_ACT_CLAIM:
			lease->epoch = Max(lease->epoch, act->epoch);
			lease->transitions++;
			break;
		case TENURE_ACT_RELEASE:
			if (lease->state == TENURE_HELD)
				tenure_end(lease, TENURE_END_RELEASED, now);
			/* the history already says so */
			lease->ended_reason = TENURE_END_NONE;
			break;
		case TENURE_ACT_DROP:
			/* not a lease created again under the name since */
			if (lease->lease_id != act->epoch)
				break;
			if (lease->state == TENURE_HELD)
				tenure_end(lease, TENURE_END_DROPPED, now);
			lease->state = TENURE_FREE;
			lease->lock_wanted = false;
			lease->dropped = true;
			break;
		case TENURE_ACT_DROP_DATABASE_LEASES:
			break;				/* handled above */
	}
}

/*
 * Whether an action still has an effect to publish: a claim always does,
 * an acquisition only if it reserved the lease (a renewal or a lost race
 * does not).  Caller holds the LWLock.
 */
static bool
tenure_txn_effective(const TenureAction *act)
{
	TenureLease *lease;

	if (act->kind != TENURE_ACT_ACQUIRE)
		return true;
	lease = hash_search(tenure_leases, &act->key, HASH_FIND, NULL);
	return lease != NULL && lease->state == TENURE_PENDING &&
		lease->pending_token == act->token &&
		lease->holder_pid == MyProcPid;
}

/*
 * PRE_COMMIT of an acquisition that issued an epoch: fail unless its
 * reservation is still ours and within its ttl; then mark it committing,
 * so that nobody takes it over while the commit completes.  An ERROR here
 * aborts the transaction before its commit record, so the epoch and the
 * history rows it wrote are never committed.
 */
static void
tenure_txn_check_reservation(const TenureAction *act)
{
	TenureLease *lease;
	int64		now = tenure_mono_now();
	bool		valid = false;
	int64		ttl_us = 0;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = hash_search(tenure_leases, &act->key, HASH_FIND, NULL);
	if (lease != NULL && lease->state == TENURE_PENDING &&
		lease->pending_token == act->token &&
		lease->holder_pid == MyProcPid &&
		now < lease->acquired_mono + lease->ttl_us)
	{
		lease->committing = true;
		valid = true;
	}
	else if (lease != NULL)
		ttl_us = lease->ttl_us;
	LWLockRelease(tenure_shared->lock);

	if (!valid)
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("acquisition of lease \"%s\" expired before its transaction committed",
						act->key.name),
				 ttl_us > 0 ?
				 errdetail("An acquisition holds the lease for at most its ttl of %.3f s until its transaction commits; after that another holder may take it over.",
						   (double) ttl_us / USECS_PER_SEC) : 0,
				 errhint("Commit acquisitions promptly; acquire the lease again in a new transaction.")));
}

/*
 * PRE_COMMIT: acquisitions must still hold their reservation; new tenures
 * and claims take their lease's fence lock in ExclusiveLock mode, fenced
 * writes in RowExclusiveLock mode, and are checked (fence.c).
 */
static void
tenure_txn_precommit(void)
{
	ListCell   *lc;

	foreach(lc, tenure_actions)
	{
		TenureAction *act = lfirst(lc);

		if (act->kind == TENURE_ACT_ACQUIRE && act->epoch != 0)
			tenure_txn_check_reservation(act);
	}

	foreach(lc, tenure_actions)
	{
		TenureAction *act = lfirst(lc);
		bool		effective;

		if (act->kind != TENURE_ACT_ACQUIRE && act->kind != TENURE_ACT_CLAIM)
			continue;
		LWLockAcquire(tenure_shared->lock, LW_SHARED);
		effective = tenure_txn_effective(act);
		LWLockRelease(tenure_shared->lock);
		if (effective)
			tenure_fence_note(act->key.name, NULL, ExclusiveLock, -1);
	}
	tenure_fence_precommit();
}

/*
 * Refuse to prepare a transaction whose lease changes or fenced writes
 * would have to be published or checked at COMMIT PREPARED, where no
 * callback runs.
 */
static void
tenure_txn_preprepare(void)
{
	ListCell   *lc;
	bool		effective = false;

	if (tenure_actions != NIL)
	{
		LWLockAcquire(tenure_shared->lock, LW_SHARED);
		foreach(lc, tenure_actions)
			effective |= tenure_txn_effective(lfirst(lc));
		LWLockRelease(tenure_shared->lock);
	}
	if (effective)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot prepare a transaction that acquired, claimed, released or dropped a lease"),
				 errdetail("pg_tenure publishes lease changes when their transaction commits, which a prepared transaction cannot do.")));
	if (tenure_fence_wrote())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot prepare a transaction that wrote a fenced table"),
				 errdetail("The fence is checked when the transaction commits, which COMMIT PREPARED cannot do.")));
	/* a fenced write noted after this point would escape both checks */
	tenure_fence_seal();
}

/*
 * Transaction callback.
 */
static void
tenure_xact_callback(XactEvent event, void *arg)
{
	ListCell   *lc;
	bool		changed = false;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			tenure_txn_precommit();
			return;
		case XACT_EVENT_PRE_PREPARE:
			tenure_txn_preprepare();
			return;
		case XACT_EVENT_COMMIT:
			tenure_fence_reset();
			if (tenure_actions != NIL)
			{
				int64		now = tenure_mono_now();

				LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
				foreach(lc, tenure_actions)
					tenure_txn_publish(lfirst(lc), now);
				LWLockRelease(tenure_shared->lock);
				changed = true;
				tenure_actions = NIL;
			}
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			/* (PRE_PREPARE refused to prepare anything that mattered) */
			tenure_fence_reset();
			if (tenure_actions != NIL)
			{
				LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
				foreach(lc, tenure_actions)
					changed |= tenure_txn_cancel(lfirst(lc));
				LWLockRelease(tenure_shared->lock);
				tenure_actions = NIL;
			}
			break;
		default:
			return;
	}

	if (changed)
	{
		tenure_wake_keeper();
		ConditionVariableBroadcast(&tenure_shared->cv);
	}
}

/*
 * Subtransaction callback: forget the actions of an aborted savepoint,
 * hand those of a released one to its parent.
 */
static void
tenure_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;
	bool		changed = false;

	if (tenure_actions == NIL)
		return;

	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, tenure_actions)
		{
			TenureAction *act = lfirst(lc);

			if (act->subid == mySubid)
				act->subid = parentSubid;
		}
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
		foreach(lc, tenure_actions)
		{
			TenureAction *act = lfirst(lc);

			if (act->subid == mySubid)
			{
				changed |= tenure_txn_cancel(act);
				tenure_actions = foreach_delete_current(tenure_actions, lc);
			}
		}
		LWLockRelease(tenure_shared->lock);
		if (changed)
		{
			tenure_wake_keeper();
			ConditionVariableBroadcast(&tenure_shared->cv);
		}
	}
}

/*
 * Register the callbacks; called once from _PG_init.
 */
void
tenure_txn_init(void)
{
	RegisterXactCallback(tenure_xact_callback, NULL);
	RegisterSubXactCallback(tenure_subxact_callback, NULL);
}
