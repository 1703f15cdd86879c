/*-------------------------------------------------------------------------
 *
 * state.c
 *		pg_tenure's shared state: the lease table, the clock, and the end of
 *		session-bound tenures when their backend exits.
 *
 * Shared memory holds one TenureShared struct and a fixed-size hash table
 * of TenureLease entries keyed by (database, lease name), sized by
 * tenure.max_leases.
 *
 * Locking protocol:
 *
 * - tenure_shared->lock (our only LWLock) protects the hash table and every
 *   field of every entry, and the keeper_* fields of TenureShared.  Readers
 *   (leader_is, the leases view) take it shared; anything that changes an
 *   entry takes it exclusive.  boot_id is written once at initialization,
 *   ready_time and ready_mono once by the keeper's first start; backends
 *   read them without the lock only after the keeper answered them.
 * - No ereport(ERROR) and no catalog or table access happens while it is
 *   held, so exit and transaction callbacks can always take it.
 * - The keeper takes and releases heavyweight advisory locks while holding
 *   it exclusive, always with dontWait; the heavyweight lock manager never
 *   calls back into pg_tenure, so the order "tenure LWLock, then lock
 *   partition LWLock" is the only one that occurs.
 * - Every change of an entry that someone may wait for (a tenure ending, the
 *   keeper answering a lock request) is followed by a broadcast on
 *   tenure_shared->cv after the LWLock is released.
 *
 * Field ownership: backends write the tenure fields and lock_wanted; only
 * the keeper writes lock_held, held_tag, lock_failed and lock_no_memory
 * (backends clear lock_failed when they make a new request).
 *
 * Entries and slots (tenure_enter_entry): an entry is built from the
 * lease's latest committed row, never from an older snapshot, and an entry
 * of a lease that was dropped (or created again under its name) is never
 * taken for the new lease.  When all tenure.max_leases slots are taken, a
 * new entry replaces one that nobody needs: FREE (no tenure, no pending
 * acquisition), no advisory lock held or wanted, and no hold-off bound
 * (pred_expiry_mono) still in the future.  The replaced entry's lease is
 * rebuilt from its row when it is next used.  What that loses: an end
 * reason and time not yet written to the history (the next tenure of the
 * lease closes the row as "expired", with the time it does so), the
 * transitions counter, and the latest epoch shared memory saw (its row has
 * the same one unless an older dump was restored over it).  Entries of
 * dropped leases (dropped) are kept until their slot is needed, and
 * evicted first: when the name is created again, its next epoch still
 * exceeds the dropped lease's latest, also after DROP EXTENSION and a
 * restore of an older dump.
 *
 * A PENDING reservation lasts at most the ttl from acquired_mono.  Past
 * that, another backend may take the lease over, unless the reservation
 * is "committing": its transaction passed the PRE_COMMIT check (txn.c),
 * which sets the flag under the LWLock exclusive after checking the
 * expiry, so a reservation is either taken over or allowed to commit,
 * never both.
 *
 * keeper_latch may be read without the lock to set it: latches live in
 * shared memory, so setting a stale one (the keeper just exited) is
 * harmless.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "access/xlog.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"

TenureShared *tenure_shared = NULL;
HTAB	   *tenure_leases = NULL;

static bool tenure_exit_registered = false;

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
	}

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(TenureKey);
	info.entrysize = sizeof(TenureLease);
	tenure_leases = ShmemInitHash("pg_tenure leases",
								  tenure_max_leases, tenure_max_leases,
								  &info,
								  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);

	LWLockRelease(AddinShmemInitLock);
}

/*
 * Fail unless the module was preloaded and its shared memory exists.
 */
void
tenure_require_loaded(void)
{
	if (tenure_shared == NULL || tenure_leases == NULL)
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
 * Caller holds the LWLock.
 */
bool
tenure_lease_tag_held(const TenureLease *lease)
{
	LOCKTAG		tag;

	tenure_lease_tag(lease, &tag);
	return lease->lock_held &&
		memcmp(&tag, &lease->held_tag, sizeof(LOCKTAG)) == 0;
}

/*
 * Whether the lease holds a tenure that has not expired at "now".
 * Caller holds the LWLock.
 */
bool
tenure_is_live(const TenureLease *lease, int64 now)
{
	return lease->state == TENURE_HELD &&
		now < lease->renewed_mono + lease->ttl_us;
}

/*
 * The epoch at which holder holds the lease at "now": that of its live
 * tenure, or of the tenure this very transaction is acquiring; 0 if it
 * holds none.  Caller holds the LWLock.
 */
int64
tenure_held_epoch(const TenureLease *lease, const char *holder, int64 now)
{
	if (strcmp(lease->holder, holder) != 0)
		return 0;
	if (tenure_is_live(lease, now))
		return lease->epoch;
	if (lease->state == TENURE_PENDING &&
		lease->holder_pid == MyProcPid &&
		lease->holder_start == MyStartTimestamp)
		return lease->pending_epoch;	/* 0 until the epoch is issued */
	return 0;
}

/*
 * Whether a PENDING reservation has outlived its ttl and may be taken
 * over by another backend.  Caller holds the LWLock.
 */
bool
tenure_pending_expired(const TenureLease *lease, int64 now)
{
	return lease->state == TENURE_PENDING && !lease->committing &&
		now >= lease->acquired_mono + lease->ttl_us;
}

/*
 * Whether an entry's slot may be given to another lease (see the header):
 * nobody holds, acquires or locks the lease, and no former holder's belief
 * still delays its next tenure.  Sets *soon if the keeper only has to let
 * go of the lease's lock first.  Caller holds the LWLock.
 */
static bool
tenure_evictable(const TenureLease *lease, int64 now, bool *soon)
{
	if (lease->lock_wanted)
		return false;
	if (!lease->dropped &&
		(lease->state != TENURE_FREE || lease->pred_expiry_mono > now))
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
 * entry is zeroed except for its key.  Caller holds the LWLock exclusive.
 * Cannot fail.
 */
TenureLease *
tenure_enter_entry(const TenureKey *key, int64 now, bool *found, bool *soon)
{
	TenureLease *lease;
	TenureLease *victim = NULL;
	HASH_SEQ_STATUS scan;

	Assert(LWLockHeldByMeInMode(tenure_shared->lock, LW_EXCLUSIVE));

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
		hash_search(tenure_leases, &victim->key, HASH_REMOVE, NULL);
		lease = hash_search(tenure_leases, key, HASH_ENTER_NULL, found);
		if (lease == NULL)
			return NULL;		/* cannot happen: we just freed a slot */
	}
	if (!*found)
		memset(((char *) lease) + sizeof(TenureKey), 0,
			   sizeof(TenureLease) - sizeof(TenureKey));
	return lease;
}

/*
 * End the lease's current tenure for the given reason.  Only touches the
 * entry; the caller holds the LWLock exclusive, then wakes the keeper and
 * broadcasts the condition variable.  Cannot fail.
 */
void
tenure_end(TenureLease *lease, TenureEndReason reason, int64 now)
{
	int64		expiry = lease->renewed_mono + lease->ttl_us;

	Assert(lease->state == TENURE_HELD);

	lease->ended_epoch = lease->epoch;
	lease->ended_reason = reason;
	memcpy(lease->ended_holder, lease->holder, sizeof(lease->holder));

	/*
	 * A former holder may believe in its tenure until its last renewal plus
	 * the ttl, unless it said it was done.  An earlier holder whose belief
	 * delayed this tenure's start may still believe: keep its bound.
	 */
	if (reason != TENURE_END_RELEASED && reason != TENURE_END_DROPPED)
		lease->pred_expiry_mono = Max(lease->pred_expiry_mono, expiry);

	lease->ended_wall = tenure_mono_to_wall(reason == TENURE_END_EXPIRED ?
											Min(expiry, now) : now,
											now, GetCurrentTimestamp());
	lease->state = TENURE_FREE;
	lease->holder[0] = '\0';
	lease->session_bound = false;
	lease->holder_pid = 0;
	lease->holder_start = 0;
	lease->lock_wanted = false;
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
 * Name of an end reason, as stored in tenure.history.
 */
const char *
tenure_end_reason_name(TenureEndReason reason)
{
	switch (reason)
	{
		case TENURE_END_NONE:
			return NULL;
		case TENURE_END_RELEASED:
			return "released";
		case TENURE_END_EXPIRED:
			return "expired";
		case TENURE_END_SESSION:
			return "session ended";
		case TENURE_END_REVOKED:
			return "revoked";
		case TENURE_END_DROPPED:
			return "dropped";
	}
	return NULL;
}

/*
 * before_shmem_exit callback: end the session-bound tenures this backend
 * holds and cancel its pending acquisitions.  Shared memory only; cannot
 * fail.
 */
static void
tenure_session_exit(int code, Datum arg)
{
	HASH_SEQ_STATUS scan;
	TenureLease *lease;
	int64		now;
	bool		changed = false;

	if (tenure_shared == NULL)
		return;

	/* an ERROR or FATAL is never raised while we hold it, but be sure */
	if (LWLockHeldByMe(tenure_shared->lock))
		LWLockRelease(tenure_shared->lock);

	now = tenure_mono_now();
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	hash_seq_init(&scan, tenure_leases);
	while ((lease = hash_seq_search(&scan)) != NULL)
	{
		if (lease->holder_pid != MyProcPid ||
			lease->holder_start != MyStartTimestamp)
			continue;
		if (lease->state == TENURE_HELD && lease->session_bound)
		{
			tenure_end(lease, TENURE_END_SESSION, now);
			changed = true;
		}
		else if (lease->state == TENURE_PENDING)
		{
			lease->state = TENURE_FREE;
			lease->holder[0] = '\0';
			lease->holder_pid = 0;
			lease->committing = false;
			lease->lock_wanted = false;
			changed = true;
		}
	}
	LWLockRelease(tenure_shared->lock);

	if (changed)
	{
		tenure_wake_keeper();
		ConditionVariableBroadcast(&tenure_shared->cv);
	}
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
