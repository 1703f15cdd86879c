/*-------------------------------------------------------------------------
 *
 * txn.c
 *		Transaction-bound lease actions: acquisitions, claims, releases,
 *		changes of settings and drops take effect in shared memory only
 *		when their transaction commits, and vanish when it (or their
 *		subtransaction) aborts.
 *
 * The ordering this relies on, and why fenced writes are linearizable
 * with new epochs, is argued in src/README (F1, F3, F5, F8).
 *
 * An SQL function that starts such an action first makes its durable
 * change (the epoch row, the history) and then remembers the action here.
 * At XACT_EVENT_COMMIT, after the commit record is flushed and the
 * transaction is visible, the actions are published to the lease table.
 * That callback runs after the point of no return: it takes the LWLock,
 * copies a few fields and broadcasts, and nothing in it can fail
 * (src/README, F8).  The copying runs in a critical section, so that an
 * assertion build catches any allocation there.
 *
 * An acquisition reserves its lease for at most the lease's ttl (see
 * state.c).  At PRE_COMMIT, before the commit record, a transaction whose
 * reservation expired (or was taken over) fails; one whose reservation is
 * still valid marks it committing, after which nobody takes it over.
 * Claims and handoffs are checked the same way: one whose holder's tenure
 * ended (expired, above all) fails; otherwise the tenure is marked, and
 * neither expires nor can be reserved until the COMMIT publishes the
 * change or the abort cancels it.
 *
 * DROP EXTENSION pg_tenure and DROP DATABASE (seen by the object access
 * hook, tenure.c) end every tenure of their database when they commit and
 * mark its entries dropped, so that nothing from before the drop leads or
 * counts as an epoch afterwards, and their slots are freed.
 *
 * Actions live in TopTransactionContext, so forgetting them is resetting
 * the list pointer.  What a transaction remembers is bounded by the leases
 * it changes, not by the number of calls: an acquisition that reserved
 * nothing (a renewal, or a lease held by someone else) is forgotten when
 * it returns, a release of a tenure already released in the transaction
 * adds nothing, and claims of one lease in a row, in one subtransaction,
 * are one action (and one notification, of the last epoch: the ones
 * before it were never current outside the transaction).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"

#include "pg_tenure.h"
#include "state.h"
#include "txn.h"
#include "fence.h"

typedef struct TenureAction
{
	TenureActionKind kind;
	TenureKey	key;
	int64		epoch;			/* CLAIM: the new epoch; ACQUIRE: the epoch
								 * issued (0 until then); DROP: the dropped
								 * lease's id */
	uint64		token;			/* ACQUIRE: the pending reservation */
	SubTransactionId subid;		/* subtransaction that made it */
	int64		claims;			/* CLAIM: epochs claimed in a row (see
								 * tenure_txn_remember) */
	/* HANDOFF: epoch is the successor's; old_epoch the holder's */
	/* CLAIM: old_epoch is the holder's tenure's when it claimed */
	int64		old_epoch;
	bool		session_bound;
	char	   *holder;
	char	   *successor;
	/* ALTER: the lease's new row, and whether its entry is pinned */
	TenureRow	row;
	bool		pinned;
} TenureAction;

static List *tenure_actions = NIL;

/*
 * Notifications on channel "tenure" of the current transaction, sent at
 * PRE_COMMIT if a backend of the database listens (state_notify.c,
 * tenure_state_notify_needed()), in the order they were made.
 */
typedef struct TenureNote
{
	SubTransactionId subid;		/* subtransaction that made it */
	bool		claimed;		/* a "claimed" event */
	char		lease[TENURE_NAME_MAX + 1];
	char	   *payload;
} TenureNote;

static List *tenure_notes = NIL;

/*
 * The latest remembered action of the lease, NULL if none.
 */
static TenureAction *
tenure_txn_latest(const TenureKey *key)
{
	int			i;

	for (i = list_length(tenure_actions) - 1; i >= 0; i--)
	{
		TenureAction *act = list_nth(tenure_actions, i);

		if (memcmp(&act->key, key, sizeof(TenureKey)) == 0)
			return act;
	}
	return NULL;
}

/*
 * Remember an action of the current (sub)transaction.
 *
 * Every action in the list belongs to the current subtransaction or to
 * one of its parents (a committed subtransaction hands its actions to its
 * parent, an aborted one drops them).  So a release equal to one
 * remembered already adds nothing: whenever it would be published, that
 * one is too.  (Claims: tenure_txn_remember_claim().)
 */
void
tenure_txn_remember(TenureActionKind kind, const TenureKey *key,
					int64 epoch, uint64 token)
{
	MemoryContext old;
	TenureAction *act;
	SubTransactionId subid = GetCurrentSubTransactionId();

	Assert(kind != TENURE_ACT_CLAIM);	/* tenure_txn_remember_claim() */
	if (kind == TENURE_ACT_RELEASE)
	{
		ListCell   *lc;

		foreach(lc, tenure_actions)
		{
			act = lfirst(lc);
			if (act->kind == TENURE_ACT_RELEASE && act->epoch == epoch &&
				memcmp(&act->key, key, sizeof(TenureKey)) == 0)
				return;
		}
	}

	old = MemoryContextSwitchTo(TopTransactionContext);
	act = palloc0(sizeof(TenureAction));
	act->kind = kind;
	act->key = *key;
	act->epoch = epoch;
	act->token = token;
	act->claims = 1;
	act->subid = subid;
	tenure_actions = lappend(tenure_actions, act);
	MemoryContextSwitchTo(old);
}

/*
 * Forget the acquisition with the given token when it reserved nothing (a
 * renewal, or a lease held by someone else): it has nothing to publish or
 * give back, and a transaction that renews over and over must not keep
 * one action per call.  One that holds a reservation stays.
 */
void
tenure_txn_forget_acquire(uint64 token)
{
	int			i;

	/* the acquisition is the latest action: look backwards */
	for (i = list_length(tenure_actions) - 1; i >= 0; i--)
	{
		TenureAction *act = list_nth(tenure_actions, i);

		if (act->kind == TENURE_ACT_ACQUIRE && act->token == token)
		{
			if (act->epoch == 0 &&
				!tenure_state_reserved(&act->key, act->token))
			{
				tenure_actions = list_delete_nth_cell(tenure_actions, i);
				pfree(act);
			}
			return;
		}
	}
}

/*
 * Queue a notification of the current (sub)transaction: event "event" of
 * the lease, with the given payload.
 *
 * Like actions (tenure_txn_remember()), notes belong to the current
 * subtransaction or its parents.  A payload queued already adds nothing
 * (PostgreSQL would send it once anyway), and a claim's note replaces the
 * lease's latest note if that is a claim's of the same subtransaction: its
 * epoch was never current outside the transaction.
 */
void
tenure_txn_notify(const char *event, const char *lease, const char *payload)
{
	MemoryContext old;
	TenureNote *note;
	SubTransactionId subid = GetCurrentSubTransactionId();
	bool		claimed = strcmp(event, "claimed") == 0;
	int			i;

	for (i = list_length(tenure_notes) - 1; i >= 0; i--)
	{
		note = list_nth(tenure_notes, i);
		if (strcmp(note->payload, payload) == 0)
			return;
	}
	for (i = list_length(tenure_notes) - 1; i >= 0; i--)
	{
		note = list_nth(tenure_notes, i);
		if (strcmp(note->lease, lease) != 0)
			continue;
		if (claimed && note->claimed && note->subid == subid)
		{
			pfree(note->payload);
			note->payload = MemoryContextStrdup(TopTransactionContext, payload);
			return;
		}
		break;
	}

	old = MemoryContextSwitchTo(TopTransactionContext);
	note = palloc(sizeof(TenureNote));
	note->subid = subid;
	note->claimed = claimed;
	strlcpy(note->lease, lease, sizeof(note->lease));
	note->payload = pstrdup(payload);
	tenure_notes = lappend(tenure_notes, note);
	MemoryContextSwitchTo(old);
}

/*
 * Remember a claim_epoch() of the current (sub)transaction: holder, whose
 * tenure was at old_epoch, claimed epoch.
 */
void
tenure_txn_remember_claim(const TenureKey *key, int64 epoch, int64 old_epoch,
						  const char *holder)
{
	MemoryContext old;
	TenureAction *act = tenure_txn_latest(key);

	/* merged into a claim of the same tenure in this subtransaction */
	if (act != NULL && act->kind == TENURE_ACT_CLAIM &&
		act->subid == GetCurrentSubTransactionId() &&
		act->old_epoch == old_epoch && strcmp(act->holder, holder) == 0)
	{
		act->epoch = Max(act->epoch, epoch);
		act->claims++;
		return;
	}

	old = MemoryContextSwitchTo(TopTransactionContext);
	act = palloc0(sizeof(TenureAction));
	act->claims = 1;
	act->kind = TENURE_ACT_CLAIM;
	act->key = *key;
	act->epoch = epoch;
	act->old_epoch = old_epoch;
	act->holder = pstrdup(holder);
	act->subid = GetCurrentSubTransactionId();
	tenure_actions = lappend(tenure_actions, act);
	MemoryContextSwitchTo(old);
}

/*
 * The latest epoch this transaction claimed of the lease and has not
 * rolled back, or 0.
 */
int64
tenure_txn_claimed_epoch(const TenureKey *key)
{
	ListCell   *lc;
	int64		epoch = 0;

	foreach(lc, tenure_actions)
	{
		TenureAction *act = lfirst(lc);

		if (act->kind == TENURE_ACT_CLAIM &&
			memcmp(&act->key, key, sizeof(TenureKey)) == 0)
			epoch = Max(epoch, act->epoch);
	}
	return epoch;
}

/*
 * Remember a handoff() of the current (sub)transaction: holder's tenure at
 * old_epoch goes to successor at epoch when the transaction commits.
 */
void
tenure_txn_remember_handoff(const TenureKey *key, int64 epoch, int64 old_epoch,
							const char *holder, const char *successor,
							bool session_bound)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	TenureAction *act = palloc0(sizeof(TenureAction));

	act->kind = TENURE_ACT_HANDOFF;
	act->key = *key;
	act->epoch = epoch;
	act->old_epoch = old_epoch;
	act->session_bound = session_bound;
	act->holder = pstrdup(holder);
	act->successor = pstrdup(successor);
	act->subid = GetCurrentSubTransactionId();
	tenure_actions = lappend(tenure_actions, act);
	MemoryContextSwitchTo(old);
}

/*
 * Remember an alter_lease() of the current (sub)transaction: the lease's
 * entry takes the settings of row when the transaction commits.  pinned:
 * alter_lease pinned the entry (tenure_state_alter_pin()), which the end
 * of the transaction undoes.
 */
void
tenure_txn_remember_alter(const TenureKey *key, const TenureRow *row,
						  bool pinned)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	TenureAction *act = palloc0(sizeof(TenureAction));

	act->kind = TENURE_ACT_ALTER;
	act->key = *key;
	act->row = *row;
	act->pinned = pinned;
	act->subid = GetCurrentSubTransactionId();
	tenure_actions = lappend(tenure_actions, act);
	MemoryContextSwitchTo(old);
}

/*
 * Fail if this transaction pinned the lease to change its lock_key or
 * shorten its ttl: a tenure it started would begin under the old setting.
 */
void
tenure_txn_check_not_pinned(const TenureKey *key)
{
	ListCell   *lc;

	foreach(lc, tenure_actions)
	{
		TenureAction *act = lfirst(lc);

		if (act->kind == TENURE_ACT_ALTER && act->pinned &&
			memcmp(&act->key, key, sizeof(TenureKey)) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot acquire lease \"%s\" in the transaction that changed its lock_key or shortened its ttl",
							key->name),
					 errhint("Acquire it after the transaction commits.")));
	}
}

/*
 * Raise the error of an action (a release, claim or handoff, by kind) of
 * lease "name" in the transaction that handed it over to successor.
 */
static void
tenure_txn_handed_error(TenureActionKind kind, const char *name,
						const char *successor)
{
	switch (kind)
	{
		case TENURE_ACT_RELEASE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot release lease \"%s\" in the transaction that handed it over",
							name),
					 errdetail("The lease goes to \"%s\" when the transaction commits.",
							   successor)));
			break;
		case TENURE_ACT_CLAIM:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot claim an epoch of lease \"%s\" in the transaction that handed it over",
							name),
					 errdetail("The lease goes to \"%s\" when the transaction commits.",
							   successor)));
			break;
		case TENURE_ACT_HANDOFF:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot hand over lease \"%s\" in the transaction that handed it over",
							name),
					 errdetail("The lease goes to \"%s\" when the transaction commits.",
							   successor)));
			break;
		default:
			elog(ERROR, "unexpected lease action %d", (int) kind);
	}
}

/*
 * Fail if this transaction handed the lease over: the tenure it would
 * claim, release or hand over again (kind: TENURE_ACT_CLAIM, _RELEASE or
 * _HANDOFF) is no longer the holder's once the transaction commits.
 */
void
tenure_txn_check_not_handed(const TenureKey *key, TenureActionKind kind)
{
	ListCell   *lc;

	foreach(lc, tenure_actions)
	{
		TenureAction *act = lfirst(lc);

		if (act->kind == TENURE_ACT_HANDOFF &&
			memcmp(&act->key, key, sizeof(TenureKey)) == 0)
			tenure_txn_handed_error(kind, key->name, act->successor);
	}
}

/*
 * Note that the acquisition with the given token issued its epoch: its
 * transaction must now commit within the reservation's ttl.
 */
void
tenure_txn_issued(uint64 token, int64 epoch)
{
	int			i;

	/* the acquisition is the latest action or close to it: look backwards */
	for (i = list_length(tenure_actions) - 1; i >= 0; i--)
	{
		TenureAction *act = list_nth(tenure_actions, i);

		if (act->kind == TENURE_ACT_ACQUIRE && act->token == token)
		{
			act->epoch = epoch;
			break;
		}
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
 * Between tenure_state_begin_update() and _end_update().  Cannot fail
 * (src/README, F8).
 */
static bool
tenure_txn_cancel(TenureAction *act)
{
	if (act->kind == TENURE_ACT_HANDOFF)
		return tenure_state_cancel_handoff(&act->key);
	if (act->kind == TENURE_ACT_CLAIM)
		return tenure_state_cancel_claim(&act->key);
	if (act->kind == TENURE_ACT_ALTER)
		return tenure_state_cancel_alter(&act->key, act->pinned);
	if (act->kind != TENURE_ACT_ACQUIRE)
		return false;
	return tenure_state_cancel(&act->key, act->token);
}

/*
 * Publish a committed action.  Between tenure_state_begin_update() and
 * _end_update(), in a critical section.  Cannot fail (src/README, F8).
 */
static void
tenure_txn_publish(TenureAction *act, int64 now)
{
	switch (act->kind)
	{
		case TENURE_ACT_ACQUIRE:
			tenure_state_publish_acquire(&act->key, act->token);
			break;
		case TENURE_ACT_CLAIM:
			tenure_state_publish_claim(&act->key, act->epoch, act->claims,
									   act->holder);
			break;
		case TENURE_ACT_RELEASE:
			tenure_state_publish_release(&act->key, now);
			break;
		case TENURE_ACT_DROP:
			tenure_state_publish_drop(&act->key, act->epoch, now);
			break;
		case TENURE_ACT_DROP_DATABASE_LEASES:
			tenure_state_drop_database(act->key.dbid, now);
			break;
		case TENURE_ACT_HANDOFF:
			tenure_state_publish_handoff(&act->key, act->epoch);
			break;
		case TENURE_ACT_ALTER:
			tenure_state_publish_alter(&act->key, &act->row, act->pinned);
			break;
	}
}

/*
 * Whether an action still has an effect to publish: a claim always does,
 * an acquisition only if it reserved the lease (a renewal or a lost race
 * does not).
 */
static bool
tenure_txn_effective(const TenureAction *act)
{
	if (act->kind != TENURE_ACT_ACQUIRE)
		return true;
	return tenure_state_reserved(&act->key, act->token);
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
	int64		ttl_us;
	bool		valid;

	valid = tenure_state_commit_reservation(&act->key, act->token, &ttl_us);
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
 * PRE_COMMIT of a claim_epoch(): the holder must still hold the tenure it
 * claimed in, live; then the claim is committing (see
 * tenure_state_claim_commit()).  An ERROR here aborts the transaction
 * before its commit record, the epoch and history rows it wrote with it.
 */
static void
tenure_txn_check_claim(const TenureAction *act)
{
	if (!tenure_state_claim_commit(&act->key, act->holder, act->old_epoch))
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("claim of lease \"%s\" by \"%s\" failed: its tenure ended before the transaction committed",
						act->key.name, act->holder),
				 errdetail("A claim commits only within its holder's live tenure; this one expired or ended while the transaction ran. Nothing of the claim is committed."),
				 errhint("Commit claims within the ttl, or acquire the lease again and claim in a new transaction.")));
}

/*
 * Raise the error of a handoff() of lease "name" from holder to successor
 * that a check refused: tenure_state_handoff_check() when handoff() is
 * called (at_commit false), or tenure_state_handoff_commit() at its
 * PRE_COMMIT (at_commit true), where the error aborts the transaction
 * before its commit record, and nothing of the handoff is committed
 * (src/README, F7, F10).  Returns if check is TENURE_HANDOFF_OK.
 */
void
tenure_txn_handoff_refused(TenureHandoffCheck check, const char *name,
						   const char *holder, const char *successor,
						   bool at_commit)
{
	switch (check)
	{
		case TENURE_HANDOFF_OK:
			break;
		case TENURE_HANDOFF_NOT_HOLDER:
			if (at_commit)
				ereport(ERROR,
						(errcode(ERRCODE_TENURE_LEASE_HELD),
						 errmsg("handoff of lease \"%s\" by \"%s\" failed: its tenure ended before the transaction committed",
								name, holder),
						 errdetail("A handoff commits only within its holder's live tenure; this one expired or ended while the transaction ran. Nothing of the handoff is committed."),
						 errhint("Commit handoffs within the ttl, or acquire the lease again and hand it over in a new transaction.")));
			ereport(ERROR,
					(errcode(ERRCODE_TENURE_LEASE_HELD),
					 errmsg("\"%s\" does not hold lease \"%s\"", holder, name),
					 errhint("Only the current holder of a lease can hand it over, once its tenure has committed.")));
			break;
		case TENURE_HANDOFF_BUSY:
			if (at_commit)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("handoff of lease \"%s\" failed: another handoff of it is committing",
								name)));
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("lease \"%s\" is being handed over already", name)));
			break;
		case TENURE_HANDOFF_NOT_WAITING:
			if (at_commit)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("handoff of lease \"%s\" failed: \"%s\" stopped waiting for it",
								name, successor),
						 errdetail("The successor must be waiting in tenure.acquire(..., wait => ...) until the handoff commits.")));
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("\"%s\" is not waiting for lease \"%s\"", successor, name),
					 errhint("The successor must be waiting in tenure.acquire(..., wait => ...) for the lease.")));
			break;
	}
}

/*
 * PRE_COMMIT of a handoff(): the holder must still hold the tenure it had,
 * and the successor still wait; then the handoff is committing (see
 * tenure_state_handoff_commit()).  An ERROR here aborts the transaction,
 * the epoch and history rows it wrote with it.
 */
static void
tenure_txn_check_handoff(const TenureAction *act)
{
	tenure_txn_handoff_refused(tenure_state_handoff_commit(&act->key,
														   act->holder,
														   act->successor,
														   act->old_epoch,
														   act->session_bound),
							   act->key.name, act->holder, act->successor,
							   true);
}

/*
 * PRE_COMMIT: acquisitions must still hold their reservation, claims and
 * handoffs their holder's tenure; new tenures and claims take their
 * lease's fence lock in ExclusiveLock mode, fenced writes in
 * RowExclusiveLock mode, and are checked (fence.c).
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
		if (act->kind == TENURE_ACT_CLAIM)
			tenure_txn_check_claim(act);
		if (act->kind == TENURE_ACT_HANDOFF)
			tenure_txn_check_handoff(act);
	}

	foreach(lc, tenure_actions)
	{
		TenureAction *act = lfirst(lc);

		if (act->kind != TENURE_ACT_ACQUIRE && act->kind != TENURE_ACT_CLAIM &&
			act->kind != TENURE_ACT_HANDOFF)
			continue;
		if (tenure_txn_effective(act))
			tenure_fence_note(act->key.name, NULL, ExclusiveLock, -1);
	}
	tenure_fence_precommit();

	/* last: a quiet commit holds up the next LISTEN tenure until it ends */
	if (tenure_notes != NIL)
	{
		if (tenure_state_notify_needed())
		{
			foreach(lc, tenure_notes)
				Async_Notify("tenure", ((TenureNote *) lfirst(lc))->payload);
		}
		tenure_notes = NIL;
	}
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

	foreach(lc, tenure_actions)
	{
		TenureAction *act = lfirst(lc);

		/*
		 * An acquisition that issued an epoch counts even if its
		 * reservation was taken over: COMMIT PREPARED would commit the epoch
		 * and history rows that its PRE_COMMIT check exists to keep out.
		 */
		effective |= tenure_txn_effective(act) ||
			(act->kind == TENURE_ACT_ACQUIRE && act->epoch != 0);
	}
	if (effective || tenure_notes != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot prepare a transaction that changed a lease"),
				 errdetail("The transaction acquired, claimed, handed over, released or dropped a lease. pg_tenure publishes such changes when their transaction commits, which a prepared transaction cannot do.")));
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
			(void) tenure_state_stop_waiting(false);
			if (tenure_actions != NIL)
			{
				int64		now = tenure_mono_now();

				/*
				 * Nothing in between can fail (src/README, F8): an assertion
				 * build fails at an allocation in the critical section.  It
				 * ends before end_update writes the LOG lines.
				 */
				START_CRIT_SECTION();
				tenure_state_begin_update();
				foreach(lc, tenure_actions)
					tenure_txn_publish(lfirst(lc), now);
				END_CRIT_SECTION();
				tenure_state_end_update(true);
				tenure_actions = NIL;
			}
			/* rows and shared memory show the change now: listeners go on */
			tenure_state_notify_done();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			/* (PRE_PREPARE refused to prepare anything that mattered) */
			tenure_notes = NIL;
			tenure_state_notify_done();
			tenure_fence_reset();
			/* an acquisition that was waiting, interrupted by an error */
			(void) tenure_state_stop_waiting(false);
			if (tenure_actions != NIL)
			{
				tenure_state_begin_update();
				foreach(lc, tenure_actions)
					changed |= tenure_txn_cancel(lfirst(lc));
				tenure_state_end_update(changed);
				tenure_actions = NIL;
			}
			break;
		default:
			break;
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

	tenure_fence_subxact(event);
	if (event == SUBXACT_EVENT_ABORT_SUB)
		(void) tenure_state_stop_waiting(false);

	foreach(lc, tenure_notes)
	{
		TenureNote *note = lfirst(lc);

		if (note->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			note->subid = parentSubid;
		else if (event == SUBXACT_EVENT_ABORT_SUB)
			tenure_notes = foreach_delete_current(tenure_notes, lc);
	}

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
		tenure_state_begin_update();
		foreach(lc, tenure_actions)
		{
			TenureAction *act = lfirst(lc);

			if (act->subid == mySubid)
			{
				changed |= tenure_txn_cancel(act);
				tenure_actions = foreach_delete_current(tenure_actions, lc);
			}
		}
		tenure_state_end_update(changed);
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
