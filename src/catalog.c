/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		The durable side of leases: statements run as the owner of
 *		pg_tenure's tables, direct access to their rows for the statements
 *		of the hot path, a lease's row and its owner's rights, and building
 *		a lease's shared-memory entry from its row, and which lease
 *		tenure.fenced says fences a table.  Epochs are issued by
 *		epoch.c, and tenure.history is written by history_rows.c, both
 *		through the SPI sessions and the direct access provided here.
 *
 * The statements here run inside an SPI session opened by
 * tenure_spi_begin(), which becomes the owner of tenure.lease (the owner of
 * all of the extension's tables) and pins search_path to pg_catalog, so
 * that nothing in these statements resolves through the caller's
 * search_path.  Callers check the caller's rights first
 * (tenure_check_owner()).
 *
 * Direct access.  The statements that acquire and release run on every
 * call (reading and locking a lease's row, issuing an epoch, opening,
 * closing and trimming rows of tenure.history) reach the rows through the
 * table and index access methods instead, as PostgreSQL's own catalog
 * code does: preparing, planning and starting an executor for each of
 * them cost more than their work, and their first use in a backend
 * prepared each.  Each such statement (tenure_table_open() to
 * tenure_table_close()) keeps what the SQL statement it replaces did:
 *
 * - what it sees: the transaction's earlier commands
 *   (CommandCounterIncrement()), under GetTransactionSnapshot(), taken
 *   anew for each statement in READ COMMITTED, the transaction's own in
 *   REPEATABLE READ and SERIALIZABLE (whose predicate locks the access
 *   methods take);
 * - row locks: the lock mode and wait policy its SQL named; in READ
 *   COMMITTED a row that a concurrent transaction updated is followed to
 *   its newest version, which the caller checks again as EvalPlanQual
 *   would, and in the other levels it fails with 40001, as ExecLockRows()
 *   and ExecUpdate() do (tenure_table_lock(), tenure_table_update());
 * - writes: WAL-logged by the table AM, every index of the table kept
 *   (ExecInsertIndexTuples(), with unique checks and partial indexes;
 *   none when the AM made a HOT update), refused in a read-only
 *   transaction with the SQL's message;
 * - constraints: the values written are valid by construction (each
 *   writer says why); NOT NULL is checked on every write, and builds with
 *   assertions check every constraint with ExecConstraints() as well;
 * - rights: it runs as the extension's owner in a security-restricted
 *   operation, as an SPI session does, and resolves no name: the tables
 *   come from objects.c, their columns and indexes are found by name and
 *   shape once (tenure_layout) and forgotten when a relcache invalidation
 *   hits them.
 *
 * Direct access applies nothing that a superuser added to a table:
 * triggers (an audit of the history, say), rules, row security, CHECK
 * constraints and columns of their own (whose defaults an INSERT fills).
 * Such a table is read and written by the SQL statements that direct
 * access replaces, which apply them, with the same results otherwise:
 * tenure_table_open() says which way, from what the relcache entry of the
 * table shows once it is locked.  Only a table without a column or index
 * that pg_tenure created is refused.
 *
 * A lease's entry in shared memory (state.c) is built from its latest
 * committed row, read with a fresh snapshot, never from the caller's
 * (tenure_ensure_entry(), tenure_load_entry()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/visibilitymap.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_relation.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/acl.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
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
		/*
		 * Generic plans from the start: every statement finds its rows by
		 * key, where the generic plan is the custom one, and a custom plan
		 * for each of a backend's first five executions would only add
		 * planning to its first calls.
		 */
		plan = SPI_prepare_cursor(sql, nargs, argtypes,
								  CURSOR_OPT_GENERIC_PLAN);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare_cursor failed for \"%s\": %s", sql,
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

/*
 * Versions: PostgreSQL 16 says which index entries an update needs (none,
 * all, or only summarizing ones), and 18 instruments index scans.
 */
#if PG_VERSION_NUM >= 160000
typedef TU_UpdateIndexes TenureUpdateIndexes;
#define TENURE_UPDATE_NEEDS_INDEXES(u)	((u) != TU_None)
#define TENURE_UPDATE_ALL_INDEXES		TU_All
#define tenure_insert_index_tuples(rri, slot, estate, update, u) \
	ExecInsertIndexTuples((rri), (slot), (estate), (update), false, NULL, \
						  NIL, (u) == TU_Summarizing)
#else
typedef bool TenureUpdateIndexes;
#define TENURE_UPDATE_NEEDS_INDEXES(u)	(u)
#define TENURE_UPDATE_ALL_INDEXES		true
#define tenure_insert_index_tuples(rri, slot, estate, update, u) \
	ExecInsertIndexTuples((rri), (slot), (estate), (update), false, NULL, NIL)
#endif
#if PG_VERSION_NUM >= 180000
#define tenure_index_beginscan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), 0)
#else
#define tenure_index_beginscan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), 0)
#endif

/*
 * Direct access: the columns and indexes of pg_tenure's tables that it
 * uses, and where each is (see the file header).
 */
typedef struct TenureColumnSpec
{
	const char *name;
	Oid			type;
} TenureColumnSpec;

static const TenureColumnSpec tenure_lease_columns[TENURE_LEASE_NCOLS] = {
	[TENURE_LEASE_NAME] = {"name", TEXTOID},
	[TENURE_LEASE_ID] = {"id", INT8OID},
	[TENURE_LEASE_OWNER] = {"owner", REGROLEOID},
	[TENURE_LEASE_TTL] = {"ttl", INTERVALOID},
	[TENURE_LEASE_HOLDOFF] = {"holdoff", INTERVALOID},
	[TENURE_LEASE_LOCK_KEY] = {"lock_key", INT8OID},
	[TENURE_LEASE_EPOCH] = {"epoch", INT8OID},
	[TENURE_LEASE_BASE] = {"base", INT8OID},
	[TENURE_LEASE_ISSUED_SYSID] = {"issued_sysid", INT8OID},
	[TENURE_LEASE_ISSUED_TLI] = {"issued_tli", INT8OID},
	[TENURE_LEASE_FENCE_LOCK] = {"fence_lock", INT2OID},
};

static const TenureColumnSpec tenure_history_columns[TENURE_HISTORY_NCOLS] = {
	[TENURE_HISTORY_LEASE] = {"lease", TEXTOID},
	[TENURE_HISTORY_EPOCH] = {"epoch", INT8OID},
	[TENURE_HISTORY_HOLDER] = {"holder", TEXTOID},
	[TENURE_HISTORY_SESSION_BOUND] = {"session_bound", BOOLOID},
	[TENURE_HISTORY_STARTED] = {"started", TIMESTAMPTZOID},
	[TENURE_HISTORY_ENDED] = {"ended", TIMESTAMPTZOID},
	[TENURE_HISTORY_END_REASON] = {"end_reason", TEXTOID},
	[TENURE_HISTORY_BOOT_ID] = {"boot_id", INT8OID},
	[TENURE_HISTORY_ISSUED_SYSID] = {"issued_sysid", INT8OID},
	[TENURE_HISTORY_ISSUED_TLI] = {"issued_tli", INT8OID},
	[TENURE_HISTORY_OPEN_TLI] = {"open_tli", INT8OID},
	[TENURE_HISTORY_BASE] = {"base", INT8OID},
	[TENURE_HISTORY_TTL] = {"ttl", INTERVALOID},
};

/*
 * An index as the install script creates it: a btree on these columns
 * (text or bigint, compared by their types' own equality), partial on
 * "null_col IS NULL" if null_col is a column (else -1).
 */
typedef struct TenureIndexSpec
{
	TenureTableId table;
	int			nkeys;
	int			keys[2];
	int			null_col;
	const char *what;
} TenureIndexSpec;

#define TENURE_INDEX_COUNT	(TENURE_INDEX_HISTORY_OPEN_BOOT + 1)

static const TenureIndexSpec tenure_index_specs[TENURE_INDEX_COUNT] = {
	[TENURE_INDEX_LEASE_NAME] = {TENURE_TABLE_LEASE, 1,
	{TENURE_LEASE_NAME}, -1, "(name)"},
	[TENURE_INDEX_HISTORY_EPOCH] = {TENURE_TABLE_HISTORY, 2,
	{TENURE_HISTORY_LEASE, TENURE_HISTORY_EPOCH}, -1, "(lease, epoch)"},
	[TENURE_INDEX_HISTORY_OPEN] = {TENURE_TABLE_HISTORY, 1,
	{TENURE_HISTORY_LEASE}, TENURE_HISTORY_ENDED,
	"(lease) WHERE ended IS NULL"},
	[TENURE_INDEX_HISTORY_OPEN_BOOT] = {TENURE_TABLE_HISTORY, 1,
	{TENURE_HISTORY_BOOT_ID}, TENURE_HISTORY_ENDED,
	"(boot_id) WHERE ended IS NULL"},
};

/*
 * Where the columns and indexes are, per table: found when a statement
 * first opens it, and forgotten (relid invalid) when a relcache
 * invalidation hits the table or one of the indexes
 * (tenure_layout_reset()).
 */
static struct
{
	Oid			relid[2];		/* by TenureTableId; invalid: not known */
	AttrNumber	att[2][TENURE_TABLE_MAX_COLS];
	Oid			index[TENURE_INDEX_COUNT];
	bool		own[2];			/* only pg_tenure's columns and constraints */
}			tenure_layout;

/*
 * The CHECK constraints that the install script gives each table (named
 * by PostgreSQL's rule, <table>_<column>_check).
 */
static const char *const tenure_lease_checks[] = {
	"lease_name_check", "lease_base_check", "lease_fence_lock_check",
	"lease_preferred_check", NULL
};
static const char *const tenure_history_checks[] = {
	"history_end_reason_check", NULL
};

static void
tenure_layout_reset(Datum arg, Oid relid)
{
	int			i;

	for (i = 0; i < TENURE_INDEX_COUNT; i++)
		if (!OidIsValid(relid) || relid == tenure_layout.index[i] ||
			relid == tenure_layout.relid[tenure_index_specs[i].table])
			tenure_layout.relid[tenure_index_specs[i].table] = InvalidOid;
}

/*
 * Fail closed: a table is not as the install script created it.
 */
static void
tenure_layout_refuse(Relation rel, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("pg_tenure's table %s is not as the extension installed it",
					quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											   RelationGetRelationName(rel))),
			 errdetail_internal("%s", detail),
			 errhint("Only a superuser may own or create objects in schema \"tenure\"; reinstall pg_tenure if its objects were changed.")));
}

/*
 * Whether key column k of a btree index compares its values as the scan
 * keys of direct access do: its operator family's equality on the
 * column's type is the type's own (texteq, int8eq).
 */
static bool
tenure_index_key_is(Relation index, int k, Oid type)
{
	Oid			eq;

	if (index->rd_opcintype[k] != type)
		return false;
	eq = get_opfamily_member(index->rd_opfamily[k], type, type,
							 BTEqualStrategyNumber);
	return OidIsValid(eq) &&
		get_opcode(eq) == (type == TEXTOID ? F_TEXTEQ : F_INT8EQ);
}

/*
 * Whether index is the one spec describes, for a table whose columns are
 * at att.
 */
static bool
tenure_index_is(Relation index, const TenureIndexSpec *spec,
				const AttrNumber *att, TupleDesc tupdesc)
{
	Form_pg_index form = index->rd_index;
	List	   *pred;
	NullTest   *test;
	int			k;

	if (index->rd_rel->relam != BTREE_AM_OID || !form->indisvalid ||
		form->indnkeyatts != spec->nkeys ||
		RelationGetIndexExpressions(index) != NIL)
		return false;
	for (k = 0; k < spec->nkeys; k++)
	{
		AttrNumber	a = att[spec->keys[k]];

		if (form->indkey.values[k] != a ||
			!tenure_index_key_is(index, k, TupleDescAttr(tupdesc, a - 1)->atttypid))
			return false;
	}
	pred = RelationGetIndexPredicate(index);
	if (spec->null_col < 0)
		return pred == NIL;
	if (list_length(pred) != 1 || !IsA(linitial(pred), NullTest))
		return false;
	test = linitial_node(NullTest, pred);
	return test->nulltesttype == IS_NULL && !test->argisrow &&
		IsA(test->arg, Var) &&
		((Var *) test->arg)->varattno == att[spec->null_col];
}

/*
 * Find the indexes of table id among rel's.
 */
static void
tenure_layout_indexes(TenureTableId id, Relation rel, const AttrNumber *att)
{
	List	   *list = RelationGetIndexList(rel);
	int			i;

	for (i = 0; i < TENURE_INDEX_COUNT; i++)
	{
		ListCell   *lc;

		if (tenure_index_specs[i].table != id)
			continue;
		tenure_layout.index[i] = InvalidOid;
		foreach(lc, list)
		{
			Relation	index = index_open(lfirst_oid(lc), AccessShareLock);
			bool		is = tenure_index_is(index, &tenure_index_specs[i],
											 att, RelationGetDescr(rel));

			index_close(index, AccessShareLock);
			if (is)
			{
				tenure_layout.index[i] = lfirst_oid(lc);
				break;
			}
		}
		if (!OidIsValid(tenure_layout.index[i]))
			tenure_layout_refuse(rel, psprintf("It has no btree index on %s.",
											   tenure_index_specs[i].what));
	}
	list_free(list);
}

/*
 * Whether the CHECK constraints of table id (rel) are all the install
 * script's, and no column is generated.
 */
static bool
tenure_layout_own_checks(TenureTableId id, Relation rel)
{
	const char *const *own = id == TENURE_TABLE_LEASE ?
		tenure_lease_checks : tenure_history_checks;
	TupleConstr *constr = RelationGetDescr(rel)->constr;
	int			i;

	if (constr == NULL)
		return true;
	if (constr->has_generated_stored)
		return false;
	for (i = 0; i < constr->num_check; i++)
	{
		int			k;

		for (k = 0; own[k] != NULL; k++)
			if (strcmp(constr->check[i].ccname, own[k]) == 0)
				break;
		if (own[k] == NULL)
			return false;
	}
	return true;
}

/*
 * Find where the columns and indexes of table id are in rel, and whether
 * it has columns or constraints of its own (see the file header).
 */
static void
tenure_layout_find(TenureTableId id, Relation rel)
{
	const TenureColumnSpec *cols = id == TENURE_TABLE_LEASE ?
		tenure_lease_columns : tenure_history_columns;
	int			ncols = id == TENURE_TABLE_LEASE ?
		TENURE_LEASE_NCOLS : TENURE_HISTORY_NCOLS;
	TupleDesc	tupdesc = RelationGetDescr(rel);
	AttrNumber *att = tenure_layout.att[id];
	int			live = 0;
	int			c;

	for (c = 0; c < ncols; c++)
	{
		att[c] = attnameAttNum(rel, cols[c].name, false);
		if (att[c] <= 0 ||
			TupleDescAttr(tupdesc, att[c] - 1)->atttypid != cols[c].type)
			tenure_layout_refuse(rel, psprintf("It has no column %s of the type pg_tenure created.",
											   cols[c].name));
	}
	for (c = 0; c < tupdesc->natts; c++)
		live += TupleDescAttr(tupdesc, c)->attisdropped ? 0 : 1;
	tenure_layout_indexes(id, rel, att);

	/*
	 * Direct access inserts history rows whole and checks only pg_tenure's
	 * own constraints (tenure_table_check()); columns of the user's own
	 * (with defaults perhaps) and constraints are left to the SQL.
	 */
	tenure_layout.own[id] =
		(id != TENURE_TABLE_HISTORY || live == ncols) &&
		tenure_layout_own_checks(id, rel);
	tenure_layout.relid[id] = RelationGetRelid(rel);
}

/*
 * Whether direct access to rel (table id, its layout known) would leave
 * out something a superuser added to it: triggers, rules, row security,
 * columns or constraints (see the file header).  Read from the relcache
 * entry each time: the table is locked, so it is current.
 */
static bool
tenure_table_has_user_objects(TenureTableId id, Relation rel)
{
	return rel->trigdesc != NULL || rel->rd_rules != NULL ||
		rel->rd_rel->relrowsecurity || !tenure_layout.own[id];
}

/*
 * Begin a statement's direct access to one of pg_tenure's tables (see the
 * file header), holding lockmode on it.  command names a statement that
 * locks or writes rows ("UPDATE", "SELECT FOR UPDATE", ...), refused as
 * the executor refuses it in a read-only transaction; NULL for one that
 * only reads.  End it with tenure_table_close().
 *
 * Returns false, with nothing to end, if the table has triggers, rules,
 * row security, columns or constraints that direct access would not
 * apply: the caller runs the SQL statement that it replaces instead.  The
 * table stays locked, as that statement locks it.
 */
bool
tenure_table_open(TenureTable *t, TenureTableId id, LOCKMODE lockmode,
				  const char *command)
{
	const TenureObjects *objs = tenure_objects(false);
	Oid			relid = id == TENURE_TABLE_LEASE ? objs->lease : objs->history;

	if (command != NULL)
	{
		PreventCommandIfReadOnly(command);
		if (strncmp(command, "SELECT", 6) != 0)
			PreventCommandIfParallelMode(command);
	}
	memset(t, 0, sizeof(TenureTable));
	t->id = id;
	GetUserIdAndSecContext(&t->save_userid, &t->save_sec_context);
	SetUserIdAndSecContext(objs->owner, t->save_sec_context |
						   SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	t->rel = table_open(relid, lockmode);
	if (tenure_layout.relid[id] != relid)
		tenure_layout_find(id, t->rel);
	if (tenure_table_has_user_objects(id, t->rel))
	{
		table_close(t->rel, NoLock);
		SetUserIdAndSecContext(t->save_userid, t->save_sec_context);
		return false;
	}
	t->att = tenure_layout.att[id];

	/* what an SPI statement would see */
	CommandCounterIncrement();
	t->snapshot = RegisterSnapshot(GetTransactionSnapshot());
	t->cid = GetCurrentCommandId(command != NULL);
	t->slot = table_slot_create(t->rel, NULL);
	return true;
}

/*
 * End a statement's direct access; what it wrote is seen by the
 * statements after it.  The table stays locked until the transaction
 * ends, as the executor leaves it.
 */
void
tenure_table_close(TenureTable *t)
{
	if (t->estate != NULL)
	{
		ExecCloseIndices(t->rri);
		ExecDropSingleTupleTableSlot(t->out);
		FreeExecutorState(t->estate);
	}
	ExecDropSingleTupleTableSlot(t->slot);
	UnregisterSnapshot(t->snapshot);
	table_close(t->rel, NoLock);
	SetUserIdAndSecContext(t->save_userid, t->save_sec_context);
	CommandCounterIncrement();
}

/*
 * Scan one of the table's indexes under the statement's snapshot for the
 * rows that match keys (set up with ScanKeyInit() on the index's columns,
 * 1-based); tenure_table_next() returns them one by one.  The keys
 * compare in the index's collations.
 */
IndexScanDesc
tenure_table_scan(TenureTable *t, TenureIndexId index, ScanKey keys,
				  int nkeys)
{
	Relation	irel;
	IndexScanDesc scan;
	int			i;

	Assert(tenure_index_specs[index].table == t->id);
	irel = index_open(tenure_layout.index[index], AccessShareLock);
	for (i = 0; i < nkeys; i++)
		keys[i].sk_collation = irel->rd_indcollation[keys[i].sk_attno - 1];
	scan = tenure_index_beginscan(t->rel, irel, t->snapshot, nkeys);
	index_rescan(scan, keys, nkeys, NULL, 0);
	return scan;
}

/*
 * The next row of a scan, in t->slot; false at the end.
 */
bool
tenure_table_next(TenureTable *t, IndexScanDesc scan)
{
	return index_getnext_slot(scan, ForwardScanDirection, t->slot);
}

/*
 * The previous row of a scan (the rows in descending order), in t->slot;
 * false at the end.
 */
bool
tenure_table_prev(TenureTable *t, IndexScanDesc scan)
{
	return index_getnext_slot(scan, BackwardScanDirection, t->slot);
}

/*
 * Pass over the next n rows of a scan in descending order that its
 * snapshot sees, as an index-only scan would count them: a row on a page
 * that the visibility map shows all-visible is seen by every snapshot, so
 * the table is not visited for it (but for SERIALIZABLE transactions,
 * whose reads take predicate locks in the table).  False if the scan
 * ended first.
 */
bool
tenure_table_skip_back(TenureTable *t, IndexScanDesc scan, int64 n)
{
	Buffer		vmbuffer = InvalidBuffer;
	bool		use_vm = !IsolationIsSerializable();
	ItemPointer tid;
	int64		seen = 0;

	while (seen < n &&
		   (tid = index_getnext_tid(scan, BackwardScanDirection)) != NULL)
	{
		if (use_vm &&
			VM_ALL_VISIBLE(t->rel, ItemPointerGetBlockNumber(tid), &vmbuffer))
			seen++;
		else if (index_fetch_heap(scan, t->slot))
			seen++;
	}
	if (BufferIsValid(vmbuffer))
		ReleaseBuffer(vmbuffer);
	return seen == n;
}

/*
 * End a scan; the index stays locked until the transaction ends.
 */
void
tenure_table_end_scan(IndexScanDesc scan)
{
	Relation	irel = scan->indexRelation;

	index_endscan(scan);
	index_close(irel, NoLock);
}

/*
 * Column col (a TenureLeaseCol or TenureHistoryCol) of the row in t->slot.
 * A value passed by reference points into the row: copy it to keep it
 * beyond the next row or tenure_table_close().
 */
Datum
tenure_table_get(TenureTable *t, int col, bool *isnull)
{
	return slot_getattr(t->slot, t->att[col], isnull);
}

/*
 * Column col of the row in t->slot, copied into the current memory
 * context if passed by reference, to outlive the row.
 */
Datum
tenure_table_copy(TenureTable *t, int col, bool *isnull)
{
	Form_pg_attribute attr = TupleDescAttr(RelationGetDescr(t->rel),
										   t->att[col] - 1);
	Datum		d = tenure_table_get(t, col, isnull);

	return *isnull ? d : datumCopy(d, attr->attbyval, attr->attlen);
}

/*
 * Raise 40001 for a row another transaction changed after this one's
 * snapshot, in REPEATABLE READ or SERIALIZABLE, as the executor does.
 */
static void
tenure_table_serialization_failure(TM_Result r)
{
	if (!IsolationUsesXactSnapshot())
		return;
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 r == TM_Deleted ?
			 errmsg("could not serialize access due to concurrent delete") :
			 errmsg("could not serialize access due to concurrent update")));
}

/*
 * Lock the row in t->slot as SELECT ... FOR <mode> [SKIP LOCKED] does
 * (ExecLockRows()): in READ COMMITTED, a row a concurrent transaction
 * updated is followed to its newest version, which is locked and left in
 * t->slot with *traversed set, for the caller to check again.  Returns
 * TM_Ok; TM_WouldBlock when wait is LockWaitSkip and another transaction
 * holds it; TM_Deleted or TM_SelfModified for a row the SQL would not
 * return.
 */
TM_Result
tenure_table_lock(TenureTable *t, LockTupleMode mode, LockWaitPolicy wait,
				  bool *traversed)
{
	TM_FailureData tmfd;
	ItemPointerData tid = t->slot->tts_tid;
	int			flags = TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS;
	TM_Result	r;

	if (!IsolationUsesXactSnapshot())
		flags |= TUPLE_LOCK_FLAG_FIND_LAST_VERSION;
	tmfd.traversed = false;
	r = table_tuple_lock(t->rel, &tid, t->snapshot, t->slot, t->cid, mode,
						 wait, flags, &tmfd);
	*traversed = r == TM_Ok && tmfd.traversed;
	switch (r)
	{
		case TM_Ok:
		case TM_WouldBlock:
		case TM_SelfModified:
			return r;
		case TM_Deleted:
			tenure_table_serialization_failure(TM_Updated);
			return r;
		case TM_Updated:
			tenure_table_serialization_failure(r);
			break;
		default:
			break;
	}
	elog(ERROR, "unexpected table_tuple_lock status: %u", r);
	return r;					/* keep compiler quiet */
}

/*
 * Make ready for writes: the table's indexes, and a slot for new rows.
 */
static void
tenure_table_writer(TenureTable *t)
{
	if (t->estate != NULL)
		return;
	t->estate = CreateExecutorState();
	t->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(t->rri, t->rel, 0, NULL, 0);
	ExecOpenIndices(t->rri, false);
	t->out = table_slot_create(t->rel, NULL);
}

/*
 * The new row in t->out meets the table's constraints: its writer made
 * it so.  Columns that must not be null are checked here, which costs
 * nothing; builds with assertions check every constraint
 * (ExecConstraints(), whose CHECK expressions cost more than the write).
 */
static void
tenure_table_check(TenureTable *t)
{
	TupleDesc	tupdesc = RelationGetDescr(t->rel);
	int			i;

	for (i = 0; i < tupdesc->natts; i++)
		if (TupleDescAttr(tupdesc, i)->attnotnull && t->out->tts_isnull[i])
			elog(ERROR, "null value in column \"%s\" of pg_tenure's table %s",
				 NameStr(TupleDescAttr(tupdesc, i)->attname),
				 RelationGetRelationName(t->rel));
#ifdef USE_ASSERT_CHECKING
	ExecConstraints(t->rri, t->out, t->estate);
#endif
}

/*
 * Update the row in t->slot, as UPDATE does (ExecUpdate()): its columns
 * cols (n of them) become values, the others stay; waits for a
 * transaction that holds the row.  Returns TM_Ok once updated.  In READ
 * COMMITTED, a row a concurrent transaction updated first is followed to
 * its newest version, which is locked and left in t->slot: TM_Updated
 * asks the caller to check it again and update it with another call.
 * TM_Deleted and TM_SelfModified: nothing to update.
 */
TM_Result
tenure_table_update(TenureTable *t, int n, const int *cols,
					const Datum *values, const bool *isnull)
{
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	ItemPointerData otid = t->slot->tts_tid;
	TenureUpdateIndexes update_indexes;
	TM_Result	r;
	int			i;

	tenure_table_writer(t);
	ExecClearTuple(t->out);
	slot_getallattrs(t->slot);
	memcpy(t->out->tts_values, t->slot->tts_values,
		   sizeof(Datum) * t->slot->tts_tupleDescriptor->natts);
	memcpy(t->out->tts_isnull, t->slot->tts_isnull,
		   sizeof(bool) * t->slot->tts_tupleDescriptor->natts);
	for (i = 0; i < n; i++)
	{
		t->out->tts_values[t->att[cols[i]] - 1] = values[i];
		t->out->tts_isnull[t->att[cols[i]] - 1] = isnull[i];
	}
	ExecStoreVirtualTuple(t->out);
	tenure_table_check(t);

	r = table_tuple_update(t->rel, &otid, t->out, t->cid, t->snapshot,
						   InvalidSnapshot, true, &tmfd, &lockmode,
						   &update_indexes);
	if (r == TM_Ok)
	{
		if (TENURE_UPDATE_NEEDS_INDEXES(update_indexes))
			(void) tenure_insert_index_tuples(t->rri, t->out, t->estate, true,
											  update_indexes);
		return r;
	}
	if (r == TM_SelfModified)
		return r;
	tenure_table_serialization_failure(r);
	if (r == TM_Deleted)
		return r;
	if (r != TM_Updated)
		elog(ERROR, "unexpected table_tuple_update status: %u", r);

	/* READ COMMITTED: lock the newest version for the caller's check */
	r = table_tuple_lock(t->rel, &otid, t->snapshot, t->slot, t->cid,
						 lockmode, LockWaitBlock,
						 TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
	if (r == TM_Ok)
		return TM_Updated;
	if (r != TM_Deleted && r != TM_SelfModified)
		elog(ERROR, "unexpected table_tuple_lock status: %u", r);
	return r;
}

/*
 * Delete the row in t->slot unless another transaction holds it: what
 * locking it FOR UPDATE SKIP LOCKED and then deleting it does, without
 * the lock's own WAL record.  A row a concurrent transaction changed since
 * the statement's snapshot is not deleted either (the DELETE would not
 * see its new version), and fails with 40001 in REPEATABLE READ and
 * SERIALIZABLE, as its lock would.  Returns whether it deleted the row.
 */
bool
tenure_table_delete_unlocked(TenureTable *t)
{
	TM_FailureData tmfd;
	ItemPointerData tid = t->slot->tts_tid;
	TM_Result	r;

	r = table_tuple_delete(t->rel, &tid, t->cid, t->snapshot, InvalidSnapshot,
						   false, &tmfd, false);
	switch (r)
	{
		case TM_Ok:
			return true;
		case TM_BeingModified:
		case TM_SelfModified:
			return false;
		case TM_Updated:
		case TM_Deleted:
			tenure_table_serialization_failure(TM_Updated);
			return false;
		default:
			break;
	}
	elog(ERROR, "unexpected table_tuple_delete status: %u", r);
	return false;				/* keep compiler quiet */
}

/*
 * Insert a row whose columns (all of the table's, by their numbers) are
 * values, as INSERT does: index entries, unique checks.
 */
void
tenure_table_insert(TenureTable *t, const Datum *values, const bool *isnull)
{
	int			ncols = t->id == TENURE_TABLE_LEASE ?
		TENURE_LEASE_NCOLS : TENURE_HISTORY_NCOLS;
	int			i;

	Assert(t->id == TENURE_TABLE_HISTORY);	/* whose columns are all known */
	tenure_table_writer(t);
	ExecClearTuple(t->out);
	for (i = 0; i < t->out->tts_tupleDescriptor->natts; i++)
		t->out->tts_isnull[i] = true;
	for (i = 0; i < ncols; i++)
	{
		t->out->tts_values[t->att[i] - 1] = values[i];
		t->out->tts_isnull[t->att[i] - 1] = isnull[i];
	}
	ExecStoreVirtualTuple(t->out);
	tenure_table_check(t);
	table_tuple_insert(t->rel, t->out, t->cid, 0, NULL);
	(void) tenure_insert_index_tuples(t->rri, t->out, t->estate, false,
									  TENURE_UPDATE_ALL_INDEXES);
}

/*
 * Find the lease's row (tenure.lease, opened by t) that the statement's
 * snapshot sees, into t->slot; false if there is none.
 */
bool
tenure_lease_find(TenureTable *t, const char *name)
{
	ScanKeyData key;
	IndexScanDesc scan;
	bool		found;

	Assert(t->id == TENURE_TABLE_LEASE);
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ,
				CStringGetTextDatum(name));
	scan = tenure_table_scan(t, TENURE_INDEX_LEASE_NAME, &key, 1);
	found = tenure_table_next(t, scan);
	tenure_table_end_scan(scan);
	return found;
}

/*
 * Lock the lease's row that tenure_lease_find() found, as SELECT ... FROM
 * tenure.lease WHERE name = $1 FOR <mode> [SKIP LOCKED] does: the newest
 * version, if it still has that name (EvalPlanQual's check).  Returns
 * TM_Ok when locked, TM_WouldBlock as tenure_table_lock(), else another
 * result for a row the SQL would not return.
 */
TM_Result
tenure_lease_lock(TenureTable *t, const char *name, LockTupleMode mode,
				  LockWaitPolicy wait)
{
	bool		traversed;
	bool		isnull;
	TM_Result	r = tenure_table_lock(t, mode, wait, &traversed);

	if (r == TM_Ok && traversed &&
		strcmp(TextDatumGetCString(tenure_table_get(t, TENURE_LEASE_NAME,
													&isnull)), name) != 0)
		return TM_Deleted;
	return r;
}

/* The columns of a lease's row that TenureRow holds, in its order. */
#define TENURE_ROW_COLUMNS \
	"SELECT id, owner::pg_catalog.oid::pg_catalog.int8," \
	" ttl, holdoff," \
	" lock_key, epoch, fence_lock::pg_catalog.int8," \
	" xmin::pg_catalog.text::pg_catalog.int8" \
	" FROM tenure.lease WHERE name OPERATOR(pg_catalog.=) $1"

/*
 * A ttl or hold-off of a lease's row (d, unless isnull) in microseconds,
 * converted as arguments are (tenure_interval_us()).  False if it is null
 * or outside min_us .. max_us; then the value, as text, is in
 * row->bad_value unless a value before it was bad already.
 */
static bool
tenure_row_interval(Datum d, bool isnull, TenureRow *row, const char *setting,
					int64 min_us, int64 max_us, int64 *us)
{
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
 * Set row's ttl and hold-off from the row's values.  A ttl or hold-off out
 * of bounds does not fail here: whoever only reads the lease's epoch or
 * drops it does not need them (tenure_load_entry() refuses it).
 */
static void
tenure_row_settings(TenureRow *row, Datum ttl, bool ttl_null, Datum holdoff,
					bool holdoff_null)
{
	row->bad_setting = NULL;
	row->bad_value[0] = '\0';
	if (!tenure_row_interval(ttl, ttl_null, row, "ttl", 1, TENURE_MAX_TTL_US,
							 &row->ttl_us))
		row->ttl_us = -1;
	if (holdoff_null ||
		!tenure_row_interval(holdoff, false, row, "holdoff", 0,
							 TENURE_MAX_HOLDOFF_US, &row->holdoff_us))
		row->holdoff_us = -1;
}

/*
 * What every way of reading a row sets alike; fails for a fence_lock out
 * of range.
 */
static void
tenure_row_finish(const char *name, TenureRow *row)
{
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
 * Fill row from the first row of the last SPI result (TENURE_ROW_COLUMNS).
 */
static void
tenure_row_from_spi(const char *name, TenureRow *row)
{
	bool		isnull;
	bool		ttl_null;
	bool		holdoff_null;
	Datum		ttl;
	Datum		holdoff;

	row->id = tenure_spi_int8(1, NULL);
	row->owner = (Oid) tenure_spi_int8(2, NULL);
	ttl = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3,
						&ttl_null);
	holdoff = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4,
							&holdoff_null);
	tenure_row_settings(row, ttl, ttl_null, holdoff, holdoff_null);
	row->lock_key = tenure_spi_int8(5, &isnull);
	row->has_lock_key = !isnull;
	row->epoch = tenure_spi_int8(6, NULL);
	row->fence_lock = (int) tenure_spi_int8(7, NULL);
	row->own = TransactionIdIsCurrentTransactionId((TransactionId)
												   tenure_spi_int8(8, NULL));
	tenure_row_finish(name, row);
}

/*
 * Column col of the lease's row in t->slot as a bigint (0 if null).
 */
static int64
tenure_lease_int8(TenureTable *t, TenureLeaseCol col, bool *isnull)
{
	bool		n;
	Datum		d = tenure_table_get(t, col, &n);

	if (isnull != NULL)
		*isnull = n;
	return n ? 0 : DatumGetInt64(d);
}

/*
 * Fill row from the lease's row in t->slot, as tenure_row_from_spi() does
 * from the SQL's.
 */
static void
tenure_row_from_table(const char *name, TenureTable *t, TenureRow *row)
{
	bool		isnull;
	bool		ttl_null;
	bool		holdoff_null;
	Datum		d;
	Datum		ttl;
	Datum		holdoff;

	row->id = tenure_lease_int8(t, TENURE_LEASE_ID, NULL);
	d = tenure_table_get(t, TENURE_LEASE_OWNER, &isnull);
	row->owner = isnull ? InvalidOid : DatumGetObjectId(d);
	ttl = tenure_table_get(t, TENURE_LEASE_TTL, &ttl_null);
	holdoff = tenure_table_get(t, TENURE_LEASE_HOLDOFF, &holdoff_null);
	tenure_row_settings(row, ttl, ttl_null, holdoff, holdoff_null);
	row->lock_key = tenure_lease_int8(t, TENURE_LEASE_LOCK_KEY, &isnull);
	row->has_lock_key = !isnull;
	row->epoch = tenure_lease_int8(t, TENURE_LEASE_EPOCH, NULL);
	d = tenure_table_get(t, TENURE_LEASE_FENCE_LOCK, &isnull);
	row->fence_lock = isnull ? 0 : DatumGetInt16(d);
	d = slot_getsysattr(t->slot, MinTransactionIdAttributeNumber, &isnull);
	row->own = TransactionIdIsCurrentTransactionId(DatumGetTransactionId(d));
	tenure_row_finish(name, row);
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
 * tenure_load_row() by its SQL statement, in an SPI session of its own.
 */
static void
tenure_load_row_sql(const char *name, TenureRow *row, bool for_update)
{
	TenureSpi	spi;
	Datum		args[1];

	args[0] = CStringGetTextDatum(name);
	tenure_spi_begin(&spi);
	tenure_spi_exec(for_update ? TENURE_ROW_COLUMNS " FOR UPDATE" :
					TENURE_ROW_COLUMNS,
					"t", args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		tenure_no_such_lease(name);
	tenure_row_from_spi(name, row);
	tenure_spi_end(&spi);
}

/*
 * Load a lease's row as the caller's transaction sees it, as SELECT ...
 * FROM tenure.lease WHERE name = $1 [FOR UPDATE] does (direct access, or
 * that statement).  Fails with 42704 if there is no such lease.
 * for_update locks the row, and then returns once every transaction that
 * changed the lease before is published in shared memory
 * (tenure_await_row_published()).  Never build a shared entry from this
 * row: under REPEATABLE READ it may be older than the catalog
 * (tenure_load_committed).
 */
void
tenure_load_row(const char *name, TenureRow *row, bool for_update)
{
	TenureTable t;
	bool		found;

	if (!tenure_table_open(&t, TENURE_TABLE_LEASE,
						   for_update ? RowShareLock : AccessShareLock,
						   for_update ? "SELECT FOR UPDATE" : NULL))
		tenure_load_row_sql(name, row, for_update);
	else
	{
		found = tenure_lease_find(&t, name);
		if (found && for_update)
			found = tenure_lease_lock(&t, name, LockTupleExclusive,
									  LockWaitBlock) == TM_Ok;
		if (!found)
			tenure_no_such_lease(name);
		tenure_row_from_table(name, &t, row);
		tenure_table_close(&t);
	}
	if (for_update)
		tenure_await_row_published(name);
}

/*
 * The caller's transaction holds the lease's row lock: return once no
 * other backend's transaction that changed the lease before is still
 * publishing its commit or abort in shared memory
 * (tenure_state_await_published(); src/README, F10).  Taking the row runs
 * it (tenure_load_row(..., true), tenure_issue_epoch()), so that what the
 * caller reads of shared memory afterwards includes every change that
 * committed before it took the row.  Call it only with the row locked in a
 * mode that conflicts with FOR NO KEY UPDATE: that is what bounds the
 * wait.  A mark is set at PRE_COMMIT by a transaction that issued an epoch
 * and so holds the row; with the row ours, that transaction has ended, and
 * its callback, which waits for nothing, is all that is left.
 */
void
tenure_await_row_published(const char *name)
{
	TenureKey	key;

	tenure_make_key(&key, MyDatabaseId, name);
	tenure_state_await_published(&key);
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
 * The lease that fences table relid as committed now (and written by this
 * transaction so far), or NULL; if mine is not NULL, *mine says whether
 * this transaction wrote that row of tenure.fenced.  An index lookup, no
 * SPI: the event trigger asks it of every table a command touches.
 */
char *
tenure_fence_lease(Oid relid, bool *mine)
{
	Relation	rel;
	Snapshot	snapshot;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *lease = NULL;

	if (mine != NULL)
		*mine = false;
	rel = table_open(tenure_objects(false)->fenced, AccessShareLock);
	/* rd_pkindex is valid once the index list is */
	list_free(RelationGetIndexList(rel));
	if (!OidIsValid(rel->rd_pkindex))
		elog(ERROR, "table tenure.fenced has no primary key");
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, rel->rd_pkindex, true, snapshot, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		value = heap_getattr(tup, 2, RelationGetDescr(rel), &isnull);

		if (!isnull)
			lease = TextDatumGetCString(value);
		if (mine != NULL)
			*mine = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data));
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	return lease;
}

/*
 * The lease that fences table relid as committed now, or NULL.
 */
char *
tenure_fenced_by(Oid relid)
{
	return tenure_fence_lease(relid, NULL);
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
	CacheRegisterRelcacheCallback(tenure_layout_reset, (Datum) 0);
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
