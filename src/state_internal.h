/*-------------------------------------------------------------------------
 *
 * state_internal.h
 *		The lease table's shared structs and the helpers that the files of
 *		the state module share: state.c (the core: the table, its entries
 *		and the lock protocol), state_wait.c (waiters and hand-off),
 *		state_keeper.c (the keeper's pass) and state_notify.c (the
 *		LISTEN/NOTIFY handshake).
 *
 * Only those files include this header (test/call_graph.pl checks it):
 * everything else asks the verbs declared in state.h, and no pointer
 * to an entry leaves the module.  state.c's header states the locking
 * protocol and lists every verb by the lock mode it takes.  A file of the
 * module calls only the core's helpers declared here, never the other way
 * round, so that the core does not depend on the files built on it (the
 * core calls only state_notify.c's set-up of its own shared memory).
 *
 *-------------------------------------------------------------------------
 */
#ifndef STATE_INTERNAL_H
#define STATE_INTERNAL_H

#include "port/atomics.h"
#include "storage/lock.h"
#include "utils/hsearch.h"

#include "pg_tenure.h"
#include "history.h"
#include "state.h"

/*
 * A backend waiting in acquire(wait) for a lease held by someone else, in
 * its slot of tenure_waiter_slots (one per backend, written under the
 * LWLock exclusive by its owner, and handed by the handoff() to it; pid 0:
 * not waiting).
 */
typedef struct TenureWaiter
{
	int			pid;
	TimestampTz start;			/* the backend's MyStartTimestamp */
	TenureKey	key;
	char		holder[TENURE_HOLDER_MAX + 1];
	Oid			role;			/* the role its acquire() counts against */
	bool		session_bound;	/* what its acquire() asked for */
	int64		since_mono;
	bool		handed;			/* a handoff() to it is committing: it
								 * waits for that before it gives up */
} TenureWaiter;

/*
 * One lease in shared memory.  Entries are created the first time a lease
 * is acquired after server start (or a fenced write needs its epoch) and
 * removed when the lease or its database is dropped, or to make room for
 * another lease while the lease is not held (see state.c's header).
 * Times ending in _mono are CLOCK_MONOTONIC microseconds.
 */
typedef struct TenureLease
{
	TenureKey	key;

	/*
	 * What leader_is() and renew() read, together after the key, so that a
	 * call touches few cache lines of the entry (doc/performance.md, 100,000
	 * live leases).
	 */
	Oid			owner;
	TenureState state;			/* the current or pending tenure */
	bool		dropped;		/* dropped; its slot is the first to go */
	bool		has_lock_key;
	bool		lock_held;		/* keeper: held, with held_tag */
	bool		session_bound;
	int64		ttl_us;
	pg_atomic_uint64 renewed_mono;	/* renew() writes it under the lock in
									 * shared mode: read with tenure_renewed() */
	int64		active_mono;	/* tenure counts as active from here */
	int64		epoch;			/* latest published epoch of the lease */
	char		holder[TENURE_HOLDER_MAX + 1];

	/* settings, copied from tenure.lease when the entry is loaded */
	int64		lease_id;
	int			fence_lock;		/* N of view tenure_lock.fence_lock_N */
	int64		holdoff_us;		/* -1: automatic hold-off */
	int64		lock_key;
	int			altering_pid;	/* alter_lease pinned it (state.c's header) */
	bool		loaded_in_recovery; /* epoch cache not to be trusted */

	/* the rest of the current or pending tenure */
	int64		pending_epoch;	/* epoch of a PENDING tenure */
	Oid			holder_role;	/* the role that acquired it */
	bool		share_taken;	/* counted in tenure_shares (holder_role and
								 * key.dbid) */
	int			holder_pid;		/* acquiring backend (session-bound or pending) */
	TimestampTz holder_start;	/* ... and its MyStartTimestamp */
	uint64		pending_token;	/* identifies the pending acquisition */
	TransactionId pending_xid;	/* its transaction, once it issued its epoch */
	bool		committing;		/* past its PRE_COMMIT check: never taken over */
	bool		issuing;		/* issuing its epoch: not taken over either */
	int64		acquired_mono;
	TimestampTz acquired_wall;
	uint64		transitions;	/* tenures started and epochs claimed */
	uint32		history_starts; /* tenures and claims committed since loaded */

	/* the end of the previous tenure, for hold-off and the history */
	int64		pred_expiry_mono;	/* 0 if it was released explicitly */
	int64		ended_epoch;
	TenureEndReason ended_reason;
	TimestampTz ended_wall;
	char		ended_holder[TENURE_HOLDER_MAX + 1];

	/* the advisory lock, held by the keeper (lock_held above) */
	bool		lock_wanted;	/* backends: the keeper should hold it */
	bool		lock_failed;	/* keeper: could not take it ... */
	bool		lock_no_memory; /* ... because the lock table is full */
	LOCKTAG		held_tag;
	int64		lock_linger_mono;	/* a lock no tenure wants any more may be
									 * kept until then (see tenure_end()) */
	bool		keeper_queued;	/* in the keeper's queue */

	/*
	 * A handoff() past its PRE_COMMIT check: its COMMIT makes the waiter in
	 * slot handoff_slot the holder.  Until then the tenure neither expires
	 * nor can be reserved.
	 */
	bool		handoff_pending;
	int			handoff_pid;	/* the backend committing it */
	int			handoff_slot;
	TenureWaiter handoff_to;	/* the waiter, as it was then */

	/*
	 * A claim_epoch() of the held tenure past its PRE_COMMIT check, in this
	 * backend (0: none).  Until its COMMIT or abort the tenure neither
	 * expires nor can be reserved.
	 */
	int			claim_pid;

	/* tenure.lease_stats, since the entry was loaded or its stats reset */
	int64		ended_mono;		/* when the latest tenure ended; 0: none */
	TenureEndReason last_end_reason;	/* ... and why (ended_reason is
										 * cleared once in the history) */
	TenureCounters counters;	/* under the LWLock exclusive */
	pg_atomic_uint64 fenced[TENURE_FENCED_KINDS];	/* under it in either mode */
} TenureLease;

/*
 * How long the keeper keeps the advisory lock of a lease without lock_key
 * after its tenure ended: a lease taken again within that time (the next
 * job of a worker, a waiting candidate) finds its lock held and starts
 * without a round trip to the keeper.  The lock's tag is private to
 * pg_tenure, so nobody else can want it meanwhile.  A lease with lock_key
 * lets go at once: applications' own pg_try_advisory_lock(lock_key) waits
 * for that.
 */
#define TENURE_LOCK_LINGER_US	((int64) USECS_PER_SEC)

/*
 * At most this many locks linger at once, so that they never take more of
 * the shared lock table than the README's sizing rule leaves spare; beyond
 * it, and for a lock nobody wanted in the end (an acquisition that rolled
 * back), the keeper lets go at once.
 */
#define TENURE_LOCK_LINGER_MAX	64

/*
 * Databases the history writer remembers at once; more make it list them
 * all again.  It starts this long after the first end it has to write, so
 * that ends close together take one run.
 */
#define TENURE_HISTORY_DBS	256
#define TENURE_HISTORY_DELAY_US	((int64) 100000)

/* length of the keeper's work queue; more work makes it scan every entry */
#define TENURE_KEEPER_QUEUE	1024

/*
 * The lease table's header in shared memory; its lock protects every field
 * but those the protocol in state.c's header names.
 */
typedef struct TenureShared
{
	LWLock	   *lock;			/* protects the table and most fields below */
	ConditionVariable cv;		/* broadcast on every lease state change */
	int64		boot_id;		/* random, new at every shared memory init */
	TimestampTz ready_time;		/* when the server could first hold tenures */
	int64		ready_mono;		/* (the keeper's first start: after startup
								 * or promotion); 0 before */
	int			keeper_pid;
	Latch	   *keeper_latch;
	uint64		keeper_starts;

	/*
	 * Work for the keeper: leases whose advisory lock may have to be taken
	 * or let go, and whether it must look at every entry instead (the queue
	 * overflowed, or it just started); keeper_due_mono is a lower bound of
	 * every held tenure's expiry, when the keeper must look at all entries
	 * again.
	 */
	bool		keeper_scan;
	bool		keeper_urgent;	/* queued work that must not wait */
	bool		keeper_let_go;	/* let go of lingering locks now */
	int			keeper_nlinger; /* lingering locks, at most (see
								 * TENURE_LOCK_LINGER_MAX) */
	int64		keeper_due_mono;
	int64		keeper_sleep_until; /* when the keeper means to look again */
	bool		keeper_wake;	/* ... which is too late: wake it */
	int			keeper_nqueued;
	TenureKey	keeper_queue[TENURE_KEEPER_QUEUE];

	/*
	 * Databases with ends of tenures to write to tenure.history (history.c
	 * writes them), from history_due_mono on; history_list: every database
	 * with an OID above history_list_after may have some (the server just
	 * became ready: tenures open when it went down).
	 */
	int			history_ndbs;
	Oid			history_dbs[TENURE_HISTORY_DBS];
	bool		history_list;
	Oid			history_list_after;
	int64		history_due_mono;

	/* alter_lease commits so far (state.c's header, "Settings") */
	pg_atomic_uint64 settings_gen;
} TenureShared;

/*
 * Leadership changes made under the LWLock, logged once it is released
 * (tenure.log_transitions); a backend makes at most a few at a time.
 */
typedef enum TenureTransitionKind
{
	TENURE_TRANSITION_START,
	TENURE_TRANSITION_END,
	TENURE_TRANSITION_CLAIM
} TenureTransitionKind;

typedef struct TenureTransition
{
	TenureTransitionKind kind;
	char		lease[TENURE_NAME_MAX + 1];
	char		holder[TENURE_HOLDER_MAX + 1];
	int64		epoch;
	bool		has_prev;		/* START: a tenure ended before, this run */
	char		prev_holder[TENURE_HOLDER_MAX + 1];
	int64		prev_epoch;
	TenureEndReason prev_reason;
	int64		gap_us;
} TenureTransition;

/* the lease table (state.c sets it up) */
extern TenureShared *tenure_shared;
extern HTAB *tenure_leases;
extern TenureWaiter *tenure_waiter_slots;	/* MaxBackends slots */

#define AssertLocked() \
	Assert(LWLockHeldByMe(tenure_shared->lock))
#define AssertLockedExclusive() \
	Assert(LWLockHeldByMeInMode(tenure_shared->lock, LW_EXCLUSIVE))

static inline int64
tenure_renewed(const TenureLease *lease)
{
	return (int64) pg_atomic_read_u64(&((TenureLease *) lease)->renewed_mono);
}

static inline int64
tenure_expiry(const TenureLease *lease)
{
	return tenure_renewed(lease) + lease->ttl_us;
}

/*
 * Whether a claim or handoff of the lease's held tenure is committing:
 * then the tenure does not expire until that transaction ends.
 */
static inline bool
tenure_change_committing(const TenureLease *lease)
{
	return lease->handoff_pending || lease->claim_pid != 0;
}

/*
 * state.c's helpers for the other files of the module.  Those that change
 * an entry run under the LWLock in exclusive mode (they assert it) and
 * cannot fail (src/README, F8); tenure_changed() runs after it is
 * released.
 */
extern TenureLease *tenure_find(const TenureKey *key);
extern void tenure_note_mine(const TenureKey *key);
extern bool tenure_is_live(const TenureLease *lease, int64 now);
extern void tenure_end(TenureLease *lease, TenureEndReason reason, int64 now);
extern void tenure_share_take(TenureLease *lease);
extern void tenure_share_give(TenureLease *lease);
extern void tenure_lease_tag(const TenureLease *lease, LOCKTAG *tag);
extern bool tenure_lease_tag_held(const TenureLease *lease);
extern void tenure_keeper_notice(TenureLease *lease);
extern void tenure_keeper_due(int64 expiry);
extern TenureTransition *tenure_transition(TenureTransitionKind kind,
										   const TenureLease *lease);
extern void tenure_changed(bool wake_keeper);

/* state_notify.c: its own slots, set up with the lease table */
extern Size tenure_notify_shmem_size(void);
extern void tenure_notify_shmem_init(void);

#endif							/* STATE_INTERNAL_H */
