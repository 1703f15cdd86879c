/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		The durable side of leases: statements run as the owner of
 *		pg_tenure's tables, a lease's row and its owner's rights, and
 *		building a lease's shared-memory entry from its row.  Epochs are
 *		issued by epoch.c, and tenure.history is written by history_rows.c,
 *		both through the SPI session opened here.
 *
 * The statements here run inside an SPI session opened by
 * tenure_spi_begin(), which becomes the owner of tenure.lease (the owner of
 * all of the extension's tables) and pins search_path to pg_catalog, so
 * that nothing in these statements resolves through the caller's
 * search_path.  Callers check the caller's rights first
 * (tenure_check_owner()).
 *
 * A lease's entry in shared memory (state.c) is built from its latest
 * committed row, read with a fresh snapshot, never from the caller's
 * (tenure_ensure_entry(), tenure_load_entry()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"
#include "state.h"
#include "objects.h"
#include "catalog.h"
#include "history.h"
#include "args.h"
#include "promotion.h"

static void tenure_carry_of(const char *name, const TenureRow *row,
							TenureCarry *carry, int64 *ttl_us);
static TenurePromotion tenure_carry_promotion(void);
/* What tenure_carry_chain() finds in a lease's history. */
typedef struct TenureChain
{
	int64		ttl_us;			/* longest ttl of a holder who may believe */
	bool		surely_active;	/* the latest tenure was surely active */
} TenureChain;

static void tenure_carry_chain(const char *name, int64 epoch,
							   TenureChain *chain);
static bool tenure_carry_continues(const TenureRow *row,
								   const TenureChain *chain,
								   TenureCarry *carry);

/*
 * Connect to SPI and become the extension's owner, which owns the
 * extension's tables, after checking that they are what the extension
 * installed (objects.c): the statements run through this session name
 * them schema-qualified, and only a superuser can change what those names
 * resolve to.
 */
void
tenure_spi_begin(TenureSpi *spi)
{
	const TenureObjects *objs = tenure_objects(false);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	GetUserIdAndSecContext(&spi->save_userid, &spi->save_sec_context);
	SetUserIdAndSecContext(objs->owner, spi->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);

	/* never resolve anything through the caller's search_path */
	spi->guc_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * Leave SPI and become the caller again.
 */
void
tenure_spi_end(TenureSpi *spi)
{
	AtEOXact_GUC(true, spi->guc_nestlevel);
	SetUserIdAndSecContext(spi->save_userid, spi->save_sec_context);
	SPI_finish();
}

/* the most arguments a statement run through tenure_spi_exec() takes */
#define TENURE_SPI_MAX_ARGS		16

/*
 * Statements run through tenure_spi_exec() are prepared once per backend
 * and kept (SPI_keepplan), keyed by their text: parsing and planning cost
 * more than running most of them.  The plan cache replans a kept plan
 * when a table it uses changes, also when the extension is dropped and
 * created again.  Every statement names its objects schema-qualified and
 * runs under the same search_path (tenure_spi_begin()).
 */
typedef struct TenureStmtEntry
{
	const char *sql;			/* key: the statement's text (a copy) */
	SPIPlanPtr	plan;
	char		types[TENURE_SPI_MAX_ARGS + 1];
} TenureStmtEntry;

static HTAB *tenure_stmts = NULL;

static uint32
tenure_stmt_hash(const void *key, Size keysize)
{
	return string_hash(*(const char *const *) key, strlen(*(const char *const *) key) + 1);
}

static int
tenure_stmt_match(const void *key1, const void *key2, Size keysize)
{
	return strcmp(*(const char *const *) key1, *(const char *const *) key2);
}

static Oid
tenure_spi_type(char t)
{
	switch (t)
	{
		case 't':
			return TEXTOID;
		case 'i':
			return INT8OID;
		case 'b':
			return BOOLOID;
		case 'z':
			return TIMESTAMPTZOID;
		case 'v':
			return INTERVALOID;
		case 'o':
			return OIDOID;
		case 'O':
			return OIDARRAYOID;
		case 'I':
			return INT8ARRAYOID;
	}
	elog(ERROR, "unknown SPI argument type %c", t);
	return InvalidOid;			/* keep compiler quiet */
}

/*
 * The plan of one statement, prepared on first use and kept for the
 * session, keyed by its text.  types holds one letter per argument: 't'
 * text, 'i' bigint, 'b' boolean, 'z' timestamptz, 'v' interval, 'o' oid,
 * 'O' oid[], 'I' bigint[].  Inside an SPI session.
 */
SPIPlanPtr
tenure_spi_plan(const char *sql, const char *types)
{
	int			nargs = strlen(types);
	TenureStmtEntry *stmt;
	bool		found;
	int			i;

	Assert(nargs <= TENURE_SPI_MAX_ARGS);
	if (tenure_stmts == NULL)
	{
		HASHCTL		info;

		memset(&info, 0, sizeof(info));
		info.keysize = sizeof(const char *);
		info.entrysize = sizeof(TenureStmtEntry);
		info.hash = tenure_stmt_hash;
		info.match = tenure_stmt_match;
		info.hcxt = TopMemoryContext;
		tenure_stmts = hash_create("pg_tenure statements", 64, &info,
								   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE |
								   HASH_CONTEXT);
	}
	stmt = hash_search(tenure_stmts, &sql, HASH_FIND, NULL);
	if (stmt == NULL)
	{
		/* the key is a copy made before the entry exists: nothing half-made */
		const char *copy = MemoryContextStrdup(TopMemoryContext, sql);

		stmt = hash_search(tenure_stmts, &copy, HASH_ENTER, &found);
		Assert(!found);
		stmt->plan = NULL;
		strlcpy(stmt->types, types, sizeof(stmt->types));
	}
	Assert(strcmp(stmt->types, types) == 0);
	if (stmt->plan == NULL)
	{
		Oid			argtypes[TENURE_SPI_MAX_ARGS];
		SPIPlanPtr	plan;

		for (i = 0; i < nargs; i++)
			argtypes[i] = tenure_spi_type(types[i]);
		plan = SPI_prepare(sql, nargs, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
				 SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		stmt->plan = plan;
	}
	return stmt->plan;
}

/*
 * Run one statement with arguments (types as for tenure_spi_plan()); a
 * NULL value is passed as SQL NULL.  Returns SPI_processed.
 */
uint64
tenure_spi_exec(const char *sql, const char *types, Datum *values,
				const bool *isnull, int expected)
{
	int			nargs = strlen(types);
	char		nulls[TENURE_SPI_MAX_ARGS] = {0};
	SPIPlanPtr	plan = tenure_spi_plan(sql, types);
	int			rc;
	int			i;

	for (i = 0; i < nargs; i++)
		nulls[i] = (isnull != NULL && isnull[i]) ? 'n' : ' ';
	rc = SPI_execute_plan(plan, values, nulls, false, 0);
	if (rc != expected)
		elog(ERROR, "SPI_execute_plan returned %d for \"%s\"", rc, sql);
	return SPI_processed;
}

/*
 * Fetch bigint column col (1-based) of row 0 of the last SPI result.
 */
int64
tenure_spi_int8(int col, bool *isnull)
{
	Datum		d;
	bool		n;

	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &n);
	if (isnull)
		*isnull = n;
	return n ? 0 : DatumGetInt64(d);
}

/* The columns of a lease's row that TenureRow holds, in its order. */
#define TENURE_ROW_COLUMNS \
	"SELECT id, owner::pg_catalog.oid::pg_catalog.int8," \
	" ttl, holdoff," \
	" lock_key, epoch, fence_lock::pg_catalog.int8," \
	" xmin::pg_catalog.text::pg_catalog.int8" \
	" FROM tenure.lease WHERE name OPERATOR(pg_catalog.=) $1"

/*
 * Read interval column col (1-based) of row 0 of the last SPI result in
 * microseconds, converted as arguments are (tenure_interval_us()).  False
 * if it is null or outside min_us .. max_us; then the value, as text, is in
 * row->bad_value unless a value before it was bad already.
 */
static bool
tenure_spi_interval(int col, TenureRow *row, const char *setting,
					int64 min_us, int64 max_us, int64 *us)
{
	Datum		d;
	bool		isnull;

	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col,
					  &isnull);
	if (!isnull &&
		tenure_interval_us(DatumGetIntervalP(d), min_us, max_us, us) ==
		TENURE_INTERVAL_OK)
		return true;
	if (row->bad_setting == NULL)
	{
		row->bad_setting = setting;
		strlcpy(row->bad_value,
				isnull ? "NULL" :
				DatumGetCString(DirectFunctionCall1(interval_out, d)),
				sizeof(row->bad_value));
	}
	return false;
}

/*
 * Fill row from the first row of the last SPI result (TENURE_ROW_COLUMNS).
 * A ttl or hold-off out of bounds does not fail here: whoever only reads
 * the lease's epoch or drops it does not need them (tenure_load_entry()
 * refuses it).
 */
static void
tenure_row_from_spi(const char *name, TenureRow *row)
{
	bool		isnull;

	row->id = tenure_spi_int8(1, NULL);
	row->owner = (Oid) tenure_spi_int8(2, NULL);
	row->bad_setting = NULL;
	row->bad_value[0] = '\0';
	if (!tenure_spi_interval(3, row, "ttl", 1, TENURE_MAX_TTL_US,
							 &row->ttl_us))
		row->ttl_us = -1;
	(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4,
						 &isnull);
	if (isnull ||
		!tenure_spi_interval(4, row, "holdoff", 0, TENURE_MAX_HOLDOFF_US,
							 &row->holdoff_us))
		row->holdoff_us = -1;
	row->lock_key = tenure_spi_int8(5, &isnull);
	row->has_lock_key = !isnull;
	row->epoch = tenure_spi_int8(6, NULL);
	row->fence_lock = (int) tenure_spi_int8(7, NULL);
	row->own = TransactionIdIsCurrentTransactionId((TransactionId)
												   tenure_spi_int8(8, NULL));
	row->restart_ttl_us = row->ttl_us;
	row->settings_gen = 0;		/* never current: see tenure_load_committed() */
	if (row->fence_lock < 0 || row->fence_lock >= TENURE_FENCE_LOCKS)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("lease \"%s\" has an invalid fence_lock %d", name,
						row->fence_lock),
				 errdetail("tenure.lease.fence_lock must be between 0 and %d.",
						   TENURE_FENCE_LOCKS - 1)));
}

/*
 * Raise 42704 for an unknown lease.
 */
static void
tenure_no_such_lease(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("lease \"%s\" does not exist", name),
			 errhint("Create it with tenure.create_lease().")));
}

/*
 * Load a lease's row as the caller's transaction sees it; inside an SPI
 * session.  Fails with 42704 if there is no such lease.  for_update locks
 * the row.  Never build a shared entry from this row: under REPEATABLE
 * READ it may be older than the catalog (tenure_load_committed).
 */
void
tenure_load_row(const char *name, TenureRow *row, bool for_update)
{
	Datum		args[1];

	args[0] = CStringGetTextDatum(name);
	tenure_spi_exec(for_update ? TENURE_ROW_COLUMNS " FOR UPDATE" :
					TENURE_ROW_COLUMNS,
					"t", args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		tenure_no_such_lease(name);
	tenure_row_from_spi(name, row);
}

/*
 * Load a lease's row for building its shared entry: its latest committed
 * state, plus what this very transaction changed (an MVCC snapshot taken
 * now sees the transaction's own earlier commands), whatever the
 * transaction's snapshot is.  Shared memory outlives the transaction, so
 * it must never be built from a REPEATABLE READ snapshot that predates a
 * drop and re-creation of the lease.  Also sets *carry (see
 * tenure_carry_of()) and row->restart_ttl_us from the same
 * snapshot, and row->settings_gen from before it (state.c).  Inside an
 * SPI session.  Returns false for an unknown lease if missing_ok, else
 * fails with 42704.
 */
bool
tenure_load_committed(const char *name, TenureRow *row, bool missing_ok,
					  TenureCarry *carry)
{
	Datum		args[1];
	Oid			argtypes[1] = {TEXTOID};
	int			rc;

	uint64		gen;
	int64		history_ttl_us = 0;

	args[0] = CStringGetTextDatum(name);

	/* before the snapshot: an alter_lease it misses raised it since */
	gen = tenure_state_settings_gen();

	/*
	 * A read-only SPI statement runs under the active snapshot instead of
	 * taking the transaction snapshot.
	 */
	PushActiveSnapshot(GetLatestSnapshot());
	rc = SPI_execute_with_args(TENURE_ROW_COLUMNS, 1, argtypes, args, NULL,
							   true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_with_args returned %d for a lease row", rc);
	if (SPI_processed == 0)
	{
		PopActiveSnapshot();
		if (missing_ok)
			return false;
		tenure_no_such_lease(name);
	}
	tenure_row_from_spi(name, row);
	row->settings_gen = gen;
	if (carry != NULL)
		tenure_carry_of(name, row, carry, &history_ttl_us);
	row->restart_ttl_us = Max(row->ttl_us, history_ttl_us);
	PopActiveSnapshot();
	return true;
}

/*
 * What a lease's entry carries over from before this server became ready
 * to hold tenures (a crash, restart or promotion; see TenureCarry):
 *
 * - CONTINUED: this server was promoted in this run after replaying the
 *   old primary's shutdown checkpoint (promotion.c), and the lease's
 *   latest tenure, not session-bound, is open in the history, issued by
 *   this cluster and left open by an earlier server (its open_tli, where
 *   its epoch was issued or the last promotion it continued through, is
 *   not ours), or already made this server's by history_rows.c (open_tli
 *   ours, the boot_id this server's, the epoch issued earlier), and the
 *   old primary's keeper listed it as live as it exited: it continues
 *   (src/README, P2, P5).
 * - RESTART or PROMOTED: a holder may still believe it holds the lease:
 *   its latest tenure was open when the earlier server went down, or was
 *   dropped with its lease since (the name's lease was created again), or
 *   its latest epoch was issued on another timeline or cluster, whose last
 *   commits this server may never have received.  Such a holder believes
 *   at most until the time this server became ready plus the ttl it knew
 *   (H2); PROMOTED when this server was promoted in this run without the
 *   proof, whose old primary may go on serving it (P3).
 *
 * *ttl_us is the longest ttl any holder who may still believe knew (see
 * tenure_carry_chain(); 0 if the history is empty), which the caller takes
 * if it exceeds the lease's.  Inside an SPI
 * session, under the snapshot tenure_load_committed() pushed.
 */
#define TENURE_CARRY_QUERY \
	"SELECT EXISTS (SELECT FROM (SELECT ended, end_reason, boot_id" \
	"   FROM tenure.history WHERE lease OPERATOR(pg_catalog.=) $1" \
	"   ORDER BY epoch DESC LIMIT 1) h" \
	"  WHERE (h.ended IS NULL OR h.end_reason OPERATOR(pg_catalog.=) ANY (ARRAY[$5, $6, $7]))" \
	"  AND h.boot_id OPERATOR(pg_catalog.<>) $2)" \
	" OR EXISTS (SELECT FROM tenure.lease l" \
	"  WHERE l.name OPERATOR(pg_catalog.=) $1 AND CASE" \
	"   WHEN l.issued_sysid IS NULL THEN $4 OPERATOR(pg_catalog.>) 1" \
	"   ELSE l.issued_sysid OPERATOR(pg_catalog.<>) $3" \
	"    OR l.issued_tli OPERATOR(pg_catalog.<>) $4 END)," \
	" h.ended IS NULL AND NOT h.session_bound" \
	"  AND h.issued_sysid OPERATOR(pg_catalog.=) $3" \
	"  AND (COALESCE(h.open_tli, h.issued_tli) OPERATOR(pg_catalog.<>) $4" \
	"   OR (h.issued_tli OPERATOR(pg_catalog.<>) $4 AND h.boot_id OPERATOR(pg_catalog.=) $2))," \
	" h.holder, h.epoch, h.started" \
	" FROM (SELECT) one LEFT JOIN LATERAL (SELECT * FROM tenure.history" \
	"  WHERE lease OPERATOR(pg_catalog.=) $1 ORDER BY epoch DESC LIMIT 1) h ON true"

static void
tenure_carry_of(const char *name, const TenureRow *row, TenureCarry *carry,
				int64 *ttl_us)
{
	Datum		args[7];
	Oid			argtypes[7] = {TEXTOID, INT8OID, INT8OID, INT8OID,
		TEXTOID, TEXTOID, TEXTOID};
	bool		isnull;
	bool		candidate;
	bool		in_recovery = RecoveryInProgress();
	TenureChain chain;
	int			rc;
	Datum		d;

	args[0] = CStringGetTextDatum(name);
	args[1] = Int64GetDatum(tenure_boot_id());
	args[2] = Int64GetDatum((int64) GetSystemIdentifier());
	args[3] = Int64GetDatum(in_recovery ? 0 : (int64) GetWALInsertionTimeLine());
	args[4] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_RESTARTED));
	args[5] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_PROMOTED));
	args[6] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_DROPPED));
	rc = SPI_execute_with_args(TENURE_CARRY_QUERY, 7, argtypes, args, NULL,
							   true, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "SPI_execute_with_args returned %d for a lease's history", rc);

	memset(carry, 0, sizeof(TenureCarry));
	*ttl_us = 0;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	carry->kind = (!isnull && DatumGetBool(d)) ?
		TENURE_CARRY_RESTART : TENURE_CARRY_NONE;
	if (carry->kind == TENURE_CARRY_NONE)
	{
		/* a holder released into a bound that a restart forgot (P3) */
		if (!in_recovery && tenure_carry_promotion() == TENURE_PROMOTION_NONE &&
			tenure_promotion_recent(tenure_ready_time()))
			carry->kind = TENURE_CARRY_PROMOTED;
		return;
	}
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	candidate = !isnull && DatumGetBool(d);
	carry->epoch = tenure_spi_int8(4, &isnull);
	memset(&chain, 0, sizeof(chain));
	if (!isnull)
	{
		strlcpy(carry->holder,
				SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3),
				sizeof(carry->holder));
		carry->started = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc,
														   5, &isnull));

		/* the holders who may still believe, and the longest ttl they knew */
		tenure_carry_chain(name, carry->epoch, &chain);
		*ttl_us = chain.ttl_us;
	}
	if (in_recovery)
		return;

	switch (tenure_carry_promotion())
	{
		case TENURE_PROMOTION_KEPT:
			if (candidate && tenure_carry_continues(row, &chain, carry))
				carry->kind = TENURE_CARRY_CONTINUED;
			break;
		case TENURE_PROMOTION_LOST:
			carry->kind = TENURE_CARRY_PROMOTED;
			break;
		case TENURE_PROMOTION_NONE:
			/* a restart soon after a promotion keeps its bound (P3) */
			if (tenure_promotion_recent(tenure_ready_time()))
				carry->kind = TENURE_CARRY_PROMOTED;
			break;
		default:
			break;
	}
}

/*
 * What the promotion of this server kept (promotion.c), waiting for the
 * keeper to find out at most as long as for any answer of the keeper:
 * every carry depends on it, a tenure that may continue (P2) as much as
 * the bound of one that may not (P3).
 */
static TenurePromotion
tenure_carry_promotion(void)
{
	int64		deadline = tenure_mono_now() + TENURE_KEEPER_WAIT_US;
	TenurePromotion state;

	while ((state = tenure_promotion_state(NULL)) == TENURE_PROMOTION_UNKNOWN)
	{
		if (tenure_mono_now() >= deadline)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("pg_tenure is not ready to hold tenures yet"),
					 errdetail("Its keeper has not started since the server started or was promoted."),
					 errhint("Try again; see the server log if this lasts.")));
		tenure_wake_keeper();
		tenure_state_prepare_wait();
		(void) tenure_state_wait(10);
		tenure_state_cancel_wait();
		CHECK_FOR_INTERRUPTS();
	}
	return state;
}

/*
 * Whether the latest tenure, whose row tenure_carry_of() read into carry,
 * continues: its epoch is the lease's latest and it was open on the
 * timeline the promotion left, or is already this server's (history_rows.c
 * made it so) (src/README, P2), and the old primary's keeper listed it as
 * live when it exited (P5).  Active at once if it surely was on the
 * old primary: a fixed hold-off of 0, or the automatic one and no earlier
 * holder who may still believe (the chain).
 */
static bool
tenure_carry_continues(const TenureRow *row, const TenureChain *chain,
					   TenureCarry *carry)
{
	if (carry->epoch != row->epoch ||
		!tenure_promotion_listed(MyDatabaseId, carry->epoch))
		return false;
	/* a fixed hold-off makes every tenure wait it out from its start */
	if (row->holdoff_us >= 0)
		carry->active = row->holdoff_us == 0;
	else
		carry->active = chain->surely_active;
	return true;
}

/*
 * The holders of a lease who may still believe in a tenure: the holder of
 * its latest tenure (epoch) and, back through releases and hand-overs
 * (a successor inherits the bound its predecessor was still waiting out)
 * and claims (the same tenure), the first earlier holder whose tenure ended
 * otherwise.  The chain gives the longest ttl they knew (each history row
 * keeps its tenure's, raised by alter_lease while it lasted), and whether
 * the latest tenure was surely active: the chain ends with no earlier
 * tenure, or with one that expired (its belief had ended when the next
 * tenure started).  Followed 32 rows back at most; beyond, not surely
 * active.  Inside the SPI session of tenure_carry_of().
 */
#define TENURE_CARRY_CHAIN_QUERY \
	"WITH RECURSIVE c (epoch, reason, ttl, depth) AS (" \
	" SELECT epoch, NULL::pg_catalog.text, ttl, 0 FROM tenure.history" \
	"  WHERE lease OPERATOR(pg_catalog.=) $1 AND epoch OPERATOR(pg_catalog.=) $2" \
	" UNION ALL" \
	" SELECT p.epoch, p.end_reason, p.ttl, c.depth OPERATOR(pg_catalog.+) 1" \
	" FROM c CROSS JOIN LATERAL (SELECT epoch, end_reason, ttl FROM tenure.history" \
	"  WHERE lease OPERATOR(pg_catalog.=) $1 AND epoch OPERATOR(pg_catalog.<) c.epoch" \
	"  ORDER BY epoch DESC LIMIT 1) p" \
	" WHERE c.depth OPERATOR(pg_catalog.<) 32" \
	"  AND (c.depth OPERATOR(pg_catalog.=) 0 OR c.reason OPERATOR(pg_catalog.=) ANY ($3)))" \
	"SELECT (SELECT reason FROM c ORDER BY depth DESC LIMIT 1)," \
	" (SELECT max(depth) FROM c)," \
	" (SELECT (EXTRACT(epoch FROM max(ttl)) OPERATOR(pg_catalog.*) 1000000)::pg_catalog.int8 FROM c)"

static void
tenure_carry_chain(const char *name, int64 epoch, TenureChain *chain)
{
	Datum		args[3];
	Oid			argtypes[3] = {TEXTOID, INT8OID, TEXTARRAYOID};
	Datum		through[3];
	bool		isnull;
	char	   *reason;
	int32		depth;
	int			rc;

	through[0] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_RELEASED));
	through[1] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_HANDED));
	through[2] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_CLAIMED));
	args[0] = CStringGetTextDatum(name);
	args[1] = Int64GetDatum(epoch);
	args[2] = PointerGetDatum(construct_array(through, 3, TEXTOID, -1, false,
											  TYPALIGN_INT));
	rc = SPI_execute_with_args(TENURE_CARRY_CHAIN_QUERY, 3, argtypes, args,
							   NULL, true, 0);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "SPI_execute_with_args returned %d for a lease's history", rc);
	reason = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	depth = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
										SPI_tuptable->tupdesc, 2, &isnull));
	chain->ttl_us = tenure_spi_int8(3, &isnull);
	if (isnull)
		chain->ttl_us = 0;
	if (reason == NULL)
		chain->surely_active = true;	/* no earlier tenure */
	else if (strcmp(reason, tenure_end_reason_text(TENURE_END_EXPIRED)) == 0)
		chain->surely_active = true;
	else
		/* the lease's first tenure, reached through releases */
		chain->surely_active = depth < 32 &&
			(strcmp(reason, tenure_end_reason_text(TENURE_END_RELEASED)) == 0 ||
			 strcmp(reason, tenure_end_reason_text(TENURE_END_HANDED)) == 0 ||
			 strcmp(reason, tenure_end_reason_text(TENURE_END_CLAIMED)) == 0);
}

/*
 * The last (caller, owner) pair found to pass tenure_check_owner(); reset
 * whenever roles or role memberships change.  Lets renew check rights
 * without a catalog lookup: tenure_state_renew() is told which owner the
 * caller is known to act for.
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
 * The owner whose privileges the current user is known to have, without
 * looking at the catalogs; InvalidOid if none is known.
 */
Oid
tenure_known_owner(void)
{
	return GetUserId() == tenure_acting_user ? tenure_acting_owner : InvalidOid;
}

/*
 * At library load: register the cache callbacks (registering later could
 * find the callback slots taken, which is FATAL).
 */
void
tenure_catalog_init(void)
{
	CacheRegisterSyscacheCallback(AUTHOID, tenure_acting_reset, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, tenure_acting_reset, (Datum) 0);
}

/*
 * Fail with 42501 unless the caller has the privileges of the lease's
 * owner.  Inside an SPI session the current user is the tables' owner:
 * pass spi.save_userid there.
 */
void
tenure_check_owner(const char *name, Oid owner, Oid caller)
{
	if (caller == tenure_acting_user && owner == tenure_acting_owner)
		return;
	if (!has_privs_of_role(caller, owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for lease \"%s\"", name),
				 errdetail("Only roles with the privileges of role \"%s\" may acquire, renew, release, claim, hand over, alter or drop it, or fence tables by it.",
						   GetUserNameFromId(owner, true) ?
						   GetUserNameFromId(owner, true) : "?")));
	tenure_acting_user = caller;
	tenure_acting_owner = owner;
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
	TenureCarry carry;

	if (!tenure_state_stale(key, 0))
		return;
	tenure_spi_begin(&spi);
	(void) tenure_load_committed(name, &row, false, &carry);
	tenure_spi_end(&spi);
	tenure_load_entry(key, &row, &carry);
}

/*
 * After a promotion that kept every transaction (promotion.c), bring the
 * lease into shared memory if it is not there and its tenure continues
 * (src/README, P2), so that its holder's renew and leader_is find it.
 * Returns whether it loaded the entry.  Nothing to do (and no catalog
 * access) otherwise, or for an unknown lease; until the keeper has found
 * out what a promotion kept, the lease's row is read to see whether it
 * has to wait for that.  Runs its own SPI session.
 */
bool
tenure_ensure_continued(const char *name, const TenureKey *key)
{
	TenureSpi	spi;
	TenureRow	row;
	TenureCarry carry;
	bool		exists;
	TenurePromotion state = tenure_promotion_state(NULL);

	/* (not known yet right after a start: the load waits for it) */
	if ((state != TENURE_PROMOTION_KEPT && state != TENURE_PROMOTION_UNKNOWN) ||
		RecoveryInProgress() || !tenure_state_stale(key, 0))
		return false;
	tenure_spi_begin(&spi);
	exists = tenure_load_committed(name, &row, true, &carry);
	tenure_spi_end(&spi);
	if (!exists || carry.kind != TENURE_CARRY_CONTINUED)
		return false;
	tenure_load_entry(key, &row, &carry);
	return true;
}

/*
 * Find the lease's shared entry, creating it from its row if needed; row
 * comes from tenure_load_committed(), and is read again if an alter_lease
 * committed since (state.c).  Fails with 53400 when the table is full of
 * leases in use; returns without an entry if the lease is gone.
 * carry: see tenure_load_committed(); applied when the entry is built.
 */
void
tenure_load_entry(const TenureKey *key, const TenureRow *row,
				  const TenureCarry *carry)
{
	int64		now = tenure_mono_now();
	int64		deadline = now + TENURE_KEEPER_WAIT_US;
	TenureLoadResult r;
	TenureRow	again;
	TenureCarry carry_again;

	/*
	 * Shared memory adds the ttl and hold-off to monotonic times: a value
	 * out of bounds never gets there.  The lease stays readable and can be
	 * dropped, and created again with its epochs continued.
	 */
	if (row->bad_setting != NULL)
	{
		char		bound[TENURE_BOUND_TEXT_MAX];

		if (strcmp(row->bad_setting, "ttl") == 0)
		{
			tenure_bound_text(TENURE_MAX_TTL_US, bound);
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("lease \"%s\" has an invalid ttl", key->name),
					 errdetail("Its ttl in tenure.lease is %s; a ttl must be greater than zero and at most %s, in days, hours, minutes or seconds.",
							   row->bad_value, bound),
					 errhint("Drop the lease with tenure.drop_lease() and create it again; its epochs continue.")));
		}
		else
		{
			tenure_bound_text(TENURE_MAX_HOLDOFF_US, bound);
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("lease \"%s\" has an invalid hold-off", key->name),
					 errdetail("Its holdoff in tenure.lease is %s; a hold-off must be NULL or between 0 and %s, in days, hours, minutes or seconds.",
							   row->bad_value, bound),
					 errhint("Drop the lease with tenure.drop_lease() and create it again; its epochs continue.")));
		}
	}

	for (;;)
	{
		r = tenure_state_load(key, row, carry, now);
		if (r == TENURE_LOAD_RETRY)
		{
			TenureSpi	spi;
			bool		exists;

			/* an alter_lease committed since the row was read: read it again */
			tenure_spi_begin(&spi);
			exists = tenure_load_committed(key->name, &again, true,
										   &carry_again);
			tenure_spi_end(&spi);
			if (!exists)
				return;			/* dropped meanwhile: the caller finds out */
			row = &again;
			carry = &carry_again;
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		if (r != TENURE_LOAD_SOON || now >= deadline)
			break;

		/* a lease was just released: the keeper is letting its lock go */
		tenure_wake_keeper();
		tenure_state_prepare_wait();
		(void) tenure_state_wait(10);
		tenure_state_cancel_wait();
		CHECK_FOR_INTERRUPTS();
		now = tenure_mono_now();
	}
	if (r != TENURE_LOAD_DONE)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many leases in use"),
				 errdetail_plural("The %d lease slot of shared memory is taken by a lease that is held, being acquired, or still in a former holder's hold-off.",
								  "All %d lease slots of shared memory are taken by leases that are held, being acquired, or still in a former holder's hold-off.",
								  tenure_max_leases, tenure_max_leases),
				 errhint("Increase tenure.max_leases and restart the server, or drop unused leases.")));
}
