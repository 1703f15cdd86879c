/*-------------------------------------------------------------------------
 *
 * observe.c
 *		Waiting for a lease's tenure to become active: await_active.
 *
 * acquire() returns a new tenure's epoch at once, but the tenure may still
 * be waiting out its predecessor's hold-off (see "Hold-off" in the README);
 * leader_is() answers false until then.  await_active() lets a client
 * sleep until that moment instead of polling leader_is().
 *
 * It reads shared memory only, under the LWLock in shared mode, and
 * sleeps on tenure_shared->cv, which is broadcast on every change of a
 * tenure (state.c); the hold-off's end is not a change anybody broadcasts,
 * so the sleep is also bounded by the tenure's active_mono.  It needs no
 * lease slot: a lease without one has no holder.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"

PG_FUNCTION_INFO_V1(tenure_await_active);

/* longest wait of await_active */
#define TENURE_MAX_WAIT_US	((int64) USECS_PER_DAY)

/* What await_active sees of a holder's tenure. */
typedef enum TenureActiveState
{
	TENURE_AS_NOT_HOLDER,		/* no live tenure of this holder */
	TENURE_AS_WAITING,			/* held, not active yet */
	TENURE_AS_ACTIVE,			/* held and active */
	TENURE_AS_OWN_PENDING		/* this transaction is acquiring it */
} TenureActiveState;

/*
 * How holder stands with the lease at "now"; *active_mono is set to when
 * a waiting tenure becomes active.  Same rule as leader_is().
 */
static TenureActiveState
tenure_active_state(const TenureKey *key, const char *holder, int64 now,
					int64 *active_mono)
{
	TenureLease *lease;
	TenureActiveState result = TENURE_AS_NOT_HOLDER;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = hash_search(tenure_leases, key, HASH_FIND, NULL);
	if (lease != NULL && !lease->dropped &&
		strcmp(lease->holder, holder) == 0)
	{
		if (tenure_is_live(lease, now))
		{
			*active_mono = lease->active_mono;
			if (now >= lease->active_mono &&
				(lease->lock_held || !lease->has_lock_key))
				result = TENURE_AS_ACTIVE;
			else
				result = TENURE_AS_WAITING;
		}
		else if (lease->state == TENURE_PENDING &&
				 lease->holder_pid == MyProcPid &&
				 lease->holder_start == MyStartTimestamp)
			result = TENURE_AS_OWN_PENDING;
	}
	LWLockRelease(tenure_shared->lock);
	return result;
}

/*
 * tenure.await_active(lease, holder, timeout) returns boolean
 *
 * Waits until the holder's tenure of the lease is active (true), or until
 * the holder no longer holds the lease or the timeout passes (false).
 * Woken by every change of a tenure and at the end of the hold-off; no
 * polling.  Cancellable.
 */
Datum
tenure_await_active(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *holder;
	Interval   *iv;
	int64		timeout_us;
	int64		deadline;
	TenureKey	key;
	bool		result = false;

	tenure_require_loaded();
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null",
						PG_ARGISNULL(0) ? "lease name" :
						PG_ARGISNULL(1) ? "holder" : "timeout")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	holder = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (strlen(name) < 1 || strlen(name) > TENURE_NAME_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease name must be between 1 and %d bytes long",
						TENURE_NAME_MAX)));
	if (strlen(holder) < 1 || strlen(holder) > TENURE_HOLDER_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("holder must be between 1 and %d bytes long",
						TENURE_HOLDER_MAX)));
	iv = PG_GETARG_INTERVAL_P(2);
	if (iv->month != 0 ||
		pg_add_s64_overflow((int64) iv->day * USECS_PER_DAY, iv->time,
							&timeout_us) ||
		timeout_us < 0 || timeout_us > TENURE_MAX_WAIT_US)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must be between 0 and 1 day"),
				 errdetail("The timeout given is %s.",
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(iv))))));

	tenure_make_key(&key, MyDatabaseId, name);
	deadline = tenure_mono_now() + timeout_us;

	ConditionVariablePrepareToSleep(&tenure_shared->cv);
	for (;;)
	{
		int64		now = tenure_mono_now();
		int64		active_mono = 0;
		int64		wake = deadline;
		TenureActiveState st;

		st = tenure_active_state(&key, holder, now, &active_mono);
		if (st == TENURE_AS_OWN_PENDING)
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot wait for a tenure of lease \"%s\" that this transaction is acquiring", name),
					 errdetail("A new tenure starts when the transaction that acquired it commits."),
					 errhint("Commit first, or call tenure.acquire() in autocommit mode.")));
		}
		if (st == TENURE_AS_ACTIVE)
		{
			result = true;
			break;
		}
		if (st == TENURE_AS_NOT_HOLDER || now >= deadline)
			break;
		/* the hold-off's end is broadcast by nobody: wake for it */
		if (active_mono > now)
			wake = Min(wake, active_mono);
		(void) ConditionVariableTimedSleep(&tenure_shared->cv,
										   Max((wake - now + 999) / 1000, 1),
										   TENURE_WAIT_EVENT);
		CHECK_FOR_INTERRUPTS();
	}
	ConditionVariableCancelSleep();

	PG_RETURN_BOOL(result);
}
