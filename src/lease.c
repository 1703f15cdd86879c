/*-------------------------------------------------------------------------
 *
 * lease.c
 *		The SQL functions of pg_tenure's leases: create_lease, drop_lease,
 *		acquire, renew, release, leader_is, current_epoch, claim_epoch and
 *		the state function behind the tenure.leases view.
 *
 * Durable facts (the lease's settings and owner, its epoch, the history)
 * live in tables of the schema tenure, which only the extension's owner
 * may write: functions check the caller's rights against the lease's owner
 * and then reach the tables through durable.c.  Live tenures live in
 * shared memory (state.c); changes to them are published when the
 * transaction commits (txn.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "common/int.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "parser/scansup.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"

PG_FUNCTION_INFO_V1(tenure_create_lease);
PG_FUNCTION_INFO_V1(tenure_drop_lease);
PG_FUNCTION_INFO_V1(tenure_acquire);
PG_FUNCTION_INFO_V1(tenure_acquire_or_error);
PG_FUNCTION_INFO_V1(tenure_renew);
PG_FUNCTION_INFO_V1(tenure_release);
PG_FUNCTION_INFO_V1(tenure_leader_is);
PG_FUNCTION_INFO_V1(tenure_current_epoch);
PG_FUNCTION_INFO_V1(tenure_claim_epoch);

/* how long an acquisition waits for the keeper to answer */
#define TENURE_KEEPER_WAIT_US	((int64) 10 * USECS_PER_SEC)
/* retry interval while a foreign session holds a lease's lock_key */
#define TENURE_FOREIGN_RETRY_MS	50L

/* What a backend sees of a lease held by someone else. */
typedef struct TenureBusy
{
	bool		foreign;		/* a foreign session holds the lock_key */
	bool		no_memory;		/* the shared lock table is full */
	char		holder[TENURE_HOLDER_MAX + 1];
	int64		epoch;
	TimestampTz since;
	int64		until_mono;		/* when the holder's tenure expires */
} TenureBusy;

static uint64 tenure_next_token = 0;

static void tenure_load_entry(const TenureKey *key, const TenureRow *row,
							  bool open_at_shutdown);

/*
 * Validate a lease name or holder argument and return it as a C string.
 */
char *
tenure_arg_text(FunctionCallInfo fcinfo, int argno, const char *what,
				int maxlen)
{
	char	   *s;
	int			len;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	len = strlen(s);
	if (len == 0 || len > maxlen)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between 1 and %d bytes long", what, maxlen),
				 len > 0 ? errdetail_plural("The %s given is %d byte long.",
											"The %s given is %d bytes long.",
											len, what, len) : 0));
	return s;
}

/*
 * Validate a lease name argument: 1 to TENURE_NAME_MAX bytes, and neither
 * "," nor "=", which separate tokens in tenure.tokens.
 */
char *
tenure_arg_lease(FunctionCallInfo fcinfo, int argno)
{
	char	   *s = tenure_arg_text(fcinfo, argno, "lease name", TENURE_NAME_MAX);

	if (strpbrk(s, ",=") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease name \"%s\" contains \",\" or \"=\"", s),
				 errdetail("Lease names appear in tenure.tokens, where these characters separate tokens.")));
	/* tenure.tokens ignores blanks around names: " a" would count for "a" */
	if (scanner_isspace(s[0]) || scanner_isspace(s[strlen(s) - 1]))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease name \"%s\" begins or ends with white space", s),
				 errdetail("Lease names appear in tenure.tokens, which ignores white space around them.")));
	return s;
}

/*
 * Validate an interval argument and return it in microseconds.  Zero is
 * accepted only when allow_zero is set.
 */
int64
tenure_arg_interval(FunctionCallInfo fcinfo, int argno, const char *what,
					bool allow_zero, int64 max_us)
{
	Interval   *iv;
	int64		us;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", what)));
	iv = PG_GETARG_INTERVAL_P(argno);
	if (iv->month != 0 ||
		pg_add_s64_overflow((int64) iv->day * USECS_PER_DAY, iv->time, &us))
		us = -1;				/* no fixed length, or absurd */
	if (us < 0 || us > max_us || (us == 0 && !allow_zero))
	{
		char	   *given = DatumGetCString(DirectFunctionCall1(interval_out,
																IntervalPGetDatum(iv)));

		if (allow_zero)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be between 0 and 1 day", what),
					 errdetail("The %s given is %s.", what, given),
					 iv->month != 0 ? errhint("Months and years have no fixed length; use days.") : 0));
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s must be greater than zero and at most 1 day", what),
					 errdetail("The %s given is %s.", what, given),
					 iv->month != 0 ? errhint("Months and years have no fixed length; use days.") : 0));
	}
	return us;
}

/*
 * The last (caller, owner) pair found to pass tenure_check_owner(); reset
 * whenever roles or role memberships change.  Lets renew check rights
 * without leaving the LWLock.
 */
static Oid	tenure_acting_user = InvalidOid;
static Oid	tenure_acting_owner = InvalidOid;

static void
tenure_acting_reset(Datum arg, int cacheid, uint32 hashvalue)
{
	tenure_acting_user = InvalidOid;
	tenure_acting_owner = InvalidOid;
}

/*
 * At library load: register the cache callbacks (registering later could
 * find the callback slots taken, which is FATAL).
 */
void
tenure_lease_init(void)
{
	CacheRegisterSyscacheCallback(AUTHOID, tenure_acting_reset, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, tenure_acting_reset, (Datum) 0);
}

/*
 * Whether the current user is known to have the privileges of owner.  No
 * catalog access: callable under the LWLock.
 */
static bool
tenure_known_to_act_for(Oid owner)
{
	return owner == tenure_acting_owner && GetUserId() == tenure_acting_user;
}

/*
 * Fail with 42501 unless the caller has the privileges of the lease's
 * owner.  Inside an SPI session the current user is the tables' owner:
 * pass spi.save_userid there.
 */
static void
tenure_check_owner(const char *name, Oid owner, Oid caller)
{
	if (caller == tenure_acting_user && owner == tenure_acting_owner)
		return;
	if (!has_privs_of_role(caller, owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for lease \"%s\"", name),
				 errdetail("Only roles with the privileges of role \"%s\" may acquire, renew, release, claim or drop it.",
						   GetUserNameFromId(owner, true) ?
						   GetUserNameFromId(owner, true) : "?")));
	tenure_acting_user = caller;
	tenure_acting_owner = owner;
}

/*
 * Whether the lease's shared entry must be (re)built from its row: it does
 * not exist, it was dropped, it belongs to another lease of the same name
 * (id, if known, differs), or it was built during recovery, when replay
 * could not keep it current.
 */
static bool
tenure_entry_stale(const TenureKey *key, int64 id)
{
	TenureLease *lease;
	bool		stale;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = hash_search(tenure_leases, key, HASH_FIND, NULL);
	stale = lease == NULL || lease->dropped ||
		(id != 0 && lease->lease_id != id) ||
		(lease->loaded_in_recovery && !RecoveryInProgress());
	LWLockRelease(tenure_shared->lock);
	return stale;
}

/*
 * Bring the lease into shared memory if it is not there (or only as
 * cached during recovery), from its latest committed row.  Runs its own
 * SPI session; fails with 42704 for an unknown lease.
 */
void
tenure_ensure_entry(const char *name, const TenureKey *key)
{
	TenureSpi	spi;
	TenureRow	row;
	bool		open_at_shutdown;

	if (!tenure_entry_stale(key, 0))
		return;
	tenure_spi_begin(&spi);
	(void) tenure_load_committed(name, &row, false, &open_at_shutdown);
	tenure_spi_end(&spi);
	tenure_load_entry(key, &row, open_at_shutdown);
}

/*
 * Find the lease's shared entry, creating it from its row if needed; row
 * comes from tenure_load_committed().  Fails with 53400 when the table is
 * full of leases in use.  open_at_shutdown: see tenure_load_committed();
 * applied when the entry is built.
 */
static void
tenure_load_entry(const TenureKey *key, const TenureRow *row,
				  bool open_at_shutdown)
{
	TenureLease *lease;
	bool		found;
	bool		soon;
	int64		now = tenure_mono_now();
	int64		deadline = now + TENURE_KEEPER_WAIT_US;

	for (;;)
	{
		LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
		lease = tenure_enter_entry(key, now, &found, &soon);
		if (lease != NULL || !soon || now >= deadline)
			break;
		LWLockRelease(tenure_shared->lock);

		/* a lease was just released: the keeper is letting its lock go */
		tenure_wake_keeper();
		ConditionVariablePrepareToSleep(&tenure_shared->cv);
		(void) ConditionVariableTimedSleep(&tenure_shared->cv, 10,
										   TENURE_WAIT_EVENT);
		ConditionVariableCancelSleep();
		CHECK_FOR_INTERRUPTS();
		now = tenure_mono_now();
	}
	if (lease == NULL)
	{
		LWLockRelease(tenure_shared->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many leases in use"),
				 errdetail_plural("The %d lease slot of shared memory is taken by a lease that is held, being acquired, or still in a former holder's hold-off.",
								  "All %d lease slots of shared memory are taken by leases that are held, being acquired, or still in a former holder's hold-off.",
								  tenure_max_leases, tenure_max_leases),
				 errhint("Increase tenure.max_leases and restart the server, or drop unused leases.")));
	}
	if (found && !lease->dropped && lease->lease_id != row->id &&
		lease->state != TENURE_FREE && row->own)
	{
		/*
		 * This transaction dropped the lease and created it again, and the
		 * old lease is still held or being acquired.  The drop ends that
		 * tenure when it commits; until then the entry stays the old
		 * lease's, and the lease is busy.
		 */
		LWLockRelease(tenure_shared->lock);
		return;
	}
	if (!found || lease->lease_id != row->id || lease->dropped ||
		(lease->loaded_in_recovery && !RecoveryInProgress() &&
		 lease->state == TENURE_FREE))
	{
		/*
		 * A new entry, or one of a lease dropped (and perhaps created
		 * again under its name, or its extension dropped and created
		 * again): nothing of it carries over but the latest epoch, a floor
		 * for the name's next epoch even after a restore of an older dump.
		 */
		bool		lock_held = found && lease->lock_held;
		LOCKTAG		held_tag;
		int64		floor = found ? lease->epoch : 0;

		if (found && lease->state == TENURE_HELD)
			tenure_end(lease, TENURE_END_DROPPED, now);
		if (lock_held)
			held_tag = lease->held_tag;
		/* keep lock_held and held_tag: they belong to the keeper */
		memset(((char *) lease) + sizeof(TenureKey), 0,
			   sizeof(TenureLease) - sizeof(TenureKey));
		lease->lock_held = lock_held;
		if (lock_held)
			lease->held_tag = held_tag;
		/* except the name's epochs, which never go back */
		lease->epoch = floor;
		lease->loaded_in_recovery = RecoveryInProgress();
		/* a holder from before the server went down may still believe */
		if (open_at_shutdown)
			lease->pred_expiry_mono = (tenure_shared->ready_mono != 0 ?
									   tenure_shared->ready_mono :
									   now) + row->ttl_us;
	}
	/* epochs only grow; the row may be ahead of an idle entry */
	lease->epoch = Max(lease->epoch, row->epoch);
	lease->lease_id = row->id;
	lease->fence_lock = row->fence_lock;
	lease->owner = row->owner;
	lease->ttl_us = row->ttl_us;
	lease->holdoff_us = row->holdoff_us;
	lease->has_lock_key = row->has_lock_key;
	lease->lock_key = row->lock_key;
	lease->dropped = false;
	LWLockRelease(tenure_shared->lock);
}

/*
 * Queue a NOTIFY on channel "tenure", delivered if the transaction commits.
 * The payload is a JSON object: event, lease, holder, epoch.
 */
static void
tenure_notify(const char *event, const char *lease, const char *holder,
			  int64 epoch)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"event\": ");
	escape_json(&buf, event);
	appendStringInfoString(&buf, ", \"lease\": ");
	escape_json(&buf, lease);
	appendStringInfoString(&buf, ", \"holder\": ");
	escape_json(&buf, holder);
	appendStringInfo(&buf, ", \"epoch\": " INT64_FORMAT "}", epoch);
	Async_Notify("tenure", buf.data);
	pfree(buf.data);
}

/*
 * tenure.create_lease(lease, ttl, holdoff, lock_key)
 */
Datum
tenure_create_lease(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	TenureSpi	spi;
	Datum		args[5];
	bool		nulls[5] = {false, false, false, false, false};

	tenure_require_loaded();
	tenure_arg_interval(fcinfo, 1, "ttl", false, TENURE_MAX_INTERVAL_US);
	if (!PG_ARGISNULL(2))
		tenure_arg_interval(fcinfo, 2, "holdoff", true, TENURE_MAX_INTERVAL_US);
	tenure_require_primary(fcinfo);

	tenure_spi_begin(&spi);

	args[0] = CStringGetTextDatum(name);
	tenure_spi_exec("SELECT 1 FROM tenure.lease WHERE name OPERATOR(pg_catalog.=) $1",
					"t", args, NULL, SPI_OK_SELECT);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("lease \"%s\" already exists", name)));

	if (!PG_ARGISNULL(3))
	{
		args[0] = PG_GETARG_DATUM(3);
		tenure_spi_exec("SELECT name FROM tenure.lease WHERE lock_key OPERATOR(pg_catalog.=) $1",
						"i", args, NULL, SPI_OK_SELECT);
		if (SPI_processed > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("lock key " INT64_FORMAT " is already used by lease \"%s\"",
							PG_GETARG_INT64(3),
							SPI_getvalue(SPI_tuptable->vals[0],
										 SPI_tuptable->tupdesc, 1))));
	}

	args[0] = CStringGetTextDatum(name);
	args[1] = PG_GETARG_DATUM(1);
	args[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2);
	args[3] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	nulls[3] = PG_ARGISNULL(3);
	args[4] = Int64GetDatum((int64) spi.save_userid);

	/*
	 * A lease created again under an old name continues that name's epochs,
	 * their base and where they were issued, so that tokens of the old lease
	 * never become valid again and its epochs neither jump nor restart.  Its
	 * fence lock is the least used one, so that up to TENURE_FENCE_LOCKS
	 * leases of a database never share one.
	 */
	tenure_spi_exec("INSERT INTO tenure.lease (name, ttl, holdoff, lock_key, owner,"
					" epoch, base, issued_sysid, issued_tli, fence_lock)"
					" SELECT $1, $2, $3, $4, $5::pg_catalog.oid::pg_catalog.regrole,"
					" COALESCE(h.epoch, 0), COALESCE(h.base, 0), h.issued_sysid, h.issued_tli,"
					" (SELECT s FROM pg_catalog.generate_series(0, " CppAsString2(TENURE_FENCE_LOCKS) " - 1) s"
					"   ORDER BY (SELECT pg_catalog.count(*) FROM tenure.lease l"
					"             WHERE l.fence_lock OPERATOR(pg_catalog.=) s), s LIMIT 1)"
					" FROM (SELECT) one LEFT JOIN (SELECT epoch, base, issued_sysid, issued_tli"
					"  FROM tenure.history WHERE lease OPERATOR(pg_catalog.=) $1"
					"  ORDER BY epoch DESC LIMIT 1) h ON true",
					"tvvii", args, nulls, SPI_OK_INSERT);

	tenure_spi_end(&spi);
	PG_RETURN_VOID();
}

/*
 * tenure.drop_lease(lease)
 */
Datum
tenure_drop_lease(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	TenureSpi	spi;
	TenureRow	row;
	TenureKey	key;
	Datum		args[1];

	tenure_require_loaded();
	tenure_require_primary(fcinfo);

	tenure_spi_begin(&spi);
	tenure_load_row(name, &row, true);
	tenure_check_owner(name, row.owner, spi.save_userid);

	args[0] = CStringGetTextDatum(name);
	tenure_spi_exec("SELECT tbl::pg_catalog.text FROM tenure.fenced"
					" WHERE lease OPERATOR(pg_catalog.=) $1 ORDER BY 1",
					"t", args, NULL, SPI_OK_SELECT);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
				 errmsg("cannot drop lease \"%s\" because it fences table %s",
						name, SPI_getvalue(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 1)),
				 errhint("Unfence its tables with tenure.unfence_table() first.")));
	tenure_spi_exec("UPDATE tenure.history SET ended = pg_catalog.clock_timestamp(),"
					" end_reason = 'dropped'"
					" WHERE lease OPERATOR(pg_catalog.=) $1 AND ended IS NULL",
					"t", args, NULL, SPI_OK_UPDATE);
	tenure_spi_exec("DELETE FROM tenure.lease WHERE name OPERATOR(pg_catalog.=) $1",
					"t", args, NULL, SPI_OK_DELETE);
	tenure_spi_end(&spi);

	tenure_make_key(&key, MyDatabaseId, name);
	tenure_txn_remember(TENURE_ACT_DROP, &key, row.id, 0);
	PG_RETURN_VOID();
}

/*
 * The latest epoch shared memory has seen for the lease, 0 if none.
 */
static int64
tenure_cached_epoch(const TenureKey *key)
{
	TenureLease *lease;
	int64		epoch = 0;

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = hash_search(tenure_leases, key, HASH_FIND, NULL);
	if (lease != NULL && !lease->dropped && !lease->loaded_in_recovery)
		epoch = lease->epoch;
	LWLockRelease(tenure_shared->lock);
	return epoch;
}

/* An acquisition whose reservation we took over after its ttl. */
typedef struct TenureAbandoned
{
	int			pid;			/* its backend, 0 if none */
	TimestampTz start;			/* ... and that backend's start */
	TransactionId xid;			/* its transaction, if it issued an epoch */
} TenureAbandoned;

/*
 * Try to reserve the lease for a new tenure or renew the caller's own.
 * Returns 1 and sets *epoch on renewal, 2 when reserved (token), 0 when
 * someone else holds it (*busy filled in), -1 when the lease has no entry
 * any more (its slot went to another lease: load it again).  A reservation
 * of another backend that outlived its ttl is taken over; *abandoned then
 * says whose it was.
 */
static int
tenure_try_reserve(const TenureKey *key, const char *holder, bool session_bound,
				   uint64 token, int64 *epoch, TenureBusy *busy,
				   TenureAbandoned *abandoned)
{
	TenureLease *lease;
	int64		now = tenure_mono_now();
	int			result;
	bool		ended = false;

	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	lease = hash_search(tenure_leases, key, HASH_FIND, NULL);
	if (lease == NULL)
	{
		LWLockRelease(tenure_shared->lock);
		return -1;
	}
	if (lease->dropped)
	{
		/* dropped under us: the caller's transaction is about to see it */
		LWLockRelease(tenure_shared->lock);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("lease \"%s\" does not exist", key->name),
				 errhint("Create it with tenure.create_lease().")));
	}

	if (lease->state == TENURE_HELD && !tenure_is_live(lease, now))
	{
		tenure_end(lease, TENURE_END_EXPIRED, now);
		ended = true;
	}

	if (tenure_pending_expired(lease, now) &&
		(lease->holder_pid != MyProcPid ||
		 lease->holder_start != MyStartTimestamp))
	{
		/*
		 * Another backend's acquisition outlived its ttl without
		 * committing: it is void, and its COMMIT will fail at PRE_COMMIT.
		 * It never led, so it imposes no hold-off.
		 */
		abandoned->pid = lease->holder_pid;
		abandoned->start = lease->holder_start;
		abandoned->xid = lease->pending_xid;
		lease->state = TENURE_FREE;
		lease->holder[0] = '\0';
		lease->holder_pid = 0;
		lease->holder_start = 0;
		lease->pending_xid = InvalidTransactionId;
	}

	if (lease->state != TENURE_FREE)
	{
		/* ours (perhaps acquired earlier in this very transaction): renew */
		int64		held = tenure_held_epoch(lease, holder, now);

		if (held != 0)
		{
			lease->renewed_mono = now;
			*epoch = held;
			result = 1;
		}
		else
		{
			busy->foreign = false;
			busy->no_memory = false;
			strlcpy(busy->holder, lease->holder, sizeof(busy->holder));
			busy->epoch = lease->state == TENURE_HELD ? lease->epoch : 0;
			busy->since = lease->acquired_wall;
			if (lease->state == TENURE_HELD)
				busy->until_mono = lease->renewed_mono + lease->ttl_us;
			else if (!lease->committing)
				busy->until_mono = lease->acquired_mono + lease->ttl_us;
			else
				busy->until_mono = 0;	/* its commit wakes us */
			result = 0;
		}
	}
	else
	{
		lease->state = TENURE_PENDING;
		strlcpy(lease->holder, holder, sizeof(lease->holder));
		lease->session_bound = session_bound;
		lease->holder_pid = MyProcPid;
		lease->holder_start = MyStartTimestamp;
		lease->pending_token = token;
		lease->pending_epoch = 0;
		lease->pending_xid = InvalidTransactionId;
		lease->committing = false;
		lease->acquired_mono = now;
		lease->acquired_wall = GetCurrentTimestamp();
		lease->renewed_mono = now;
		if (lease->holdoff_us >= 0)
			lease->active_mono = now + lease->holdoff_us;
		else
			lease->active_mono = Max(now, lease->pred_expiry_mono);
		lease->lock_wanted = true;
		lease->lock_failed = false;
		result = 2;
	}
	LWLockRelease(tenure_shared->lock);

	if (ended)
		ConditionVariableBroadcast(&tenure_shared->cv);
	if (result == 2)
		tenure_wake_keeper();
	return result;
}

/*
 * Wait until the keeper holds the advisory lock of a lease we reserved.
 * Returns false, and gives the reservation back, if a foreign session
 * holds it.
 */
static bool
tenure_wait_for_lock(const TenureKey *key, uint64 token, TenureBusy *busy)
{
	int64		deadline = tenure_mono_now() + TENURE_KEEPER_WAIT_US;
	bool		result = false;
	bool		freed = false;

	memset(busy, 0, sizeof(TenureBusy));
	ConditionVariablePrepareToSleep(&tenure_shared->cv);
	for (;;)
	{
		TenureLease *lease;
		bool		done = false;

		LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
		lease = hash_search(tenure_leases, key, HASH_FIND, NULL);
		if (lease == NULL || lease->state != TENURE_PENDING ||
			lease->pending_token != token)
			done = true;		/* cannot happen while our transaction runs */
		else if (lease->lock_held && tenure_lease_tag_held(lease))
		{
			result = true;
			done = true;
		}
		else if (lease->lock_failed)
		{
			freed = true;
			lease->state = TENURE_FREE;
			lease->holder[0] = '\0';
			lease->holder_pid = 0;
			lease->session_bound = false;
			lease->lock_wanted = false;
			busy->foreign = true;
			busy->no_memory = lease->lock_no_memory;
			busy->holder[0] = '\0';
			busy->epoch = 0;
			busy->since = 0;
			busy->until_mono = 0;
			done = true;
		}
		LWLockRelease(tenure_shared->lock);
		if (freed)
			ConditionVariableBroadcast(&tenure_shared->cv);
		if (done)
			break;

		if (tenure_mono_now() >= deadline)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("pg_tenure keeper did not answer"),
					 errdetail("The keeper background worker holds the advisory locks of tenures; it is not running or not responding."),
					 errhint("Check the server log and max_worker_processes.")));
		tenure_wake_keeper();
		(void) ConditionVariableTimedSleep(&tenure_shared->cv, 100,
										   TENURE_WAIT_EVENT);
	}
	ConditionVariableCancelSleep();
	return result;
}

/*
 * Make sure the transaction of an acquisition we took over (its reservation
 * outlived its ttl) has ended, before we issue our epoch.
 *
 * That transaction issued its epoch with an UPDATE of the lease's row in
 * tenure.lease and holds the row lock until it ends; our own UPDATE of the
 * row would wait for it, and a client idle in its transaction may never
 * end it: the lease would be ours in shared memory, yet nobody could issue
 * an epoch until that client came back.  Nothing short of ending the
 * transaction frees the row (the epoch counter lives in it), and
 * PostgreSQL cannot abort another session's transaction while that
 * session is idle.  So its backend is terminated, as pg_terminate_backend()
 * does: the transaction could not commit anyway (its PRE_COMMIT check
 * fails), so only its session is lost.  Like pg_terminate_backend(), only
 * a superuser terminates a superuser's backend.  If we may not, or the
 * transaction does not end within TENURE_KEEPER_WAIT_US, we fail with
 * 55P03 and our reservation is given back.  Its history rows are freed
 * with it, so the history statements that follow never wait for it.
 */
static void
tenure_end_abandoned(const char *name, const TenureAbandoned *abandoned)
{
	int64		deadline = tenure_mono_now() + TENURE_KEEPER_WAIT_US;
	bool		signalled = false;

	if (!TransactionIdIsValid(abandoned->xid))
		return;					/* it had issued nothing: nothing is locked */

	while (TransactionIdIsInProgress(abandoned->xid))
	{
		if (!signalled)
		{
			PGPROC	   *proc = BackendPidGetProc(abandoned->pid);

			if (proc != NULL && proc->xid == abandoned->xid)
			{
				if (superuser_arg(proc->roleId) && !superuser())
					ereport(ERROR,
							(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
							 errmsg("lease \"%s\" is locked by an expired acquisition", name),
							 errdetail("The transaction of superuser backend %d acquired the lease and has neither committed nor rolled back.",
									   abandoned->pid),
							 errhint("End that transaction, or set idle_in_transaction_session_timeout.")));
				ereport(LOG,
						(errmsg("terminating backend %d, whose acquisition of lease \"%s\" expired before its transaction committed",
								abandoned->pid, name),
						 errdetail("The transaction holds the lease's row lock, which the new holder needs.")));
#ifdef HAVE_SETSID
				(void) kill(-abandoned->pid, SIGTERM);
#else
				(void) kill(abandoned->pid, SIGTERM);
#endif
			}
			signalled = true;
		}
		if (tenure_mono_now() >= deadline)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("lease \"%s\" is locked by an expired acquisition", name),
					 errdetail("The transaction of backend %d acquired the lease and has not ended.",
							   abandoned->pid),
					 errhint("End that transaction, or set idle_in_transaction_session_timeout.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10L, TENURE_WAIT_EVENT);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Shared body of acquire and acquire_or_error.  Returns the epoch, or
 * 0 if the lease is held by someone else (busy filled in).
 */
static int64
tenure_acquire_internal(FunctionCallInfo fcinfo, const char *name,
						const char *holder, int64 wait_us, bool session_bound,
						TenureBusy *busy)
{
	TenureSpi	spi;
	TenureRow	row;
	TenureRow	latest;
	TenureKey	key;
	TenureAbandoned abandoned;
	int64		epoch = 0;
	int64		deadline;
	uint64		token = ((uint64) MyProcPid << 32) | (uint32) ++tenure_next_token;
	bool		reserved = false;
	bool		stale;
	bool		exists = true;
	bool		open_at_shutdown = false;
	bool		ours = false;
	TransactionId xid;

	tenure_require_loaded();
	tenure_require_primary(fcinfo);

	tenure_make_key(&key, MyDatabaseId, name);
	tenure_spi_begin(&spi);
	tenure_load_row(name, &row, false);
	tenure_check_owner(name, row.owner, spi.save_userid);
	stale = tenure_entry_stale(&key, row.id);
	if (stale)
		exists = tenure_load_committed(name, &latest, true, &open_at_shutdown);
	tenure_spi_end(&spi);

	if (stale)
	{
		/* the entry follows the catalog, whatever our snapshot says */
		if (exists)
			tenure_load_entry(&key, &latest, open_at_shutdown);
		if (!exists || latest.id != row.id)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("lease \"%s\" was dropped and created again concurrently", name),
					 errhint("Retry the transaction.")));
	}
	if (session_bound)
		tenure_register_session_exit();

	/* remembered before reserving, so that an abort always gives it back */
	tenure_txn_remember(TENURE_ACT_ACQUIRE, &key, 0, token);
	memset(&abandoned, 0, sizeof(abandoned));

	/*
	 * Be on the condition variable's wait list before looking at the lease,
	 * so that a release between our look and our sleep still wakes us.
	 * (tenure_wait_for_lock cancels it; the next sleep then only prepares
	 * again and returns at once, and we look again.)
	 */
	deadline = tenure_mono_now() + wait_us;
	if (wait_us > 0)
		ConditionVariablePrepareToSleep(&tenure_shared->cv);
	for (;;)
	{
		int			r = tenure_try_reserve(&key, holder, session_bound, token,
										   &epoch, busy, &abandoned);
		int64		now;
		long		sleep_ms;

		if (r == -1)
		{
			/* its slot went to another lease meanwhile */
			tenure_ensure_entry(name, &key);
			continue;
		}
		if (r == 1)
			break;				/* renewed */
		if (r == 2)
		{
			reserved = tenure_wait_for_lock(&key, token, busy);
			/* it left the wait list: rejoin before looking again */
			if (wait_us > 0)
				ConditionVariablePrepareToSleep(&tenure_shared->cv);
			if (reserved)
				break;
		}
		if (busy->no_memory)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of shared memory for the advisory lock of lease \"%s\"", name),
					 errdetail("The keeper holds one lock per live tenure in the shared lock table, which is full."),
					 errhint("Increase max_locks_per_transaction and restart the server.")));

		now = tenure_mono_now();
		if (now >= deadline)
			break;				/* held by someone else */

		/* sleep until woken, the holder's expiry, or the deadline */
		sleep_ms = (long) ((deadline - now + 999) / 1000);
		if (busy->foreign)
			sleep_ms = Min(sleep_ms, TENURE_FOREIGN_RETRY_MS);
		else if (busy->until_mono > now)
			sleep_ms = Min(sleep_ms, (long) ((busy->until_mono - now + 999) / 1000));
		(void) ConditionVariableTimedSleep(&tenure_shared->cv, Max(sleep_ms, 1),
										   TENURE_WAIT_EVENT);
		CHECK_FOR_INTERRUPTS();
	}
	if (wait_us > 0)
		ConditionVariableCancelSleep();
	if (!reserved)
		return epoch;			/* the renewed tenure's, or 0 */

	/* reserved, and the keeper holds the lock: issue the epoch */
	tenure_end_abandoned(name, &abandoned);
	tenure_spi_begin(&spi);
	epoch = tenure_issue_epoch(name, tenure_cached_epoch(&key));

	tenure_history_close(name, &key);
	tenure_history_start(name, epoch, holder, session_bound);
	tenure_spi_end(&spi);

	/*
	 * Our reservation may have outlived its ttl meanwhile and been taken
	 * over; then its new holder waits for our row lock, so fail now.
	 */
	xid = GetTopTransactionIdIfAny();
	LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
	{
		TenureLease *lease = hash_search(tenure_leases, &key, HASH_FIND, NULL);

		if (lease != NULL && lease->state == TENURE_PENDING &&
			lease->pending_token == token && lease->holder_pid == MyProcPid)
		{
			lease->pending_epoch = epoch;
			lease->pending_xid = xid;
			ours = true;
		}
	}
	LWLockRelease(tenure_shared->lock);
	if (!ours)
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("acquisition of lease \"%s\" expired before its transaction committed", name),
				 errdetail("Another holder took the lease over while its epoch was being issued.")));
	tenure_txn_issued(token, epoch);

	tenure_notify("acquired", name, holder, epoch);

	/* the epoch must survive a crash even with synchronous_commit = off */
	ForceSyncCommit();
	return epoch;
}

/*
 * tenure.acquire(lease, holder, wait, session_bound) returns bigint
 *
 * Starts a tenure and returns its epoch, renews the caller's own tenure
 * and returns its epoch, or returns NULL if someone else holds the lease
 * for longer than "wait".
 */
Datum
tenure_acquire(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	int64		wait_us = tenure_arg_interval(fcinfo, 2, "wait", true,
											  TENURE_MAX_INTERVAL_US);
	bool		session_bound;
	int64		epoch;
	TenureBusy	busy;

	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("session_bound must not be null")));
	session_bound = PG_GETARG_BOOL(3);

	epoch = tenure_acquire_internal(fcinfo, name, holder, wait_us,
									session_bound, &busy);
	if (epoch == 0)
		PG_RETURN_NULL();
	PG_RETURN_INT64(epoch);
}

/*
 * tenure.acquire_or_error(lease, holder, session_bound) returns bigint
 *
 * Like acquire without waiting, but raises TN001 naming the current holder
 * when the lease is held by someone else: for processes that must refuse
 * to start.
 */
Datum
tenure_acquire_or_error(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	bool		session_bound;
	int64		epoch;
	TenureBusy	busy;

	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("session_bound must not be null")));
	session_bound = PG_GETARG_BOOL(2);

	epoch = tenure_acquire_internal(fcinfo, name, holder, 0, session_bound,
									&busy);
	if (epoch != 0)
		PG_RETURN_INT64(epoch);

	if (busy.foreign)
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("lease \"%s\" is held by another session's advisory lock", name),
				 errdetail("A session that is not a pg_tenure holder holds the lease's lock_key; pg_locks shows which.")));
	else if (busy.epoch == 0)
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("lease \"%s\" is held by \"%s\"", name, busy.holder),
				 errdetail("Holder \"%s\" is acquiring it in a transaction that started at %s.",
						   busy.holder, timestamptz_to_str(busy.since))));
	else
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("lease \"%s\" is held by \"%s\"", name, busy.holder),
				 errdetail("Holder \"%s\" has held it at epoch " INT64_FORMAT " since %s.",
						   busy.holder, busy.epoch, timestamptz_to_str(busy.since))));
	PG_RETURN_NULL();
}

/*
 * tenure.renew(lease, holder) returns boolean
 *
 * Extends the holder's tenure to now + ttl; false if the holder does not
 * hold the lease (any more).  Shared memory only.
 */
Datum
tenure_renew(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	TenureKey	key;
	TenureLease *lease;
	Oid			owner = InvalidOid;
	bool		result = false;
	int64		now;
	int			attempt;

	tenure_require_loaded();
	tenure_require_primary(fcinfo);
	tenure_make_key(&key, MyDatabaseId, name);

	/*
	 * One pass under the lock when the caller is already known to act for
	 * the lease's owner; otherwise check the privilege (which may read the
	 * catalogs, so never under the lock) and come back once.
	 */
	for (attempt = 0; attempt < 2; attempt++)
	{
		bool		allowed = false;

		now = tenure_mono_now();
		LWLockAcquire(tenure_shared->lock, LW_EXCLUSIVE);
		lease = hash_search(tenure_leases, &key, HASH_FIND, NULL);
		owner = (lease != NULL && !lease->dropped) ? lease->owner : InvalidOid;
		if (OidIsValid(owner) && tenure_known_to_act_for(owner))
		{
			allowed = true;
			if (tenure_held_epoch(lease, holder, now) != 0)
			{
				lease->renewed_mono = now;
				result = true;
			}
		}
		LWLockRelease(tenure_shared->lock);
		if (allowed)
			break;

		if (!OidIsValid(owner))
		{
			TenureSpi	spi;
			TenureRow	row;

			/* never held since server start: unknown lease, or simply free */
			tenure_spi_begin(&spi);
			tenure_load_row(name, &row, false);
			tenure_check_owner(name, row.owner, spi.save_userid);
			tenure_spi_end(&spi);
			break;
		}
		tenure_check_owner(name, owner, GetUserId());
	}

	PG_RETURN_BOOL(result);
}

/*
 * tenure.release(lease, holder) returns boolean
 *
 * Ends the holder's tenure when the transaction commits; the successor
 * needs no hold-off.  False if the holder does not hold the lease.
 */
Datum
tenure_release(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	TenureSpi	spi;
	TenureRow	row;
	TenureKey	key;
	TenureLease *lease;
	bool		holds = false;
	int64		epoch = 0;
	int64		now;
	Datum		args[2];

	tenure_require_loaded();
	tenure_require_primary(fcinfo);

	tenure_spi_begin(&spi);
	/* locked until commit: a claim racing us re-checks after we are done */
	tenure_load_row(name, &row, true);
	tenure_check_owner(name, row.owner, spi.save_userid);

	tenure_make_key(&key, MyDatabaseId, name);
	now = tenure_mono_now();
	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = hash_search(tenure_leases, &key, HASH_FIND, NULL);
	if (lease != NULL)
		epoch = tenure_held_epoch(lease, holder, now);
	holds = epoch != 0;
	LWLockRelease(tenure_shared->lock);

	if (holds)
	{
		args[0] = CStringGetTextDatum(name);
		args[1] = Int64GetDatum(epoch);
		tenure_spi_exec("UPDATE tenure.history SET ended = pg_catalog.clock_timestamp(),"
						" end_reason = 'released'"
						" WHERE lease OPERATOR(pg_catalog.=) $1 AND epoch OPERATOR(pg_catalog.=) $2"
						" AND ended IS NULL",
						"ti", args, NULL, SPI_OK_UPDATE);
		tenure_txn_remember(TENURE_ACT_RELEASE, &key, epoch, 0);
		tenure_notify("released", name, holder, epoch);
	}
	tenure_spi_end(&spi);

	PG_RETURN_BOOL(holds);
}

/*
 * tenure.leader_is(lease, holder) returns boolean
 *
 * True iff holder holds a live, active tenure of the lease.  Answered from
 * shared memory alone.
 */
Datum
tenure_leader_is(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	TenureKey	key;
	TenureLease *lease;
	bool		result = false;
	int64		now;

	tenure_require_loaded();
	tenure_make_key(&key, MyDatabaseId, name);

	now = tenure_mono_now();
	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = hash_search(tenure_leases, &key, HASH_FIND, NULL);
	if (lease != NULL &&
		tenure_is_live(lease, now) &&
		now >= lease->active_mono &&
		(lease->lock_held || !lease->has_lock_key) &&
		strcmp(lease->holder, holder) == 0)
		result = true;
	LWLockRelease(tenure_shared->lock);

	PG_RETURN_BOOL(result);
}

/*
 * tenure.current_epoch(lease) returns bigint
 *
 * The lease's latest epoch, from its durable row (works on a standby).
 */
Datum
tenure_current_epoch(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	TenureSpi	spi;
	TenureRow	row;

	tenure_spi_begin(&spi);
	tenure_load_row(name, &row, false);
	tenure_spi_end(&spi);
	PG_RETURN_INT64(row.epoch);
}

/*
 * Whether holder holds the lease now: a live tenure, or one this very
 * transaction is acquiring.  Sets *session_bound.
 */
static bool
tenure_holds(const TenureKey *key, const char *holder, bool *session_bound)
{
	TenureLease *lease;
	bool		holds = false;
	int64		now = tenure_mono_now();

	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = hash_search(tenure_leases, key, HASH_FIND, NULL);
	if (lease != NULL && tenure_held_epoch(lease, holder, now) != 0)
	{
		holds = true;
		*session_bound = lease->session_bound;
	}
	LWLockRelease(tenure_shared->lock);
	return holds;
}

/*
 * Raise TN001 for a claim by someone who does not hold the lease.
 */
static void
tenure_not_holder(const char *name, const char *holder)
{
	ereport(ERROR,
			(errcode(ERRCODE_TENURE_LEASE_HELD),
			 errmsg("\"%s\" does not hold lease \"%s\"", holder, name),
			 errhint("Only the current holder of a lease can claim a new epoch.")));
}

/*
 * tenure.claim_epoch(lease, holder) returns bigint
 *
 * The current holder starts a new epoch within its tenure.  The new epoch
 * is durable before the transaction's commit returns.
 */
Datum
tenure_claim_epoch(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	TenureSpi	spi;
	TenureRow	row;
	TenureKey	key;
	bool		session_bound = false;
	int64		epoch;
	Datum		args[4];

	tenure_require_loaded();
	tenure_require_primary(fcinfo);

	tenure_spi_begin(&spi);
	tenure_load_row(name, &row, false);
	tenure_check_owner(name, row.owner, spi.save_userid);

	tenure_make_key(&key, MyDatabaseId, name);
	if (!tenure_holds(&key, holder, &session_bound))
		tenure_not_holder(name, holder);

	epoch = tenure_issue_epoch(name, tenure_cached_epoch(&key));
	args[0] = CStringGetTextDatum(name);

	/*
	 * We waited for the row if another transaction changed the lease: a
	 * release or a new tenure committed meanwhile is published by now.
	 */
	if (!tenure_holds(&key, holder, &session_bound))
		tenure_not_holder(name, holder);

	tenure_spi_exec("UPDATE tenure.history SET ended = pg_catalog.clock_timestamp(),"
					" end_reason = 'claimed'"
					" WHERE lease OPERATOR(pg_catalog.=) $1 AND ended IS NULL",
					"t", args, NULL, SPI_OK_UPDATE);
	tenure_history_start(name, epoch, holder, session_bound);
	tenure_spi_end(&spi);

	tenure_txn_remember(TENURE_ACT_CLAIM, &key, epoch, 0);
	tenure_notify("claimed", name, holder, epoch);
	ForceSyncCommit();
	PG_RETURN_INT64(epoch);
}
