/*-------------------------------------------------------------------------
 *
 * pg_tenure.h
 *		Shared declarations of pg_tenure: the shared-memory lease table, the
 *		keeper worker, transaction-bound actions and the SQL functions.
 *
 * The locking protocol of the shared state is described in state.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PG_TENURE_H
#define PG_TENURE_H

#include "access/xact.h"
#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "utils/guc.h"

#include "compat.h"

/* Longest lease name and holder, in bytes (without the terminator). */
#define TENURE_NAME_MAX		63
#define TENURE_HOLDER_MAX	127

/*
 * field4 of the advisory lock tags pg_tenure uses in its private key space.
 * SQL only ever produces 1 (bigint keys) and 2 (int4 pairs).
 */
#define TENURE_LEASE_LOCK_FIELD4	0x7E41
#define TENURE_PROBE_LOCK_FIELD4	0x7E43	/* the keeper's lock table probe */

/*
 * Fence locks are relation locks on the views tenure_lock.fence_lock_0 .. _15
 * (a lease's is the one its row names): weak relation locks take the lock
 * manager's per-backend fast path, which advisory locks never do.  The
 * install script creates the same number of views.
 */
#define TENURE_FENCE_LOCKS			16

/*
 * A lease's history is trimmed to tenure.history_per_lease rows at every
 * this many new rows (and at the first after server start).
 */
#define TENURE_HISTORY_TRIM_EVERY	64

/* SQLSTATEs of pg_tenure's own conditions. */
#define ERRCODE_TENURE_LEASE_HELD	MAKE_SQLSTATE('T','N','0','0','1')
#define ERRCODE_TENURE_FENCED		MAKE_SQLSTATE('T','N','0','0','2')

typedef enum TenureState
{
	TENURE_FREE = 0,			/* no tenure */
	TENURE_PENDING,				/* being acquired by an open transaction, for
								 * at most the ttl from acquired_mono */
	TENURE_HELD					/* a tenure (check expiry before trusting) */
} TenureState;

/* Hash key: a lease is named per database. */
typedef struct TenureKey
{
	Oid			dbid;
	char		name[TENURE_NAME_MAX + 1];	/* zero padded */
} TenureKey;

/* tenure.c */
extern int	tenure_max_leases;
extern int	tenure_role_share;
extern int	tenure_database_share;
extern int	tenure_history_per_lease;
extern int	tenure_claim_timeout;
extern bool tenure_notify_enabled;
extern bool tenure_log_transitions;

/* A lease's row in tenure.lease (catalog.c reads it). */
typedef struct TenureRow
{
	int64		id;
	Oid			owner;
	int64		ttl_us;			/* -1 if out of bounds (bad_setting) */
	int64		holdoff_us;		/* -1: automatic (NULL), or out of bounds */
	/*
	 * "ttl" or "holdoff" if the row's value is outside the bounds that
	 * create_lease checks (a row restored from a dump, or written by hand),
	 * NULL if both are within them; bad_value is that value as text.  Such
	 * a lease can be read and dropped, but not loaded into shared memory
	 * (tenure_load_entry() fails).
	 */
	const char *bad_setting;
	char		bad_value[128];
	bool		has_lock_key;
	int64		lock_key;
	int64		epoch;
	int			fence_lock;
	bool		own;			/* written by this (uncommitted) transaction */
	/* set by tenure_load_committed() only: */
	int64		restart_ttl_us; /* the ttl a holder from before the server
								 * went down may believe in (at least ttl_us) */
	uint64		settings_gen;	/* tenure_state_settings_gen() before reading */
} TenureRow;

/*
 * state.c, state_wait.c, state_keeper.c, state_notify.c: the shared lease
 * table.  The only code that reads or changes it; state.c's header states
 * the locking protocol and lists the verbs by the lock mode they take, as
 * the declarations below are grouped.
 */

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
										  bool open_at_shutdown, int64 now);
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

/* txn.c */
typedef enum TenureActionKind
{
	TENURE_ACT_ACQUIRE,
	TENURE_ACT_CLAIM,
	TENURE_ACT_RELEASE,
	TENURE_ACT_DROP,
	TENURE_ACT_DROP_DATABASE_LEASES,	/* key.dbid: DROP EXTENSION or DATABASE */
	TENURE_ACT_HANDOFF,
	TENURE_ACT_ALTER
} TenureActionKind;

extern void tenure_txn_init(void);
extern void tenure_txn_remember(TenureActionKind kind, const TenureKey *key,
								int64 epoch, uint64 token);
extern void tenure_txn_issued(uint64 token, int64 epoch);
extern void tenure_txn_forget_acquire(uint64 token);
extern void tenure_txn_notify(const char *event, const char *lease,
							  const char *payload);
extern void tenure_txn_remember_claim(const TenureKey *key, int64 epoch,
									  int64 old_epoch, const char *holder);
extern int64 tenure_txn_claimed_epoch(const TenureKey *key);
extern void tenure_txn_remember_handoff(const TenureKey *key, int64 epoch,
										int64 old_epoch, const char *holder,
										const char *successor,
										bool session_bound);
extern void tenure_txn_drop_database_leases(Oid dbid);
extern void tenure_txn_check_not_handed(const TenureKey *key,
										TenureActionKind kind);
extern void tenure_txn_handoff_refused(TenureHandoffCheck check,
									   const char *name, const char *holder,
									   const char *successor, bool at_commit);
extern void tenure_txn_remember_alter(const TenureKey *key,
									  const TenureRow *row, bool pinned);
extern void tenure_txn_check_not_pinned(const TenureKey *key);

/* objects.c: the extension's own objects, as installed */
typedef struct TenureObjects
{
	Oid			extension;
	Oid			owner;			/* the extension's owner, a superuser */
	Oid			namespace;		/* schema tenure */
	Oid			lease;			/* tenure.lease */
	Oid			history;		/* tenure.history */
	Oid			fenced;			/* tenure.fenced */
	Oid			fence_locks[TENURE_FENCE_LOCKS];	/* tenure_lock.fence_lock_N */
	Oid			fence_trigger;	/* tenure.fence_trigger() */
	Oid			fence_apply_trigger;	/* tenure.fence_apply_trigger() */
} TenureObjects;

extern void tenure_objects_init(void);
extern const TenureObjects *tenure_objects(bool missing_ok);
extern bool tenure_objects_gone(void);

/* catalog.c: an SPI session as the owner of pg_tenure's tables */
typedef struct TenureSpi
{
	Oid			save_userid;
	int			save_sec_context;
	int			guc_nestlevel;
} TenureSpi;

/* how long a backend waits for the keeper to answer */
#define TENURE_KEEPER_WAIT_US	((int64) 10 * USECS_PER_SEC)

extern void tenure_catalog_init(void);
extern void tenure_spi_begin(TenureSpi *spi);
extern void tenure_spi_end(TenureSpi *spi);
extern struct _SPI_plan *tenure_spi_plan(const char *sql, const char *types);
extern uint64 tenure_spi_exec(const char *sql, const char *types,
							  Datum *values, const bool *isnull, int expected);
extern int64 tenure_spi_int8(int col, bool *isnull);
extern void tenure_load_row(const char *name, TenureRow *row, bool for_update);
extern bool tenure_load_committed(const char *name, TenureRow *row,
								  bool missing_ok, bool *open_at_shutdown);
extern void tenure_check_owner(const char *name, Oid owner, Oid caller);
extern Oid	tenure_known_owner(void);
extern void tenure_ensure_entry(const char *name, const TenureKey *key);
extern void tenure_load_entry(const TenureKey *key, const TenureRow *row,
							  bool open_at_shutdown);

/*
 * epoch.c: issuing epochs, and the epoch clock in shared memory of its own
 * (src/README, "Issuing epochs")
 */
extern Size tenure_epoch_shmem_size(void);
extern void tenure_epoch_shmem_init(void);
extern int64 tenure_issue_epoch(const char *name, int64 floor, bool *locked);

/*
 * history_rows.c: every statement that writes tenure.history
 *
 * Why a tenure ended, as tenure.history.end_reason names it.  Shared
 * memory records why a tenure ended (state.c, tenure_end()), and keeps an
 * end that happened outside a transaction until the history shows it
 * (tenure_state_ended()); claims, server restarts and promotions are
 * only ever written to the history.
 */
typedef enum TenureEndReason
{
	TENURE_END_NONE = 0,
	TENURE_END_RELEASED,
	TENURE_END_EXPIRED,
	TENURE_END_SESSION,
	TENURE_END_REVOKED,
	TENURE_END_CLAIMED,			/* written by claim_epoch() itself */
	TENURE_END_HANDED,			/* written by handoff() itself */
	TENURE_END_RESTARTED,		/* open when the server went down */
	TENURE_END_PROMOTED,		/* ... its epoch issued on an earlier timeline */
	TENURE_END_DROPPED
} TenureEndReason;

#define TENURE_END_REASONS	(TENURE_END_DROPPED + 1)

/*
 * The name of an end reason in tenure.history (NULL for TENURE_END_NONE):
 * the one table of them, which sql/end_reasons.sql compares with the
 * table's CHECK constraint.
 */
static inline const char *
tenure_end_reason_text(TenureEndReason reason)
{
	static const char *const names[TENURE_END_REASONS] = {
		[TENURE_END_NONE] = NULL,
		[TENURE_END_RELEASED] = "released",
		[TENURE_END_EXPIRED] = "expired",
		[TENURE_END_SESSION] = "session ended",
		[TENURE_END_REVOKED] = "revoked",
		[TENURE_END_CLAIMED] = "claimed",
		[TENURE_END_HANDED] = "handed over",
		[TENURE_END_RESTARTED] = "server restart",
		[TENURE_END_PROMOTED] = "promoted",
		[TENURE_END_DROPPED] = "dropped",
	};

	Assert((unsigned) reason < TENURE_END_REASONS);
	return names[reason];
}

extern void tenure_history_start(const char *name, int64 epoch,
								 const char *holder, bool session_bound);
extern void tenure_history_close(const char *name, const TenureKey *key);
extern void tenure_history_close_restarted(void);
extern bool tenure_history_close_ended(const char *name, int64 epoch,
									   const char *reason, TimestampTz ended);
extern void tenure_history_close_now(const char *name, TenureEndReason reason,
									 int64 first, int64 last);
extern void tenure_history_raise_ttl(const char *name);

/* history.c: the history writer, a worker the keeper starts */
extern struct BackgroundWorkerHandle *tenure_history_launch(Oid dbid, Oid after);
PGDLLEXPORT void tenure_history_main(Datum arg);

/* acquire.c */
extern int64 tenure_acquire_lease(const char *name, const char *holder,
								  int64 wait_us, bool session_bound,
								  TenureBusy *busy, bool *started);

/*
 * args.c: checks of SQL arguments
 *
 * Bounds of the interval arguments (README, Reference): a lease's ttl is
 * 1 microsecond to TENURE_MAX_TTL_US, its fixed hold-off 0 to
 * TENURE_MAX_HOLDOFF_US, acquire's wait and the await functions' timeout
 * 0 to TENURE_MAX_WAIT_US.  Whatever is added to a monotonic time in
 * microseconds stays far from overflowing a bigint.
 */
#define TENURE_MAX_TTL_US		((int64) USECS_PER_DAY)
#define TENURE_MAX_HOLDOFF_US	((int64) USECS_PER_DAY)
#define TENURE_MAX_WAIT_US		((int64) USECS_PER_DAY)

/* Why an interval does not convert to microseconds within bounds. */
typedef enum TenureIntervalCheck
{
	TENURE_INTERVAL_OK = 0,
	TENURE_INTERVAL_MONTHS,		/* months or years: no fixed length */
	TENURE_INTERVAL_INFINITE,	/* 'infinity' or '-infinity' (17 and later) */
	TENURE_INTERVAL_OUT_OF_RANGE	/* outside the bounds, or beyond a bigint
									 * of microseconds */
} TenureIntervalCheck;

/* room for tenure_bound_text() */
#define TENURE_BOUND_TEXT_MAX	32

extern TenureIntervalCheck tenure_interval_us(const Interval *iv,
											  int64 min_us, int64 max_us,
											  int64 *us);
extern void tenure_bound_text(int64 us, char *buf);
extern void tenure_arg_not_null(FunctionCallInfo fcinfo, int argno,
								const char *argname);
extern char *tenure_arg_text(FunctionCallInfo fcinfo, int argno,
							 const char *argname, int maxlen);
extern char *tenure_arg_lease(FunctionCallInfo fcinfo, int argno);
extern int64 tenure_arg_interval(FunctionCallInfo fcinfo, int argno,
								 const char *argname, bool allow_zero,
								 int64 max_us);

/*
 * tokens.c: the syntax of tenure.tokens and the rules for names, pure
 * functions that fuzz/ builds without a server
 */

/*
 * Bounds of tenure.tokens: a value longer than this, or with more tokens,
 * is rejected when it is set, so that parsing it, and looking tokens up in
 * it, stays cheap whoever sets it (ALTER ROLE ... SET included).
 */
#define TENURE_TOKENS_MAX_BYTES		65536
#define TENURE_TOKENS_MAX_COUNT		1000

/* One presented token. */
typedef struct TenureToken
{
	char		lease[TENURE_NAME_MAX + 1];
	int64		epoch;
} TenureToken;

/*
 * Parsed value of tenure.tokens, kept as the setting's "extra": the tokens
 * sorted by lease name, so that duplicates are found, and a lease's token
 * is looked up, by binary search.
 */
typedef struct TenureTokens
{
	int			count;
	TenureToken items[FLEXIBLE_ARRAY_MEMBER];
} TenureTokens;

/* Why a value of tenure.tokens was rejected. */
typedef enum TenureTokensError
{
	TENURE_TOKENS_OK = 0,
	TENURE_TOKENS_TOO_LONG,		/* over TENURE_TOKENS_MAX_BYTES */
	TENURE_TOKENS_TOO_MANY,		/* over TENURE_TOKENS_MAX_COUNT */
	TENURE_TOKENS_BAD_FORM,		/* a token without "=" */
	TENURE_TOKENS_BAD_NAME,		/* not a lease name */
	TENURE_TOKENS_BAD_EPOCH,	/* not a positive bigint */
	TENURE_TOKENS_DUPLICATE		/* a lease named twice */
} TenureTokensError;

/* Which rule a lease name or holder breaks. */
typedef enum TenureNameCheck
{
	TENURE_NAME_OK = 0,
	TENURE_NAME_BAD_LENGTH,		/* empty, or longer than allowed */
	TENURE_NAME_SEPARATOR,		/* a lease name with "," or "=" */
	TENURE_NAME_BLANK_END		/* a lease name beginning or ending with a
								 * blank */
} TenureNameCheck;

extern TenureNameCheck tenure_name_check(const char *s, size_t len,
										 int maxlen, bool lease);
extern bool tenure_token_name_ok(const char *s, size_t len);
extern TenureTokensError tenure_tokens_measure(const char *value,
											   size_t *length, size_t *size);
extern TenureTokensError tenure_tokens_parse(const char *value,
											 TenureTokens *tokens, size_t size,
											 const char **duplicate);
extern size_t tenure_tokens_print(const TenureTokens *tokens, const char *omit,
								  char *buf, size_t size);
extern const TenureToken *tenure_tokens_find(const TenureTokens *tokens,
											 const char *name);

/* fence.c */
extern char *tenure_tokens_string;
extern bool tenure_tokens_check(char **newval, void **extra, GucSource source);
extern void tenure_tokens_assign(const char *newval, void *extra);
extern void tenure_fence_init(void);
extern void tenure_fence_subxact(SubXactEvent event);
extern bool tenure_fence_utility_begin(Node *stmt);
extern void tenure_require_changes(FunctionCallInfo fcinfo);
extern void tenure_fence_utility_end(bool counted);
extern void tenure_fence_check(const char *name, const char *table,
							   bool at_commit, int *fence_lock);
extern void tenure_fence_note(const char *lease, const char *table,
							  LOCKMODE mode, int fence_lock);
extern bool tenure_fence_wrote(void);
extern void tenure_fence_precommit(void);
extern void tenure_fence_reset(void);
extern void tenure_fence_seal(void);

/*
 * fence_table.c: setting fences up and taking them down; the verbs the
 * event trigger (fence_ddl.c) shares with tenure.fence_table() and
 * tenure.unfence_table()
 */
extern char *tenure_rel_qualified(Oid relid);
extern void tenure_fence_query(const char *sql, int nargs, Datum *args);
extern char *tenure_fenced_by(Oid relid);
extern List *tenure_rel_parents(Oid relid);
extern const char *tenure_subscription_name(Oid subid);
extern void tenure_fence_utility(const char *sql);
extern bool tenure_fence_utility_running(void);
extern void tenure_fence_forget(Oid relid);
extern void tenure_fence_one(Oid relid, const char *lease);
extern void tenure_fence_foreign_check(const char *sql, Datum tables,
									   bool fencing);

/*
 * What shapes a fenced table's rows, followed through pg_depend from the
 * tables (and the expressions of their generated columns) to the types,
 * collations, functions, operators (and their classes and families), text
 * search configurations and dictionaries and composite types' relations
 * they use, to any depth.  A command on any of these can change the fenced
 * rows (ALTER TYPE ... ADD ATTRIBUTE, DROP TYPE ... CASCADE drops a
 * column), so each must belong to the table's owner (or a role whose
 * privileges its owner has) or a superuser, and so must the extension it
 * belongs to, if any (a trusted extension created by another role owns
 * objects of the bootstrap superuser, but its DROP is that role's); and
 * none may be one of pg_tenure's own: otherwise a fence set up by one role
 * would refuse another role's commands on its own objects, or pull
 * pg_tenure's tables into a fence.  (src/README, F9.)
 * The seed is a query of the tables to check, column "tbl" (oid); filter
 * is appended to the final WHERE clause.  fence_table.c and fence_ddl.c
 * build their queries with it, and tenure_fence_foreign_check() runs them.
 */
#define TENURE_FOREIGN_QUERY(seed, filter) \
	"WITH RECURSIVE tables (tbl) AS (" seed ")," \
	" edges (classid, objid, refclassid, refobjid) AS (" \
	"  SELECT d.classid, d.objid, d.refclassid, d.refobjid FROM pg_catalog.pg_depend d" \
	"   WHERE d.refclassid OPERATOR(pg_catalog.=) ANY (ARRAY[" \
	"    'pg_catalog.pg_type'::pg_catalog.regclass, 'pg_catalog.pg_class'::pg_catalog.regclass," \
	"    'pg_catalog.pg_collation'::pg_catalog.regclass, 'pg_catalog.pg_proc'::pg_catalog.regclass," \
	"    'pg_catalog.pg_operator'::pg_catalog.regclass, 'pg_catalog.pg_opclass'::pg_catalog.regclass," \
	"    'pg_catalog.pg_opfamily'::pg_catalog.regclass, 'pg_catalog.pg_ts_config'::pg_catalog.regclass," \
	"    'pg_catalog.pg_ts_dict'::pg_catalog.regclass" \
	"   ]::pg_catalog.oid[])" \
	"   AND d.deptype OPERATOR(pg_catalog.=) ANY ('{n,i,a}'::pg_catalog.\"char\"[])" \
	"  UNION ALL" \
	"  SELECT 'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid, t.oid," \
	"   'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid, t.typrelid" \
	"   FROM pg_catalog.pg_type t WHERE t.typrelid OPERATOR(pg_catalog.<>) 0)," \
	" dep (classid, objid, tbl) AS (" \
	"  SELECT s.classid, s.objid, s.tbl FROM (" \
	"   SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid AS classid," \
	"    t.tbl AS objid, t.tbl FROM tables t" \
	"   UNION ALL" \
	"   SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass::pg_catalog.oid, d.oid, d.adrelid" \
	"    FROM pg_catalog.pg_attrdef d JOIN pg_catalog.pg_attribute a" \
	"    ON a.attrelid OPERATOR(pg_catalog.=) d.adrelid AND a.attnum OPERATOR(pg_catalog.=) d.adnum" \
	"    WHERE d.adrelid OPERATOR(pg_catalog.=) ANY (SELECT t.tbl FROM tables t)" \
	"    AND a.attgenerated OPERATOR(pg_catalog.<>) ''" \
	"  ) s" \
	"  UNION" \
	"  SELECT e.refclassid, e.refobjid, dep.tbl FROM edges e JOIN dep" \
	"   ON e.classid OPERATOR(pg_catalog.=) dep.classid AND e.objid OPERATOR(pg_catalog.=) dep.objid)," \
	" owned (classid, objid, tbl, objowner, ours, ext) AS (" \
	"  SELECT dep.classid, dep.objid, dep.tbl, COALESCE(c.relowner, ty.typowner, co.collowner, p.proowner," \
	"   op.oprowner, oc.opcowner, ofa.opfowner, tc.cfgowner, td.dictowner)," \
	"   EXISTS (SELECT FROM pg_catalog.pg_depend x" \
	"    WHERE x.classid OPERATOR(pg_catalog.=) dep.classid AND x.objid OPERATOR(pg_catalog.=) dep.objid" \
	"    AND x.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass" \
	"    AND x.refobjid OPERATOR(pg_catalog.=) $1 AND x.deptype OPERATOR(pg_catalog.=) 'e')," \
	"   (SELECT e.extowner OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) e.extname" \
	"     FROM pg_catalog.pg_depend x JOIN pg_catalog.pg_extension e" \
	"     ON e.oid OPERATOR(pg_catalog.=) x.refobjid" \
	"    WHERE x.classid OPERATOR(pg_catalog.=) dep.classid AND x.objid OPERATOR(pg_catalog.=) dep.objid" \
	"    AND x.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass" \
	"    AND x.deptype OPERATOR(pg_catalog.=) 'e' LIMIT 1)" \
	"  FROM dep" \
	"  LEFT JOIN pg_catalog.pg_class c ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass" \
	"   AND c.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_type ty ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass" \
	"   AND ty.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_collation co ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_collation'::pg_catalog.regclass" \
	"   AND co.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_proc p ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass" \
	"   AND p.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_operator op ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass" \
	"   AND op.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_opclass oc ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_opclass'::pg_catalog.regclass" \
	"   AND oc.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_opfamily ofa ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_opfamily'::pg_catalog.regclass" \
	"   AND ofa.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_ts_config tc ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_ts_config'::pg_catalog.regclass" \
	"   AND tc.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_ts_dict td ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_ts_dict'::pg_catalog.regclass" \
	"   AND td.oid OPERATOR(pg_catalog.=) dep.objid)" \
	" SELECT o.tbl::pg_catalog.regclass::pg_catalog.text," \
	"  pg_catalog.pg_describe_object(o.classid, o.objid, 0)," \
	"  r.rolname, o.ours, w.extname" \
	" FROM owned o JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) o.tbl" \
	" CROSS JOIN LATERAL (VALUES (o.objowner, NULL::pg_catalog.text)," \
	"  (pg_catalog.split_part(o.ext, ' ', 1)::pg_catalog.oid, pg_catalog.split_part(o.ext, ' ', 2))) AS w (owner, extname)" \
	" JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) w.owner" \
	" WHERE (o.ours" \
	"  OR NOT (r.rolsuper OR pg_catalog.pg_has_role(w.owner, t.relowner, 'USAGE')))" \
	filter \
	" ORDER BY 4 DESC, 1, 2 LIMIT 1"

/* keeper.c */
extern void tenure_register_keeper(void);
PGDLLEXPORT void tenure_keeper_main(Datum arg);

#endif							/* PG_TENURE_H */
