/*-------------------------------------------------------------------------
 *
 * observe.c
 *		What backends can see of leases without changing them: the
 *		shared-memory state behind tenure.leases, await_change,
 *		await_active, lease_stats (and stats_reset, which zeroes its
 *		counters), waiters and the size of shared memory.
 *
 * await_change() sleeps until a lease's holder or epoch differs from what
 * the caller knew (see its comment).
 *
 * acquire() returns a new tenure's epoch at once, but the tenure may still
 * be waiting out its predecessor's hold-off (doc/reference.md, Concepts);
 * leader_is() answers false until then.  await_active() lets a client
 * sleep until that moment instead of polling leader_is().
 *
 * On a primary it reads shared memory only, through the state module's
 * readers (state.c, and state_wait.c for the waiters), and sleeps on
 * state.c's condition variable, broadcast on every change of a tenure;
 * the hold-off's end is not a change anybody broadcasts,
 * so the sleep is also bounded by the tenure's active_mono.  It needs no
 * lease slot: a lease without one has no holder.
 *
 * On a hot standby shared memory holds no tenure: replay does not touch
 * it.  There await_change() polls the replicated tables instead (the
 * lease's epoch, the holder of its open tenure.history row: what
 * tenure.leases shows there), and await_active() answers false at once,
 * as leader_is() does: a standby's answer may lag the primary's by an
 * unbounded replay delay, and nobody leads on it (doc/high-availability.md).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"
#include "state.h"
#include "catalog.h"
#include "epoch.h"
#include "promotion.h"
#include "args.h"

PG_FUNCTION_INFO_V1(pg_tenure_await_active);
PG_FUNCTION_INFO_V1(pg_tenure_lease_state);
PG_FUNCTION_INFO_V1(pg_tenure_await_change);
PG_FUNCTION_INFO_V1(pg_tenure_shared_memory_bytes);
PG_FUNCTION_INFO_V1(pg_tenure_lease_stats);
PG_FUNCTION_INFO_V1(pg_tenure_stats_reset);
PG_FUNCTION_INFO_V1(pg_tenure_waiters);

/* how often await_change reads the table during recovery */
#define TENURE_STANDBY_POLL_MS	100L

/*
 * tenure.await_active(lease, holder, timeout) returns boolean
 *
 * Waits until the holder's tenure of the lease is active (true), or until
 * the holder no longer holds the lease or the timeout passes (false).
 * Woken by every change of a tenure and at the end of the hold-off; no
 * polling.  Cancellable.  False at once on a hot standby, where nobody
 * leads.
 */
Datum
pg_tenure_await_active(PG_FUNCTION_ARGS)
{
	char	   *name;
	char	   *holder;
	int64		timeout_us;
	int64		deadline;
	TenureKey	key;
	bool		result = false;

	tenure_require_loaded();
	name = tenure_arg_text(fcinfo, 0, "lease", TENURE_NAME_MAX);
	holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	timeout_us = tenure_arg_interval(fcinfo, 2, "timeout", true,
									 TENURE_MAX_WAIT_US);

	if (RecoveryInProgress())
		PG_RETURN_BOOL(false);

	tenure_make_key(&key, MyDatabaseId, name);
	deadline = tenure_mono_now() + timeout_us;

	tenure_state_prepare_wait();
	for (;;)
	{
		int64		now = tenure_mono_now();
		int64		active_mono = 0;
		int64		wake = deadline;
		TenureActiveState st;

		st = tenure_state_active(&key, holder, now, &active_mono);
		if (st == TENURE_AS_OWN_PENDING)
		{
			tenure_state_cancel_wait();
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
		(void) tenure_state_wait((long) ((wake - now + 999) / 1000));
		CHECK_FOR_INTERRUPTS();
	}
	tenure_state_cancel_wait();

	PG_RETURN_BOOL(result);
}

/*
 * tenure._lease_state() returns setof record
 *
 * The shared-memory state of this database's leases, for tenure.leases.
 */
Datum
pg_tenure_lease_state(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TenureLeaseInfo *infos;
	int			count;
	int			i;
	int64		now_mono;
	TimestampTz now_wall;

	tenure_require_loaded();
	InitMaterializedSRF(fcinfo, 0);

	now_mono = tenure_mono_now();
	now_wall = GetCurrentTimestamp();
	infos = tenure_state_list(MyDatabaseId, now_mono, &count);

	for (i = 0; i < count; i++)
	{
		TenureLeaseInfo *info = &infos[i];
		Datum		values[13];
		bool		nulls[13];
		bool		live = info->live;

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(info->name);
		values[1] = CStringGetTextDatum(live ? "held" :
										info->state == TENURE_PENDING ? "pending" : "free");
		values[2] = CStringGetTextDatum(info->holder);
		nulls[2] = !live;
		values[3] = Int64GetDatum(info->epoch);
		values[4] = BoolGetDatum(info->session_bound);
		nulls[4] = !live;
		values[5] = TimestampTzGetDatum(info->acquired_wall);
		nulls[5] = !live;
		values[6] = TimestampTzGetDatum(tenure_mono_to_wall(info->renewed_mono,
															now_mono, now_wall));
		nulls[6] = !live;
		values[7] = TimestampTzGetDatum(tenure_mono_to_wall(info->expiry_mono,
															now_mono, now_wall));
		nulls[7] = !live;
		values[8] = TimestampTzGetDatum(tenure_mono_to_wall(info->active_mono,
															now_mono, now_wall));
		nulls[8] = !live;
		values[9] = Int32GetDatum(info->holder_pid);
		nulls[9] = !live || info->holder_pid == 0;
		values[10] = BoolGetDatum(info->lock_held);
		values[11] = Int64GetDatum((int64) info->transitions);
		values[12] = ObjectIdGetDatum(info->holder_role);
		nulls[12] = !live || !OidIsValid(info->holder_role);

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(infos);

	return (Datum) 0;
}

/* What an await_change() caller knew of a lease, and what it then saw. */
typedef struct TenureKnown
{
	bool		know_epoch;		/* false: answer at once */
	int64		epoch;
	const char *holder;			/* NULL: no holder */
} TenureKnown;

typedef struct TenureSeen
{
	int64		epoch;
	bool		held;
	char		holder[TENURE_HOLDER_MAX + 1];	/* if held */
} TenureSeen;

/*
 * Whether what await_change() sees differs from what its caller knew.
 */
static bool
tenure_seen_changed(const TenureKnown *known, const TenureSeen *seen)
{
	return !known->know_epoch || seen->epoch != known->epoch ||
		seen->held != (known->holder != NULL) ||
		(seen->held && strcmp(seen->holder, known->holder) != 0);
}

/* a lease's epoch and the holder of its open tenure.history row */
#define TENURE_REPLICA_SQL \
	"SELECT l.epoch, (SELECT h.holder FROM tenure.history h" \
	" WHERE h.lease OPERATOR(pg_catalog.=) l.name AND h.ended IS NULL" \
	" ORDER BY h.epoch DESC LIMIT 1)" \
	" FROM tenure.lease l WHERE l.name OPERATOR(pg_catalog.=) $1"

/*
 * What a hot standby knows of a lease, as tenure.leases shows it there:
 * its latest epoch and the holder of its open tenure, read from the
 * replicated tables under a snapshot taken now, whatever the transaction's
 * isolation level (await_change answers what is current).  Fails with
 * 42704 for an unknown lease.
 */
static void
tenure_replica_read(const char *name, TenureSeen *seen)
{
	TenureSpi	spi;
	Datum		args[1];
	int			rc;

	args[0] = CStringGetTextDatum(name);
	tenure_spi_begin(&spi);
	for (;;)
	{
		rc = SPI_execute_snapshot(tenure_spi_plan(TENURE_REPLICA_SQL, "t"),
								  args, NULL, GetLatestSnapshot(),
								  InvalidSnapshot, true, false, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "SPI_execute_snapshot returned %d for a lease's holder", rc);
		if (SPI_processed > 0)
			break;

		/* unknown: catalog.c says so, unless replay created it since */
		{
			TenureRow	row;

			(void) tenure_load_committed(name, &row, false, NULL);
		}
		CHECK_FOR_INTERRUPTS();
	}
	seen->epoch = tenure_spi_int8(1, NULL);
	{
		char	   *holder = SPI_getvalue(SPI_tuptable->vals[0],
										  SPI_tuptable->tupdesc, 2);

		seen->held = (holder != NULL);
		if (holder != NULL)
			strlcpy(seen->holder, holder, sizeof(seen->holder));
	}
	tenure_spi_end(&spi);
}

/*
 * await_change() on a hot standby, where replay does not touch shared
 * memory: reads the replicated tables every TENURE_STANDBY_POLL_MS until
 * what it sees changed or the deadline passes; sets *changed and returns
 * true.  Returns false, with nothing decided, if recovery ended meanwhile:
 * from then on the live tenures are in shared memory.
 */
static bool
tenure_await_replica(const char *name, const TenureKnown *known,
					 int64 deadline, TenureSeen *seen, bool *changed)
{
	MemoryContext loop_cxt = AllocSetContextCreate(CurrentMemoryContext,
												   "tenure await_change",
												   ALLOCSET_SMALL_SIZES);
	MemoryContext old_cxt = MemoryContextSwitchTo(loop_cxt);
	bool		answered = true;

	for (;;)
	{
		MemoryContextReset(loop_cxt);
		tenure_replica_read(name, seen);
		*changed = tenure_seen_changed(known, seen);
		if (*changed || tenure_mono_now() >= deadline)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(TENURE_STANDBY_POLL_MS,
							 Max((deadline - tenure_mono_now() + 999) / 1000, 1)),
						 TENURE_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (!RecoveryInProgress())
		{
			answered = false;
			break;
		}
	}
	MemoryContextSwitchTo(old_cxt);
	MemoryContextDelete(loop_cxt);
	return answered;
}

/*
 * await_change() on a primary: sleeps on shared memory until the lease's
 * live holder or epoch differs from what the caller knew, or the
 * deadline passes.  Returns whether it changed.
 */
static bool
tenure_await_live(const char *name, const TenureKnown *known,
				  int64 deadline, TenureSeen *seen)
{
	TenureKey	key;
	int64		row_epoch;
	int64		row_id;
	bool		had_entry = false;
	bool		changed;

	tenure_make_key(&key, MyDatabaseId, name);
	/* a tenure that a promotion continued, not loaded yet (src/README, P2) */
	(void) tenure_ensure_continued(name, &key);

	/*
	 * A lease that is not held needs no slot: its epoch is in its row (the
	 * latest committed one), and once it is acquired its entry appears
	 * and the acquisition's commit wakes us.  An entry of another lease
	 * id is a dropped predecessor's: not ours.
	 */
	{
		TenureSpi	spi;
		TenureRow	row;

		tenure_spi_begin(&spi);
		(void) tenure_load_committed(name, &row, false, NULL);
		tenure_spi_end(&spi);
		row_epoch = row.epoch;
		row_id = row.id;
	}

	tenure_state_prepare_wait();
	for (;;)
	{
		int64		now = tenure_mono_now();
		int64		wake = deadline;
		bool		gone = false;
		TenureWatch watch;

		seen->held = false;
		seen->epoch = row_epoch;
		if (tenure_state_watch(&key, row_id, now, &watch))
		{
			had_entry = true;
			seen->epoch = Max(watch.epoch, row_epoch);
			if (watch.held)
			{
				seen->held = true;
				strlcpy(seen->holder, watch.holder, sizeof(seen->holder));
				wake = Min(wake, watch.expiry_mono);
			}
		}
		else if (had_entry)
			gone = true;		/* dropped, or its slot reused: look again */

		changed = gone || tenure_seen_changed(known, seen);
		if (changed || now >= deadline)
			break;
		(void) tenure_state_wait((long) ((wake - now + 999) / 1000));
		CHECK_FOR_INTERRUPTS();
	}
	tenure_state_cancel_wait();
	return changed;
}

/*
 * tenure.await_change(lease, known_epoch, known_holder, timeout)
 *		returns (changed boolean, holder text, epoch bigint)
 *
 * Sleeps until the lease's holder or its epoch differs from what the
 * caller knew, or until the timeout; returns what it then sees.  A NULL
 * known_epoch returns at once.  On a primary the holder is the live one,
 * and the sleep wakes on every lease change and when the holder's tenure
 * expires, without polling.  On a hot standby the holder is the one the
 * replicated tables record (as tenure.leases shows it there), polled.
 */
Datum
pg_tenure_await_change(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	TenureKnown known;
	int64		timeout_us;
	int64		deadline;
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	TenureSeen	seen;
	bool		changed;

	known.know_epoch = !PG_ARGISNULL(1);
	known.epoch = known.know_epoch ? PG_GETARG_INT64(1) : 0;
	known.holder = PG_ARGISNULL(2) ? NULL :
		tenure_arg_text(fcinfo, 2, "known_holder", TENURE_HOLDER_MAX);
	timeout_us = tenure_arg_interval(fcinfo, 3, "timeout", true,
									 TENURE_MAX_WAIT_US);

	tenure_require_loaded();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	deadline = tenure_mono_now() + timeout_us;
	if (!RecoveryInProgress() ||
		!tenure_await_replica(name, &known, deadline, &seen, &changed))
		changed = tenure_await_live(name, &known, deadline, &seen);

	values[0] = BoolGetDatum(changed);
	if (seen.held)
		values[1] = CStringGetTextDatum(seen.holder);
	nulls[1] = !seen.held;
	values[2] = Int64GetDatum(seen.epoch);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

/*
 * tenure.shared_memory_bytes() returns bigint
 *
 * Bytes of shared memory pg_tenure reserved at server start.
 */
Datum
pg_tenure_shared_memory_bytes(PG_FUNCTION_ARGS)
{
	tenure_require_loaded();
	PG_RETURN_INT64((int64) add_size(add_size(tenure_shmem_size(),
											  tenure_epoch_shmem_size()),
									 tenure_promotion_shmem_size()));
}

/*
 * tenure._lease_stats() returns setof record
 *
 * The counters of this database's leases that have an entry in shared
 * memory; tenure.lease_stats joins them to tenure.lease.
 */
Datum
pg_tenure_lease_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TenureLeaseStats *stats;
	int			count;
	int			i;

	tenure_require_loaded();
	InitMaterializedSRF(fcinfo, 0);

	stats = tenure_state_stats(MyDatabaseId, &count);
	for (i = 0; i < count; i++)
	{
		TenureLeaseStats *st = &stats[i];
		TenureCounters *c = &st->counters;
		Datum		values[16];
		bool		nulls[16];
		int			j;

		memset(nulls, 0, sizeof(nulls));
		values[0] = CStringGetTextDatum(st->name);
		values[1] = Int64GetDatum((int64) c->started);
		values[2] = Int64GetDatum((int64) c->released);
		values[3] = Int64GetDatum((int64) c->expired);
		values[4] = Int64GetDatum((int64) c->session_ended);
		values[5] = Int64GetDatum((int64) c->revoked);
		values[6] = Int64GetDatum((int64) c->restarted);
		values[7] = Int64GetDatum((int64) c->handed_over);
		values[8] = Int64GetDatum((int64) c->claims);
		for (j = 0; j < TENURE_FENCED_KINDS; j++)
			values[9 + j] = Int64GetDatum((int64) st->fenced[j]);
		values[13] = Int32GetDatum(st->waiters);
		values[14] = TimestampTzGetDatum(c->last_change);
		nulls[14] = (c->last_change == 0);
		if (c->last_gap_us >= 0)
		{
			Interval   *gap = palloc0(sizeof(Interval));

			gap->time = c->last_gap_us;
			values[15] = IntervalPGetDatum(gap);
		}
		else
			nulls[15] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(stats);
	return (Datum) 0;
}

/*
 * tenure.stats_reset(lease text DEFAULT NULL) returns void
 *
 * Zero the counters of tenure.lease_stats for one lease of this database,
 * or for all of them.  Like pg_stat_reset(), only roles granted EXECUTE may
 * call it (none but superusers by default).
 */
Datum
pg_tenure_stats_reset(PG_FUNCTION_ARGS)
{
	char	   *name = PG_ARGISNULL(0) ? NULL : tenure_arg_lease(fcinfo, 0);

	tenure_require_loaded();
	tenure_state_stats_reset(MyDatabaseId, name);
	PG_RETURN_VOID();
}

/*
 * tenure._waiters() returns setof record
 *
 * The sessions of this database waiting in acquire(wait), for
 * tenure.waiters.
 */
Datum
pg_tenure_waiters(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TenureWaiterInfo *waiters;
	int			count;
	int			i;
	int64		now_mono;
	TimestampTz now_wall;

	tenure_require_loaded();
	InitMaterializedSRF(fcinfo, 0);

	now_mono = tenure_mono_now();
	now_wall = GetCurrentTimestamp();
	waiters = tenure_state_waiters(MyDatabaseId, &count);
	for (i = 0; i < count; i++)
	{
		Datum		values[6];
		bool		nulls[6] = {false, false, false, false, false, false};

		values[0] = CStringGetTextDatum(waiters[i].lease);
		values[1] = CStringGetTextDatum(waiters[i].holder);
		values[2] = BoolGetDatum(waiters[i].session_bound);
		values[3] = Int32GetDatum(waiters[i].pid);
		values[4] = TimestampTzGetDatum(tenure_mono_to_wall(waiters[i].since_mono,
															now_mono, now_wall));
		values[5] = BoolGetDatum(waiters[i].handed);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	pfree(waiters);
	return (Datum) 0;
}
