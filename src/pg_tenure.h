/*-------------------------------------------------------------------------
 *
 * pg_tenure.h
 *		What every file of pg_tenure shares: limits, SQLSTATEs, the key of
 *		a lease, its row in tenure.lease and the settings.
 *
 * Each module declares its verbs in a header of its own, named after it
 * (state.h, txn.h, catalog.h, epoch.h, history.h, fence.h, ...); a file
 * includes the headers of the modules it calls.  The locking protocol of
 * the shared state is described in state.c.
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
extern int	tenure_demotion_bound;
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

#endif							/* PG_TENURE_H */
