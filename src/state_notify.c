/*-------------------------------------------------------------------------
 *
 * state_notify.c
 *		The LISTEN/NOTIFY handshake: whether a transaction that changed a
 *		lease sends its notifications on channel "tenure".
 *
 * Part of the state module (state_internal.h), but it neither takes the
 * LWLock nor reads the lease table: it has shared memory of its own, one
 * slot per backend and a count of listeners, all atomics, which state.c
 * sets up with the lease table (tenure_notify_shmem_init()).
 *
 * Notifications go only where somebody listens.
 *
 * Every transaction that sends a NOTIFY commits under one lock of the
 * whole cluster (PostgreSQL's PreCommit_Notify()), which serializes the
 * commits of concurrent acquisitions and releases.  So a transaction that
 * changed a lease notifies only if some backend of its database has run
 * LISTEN tenure (and not yet exited): tenure_state_notify_needed() at its
 * PRE_COMMIT.  A backend counts as listening from its first LISTEN tenure
 * until it exits, also after UNLISTEN: a notification too many is
 * harmless, one too few is not.
 *
 * The race to close: a notifier decides at PRE_COMMIT that nobody listens,
 * a listener then runs LISTEN, commits it and reads the lease, all before
 * the notifier's commit is visible, and so misses the change for good.
 * Both sides write their own word first and then read the other's, with a
 * full barrier between (Dekker): the notifier publishes a nonzero quiet
 * value, then reads the listeners; the listener publishes its database,
 * then reads every quiet value.  At least one of them sees the other.  If
 * the notifier sees the listener, it notifies.  Otherwise the listener
 * sees the notifier quiet and waits, before its LISTEN goes on, until that
 * transaction has ended (tenure_state_notify_done(), in the COMMIT
 * callback, after the commit became visible and its changes were
 * published to the lease table; or at abort, or exit): its next read
 * shows the change.  Only quiet commits of the listener's database are
 * waited for.  A quiet window lasts from PRE_COMMIT to COMMIT,
 * microseconds unless the commit waits for a synchronous standby.
 *
 * INTERFACE ROUTINES (no LWLock: atomics and full barriers only)
 *
 *		tenure_state_notify_needed()	PRE_COMMIT: whether anyone listens
 *		tenure_state_notify_done()		the quiet transaction has ended
 *		tenure_state_listening()		this backend runs LISTEN tenure
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"

#include "state_internal.h"

/*
 * One per backend, without the LWLock (see the header): listen_db is the
 * database this backend ran LISTEN tenure in, or 0; quiet is nonzero while
 * a transaction of this backend that would have sent notifications
 * commits without them, and quiet_db is the database of that transaction
 * (written before quiet).
 */
typedef struct TenureListenSlot
{
	pg_atomic_uint32 listen_db;
	pg_atomic_uint32 quiet_db;
	pg_atomic_uint64 quiet;
} TenureListenSlot;

typedef struct TenureListeners
{
	pg_atomic_uint32 count;		/* backends that have run LISTEN tenure */
	TenureListenSlot slots[FLEXIBLE_ARRAY_MEMBER];	/* MaxBackends of them */
} TenureListeners;

static TenureListeners *tenure_listeners = NULL;

static bool tenure_listen_registered = false;
static bool tenure_listen_ready = false;	/* counted, and waited once */
static bool tenure_quiet = false;
static uint32 tenure_quiet_count = 0;

/*
 * Bytes of shared memory the handshake needs.
 */
Size
tenure_notify_shmem_size(void)
{
	return add_size(offsetof(TenureListeners, slots),
					mul_size(MaxBackends, sizeof(TenureListenSlot)));
}

/*
 * Create or attach to the handshake's shared memory; state.c calls it from
 * tenure_shmem_init(), under AddinShmemInitLock.
 */
void
tenure_notify_shmem_init(void)
{
	bool		found;

	tenure_listeners = ShmemInitStruct("pg_tenure listeners",
									   tenure_notify_shmem_size(), &found);
	if (!found)
	{
		int			i;

		pg_atomic_init_u32(&tenure_listeners->count, 0);
		for (i = 0; i < MaxBackends; i++)
		{
			pg_atomic_init_u32(&tenure_listeners->slots[i].listen_db, 0);
			pg_atomic_init_u32(&tenure_listeners->slots[i].quiet_db, 0);
			pg_atomic_init_u64(&tenure_listeners->slots[i].quiet, 0);
		}
	}
}

/*
 * before_shmem_exit callback: this backend listens no more, and no
 * transaction of it is quiet.  Cannot fail (src/README, F8).
 */
static void
tenure_listen_exit(int code, Datum arg)
{
	int			slot = TENURE_MY_SLOT();

	if (slot < 0 || slot >= MaxBackends || tenure_listeners == NULL)
		return;
	pg_atomic_write_u64(&tenure_listeners->slots[slot].quiet, 0);
	tenure_quiet = false;
	if (pg_atomic_read_u32(&tenure_listeners->slots[slot].listen_db) != InvalidOid)
	{
		pg_atomic_write_u32(&tenure_listeners->slots[slot].listen_db, InvalidOid);
		pg_atomic_fetch_sub_u32(&tenure_listeners->count, 1);
	}
}

/*
 * Make sure tenure_listen_exit() runs when this backend exits.
 */
static void
tenure_listen_register_exit(void)
{
	if (!tenure_listen_registered)
	{
		before_shmem_exit(tenure_listen_exit, (Datum) 0);
		tenure_listen_registered = true;
	}
}

/*
 * PRE_COMMIT of a transaction with notifications to send: whether a
 * backend of this database listens.  If not, this backend stays quiet
 * until tenure_state_notify_done().
 */
bool
tenure_state_notify_needed(void)
{
	int			slot = TENURE_MY_SLOT();
	uint64		quiet;
	int			i;

	if (slot < 0 || slot >= MaxBackends || tenure_listeners == NULL)
		return true;
	tenure_listen_register_exit();

	/* unique while we live: a listener waits until it changes */
	quiet = ((uint64) MyProcPid << 32) | ++tenure_quiet_count;
	if ((uint32) quiet == 0)
		quiet = ((uint64) MyProcPid << 32) | ++tenure_quiet_count;
	tenure_quiet = true;
	pg_atomic_write_u32(&tenure_listeners->slots[slot].quiet_db, MyDatabaseId);
	(void) pg_atomic_exchange_u64(&tenure_listeners->slots[slot].quiet, quiet);	/* full barrier */

	if (pg_atomic_read_u32(&tenure_listeners->count) > 0)
	{
		for (i = 0; i < MaxBackends; i++)
		{
			if (pg_atomic_read_u32(&tenure_listeners->slots[i].listen_db) == MyDatabaseId)
			{
				tenure_state_notify_done();
				return true;
			}
		}
	}
	return false;
}

/*
 * The transaction that stayed quiet has ended (COMMIT or abort callback):
 * listeners waiting for it go on.  Cannot fail (src/README, F8).
 */
void
tenure_state_notify_done(void)
{
	int			slot = TENURE_MY_SLOT();

	if (!tenure_quiet)
		return;
	tenure_quiet = false;
	/* a full barrier: what the transaction published comes first */
	(void) pg_atomic_exchange_u64(&tenure_listeners->slots[slot].quiet, 0);
}

/*
 * This backend runs LISTEN tenure: from now on, transactions of its
 * database notify.  The first time, wait until every transaction that
 * decided to stay quiet before we were counted has ended.  (If that wait
 * is cancelled, the next LISTEN waits again.)
 */
void
tenure_state_listening(void)
{
	int			slot = TENURE_MY_SLOT();
	uint64	   *seen;
	int			i;

	if (tenure_listen_ready || slot < 0 || slot >= MaxBackends ||
		tenure_listeners == NULL || !OidIsValid(MyDatabaseId))
		return;
	tenure_listen_register_exit();

	if (pg_atomic_read_u32(&tenure_listeners->slots[slot].listen_db) != MyDatabaseId)
	{
		pg_atomic_write_u32(&tenure_listeners->slots[slot].listen_db, MyDatabaseId);
		(void) pg_atomic_fetch_add_u32(&tenure_listeners->count, 1);	/* full barrier */
	}
	else
		pg_memory_barrier();

	/* quiet commits of this database (quiet_db was written before quiet) */
	seen = palloc(sizeof(uint64) * MaxBackends);
	for (i = 0; i < MaxBackends; i++)
	{
		seen[i] = (i == slot) ? 0 : pg_atomic_read_u64(&tenure_listeners->slots[i].quiet);
		pg_read_barrier();
		if (seen[i] != 0 &&
			pg_atomic_read_u32(&tenure_listeners->slots[i].quiet_db) != MyDatabaseId)
			seen[i] = 0;
	}
	for (i = 0; i < MaxBackends; i++)
	{
		while (seen[i] != 0 &&
			   pg_atomic_read_u64(&tenure_listeners->slots[i].quiet) == seen[i])
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 1L, TENURE_WAIT_EVENT);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	pfree(seen);
	tenure_listen_ready = true;
}
