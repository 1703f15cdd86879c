/*-------------------------------------------------------------------------
 *
 * state.h
 *		Declarations of state.c, state_wait.c, state_keeper.c, state_notify.c: the shared lease table (the state module's verbs).
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_STATE_H
#define TENURE_STATE_H

#include "pg_tenure.h"
#include "promotion.h"

/*
 * state.c, state_wait.c, state_keeper.c, state_notify.c: the shared lease
 * table.  The only code that reads or changes it; state.c's header states
 * the locking protocol and lists the verbs by the lock mode they take, as
 * the declarations below are grouped.
 */

/*
 * What a lease's entry carries over from before this server became ready
 * to hold tenures (a restart or a promotion): catalog.c finds it in the
 * tables, tenure_state_load() applies it when it builds the entry
 * (src/README, H2 and P1 .. P5).
 */
typedef enum TenureCarryKind
{
	TENURE_CARRY_NONE = 0,		/* no holder from before may believe */
	TENURE_CARRY_RESTART,		/* one may, until ready + its ttl */
	TENURE_CARRY_PROMOTED,		/* ... until ready + its ttl +
								 * tenure.demotion_bound: the old primary
								 * may go on serving it */
	TENURE_CARRY_CONTINUED		/* its tenure continues (a promotion that
								 * kept every transaction) */
} TenureCarryKind;

typedef struct TenureCarry
{
	TenureCarryKind kind;
	/* TENURE_CARRY_CONTINUED: the tenure, as tenure.history shows it */
	char		holder[TENURE_HOLDER_MAX + 1];
	int64		epoch;
	TimestampTz started;
	bool		active;			/* active at once (else from ready + its
								 * hold-off or ttl) */
} TenureCarry;

/* What a backend sees of a lease held by someone else. */
typedef struct TenureBusy
{
	bool		foreign;		/* a foreign session holds the lock_key */
	bool		no_memory;		/* the shared lock table is full */
	bool		altering;		/* an alter_lease pinned it (state.c) */
	bool		row_locked;		/* another transaction holds its row */
	char		holder[TENURE_HOLDER_MAX + 1];
	int64		epoch;			/* 0 while the holder is acquiring it */
	TimestampTz since;
	int64		until_mono;		/* when the holder's tenure expires */
	int			share_limit;	/* a share used up: its number of slots */
} TenureBusy;

/*
 * Another backend's acquisition that outlived its ttl after issuing its
 * epoch: its transaction holds the lease's row lock, and its reservation
 * is taken over only once that transaction has ended (acquire.c).
 */
typedef struct TenureAbandoned
{
	int			pid;			/* its backend */
	TransactionId xid;			/* its transaction */
	uint64		token;			/* its reservation */
} TenureAbandoned;

typedef enum TenureReserveResult
{
	TENURE_RESERVE_NO_ENTRY,	/* its slot went to another lease: load it
								 * again */
	TENURE_RESERVE_DROPPED,		/* dropped under us */
	TENURE_RESERVE_BUSY,		/* held or being acquired by someone else */
	TENURE_RESERVE_RENEWED,		/* the holder's own tenure, renewed */
	TENURE_RESERVE_RESERVED,	/* reserved: wait for the keeper's lock */
	TENURE_RESERVE_ROLE_SHARE,	/* the role has its share of slots */
	TENURE_RESERVE_DATABASE_SHARE,	/* the database has its share */
	TENURE_RESERVE_ABANDONED	/* an expired acquisition's transaction must
								 * end first (see TenureAbandoned) */
} TenureReserveResult;

typedef enum TenureLockAnswer
{
	TENURE_LOCK_WAITING,		/* the keeper has not answered yet */
	TENURE_LOCK_GRANTED,		/* the keeper holds the lease's lock */
	TENURE_LOCK_REFUSED,		/* it could not: reservation given back */
	TENURE_LOCK_GONE			/* the reservation is not ours any more */
} TenureLockAnswer;

typedef enum TenureLoadResult
{
	TENURE_LOAD_DONE,
	TENURE_LOAD_SOON,			/* table full; a slot frees up once the
								 * keeper lets go of a lock */
	TENURE_LOAD_FULL,			/* table full of leases in use */
	TENURE_LOAD_RETRY			/* an alter_lease committed since the row was
								 * read: read it again */
} TenureLoadResult;

/* Whether alter_lease may change what needs a lease nobody uses. */
typedef enum TenureAlterCheck
{
	TENURE_ALTER_OK,			/* pinned until the transaction ends */
	TENURE_ALTER_NO_ENTRY,		/* its slot went to another lease: load it */
	TENURE_ALTER_IN_USE			/* held, being acquired or handed over, or
								 * being altered by another transaction */
} TenureAlterCheck;

/* How a holder stands with a lease (await_active). */
typedef enum TenureActiveState
{
	TENURE_AS_NOT_HOLDER,		/* no live tenure of this holder */
	TENURE_AS_WAITING,			/* held, not active yet */
	TENURE_AS_ACTIVE,			/* held and active */
	TENURE_AS_OWN_PENDING		/* this transaction is acquiring it */
} TenureActiveState;

/* What the fence check reads of a lease. */
typedef struct TenureFenceView
{
	bool		has_entry;		/* the lease has an entry (maybe dropped) */
	bool		known;			/* ... and it was not dropped */
	int64		epoch;			/* known: the published epoch */
	bool		live;			/* known: its tenure is live */
	int			fence_lock;		/* has_entry: its fence lock; else -1 */
} TenureFenceView;

/* Fenced writes tenure.lease_stats counts, at the statement and at COMMIT. */
typedef enum TenureFencedKind
{
	TENURE_FENCED_NONE = -1,	/* not counted */
	TENURE_FENCED_STATEMENT_ACCEPTED = 0,
	TENURE_FENCED_STATEMENT_REJECTED,
	TENURE_FENCED_COMMIT_ACCEPTED,
	TENURE_FENCED_COMMIT_REJECTED
} TenureFencedKind;

#define TENURE_FENCED_KINDS 4

/* Changes of a lease counted since its entry was loaded or reset. */
typedef struct TenureCounters
{
	uint64		started;		/* tenures */
	uint64		released;		/* tenures ended, by reason */
	uint64		expired;
	uint64		session_ended;
	uint64		revoked;
	uint64		restarted;		/* open when the server went down */
	uint64		handed_over;
	uint64		claims;
	TimestampTz last_change;	/* 0: none */
	int64		last_gap_us;	/* last hand-over gap; -1: none */
} TenureCounters;

/* A session waiting in acquire(wait), as tenure.waiters shows it. */
typedef struct TenureWaiterInfo
{
	char		lease[TENURE_NAME_MAX + 1];
	char		holder[TENURE_HOLDER_MAX + 1];
	bool		session_bound;
	int			pid;
	int64		since_mono;
	bool		handed;
} TenureWaiterInfo;

/* An end of a tenure not yet written to tenure.history. */
typedef struct TenureEnded
{
	TenureKey	key;
	int64		epoch;
	const char *reason;			/* a constant string */
	TimestampTz ended;
} TenureEnded;

/* One lease as tenure.lease_stats shows it. */
typedef struct TenureLeaseStats
{
	char		name[TENURE_NAME_MAX + 1];
	TenureCounters counters;
	uint64		fenced[TENURE_FENCED_KINDS];
	int			waiters;
} TenureLeaseStats;

/* What await_change watches of a lease. */
typedef struct TenureWatch
{
	int64		epoch;
	bool		held;
	char		holder[TENURE_HOLDER_MAX + 1];
	int64		expiry_mono;
} TenureWatch;

/* One lease as tenure.leases shows it; times ending in _mono are
 * CLOCK_MONOTONIC microseconds. */
typedef struct TenureLeaseInfo
{
	char		name[TENURE_NAME_MAX + 1];
	TenureState state;
	bool		live;
	char		holder[TENURE_HOLDER_MAX + 1];
	int64		epoch;
	bool		session_bound;
	TimestampTz acquired_wall;
	int64		renewed_mono;
	int64		expiry_mono;
	int64		active_mono;
	int			holder_pid;
	Oid			holder_role;
	bool		lock_held;
	uint64		transitions;
} TenureLeaseInfo;

/* A tenure the keeper revoked, for its log. */
typedef struct TenureRevoked
{
	TenureKey	key;
	int64		epoch;
} TenureRevoked;

/* no LWLock */
extern Size tenure_shmem_size(void);
extern void tenure_shmem_init(void);
extern bool tenure_state_attached(void);
extern void tenure_require_loaded(void);
extern void tenure_require_primary(FunctionCallInfo fcinfo);
extern int64 tenure_mono_now(void);
extern TimestampTz tenure_mono_to_wall(int64 mono, int64 now_mono,
									   TimestampTz now_wall);
extern void tenure_make_key(TenureKey *key, Oid dbid, const char *name);
extern int64 tenure_boot_id(void);
extern TimestampTz tenure_ready_time(void);
extern void tenure_wake_keeper(void);
extern void tenure_state_prepare_wait(void);
extern bool tenure_state_wait(long timeout_ms);
extern void tenure_state_cancel_wait(void);
extern void tenure_register_session_exit(void);
extern uint64 tenure_state_settings_gen(void);
extern int	tenure_state_history_room(void);
/* ... state_notify.c: the LISTEN/NOTIFY handshake, atomics only */
extern bool tenure_state_notify_needed(void);
extern void tenure_state_notify_done(void);
extern void tenure_state_listening(void);

/* Whether a handoff() may go ahead (tenure_state_handoff_check()). */
typedef enum TenureHandoffCheck
{
	TENURE_HANDOFF_OK,
	TENURE_HANDOFF_NOT_HOLDER,	/* holder has no live tenure of the lease */
	TENURE_HANDOFF_BUSY,		/* another handoff of it is committing */
	TENURE_HANDOFF_NOT_WAITING	/* successor is not waiting for it */
} TenureHandoffCheck;

/* readers: the LWLock in shared mode */
extern bool tenure_state_leads(const TenureKey *key, const char *holder,
							   int64 now);
extern TenureActiveState tenure_state_active(const TenureKey *key,
											 const char *holder, int64 now,
											 int64 *active_mono);
extern int64 tenure_state_held_epoch(const TenureKey *key, const char *holder,
									 bool *session_bound);
extern void tenure_state_await_published(const TenureKey *key);
extern int64 tenure_state_cached_epoch(const TenureKey *key);
extern bool tenure_state_stale(const TenureKey *key, int64 id);
extern void tenure_state_fence(const TenureKey *key, int64 now,
							   int64 presented, TenureFencedKind accepted_as,
							   TenureFenceView *view);
extern void tenure_state_fence_rejected(const TenureKey *key,
										TenureFencedKind kind);
extern TenureLeaseStats *tenure_state_stats(Oid dbid, int *count);
extern bool tenure_state_watch(const TenureKey *key, int64 id, int64 now,
							   TenureWatch *watch);
extern TenureLeaseInfo *tenure_state_list(Oid dbid, int64 now, int *count);
extern const char *tenure_state_ended(const TenureKey *key, int64 *epoch,
									  TimestampTz *ended);
extern bool tenure_state_reserved(const TenureKey *key, uint64 token);
extern bool tenure_state_history_trim_due(const TenureKey *key);
extern TenureEnded *tenure_state_history_pending(Oid dbid, int *count);

/*
 * A lease's latest epoch, for the keeper's list of live tenures: the
 * list's entry first, so that promotion.c's order applies to it.
 */
typedef struct TenureTenureOf
{
	TenureLive	tenure;			/* remaining_us: if live, how long it has */
	bool		live;			/* held, not expired, not session-bound */
} TenureTenureOf;

extern TenureTenureOf *tenure_state_tenures(int64 now, int64 *ready_mono,
											int *count);
/* ... renew changes only the renewal time, an atomic */
extern bool tenure_state_renew(const TenureKey *key, const char *holder,
							   Oid allowed_owner, Oid *owner, bool *renewed);
/* ... state_wait.c */
extern TenureWaiterInfo *tenure_state_waiters(Oid dbid, int *count);
extern TenureHandoffCheck tenure_state_handoff_check(const TenureKey *key,
													 const char *holder,
													 const char *successor,
													 int64 *epoch,
													 bool *session_bound);
/* writers: the LWLock in exclusive mode */
extern TenureLoadResult tenure_state_load(const TenureKey *key,
										  const TenureRow *row,
										  const TenureCarry *carry,
										  int64 now);
extern TenureReserveResult tenure_state_reserve(const TenureKey *key,
												const char *holder,
												bool session_bound, Oid role,
												uint64 token, uint64 takeover,
												int64 *epoch,
												TenureBusy *busy,
												TenureAbandoned *abandoned);
extern TenureLockAnswer tenure_state_lock_answer(const TenureKey *key,
												 uint64 token,
												 TenureBusy *busy);
extern bool tenure_state_issuing(const TenureKey *key, uint64 token);
extern bool tenure_state_issued(const TenureKey *key, uint64 token,
								int64 epoch, TransactionId xid);
extern bool tenure_state_commit_reservation(const TenureKey *key,
											uint64 token, int64 *ttl_us);
extern bool tenure_state_claim_commit(const TenureKey *key,
									  const char *holder, int64 old_epoch);
extern TenureAlterCheck tenure_state_alter_pin(const TenureKey *key,
											   int64 lease_id);
extern void tenure_state_stats_reset(Oid dbid, const char *name);
extern bool tenure_state_history_job(int64 now, Oid *dbid, Oid *after,
									 int64 *due);
extern void tenure_state_history_retry(Oid dbid, Oid after, int64 retry);
extern void tenure_state_history_add_dbs(const Oid *dbids, int n, bool more);
extern void tenure_state_history_written(const TenureKey *key, int64 epoch);
/* ... state_wait.c: stop_waiting is the only way to stop */
extern void tenure_state_waiting(const TenureKey *key, const char *holder,
								 bool session_bound);
extern bool tenure_state_stop_waiting(bool unless_handed);
extern TenureHandoffCheck tenure_state_handoff_commit(const TenureKey *key,
													  const char *holder,
													  const char *successor,
													  int64 old_epoch,
													  bool session_bound);
/* ... state_keeper.c: the keeper */
extern void tenure_state_keeper_start(void);
extern void tenure_state_keeper_exit(void);
extern int64 tenure_state_keeper_pass(int64 now, int64 next,
									  TenureRevoked *revoked, int maxrevoked,
									  int *nrevoked);
/*
 * a transaction's changes, published under one exclusive hold of the
 * lock: begin_update takes it, end_update releases it
 */
extern void tenure_state_begin_update(void);
extern void tenure_state_end_update(bool changed);
extern bool tenure_state_cancel(const TenureKey *key, uint64 token);
extern void tenure_state_publish_acquire(const TenureKey *key, uint64 token);
extern bool tenure_state_cancel_claim(const TenureKey *key);
extern void tenure_state_publish_claim(const TenureKey *key, int64 epoch,
									   int64 claims, const char *holder);
extern void tenure_state_publish_release(const TenureKey *key, int64 now);
extern void tenure_state_publish_drop(const TenureKey *key, int64 lease_id,
									  int64 now);
extern void tenure_state_drop_database(Oid dbid, int64 now);
extern void tenure_state_publish_alter(const TenureKey *key,
									   const TenureRow *row, bool pinned);
extern bool tenure_state_cancel_alter(const TenureKey *key, bool pinned);
/* ... state_wait.c */
extern void tenure_state_publish_handoff(const TenureKey *key, int64 epoch);
extern bool tenure_state_cancel_handoff(const TenureKey *key);

#endif							/* TENURE_STATE_H */
