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
 * Fence locks are relation locks on the views tenure.fence_lock_0 .. _15
 * (a lease's is the one its row names): weak relation locks take the lock
 * manager's per-backend fast path, which advisory locks never do.  The
 * install script creates the same number of views.
 */
#define TENURE_FENCE_LOCKS			16

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

/*
 * Why a tenure ended, as shared memory records it until the history is
 * written (tenure_end_reason_name()).  Claims and server restarts are
 * written to the history directly and need no value here.
 */
typedef enum TenureEndReason
{
	TENURE_END_NONE = 0,
	TENURE_END_RELEASED,
	TENURE_END_EXPIRED,
	TENURE_END_SESSION,
	TENURE_END_REVOKED,
	TENURE_END_DROPPED
} TenureEndReason;

/* Hash key: a lease is named per database. */
typedef struct TenureKey
{
	Oid			dbid;
	char		name[TENURE_NAME_MAX + 1];	/* zero padded */
} TenureKey;

/*
 * One lease in shared memory.  Entries are created the first time a lease
 * is acquired after server start (or a fenced write needs its epoch) and
 * removed when the lease or its database is dropped, or to make room for
 * another lease while the lease is not held (state.c).
 * Times ending in _mono are CLOCK_MONOTONIC microseconds.
 */
typedef struct TenureLease
{
	TenureKey	key;

	/* settings, copied from tenure.lease when the entry is loaded */
	int64		lease_id;
	int			fence_lock;		/* N of view tenure.fence_lock_N */
	Oid			owner;
	int64		ttl_us;
	int64		holdoff_us;		/* -1: automatic hold-off */
	bool		has_lock_key;
	int64		lock_key;
	bool		dropped;		/* dropped; its slot is the first to go */
	bool		loaded_in_recovery; /* epoch cache not to be trusted */

	/* the current or pending tenure */
	TenureState state;
	char		holder[TENURE_HOLDER_MAX + 1];
	int64		epoch;			/* latest published epoch of the lease */
	int64		pending_epoch;	/* epoch of a PENDING tenure */
	bool		session_bound;
	int			holder_pid;		/* acquiring backend (session-bound or pending) */
	TimestampTz holder_start;	/* ... and its MyStartTimestamp */
	uint64		pending_token;	/* identifies the pending acquisition */
	TransactionId pending_xid;	/* its transaction, once it issued its epoch */
	bool		committing;		/* past its PRE_COMMIT check: never taken over */
	int64		acquired_mono;
	TimestampTz acquired_wall;
	int64		renewed_mono;
	int64		active_mono;	/* tenure counts as active from here */
	uint64		transitions;	/* tenures started and epochs claimed */

	/* the end of the previous tenure, for hold-off and the history */
	int64		pred_expiry_mono;	/* 0 if it was released explicitly */
	int64		ended_epoch;
	TenureEndReason ended_reason;
	TimestampTz ended_wall;
	char		ended_holder[TENURE_HOLDER_MAX + 1];

	/* the advisory lock, held by the keeper */
	bool		lock_wanted;	/* backends: the keeper should hold it */
	bool		lock_failed;	/* keeper: could not take it ... */
	bool		lock_no_memory; /* ... because the lock table is full */
	bool		lock_held;		/* keeper: held, with held_tag */
	LOCKTAG		held_tag;
} TenureLease;

typedef struct TenureShared
{
	LWLock	   *lock;			/* protects everything below and the hash */
	ConditionVariable cv;		/* broadcast on every lease state change */
	int64		boot_id;		/* random, new at every shared memory init */
	TimestampTz ready_time;		/* when the server could first hold tenures */
	int64		ready_mono;		/* (the keeper's first start: after startup
								 * or promotion); 0 before */
	int			keeper_pid;
	Latch	   *keeper_latch;
	uint64		keeper_starts;
} TenureShared;

/* tenure.c */
extern int	tenure_max_leases;
extern int	tenure_history_per_lease;
extern int	tenure_claim_timeout;

/* state.c */
extern TenureShared *tenure_shared;
extern struct HTAB *tenure_leases;
extern Size tenure_shmem_size(void);
extern void tenure_shmem_init(void);
extern void tenure_require_loaded(void);
extern void tenure_require_primary(FunctionCallInfo fcinfo);
extern int64 tenure_mono_now(void);
extern TimestampTz tenure_mono_to_wall(int64 mono, int64 now_mono,
									   TimestampTz now_wall);
extern void tenure_make_key(TenureKey *key, Oid dbid, const char *name);
extern void tenure_lease_tag(const TenureLease *lease, LOCKTAG *tag);
extern bool tenure_lease_tag_held(const TenureLease *lease);
extern bool tenure_is_live(const TenureLease *lease, int64 now);
extern int64 tenure_held_epoch(const TenureLease *lease, const char *holder,
							   int64 now);
extern void tenure_end(TenureLease *lease, TenureEndReason reason,
					   int64 now);
extern bool tenure_pending_expired(const TenureLease *lease, int64 now);
extern TenureLease *tenure_enter_entry(const TenureKey *key, int64 now,
									   bool *found, bool *soon);
extern void tenure_wake_keeper(void);
extern const char *tenure_end_reason_name(TenureEndReason reason);
extern void tenure_register_session_exit(void);

/* txn.c */
typedef enum TenureActionKind
{
	TENURE_ACT_ACQUIRE,
	TENURE_ACT_CLAIM,
	TENURE_ACT_RELEASE,
	TENURE_ACT_DROP,
	TENURE_ACT_DROP_DATABASE_LEASES	/* key.dbid: DROP EXTENSION or DATABASE */
} TenureActionKind;

extern void tenure_txn_init(void);
extern void tenure_txn_remember(TenureActionKind kind, const TenureKey *key,
								int64 epoch, uint64 token);
extern void tenure_txn_issued(uint64 token, int64 epoch);
extern void tenure_txn_drop_database_leases(Oid dbid);

/* durable.c: an SPI session as the owner of pg_tenure's tables */
typedef struct TenureSpi
{
	Oid			save_userid;
	int			save_sec_context;
	int			guc_nestlevel;
} TenureSpi;

/* lease.c */
/* longest ttl, hold-off, wait or timeout argument */
#define TENURE_MAX_INTERVAL_US	((int64) USECS_PER_DAY)
extern char *tenure_arg_text(FunctionCallInfo fcinfo, int argno, const char *what,
							 int maxlen);
extern char *tenure_arg_lease(FunctionCallInfo fcinfo, int argno);
extern int64 tenure_arg_interval(FunctionCallInfo fcinfo, int argno, const char *what,
								 bool allow_zero, int64 max_us);
extern void tenure_lease_init(void);
extern void tenure_ensure_entry(const char *name, const TenureKey *key);

/* durable.c */

/* A lease's row in tenure.lease. */
typedef struct TenureRow
{
	int64		id;
	Oid			owner;
	int64		ttl_us;
	int64		holdoff_us;
	bool		has_lock_key;
	int64		lock_key;
	int64		epoch;
	int			fence_lock;
	bool		own;			/* written by this (uncommitted) transaction */
} TenureRow;

extern void tenure_spi_begin(TenureSpi *spi);
extern void tenure_spi_end(TenureSpi *spi);
extern uint64 tenure_spi_exec(const char *sql, const char *types,
							  Datum *values, const bool *isnull, int expected);
extern int64 tenure_spi_int8(int col, bool *isnull);
extern void tenure_load_row(const char *name, TenureRow *row, bool for_update);
extern bool tenure_load_committed(const char *name, TenureRow *row,
								  bool missing_ok, bool *open_at_shutdown);
extern void tenure_history_close(const char *name, const TenureKey *key);
extern int64 tenure_issue_epoch(const char *name, int64 floor);
extern void tenure_history_start(const char *name, int64 epoch,
								 const char *holder, bool session_bound);

/* fence.c */
extern char *tenure_tokens_string;
extern bool tenure_tokens_check(char **newval, void **extra, GucSource source);
extern void tenure_tokens_assign(const char *newval, void *extra);
extern void tenure_fence_init(void);
extern void tenure_fence_check(const char *name, const char *table,
							   bool at_commit, int *fence_lock);
extern void tenure_fence_note(const char *lease, const char *table,
							  LOCKMODE mode, int fence_lock);
extern bool tenure_fence_wrote(void);
extern void tenure_fence_precommit(void);
extern void tenure_fence_reset(void);
extern void tenure_fence_seal(void);

/* keeper.c */
extern void tenure_register_keeper(void);
PGDLLEXPORT void tenure_keeper_main(Datum arg);

#endif							/* PG_TENURE_H */
