/*-------------------------------------------------------------------------
 *
 * lease.c
 *		The SQL functions of pg_tenure's leases: create_lease, alter_lease,
 *		drop_lease, acquire, acquire_or_error, renew, release, leader_is,
 *		current_epoch, claim_epoch, handoff and set_preferred.
 *
 * Durable facts (the lease's settings and owner, its epoch, the history)
 * live in tables of the schema tenure, which only the extension's owner
 * may write: functions check the caller's rights against the lease's owner
 * and then reach the tables through catalog.c.  Live tenures live in
 * shared memory (state.c); acquire.c starts them, and changes to them are
 * published when the transaction commits (txn.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"


#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"
#include "state.h"
#include "txn.h"
#include "catalog.h"
#include "epoch.h"
#include "history.h"
#include "acquire.h"
#include "args.h"
#include "fence.h"

PG_FUNCTION_INFO_V1(pg_tenure_create_lease);
PG_FUNCTION_INFO_V1(pg_tenure_alter_lease);
PG_FUNCTION_INFO_V1(pg_tenure_drop_lease);
PG_FUNCTION_INFO_V1(pg_tenure_acquire);
PG_FUNCTION_INFO_V1(pg_tenure_acquire_or_error);
PG_FUNCTION_INFO_V1(pg_tenure_renew);
PG_FUNCTION_INFO_V1(pg_tenure_release);
PG_FUNCTION_INFO_V1(pg_tenure_leader_is);
PG_FUNCTION_INFO_V1(pg_tenure_current_epoch);
PG_FUNCTION_INFO_V1(pg_tenure_claim_epoch);
PG_FUNCTION_INFO_V1(pg_tenure_handoff);
PG_FUNCTION_INFO_V1(pg_tenure_set_preferred);

/*
 * Queue a NOTIFY on channel "tenure", delivered if the transaction commits
 * and a session of the database has run LISTEN tenure (txn.c), unless
 * tenure.notify is off.  The payload is a JSON object: event, lease,
 * holder, epoch.
 */
static void
tenure_notify(const char *event, const char *lease, const char *holder,
			  int64 epoch)
{
	StringInfoData buf;

	if (!tenure_notify_enabled)
		return;
	initStringInfo(&buf);
	appendStringInfoString(&buf, "{\"event\": ");
	escape_json(&buf, event);
	appendStringInfoString(&buf, ", \"lease\": ");
	escape_json(&buf, lease);
	appendStringInfoString(&buf, ", \"holder\": ");
	escape_json(&buf, holder);
	appendStringInfo(&buf, ", \"epoch\": " INT64_FORMAT "}", epoch);
	tenure_txn_notify(event, lease, buf.data);
	pfree(buf.data);
}

/*
 * tenure.create_lease(lease, ttl, holdoff, lock_key)
 */
Datum
pg_tenure_create_lease(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *preferred = PG_ARGISNULL(4) ? NULL :
		tenure_arg_text(fcinfo, 4, "preferred", TENURE_HOLDER_MAX);
	TenureSpi	spi;
	Datum		args[6];
	bool		nulls[6] = {false, false, false, false, false, false};

	tenure_require_loaded();
	tenure_arg_interval(fcinfo, 1, "ttl", false, TENURE_MAX_TTL_US);
	if (!PG_ARGISNULL(2))
		tenure_arg_interval(fcinfo, 2, "holdoff", true, TENURE_MAX_HOLDOFF_US);
	tenure_require_changes(fcinfo);

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
	args[5] = preferred ? CStringGetTextDatum(preferred) : (Datum) 0;
	nulls[5] = (preferred == NULL);

	/*
	 * A lease created again under an old name continues that name's epochs,
	 * their base and where they were issued, so that tokens of the old lease
	 * never become valid again and its epochs neither jump nor restart
	 * (src/README, E6; epoch.c issues from this row).
	 *
	 * Its fence lock: in a database of fewer than 64 leases the least used
	 * one, so that up to TENURE_FENCE_LOCKS leases never share one;
	 * beyond, the one after the newest lease's, found through the index on
	 * id.  Counting every lease per view would make creating n leases cost
	 * n^2.
	 */
	tenure_spi_exec("INSERT INTO tenure.lease (name, ttl, holdoff, lock_key, owner,"
					" epoch, base, issued_sysid, issued_tli, fence_lock, preferred)"
					" SELECT $1, $2, $3, $4, $5::pg_catalog.oid::pg_catalog.regrole,"
					" COALESCE(h.epoch, 0), COALESCE(h.base, 0), h.issued_sysid, h.issued_tli,"
					" CASE WHEN (SELECT pg_catalog.count(*) FROM (SELECT FROM tenure.lease LIMIT 64) few)"
					"  OPERATOR(pg_catalog.<) 64"
					" THEN (SELECT s FROM pg_catalog.generate_series(0, " CppAsString2(TENURE_FENCE_LOCKS) " - 1) s"
					"   ORDER BY (SELECT pg_catalog.count(*) FROM tenure.lease l"
					"             WHERE l.fence_lock OPERATOR(pg_catalog.=) s), s LIMIT 1)"
					" ELSE (SELECT (l.fence_lock OPERATOR(pg_catalog.+) 1) OPERATOR(pg_catalog.%) " CppAsString2(TENURE_FENCE_LOCKS)
					"   FROM tenure.lease l ORDER BY l.id DESC LIMIT 1) END, $6"
					" FROM (SELECT) one LEFT JOIN (SELECT epoch, base, issued_sysid, issued_tli"
					"  FROM tenure.history WHERE lease OPERATOR(pg_catalog.=) $1"
					"  ORDER BY epoch DESC LIMIT 1) h ON true",
					"tvviit", args, nulls, SPI_OK_INSERT);

	tenure_spi_end(&spi);
	PG_RETURN_VOID();
}

/* The settings alter_lease() can reset, in its reset argument. */
#define TENURE_RESET_TTL		1
#define TENURE_RESET_HOLDOFF	2
#define TENURE_RESET_LOCK_KEY	4
#define TENURE_RESET_PREFERRED	8

/* create_lease()'s default ttl, which reset restores */
#define TENURE_DEFAULT_TTL_US	((int64) 15 * USECS_PER_SEC)

/*
 * The settings named by alter_lease()'s reset argument, as TENURE_RESET_*
 * bits; fails with 22004 or 22023 on a null array, a null element or an
 * unknown name.
 */
static int
tenure_arg_reset(FunctionCallInfo fcinfo, int argno)
{
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			bits = 0;

	tenure_arg_not_null(fcinfo, argno, "reset");
	arr = PG_GETARG_ARRAYTYPE_P(argno);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
	{
		char	   *setting;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument \"reset\" must not contain nulls")));
		setting = TextDatumGetCString(elems[i]);
		if (strcmp(setting, "ttl") == 0)
			bits |= TENURE_RESET_TTL;
		else if (strcmp(setting, "holdoff") == 0)
			bits |= TENURE_RESET_HOLDOFF;
		else if (strcmp(setting, "lock_key") == 0)
			bits |= TENURE_RESET_LOCK_KEY;
		else if (strcmp(setting, "preferred") == 0)
			bits |= TENURE_RESET_PREFERRED;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unrecognized lease setting \"%s\" in argument \"reset\"",
							setting),
					 errhint("The settings are ttl, holdoff, lock_key and preferred.")));
	}
	return bits;
}

/*
 * Fail with 22023 if a setting is both given a value and named in reset.
 */
static void
tenure_arg_not_both(FunctionCallInfo fcinfo, int argno, int reset, int bit,
					const char *argname)
{
	if (!PG_ARGISNULL(argno) && (reset & bit) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("setting \"%s\" is both given a value and reset", argname)));
}

/*
 * Bring the lease's entry into shared memory, built from its row with the
 * given id, and pin it for alter_lease() (tenure_state_alter_pin()).
 * Fails with 55006 if the lease is in use.
 */
static void
tenure_alter_pin(const char *name, const TenureKey *key, int64 id,
				 bool lock_key_changes)
{
	for (int attempt = 0;; attempt++)
	{
		TenureAlterCheck check;

		if (tenure_state_stale(key, id))
		{
			TenureSpi	spi;
			TenureRow	latest;
			TenureCarry carry;

			tenure_spi_begin(&spi);
			(void) tenure_load_committed(name, &latest, false, &carry);
			tenure_spi_end(&spi);
			tenure_load_entry(key, &latest, &carry);
		}
		check = tenure_state_alter_pin(key, id);
		if (check == TENURE_ALTER_OK)
			return;

		/*
		 * Its slot went to another lease meanwhile: load it again.  An entry
		 * that stays another lease's is one this transaction dropped while
		 * it was held; the drop ends that tenure when it commits.
		 */
		if (check == TENURE_ALTER_NO_ENTRY && attempt < 3)
			continue;
		if (lock_key_changes)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("cannot change the lock_key of lease \"%s\" while it is in use", name),
					 errdetail("The lease is held, or being acquired or handed over. The keeper holds the advisory lock of a tenure under the lease's lock_key; moving it could let a session's pg_try_advisory_lock() on the new key succeed while the holder still leads."),
					 errhint("Change the lock_key while nobody holds the lease, for instance right after tenure.release().")));
		else
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("cannot shorten the ttl of lease \"%s\" while it is in use", name),
					 errdetail("The lease is held, or being acquired or handed over. Its holder may act as leader until its last renewal plus the ttl it knows."),
					 errhint("Shorten the ttl while nobody holds the lease; a longer ttl applies at once.")));
	}
}

/*
 * tenure.alter_lease(lease, ttl, holdoff, lock_key, preferred, reset)
 *
 * Change a lease's settings without dropping it: each setting given (not
 * NULL) takes the value given, each one named in reset create_lease()'s
 * default, the others stay.  When they apply (doc/reference.md, "Changing a
 * lease"): a longer ttl at once, also to the current tenure; a hold-off to
 * tenures that start after the commit; a new lock_key and a shorter ttl
 * only while nobody holds the lease (55006 otherwise), so that no holder
 * ever leads under a ttl shorter than it knows, and a tenure's advisory
 * lock never moves to another key while it lasts.
 */
Datum
pg_tenure_alter_lease(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *preferred = PG_ARGISNULL(4) ? NULL :
		tenure_arg_text(fcinfo, 4, "preferred", TENURE_HOLDER_MAX);
	int			reset = tenure_arg_reset(fcinfo, 5);
	int64		ttl_us = 0;
	int64		holdoff_us = 0;
	TenureSpi	spi;
	TenureRow	row;
	TenureRow	altered;
	TenureKey	key;
	bool		lock_key_changes;
	bool		pinned;
	Datum		args[6];
	bool		nulls[6] = {false, false, false, false, false, false};

	if (!PG_ARGISNULL(1))
		ttl_us = tenure_arg_interval(fcinfo, 1, "ttl", false, TENURE_MAX_TTL_US);
	if (!PG_ARGISNULL(2))
		holdoff_us = tenure_arg_interval(fcinfo, 2, "holdoff", true, TENURE_MAX_HOLDOFF_US);
	tenure_arg_not_both(fcinfo, 1, reset, TENURE_RESET_TTL, "ttl");
	tenure_arg_not_both(fcinfo, 2, reset, TENURE_RESET_HOLDOFF, "holdoff");
	tenure_arg_not_both(fcinfo, 3, reset, TENURE_RESET_LOCK_KEY, "lock_key");
	tenure_arg_not_both(fcinfo, 4, reset, TENURE_RESET_PREFERRED, "preferred");
	tenure_require_changes(fcinfo);

	tenure_spi_begin(&spi);
	/*
	 * Locked until commit: drops, claims, new epochs and alters wait; what
	 * committed before we took the row is published, not "in use".
	 */
	tenure_load_row(name, &row, true);
	tenure_check_owner(name, row.owner, spi.save_userid);
	tenure_make_key(&key, MyDatabaseId, name);

	/* the settings the lease will have */
	altered = row;
	if (reset & TENURE_RESET_TTL)
		altered.ttl_us = TENURE_DEFAULT_TTL_US;
	else if (!PG_ARGISNULL(1))
		altered.ttl_us = ttl_us;
	if (reset & TENURE_RESET_HOLDOFF)
		altered.holdoff_us = -1;
	else if (!PG_ARGISNULL(2))
		altered.holdoff_us = holdoff_us;
	if (reset & TENURE_RESET_LOCK_KEY)
	{
		altered.has_lock_key = false;
		altered.lock_key = 0;
	}
	else if (!PG_ARGISNULL(3))
	{
		altered.has_lock_key = true;
		altered.lock_key = PG_GETARG_INT64(3);
	}
	lock_key_changes = altered.has_lock_key != row.has_lock_key ||
		(altered.has_lock_key && altered.lock_key != row.lock_key);

	if (lock_key_changes && altered.has_lock_key)
	{
		args[0] = Int64GetDatum(altered.lock_key);
		tenure_spi_exec("SELECT name FROM tenure.lease WHERE lock_key OPERATOR(pg_catalog.=) $1",
						"i", args, NULL, SPI_OK_SELECT);
		if (SPI_processed > 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("lock key " INT64_FORMAT " is already used by lease \"%s\"",
							altered.lock_key,
							SPI_getvalue(SPI_tuptable->vals[0],
										 SPI_tuptable->tupdesc, 1))));
	}

	/*
	 * A new lock_key or a shorter ttl: only while nobody uses the lease,
	 * and nobody starts to until we end.  Remembered first, so that an
	 * abort always unpins.
	 */
	pinned = lock_key_changes || altered.ttl_us < row.ttl_us;
	tenure_txn_remember_alter(&key, &altered, pinned);
	if (pinned)
		tenure_alter_pin(name, &key, row.id, lock_key_changes);

	args[0] = CStringGetTextDatum(name);
	args[1] = PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1);
	nulls[1] = PG_ARGISNULL(1);
	args[2] = PG_ARGISNULL(2) ? (Datum) 0 : PG_GETARG_DATUM(2);
	nulls[2] = PG_ARGISNULL(2);
	args[3] = PG_ARGISNULL(3) ? (Datum) 0 : PG_GETARG_DATUM(3);
	nulls[3] = PG_ARGISNULL(3);
	args[4] = preferred ? CStringGetTextDatum(preferred) : (Datum) 0;
	nulls[4] = (preferred == NULL);
	args[5] = Int64GetDatum((int64) reset);
	tenure_spi_exec("UPDATE tenure.lease SET"
					" ttl = CASE WHEN ($6 OPERATOR(pg_catalog.&) " CppAsString2(TENURE_RESET_TTL) ") OPERATOR(pg_catalog.<>) 0"
					"  THEN '15 s'::pg_catalog.interval ELSE COALESCE($2, ttl) END,"
					" holdoff = CASE WHEN ($6 OPERATOR(pg_catalog.&) " CppAsString2(TENURE_RESET_HOLDOFF) ") OPERATOR(pg_catalog.<>) 0"
					"  THEN NULL ELSE COALESCE($3, holdoff) END,"
					" lock_key = CASE WHEN ($6 OPERATOR(pg_catalog.&) " CppAsString2(TENURE_RESET_LOCK_KEY) ") OPERATOR(pg_catalog.<>) 0"
					"  THEN NULL ELSE COALESCE($4, lock_key) END,"
					" preferred = CASE WHEN ($6 OPERATOR(pg_catalog.&) " CppAsString2(TENURE_RESET_PREFERRED) ") OPERATOR(pg_catalog.<>) 0"
					"  THEN NULL ELSE COALESCE($5, preferred) END"
					" WHERE name OPERATOR(pg_catalog.=) $1",
					"tvviti", args, nulls, SPI_OK_UPDATE);

	/*
	 * The tenure that lasts knows the longer ttl from now on: so does its
	 * history row, which a lease created again under the name after a
	 * restart reads (catalog.c, tenure_carry_of()).
	 */
	if (altered.ttl_us > row.ttl_us)
		tenure_history_raise_ttl(name);
	tenure_spi_end(&spi);
	PG_RETURN_VOID();
}

/*
 * tenure.drop_lease(lease)
 */
Datum
pg_tenure_drop_lease(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	TenureSpi	spi;
	TenureRow	row;
	TenureKey	key;
	Datum		args[1];

	tenure_require_changes(fcinfo);

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
	tenure_history_close_now(name, TENURE_END_DROPPED, PG_INT64_MIN,
							 PG_INT64_MAX);
	tenure_spi_exec("DELETE FROM tenure.lease WHERE name OPERATOR(pg_catalog.=) $1",
					"t", args, NULL, SPI_OK_DELETE);
	tenure_spi_end(&spi);

	tenure_make_key(&key, MyDatabaseId, name);
	tenure_txn_remember(TENURE_ACT_DROP, &key, row.id, 0);
	PG_RETURN_VOID();
}

/*
 * Shared body of acquire and acquire_or_error: start or renew a tenure
 * (acquire.c) and announce a new one.  Returns the epoch, or 0 if the
 * lease is held by someone else (busy filled in).
 */
static int64
tenure_acquire_checked(FunctionCallInfo fcinfo, const char *name,
					   const char *holder, int64 wait_us, bool session_bound,
					   TenureBusy *busy)
{
	int64		epoch;
	bool		started;

	TenureKey	key;

	tenure_require_changes(fcinfo);
	tenure_make_key(&key, MyDatabaseId, name);
	tenure_txn_check_not_pinned(&key);
	epoch = tenure_acquire_lease(name, holder, wait_us, session_bound, busy,
								 &started);
	if (started)
		tenure_notify("acquired", name, holder, epoch);
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
pg_tenure_acquire(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	int64		wait_us = tenure_arg_interval(fcinfo, 2, "wait", true,
											  TENURE_MAX_WAIT_US);
	bool		session_bound;
	int64		epoch;
	TenureBusy	busy;

	tenure_arg_not_null(fcinfo, 3, "session_bound");
	session_bound = PG_GETARG_BOOL(3);

	epoch = tenure_acquire_checked(fcinfo, name, holder, wait_us,
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
pg_tenure_acquire_or_error(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	bool		session_bound;
	int64		epoch;
	TenureBusy	busy;

	tenure_arg_not_null(fcinfo, 2, "session_bound");
	session_bound = PG_GETARG_BOOL(2);

	epoch = tenure_acquire_checked(fcinfo, name, holder, 0, session_bound,
								   &busy);
	if (epoch != 0)
		PG_RETURN_INT64(epoch);

	if (busy.row_locked)
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("lease \"%s\" is being changed by another transaction", name),
				 errdetail("A transaction that claims, releases, hands over, drops or alters the lease has not ended yet.")));
	else if (busy.altering)
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_LEASE_HELD),
				 errmsg("lease \"%s\" is being altered", name),
				 errdetail("A transaction that changes its lock_key or shortens its ttl has not ended yet.")));
	else if (busy.foreign)
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
pg_tenure_renew(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	TenureKey	key;
	Oid			owner = InvalidOid;
	bool		result = false;
	int			attempt;

	tenure_require_changes(fcinfo);
	tenure_make_key(&key, MyDatabaseId, name);

	/*
	 * One pass under the lock when the caller is already known to act for
	 * the lease's owner; otherwise check the privilege (which may read the
	 * catalogs, so never under the lock) and come back once (twice if the
	 * tenure had to be loaded first).
	 */
	for (attempt = 0; attempt < 3; attempt++)
	{
		if (tenure_state_renew(&key, holder, tenure_known_owner(), &owner,
							   &result))
			break;

		if (!OidIsValid(owner))
		{
			TenureRow	row;

			/*
			 * Never held since server start: unknown lease, or simply free,
			 * or its tenure continues from before a promotion (come back
			 * once it is loaded)
			 */
			tenure_load_row(name, &row, false);
			tenure_check_owner(name, row.owner, GetUserId());
			if (attempt == 0 && tenure_ensure_continued(name, &key))
				continue;
			break;
		}
		tenure_check_owner(name, owner, GetUserId());
	}

	PG_RETURN_BOOL(result);
}

/*
 * The lease's key, for a call of its holder: the lease's entry is loaded
 * first if its tenure continues from before a promotion (src/README, P2),
 * so that the holder's release, claim or hand-off finds it.
 */
static void
tenure_key_of_holder(const char *name, TenureKey *key)
{
	tenure_make_key(key, MyDatabaseId, name);
	(void) tenure_ensure_continued(name, key);
}

/*
 * tenure.release(lease, holder) returns boolean
 *
 * Ends the holder's tenure when the transaction commits; the successor
 * needs no hold-off.  False if the holder does not hold the lease.
 */
Datum
pg_tenure_release(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	TenureRow	row;
	TenureKey	key;
	bool		holds;
	int64		epoch;

	tenure_require_changes(fcinfo);

	tenure_key_of_holder(name, &key);

	/*
	 * Locked until commit: a claim racing us re-checks after we are done; a
	 * handoff or claim that committed before we took the row is published.
	 */
	tenure_load_row(name, &row, true);
	tenure_check_owner(name, row.owner, GetUserId());

	tenure_make_key(&key, MyDatabaseId, name);
	tenure_txn_check_not_handed(&key, TENURE_ACT_RELEASE);
	epoch = tenure_state_held_epoch(&key, holder, NULL);
	holds = epoch != 0;

	if (holds)
	{
		/* the tenure's row, or the one of an epoch this transaction claimed */
		tenure_history_close_now(name, TENURE_END_RELEASED, epoch,
								 Max(epoch, tenure_txn_claimed_epoch(&key)));
		tenure_txn_remember(TENURE_ACT_RELEASE, &key, epoch, 0);
		tenure_notify("released", name, holder, epoch);
	}

	PG_RETURN_BOOL(holds);
}

/*
 * tenure.leader_is(lease, holder) returns boolean
 *
 * True iff holder holds a live, active tenure of the lease.  Answered from
 * shared memory alone.  Never true on a hot standby: replay brings the
 * primary's rows, not its tenures, and may lag it without bound, so no
 * client may lead on a standby's answer (doc/high-availability.md).
 */
Datum
pg_tenure_leader_is(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	TenureKey	key;

	tenure_require_loaded();
	if (RecoveryInProgress())
		PG_RETURN_BOOL(false);
	tenure_make_key(&key, MyDatabaseId, name);
	if (tenure_state_leads(&key, holder, tenure_mono_now()))
		PG_RETURN_BOOL(true);
	/* a tenure that a promotion continued, not loaded yet */
	PG_RETURN_BOOL(tenure_ensure_continued(name, &key) &&
				   tenure_state_leads(&key, holder, tenure_mono_now()));
}

/*
 * tenure.current_epoch(lease) returns bigint
 *
 * The lease's latest epoch, from its durable row.  On a hot standby, the
 * latest epoch replay has brought: the primary's as of
 * pg_last_xact_replay_timestamp() (tenure.leases.as_of), perhaps behind
 * it by the replay lag.
 */
Datum
pg_tenure_current_epoch(PG_FUNCTION_ARGS)
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
	return tenure_state_held_epoch(key, holder, session_bound) != 0;
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
 * The current holder starts a new epoch within its tenure.  It is never
 * issued again, also if a crash loses the transaction (epoch.c).  The
 * claim commits only if the holder's tenure is still live at COMMIT
 * (txn.c checks at PRE_COMMIT).
 */
Datum
pg_tenure_claim_epoch(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	TenureSpi	spi;
	TenureRow	row;
	TenureKey	key;
	bool		session_bound = false;
	int64		epoch;
	int64		held;

	tenure_require_changes(fcinfo);

	tenure_key_of_holder(name, &key);

	tenure_spi_begin(&spi);
	tenure_load_row(name, &row, false);
	tenure_check_owner(name, row.owner, spi.save_userid);

	tenure_make_key(&key, MyDatabaseId, name);
	tenure_txn_check_not_handed(&key, TENURE_ACT_CLAIM);
	if (!tenure_holds(&key, holder, &session_bound))
		tenure_not_holder(name, holder);

	/*
	 * tenure_issue_epoch() takes the row and waits until every transaction
	 * that changed it before is published (another claim, a handoff, a new
	 * tenure: each may have let go of the row before its COMMIT callback
	 * ran), so the tenure's epoch is the one PRE_COMMIT expects it still to
	 * have; a release published later fails our check there, as it must.
	 */
	epoch = tenure_issue_epoch(name, tenure_state_cached_epoch(&key), NULL);
	held = tenure_state_held_epoch(&key, holder, &session_bound);
	if (held == 0)
		tenure_not_holder(name, holder);

	tenure_history_close_now(name, TENURE_END_CLAIMED, PG_INT64_MIN,
							 PG_INT64_MAX);
	tenure_history_start(name, epoch, holder, session_bound);
	tenure_spi_end(&spi);

	tenure_txn_remember_claim(&key, epoch, held, holder);
	tenure_notify("claimed", name, holder, epoch);
	PG_RETURN_INT64(epoch);
}

/*
 * tenure.handoff(lease, holder, successor) returns bigint
 *
 * The holder ends its tenure and, in the same transaction, successor,
 * which must be waiting in tenure.acquire(lease, successor, wait => ...)
 * both now and when the transaction commits, receives a new tenure with a
 * new epoch (returned), session-bound if its acquire asked for it, active
 * at once: the predecessor gave up explicitly.  Like a claim, the new epoch
 * fences the holder's tokens, and the fence lock is taken at COMMIT.
 * Anything short of that is an error, and nothing changes.
 */
Datum
pg_tenure_handoff(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *holder = tenure_arg_text(fcinfo, 1, "holder", TENURE_HOLDER_MAX);
	char	   *successor = tenure_arg_text(fcinfo, 2, "successor", TENURE_HOLDER_MAX);
	TenureSpi	spi;
	TenureRow	row;
	TenureKey	key;
	int64		old_epoch = 0;
	int64		epoch = 0;
	bool		session_bound = false;
	TenureHandoffCheck check;

	tenure_require_changes(fcinfo);
	if (strcmp(holder, successor) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot hand lease \"%s\" over to its own holder \"%s\"",
						name, holder)));

	tenure_key_of_holder(name, &key);

	tenure_spi_begin(&spi);
	tenure_load_row(name, &row, false);
	tenure_check_owner(name, row.owner, spi.save_userid);
	tenure_make_key(&key, MyDatabaseId, name);
	tenure_txn_check_not_handed(&key, TENURE_ACT_HANDOFF);

	/* checked before and after the epoch's row lock, like a claim */
	for (int pass = 0; pass < 2; pass++)
	{
		check = tenure_state_handoff_check(&key, holder, successor,
										   &old_epoch, &session_bound);
		tenure_txn_handoff_refused(check, name, holder, successor, false);
		if (pass == 0)
			epoch = tenure_issue_epoch(name, tenure_state_cached_epoch(&key), NULL);
	}

	/*
	 * The holder's tenure ends at its latest epoch: old_epoch, or one this
	 * transaction claimed (published only at COMMIT, so not old_epoch).
	 */
	tenure_history_close_now(name, TENURE_END_HANDED, PG_INT64_MIN,
							 Max(old_epoch, tenure_txn_claimed_epoch(&key)));
	tenure_history_start(name, epoch, successor, session_bound);
	tenure_spi_end(&spi);

	tenure_txn_remember_handoff(&key, epoch, old_epoch, holder, successor,
								session_bound);
	tenure_notify("handed over", name, successor, epoch);
	PG_RETURN_INT64(epoch);
}

/*
 * tenure.set_preferred(lease, preferred) returns void
 *
 * Name the holder the lease should go to when it campaigns (NULL: none).
 * pg_tenure records it for clients (tenure.leases); a holder that sees the
 * preferred holder waiting (tenure.waiters) hands the lease over with
 * tenure.handoff().
 */
Datum
pg_tenure_set_preferred(PG_FUNCTION_ARGS)
{
	char	   *name = tenure_arg_lease(fcinfo, 0);
	char	   *preferred = PG_ARGISNULL(1) ? NULL :
		tenure_arg_text(fcinfo, 1, "preferred", TENURE_HOLDER_MAX);
	TenureSpi	spi;
	TenureRow	row;
	Datum		args[2];
	bool		nulls[2] = {false, false};

	tenure_require_changes(fcinfo);

	tenure_spi_begin(&spi);
	tenure_load_row(name, &row, true);
	tenure_check_owner(name, row.owner, spi.save_userid);
	args[0] = CStringGetTextDatum(name);
	args[1] = preferred ? CStringGetTextDatum(preferred) : (Datum) 0;
	nulls[1] = (preferred == NULL);
	tenure_spi_exec("UPDATE tenure.lease SET preferred = $2"
					" WHERE name OPERATOR(pg_catalog.=) $1",
					"tt", args, nulls, SPI_OK_UPDATE);
	tenure_spi_end(&spi);
	PG_RETURN_VOID();
}
