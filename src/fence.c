/*-------------------------------------------------------------------------
 *
 * fence.c
 *		Commit-time fencing: tables fenced by a lease accept writes only from
 *		transactions that present the lease's current epoch, checked when the
 *		statement starts and, decisively, when the transaction commits.
 *
 * Tokens.  A transaction presents "lease=epoch" pairs through the setting
 * tenure.tokens (SET LOCAL works through transaction poolers) or
 * tenure.present().  Only a value assigned in the transaction itself
 * counts (see tenure_presented()): nothing is presented implicitly, not
 * even by the session that holds a session-bound tenure, and nothing left
 * in the setting by an earlier transaction or client of a pooled
 * connection counts.
 *
 * The protocol, with the invariants F1 .. F11 that other comments cite,
 * is argued in src/README.
 *
 * The check.  A fenced write passes iff the lease has a live tenure whose
 * epoch equals the presented token.  The fence trigger checks at once and
 * records the lease; at XACT_EVENT_PRE_COMMIT the transaction takes a
 * transaction-level RowExclusiveLock on each recorded lease's fence lock
 * and checks again.  A transaction that starts a tenure or claims an epoch
 * takes ExclusiveLock on the same lock at its PRE_COMMIT and publishes the
 * new epoch in its COMMIT callback, before its locks are released.  Locks
 * are released after a commit becomes visible, so a writer that passed is
 * visible before any newer epoch is published, and a writer that checks
 * later sees the newer epoch: the fence is linearizable with claims and new
 * tenures.
 *
 * The fence lock.  A lease's fence lock is a relation lock on one of the
 * views tenure_lock.fence_lock_0 .. tenure_lock.fence_lock_15, the one its
 * row names (create_lease picks the least used).  Writers'
 * RowExclusiveLock takes the lock manager's per-backend fast path while
 * the backend has a free slot,
 * so committing fenced writers do not meet in a shared lock partition; an
 * ExclusiveLock moves the fast-path entries of its relation to the shared
 * table first, which claims and new tenures, being rare, can afford.
 * Leases sharing a view share the wait while a claim or a fenced write of
 * one of them commits; the check itself is per lease.  A transaction takes
 * its fence locks in view order, the stronger mode first, so fenced
 * writers and claimers never deadlock one another.
 *
 * What a fence covers, and the DDL that is checked or refused: fence_ddl.c.
 * Logical replication apply fires row triggers only: the REPLICA row
 * trigger tenure.fence_apply_trigger() here rejects it, should a
 * subscription reach a fenced table anyway.  A write noted after the
 * commit-time check ran fails.
 *
 * What runs after the check.  PostgreSQL runs a transaction's ON COMMIT
 * actions after the PRE_COMMIT callbacks, so a temporary table dropped or
 * emptied at commit could make a commit wait for another session's lock
 * while it holds a fence lock that other roles' leases share.  A fenced
 * commit runs them before it takes any fence lock (src/README, F11;
 * tenure_fence_precommit()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/extension.h"
#include "commands/tablecmds.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "optimizer/planner.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "replication/logicalworker.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pg_tenure.h"
#include "state.h"
#include "objects.h"
#include "catalog.h"
#include "args.h"
#include "tokens.h"
#include "fence.h"

PG_FUNCTION_INFO_V1(pg_tenure_fence_trigger);
PG_FUNCTION_INFO_V1(pg_tenure_present);

/* A lease whose fence this transaction must pass or hold at commit. */
typedef struct TenureFenceUse
{
	char		lease[TENURE_NAME_MAX + 1];
	char	   *table;			/* first fenced table written, or NULL */
	LOCKMODE	mode;			/* RowExclusiveLock for writes,
								 * ExclusiveLock for new epochs */
	int			fence_lock;		/* the lease's fence lock view, or -1 if not
								 * known yet (it cannot change while a table
								 * the lease fences is being written) */
} TenureFenceUse;

/*
 * The "extra" of tenure.tokens: the parsed tokens and who presented them.
 *
 * The check hook parses every new value; it marks it "offered" only if it
 * comes from an explicit assignment (GucSource PGC_S_SESSION: SET, SET
 * LOCAL, set_config(), tenure.present(), a function's SET clause) made
 * while no trigger runs and no statement writes rows (tenure_writing).
 * The assign hook stamps an offered value, the
 * first time it is assigned, with the transaction that assigned it
 * (presented_in).  Whenever PostgreSQL brings a value back (a
 * subtransaction's abort, a function's exit, RESET, the end of a
 * transaction, a configuration reload) it assigns it again with the same
 * extra, stamp and all, so a value counts only in the transaction that
 * presented it (src/README, F6): a value from a role or database default,
 * the configuration or a connection's options was never offered, and one
 * presented by an earlier transaction carries that transaction's serial.
 * A value set by a trigger, or by any code that runs because rows are
 * written, is never offered: a trigger that another role put on a fenced
 * table (TRIGGER privilege) cannot present a token for the write that
 * fired it, nor can another role's default or rule.
 */
typedef struct TenureTokensValue
{
	bool		offered;		/* explicit, not yet assigned */
	uint64		presented_in;	/* serial of the presenting transaction, or
								 * 0 */
} TenureTokensValue;

#define TENURE_TOKENS_VALUE_HEADER MAXALIGN(sizeof(TenureTokensValue))
#define TenureTokensOf(value) \
	((TenureTokens *) ((char *) (value) + TENURE_TOKENS_VALUE_HEADER))

/*
 * Statements writing rows in this backend, running now: the planner
 * (which folds immutable defaults), executors started for INSERT, UPDATE,
 * DELETE or MERGE, for a query with a data-modifying WITH, or for a rule's
 * action (tenure_planner() marks those), and utility
 * statements other than the few that run no code of their own on rows
 * (tenure_fence_utility_begin(): COPY, ALTER TABLE rewriting a table and
 * checking constraints, and every other DDL).  While one runs, code runs
 * because rows are written or DDL is done (column defaults, CHECK
 * constraints, index expressions, generated columns, rules, triggers, and
 * whatever they call), not because the client asked for it: a value of
 * tenure.tokens set then is never a presentation (see TenureTokensValue).
 * An error skips the end of a statement: the count is put back when a
 * subtransaction aborts (tenure_writing_saved, one entry per open
 * subtransaction) and cleared when the transaction ends.
 */
static int	tenure_writing = 0;
static List *tenure_writing_saved = NIL;
static planner_hook_type tenure_prev_planner = NULL;
static ExecutorStart_hook_type tenure_prev_ExecutorStart = NULL;
static ExecutorEnd_hook_type tenure_prev_ExecutorEnd = NULL;

char	   *tenure_tokens_string = NULL;
static TenureTokensValue *tenure_tokens_value = NULL;
static TenureTokens *tenure_tokens = NULL;

/*
 * Serial number of the current top-level transaction of this backend,
 * counted from 1 and advanced when a transaction ends (commit, abort or
 * prepare: tenure_fence_reset()).
 */
static uint64 tenure_fence_serial = 1;

/* leases this transaction wrote through or issues epochs for */
static List *tenure_fence_uses = NIL;

/*
 * Set once the commit-time check has run: a fenced write noted later (by
 * another extension's PRE_COMMIT callback, say) could not be checked.
 */
static bool tenure_fence_checked = false;

static Oid	tenure_fence_rel(int n);

/*
 * How deeply nested in triggers this backend is: pg_trigger_depth(), which
 * reads trigger.c's counter and needs no arguments.
 */
static int
tenure_trigger_depth(void)
{
	LOCAL_FCINFO(fcinfo, 0);

	InitFunctionCallInfoData(*fcinfo, NULL, 0, InvalidOid, NULL, NULL);
	return DatumGetInt32(pg_trigger_depth(fcinfo));
}

/*
 * Whether a query writes rows: the executors counted in tenure_writing.
 */
static bool
tenure_query_writes(const QueryDesc *queryDesc)
{
	return queryDesc->operation != CMD_SELECT ||
		(queryDesc->plannedstmt != NULL && queryDesc->plannedstmt->hasModifyingCTE);
}

static void
tenure_executor_start(QueryDesc *queryDesc, int eflags)
{
	/* counted from before its initialization evaluates anything */
	if (tenure_query_writes(queryDesc))
		tenure_writing++;
	if (tenure_prev_ExecutorStart)
		tenure_prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

static void
tenure_executor_end(QueryDesc *queryDesc)
{
	if (tenure_query_writes(queryDesc) && tenure_writing > 0)
		tenure_writing--;
	if (tenure_prev_ExecutorEnd)
		tenure_prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
}

/*
 * Planner hook: a rule's action runs because its rule's relation is
 * written, but one that only reads (DO ALSO SELECT f(), DO INSTEAD SELECT
 * ...) is a SELECT like any other by the time it runs, also under SPI or
 * EXPLAIN ANALYZE.  Mark it as data-modifying (as a query with a
 * data-modifying WITH is: it runs to completion, and not in a read-only
 * function), so that tenure_writing counts it.
 */
static PlannedStmt *
tenure_planner(Query *parse, const char *query_string, int cursorOptions,
			   ParamListInfo boundParams)
{
	PlannedStmt *result;

	/*
	 * Planning counts as writing: it folds immutable functions with
	 * constant arguments, among them a write's column and domain defaults
	 * that the rewriter put into its target list.  (A volatile call such
	 * as set_config() is never folded: a client's presentation runs in the
	 * executor.)  An error leaves the count to the (sub)transaction's end.
	 */
	tenure_writing++;
	if (tenure_prev_planner)
		result = tenure_prev_planner(parse, query_string, cursorOptions, boundParams);
	else
		result = standard_planner(parse, query_string, cursorOptions, boundParams);
	tenure_writing--;
	if (result->commandType == CMD_SELECT &&
		(parse->querySource == QSRC_INSTEAD_RULE ||
		 parse->querySource == QSRC_QUAL_INSTEAD_RULE ||
		 parse->querySource == QSRC_NON_INSTEAD_RULE))
		result->hasModifyingCTE = true;
	return result;
}

/*
 * Refuse a cursor WITH HOLD declared while rows are written (by a trigger,
 * or by a default, constraint or rule's code, whoever wrote it), in a
 * database with pg_tenure.  Its query would run when the transaction
 * commits (PreCommit_Portals(), before the PRE_COMMIT callbacks), in no
 * trigger and no writing statement: a token it presents would count (F6),
 * and a lease it claimed or released would be changed in the writer's
 * name.  A client declares its own holdable cursors in statements of
 * their own.
 */
static void
tenure_fence_refuse_late_cursor(Node *stmt)
{
	if (!IsA(stmt, DeclareCursorStmt) ||
		(((DeclareCursorStmt *) stmt)->options & CURSOR_OPT_HOLD) == 0)
		return;
	if (tenure_writing == 0 && tenure_trigger_depth() == 0)
		return;
	if (!OidIsValid(get_extension_oid("pg_tenure", true)))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("cannot declare a cursor WITH HOLD while rows are written"),
			 errdetail("Its query would run when the transaction commits, in the writer's name, outside the statement that wrote the rows; a trigger or default that another role wrote could present a token or change a lease there."),
			 errhint("Declare holdable cursors in statements of their own.")));
}

/*
 * ProcessUtility (tenure.c): whether a utility statement counts as writing
 * rows while it runs (see tenure_writing); if so it is counted, and the
 * caller calls tenure_fence_utility_end(true) after it.  Only statements
 * that evaluate nothing on rows of their own are not: settings, transaction
 * control, cursors, prepared statements, LISTEN and NOTIFY, LOCK, and DO,
 * CALL and EXPLAIN, whose statements are counted each on its own.
 */
bool
tenure_fence_utility_begin(Node *stmt)
{
	tenure_fence_refuse_late_cursor(stmt);
	switch (nodeTag(stmt))
	{
		case T_VariableSetStmt:
		case T_VariableShowStmt:
		case T_TransactionStmt:
		case T_DoStmt:
		case T_CallStmt:
		case T_ExplainStmt:
		case T_DeclareCursorStmt:
		case T_FetchStmt:
		case T_ClosePortalStmt:
		case T_PrepareStmt:
		case T_ExecuteStmt:
		case T_DeallocateStmt:
		case T_ListenStmt:
		case T_UnlistenStmt:
		case T_NotifyStmt:
		case T_LockStmt:
			return false;
		default:
			tenure_writing++;
			return true;
	}
}

void
tenure_fence_utility_end(bool counted)
{
	if (counted && tenure_writing > 0)
		tenure_writing--;
}

/*
 * Fence triggers known to be fence_table()'s: relations whose row of
 * tenure.fenced names the lease their trigger names (see
 * tenure_fence_trigger_fired()).  Forgotten when the relation's cache
 * entry is invalidated, which creating, replacing or dropping any of its
 * triggers does, and with it fence_table() and unfence_table().
 */
#define TENURE_FENCE_KNOWN	32

typedef struct TenureFenceKnown
{
	Oid			relid;			/* InvalidOid: a free slot */
	char		lease[TENURE_NAME_MAX + 1];
} TenureFenceKnown;

static TenureFenceKnown tenure_fence_known[TENURE_FENCE_KNOWN];
static int	tenure_fence_known_next = 0;

static void
tenure_fence_known_reset(Datum arg, Oid relid)
{
	int			i;

	for (i = 0; i < TENURE_FENCE_KNOWN; i++)
		if (!OidIsValid(relid) || tenure_fence_known[i].relid == relid)
			tenure_fence_known[i].relid = InvalidOid;
}

/*
 * At library load: count the statements that write rows (tenure_writing),
 * and register the callback that forgets known fence triggers (registering
 * later could find the callback slots taken, which is FATAL).
 */
void
tenure_fence_init(void)
{
	CacheRegisterRelcacheCallback(tenure_fence_known_reset, (Datum) 0);
	tenure_prev_planner = planner_hook;
	planner_hook = tenure_planner;
	tenure_prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = tenure_executor_start;
	tenure_prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = tenure_executor_end;
}

/*
 * Subtransaction events (from txn.c's callback): keep tenure_writing as it
 * was when the subtransaction started, should it abort.
 */
void
tenure_fence_subxact(SubXactEvent event)
{
	MemoryContext old;

	switch (event)
	{
		case SUBXACT_EVENT_START_SUB:
			old = MemoryContextSwitchTo(TopTransactionContext);
			tenure_writing_saved = lappend_int(tenure_writing_saved, tenure_writing);
			MemoryContextSwitchTo(old);
			break;
		case SUBXACT_EVENT_COMMIT_SUB:
		case SUBXACT_EVENT_ABORT_SUB:
			if (tenure_writing_saved == NIL)
				break;
			if (event == SUBXACT_EVENT_ABORT_SUB)
				tenure_writing = llast_int(tenure_writing_saved);
			tenure_writing_saved = list_delete_last(tenure_writing_saved);
			break;
		default:
			break;
	}
}

/*
 * Whether rows are being written (see tenure_writing).
 */
static bool
tenure_rows_being_written(void)
{
	return tenure_writing > 0;
}

/*
 * Refuse to change leases or fences from a trigger, naming the function
 * called: a trigger runs with the writing role's privileges without that
 * role asking for it, and another role may have written it (a role with
 * only the TRIGGER privilege on a fenced table could otherwise unfence it,
 * or claim the writer's epoch, in the writer's name).  A statement's own
 * expressions may call pg_tenure's functions (INSERT INTO log SELECT
 * tenure.claim_epoch(...)): the client wrote them.
 */
static void
tenure_require_not_trigger(FunctionCallInfo fcinfo)
{
	Oid			fn = fcinfo->flinfo->fn_oid;

	if (tenure_trigger_depth() > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot execute %s() from a trigger",
						quote_qualified_identifier(get_namespace_name(get_func_namespace(fn)),
												   get_func_name(fn))),
				 errdetail("A trigger runs because rows are written, with the writing role's privileges, and another role may have put it on the table; it cannot change leases or fences in the writer's name."),
				 errhint("Call pg_tenure's functions from the statements of the transaction itself.")));
}

/*
 * The checks every function that changes leases or fences makes first:
 * pg_tenure is loaded, this is a primary, and no trigger called it.
 */
void
tenure_require_changes(FunctionCallInfo fcinfo)
{
	tenure_require_loaded();
	tenure_require_primary(fcinfo);
	tenure_require_not_trigger(fcinfo);
}

/*
 * Check hook of tenure.tokens: parse "lease=epoch[, lease=epoch ...]"
 * (the syntax is tokens.c's) into the setting's "extra", allocated as the
 * GUC machinery frees it.  No catalog access and no ERROR here: a bad
 * value is reported through GUC_check_errmsg.  Linear in the value's
 * length, plus sorting at most TENURE_TOKENS_MAX_COUNT tokens.
 */
bool
tenure_tokens_check(char **newval, void **extra, GucSource source)
{
	const char *value = *newval ? *newval : "";
	TenureTokensError err;
	size_t		len;
	size_t		size;
	TenureTokensValue *held;
	TenureTokens *tokens;
	const char *duplicate;

	err = tenure_tokens_measure(value, &len, &size);
	if (err == TENURE_TOKENS_TOO_LONG)
	{
		GUC_check_errmsg("tenure.tokens is too long");
		GUC_check_errdetail("The value is %zu bytes long; at most %d bytes are allowed.",
							len, TENURE_TOKENS_MAX_BYTES);
		GUC_check_errhint("Present only the tokens of the leases the transaction writes through.");
		return false;
	}
	if (err == TENURE_TOKENS_TOO_MANY)
	{
		GUC_check_errmsg("tenure.tokens holds too many tokens");
		GUC_check_errdetail("At most %d tokens are allowed.", TENURE_TOKENS_MAX_COUNT);
		GUC_check_errhint("Present only the tokens of the leases the transaction writes through.");
		return false;
	}
	Assert(err == TENURE_TOKENS_OK);

	held = tenure_guc_malloc(TENURE_TOKENS_VALUE_HEADER + size);
	if (held == NULL)
		return false;
	held->offered = (source == PGC_S_SESSION && tenure_trigger_depth() == 0 &&
					 !tenure_rows_being_written());
	held->presented_in = 0;
	tokens = TenureTokensOf(held);

	switch (tenure_tokens_parse(value, tokens, size, &duplicate))
	{
		case TENURE_TOKENS_OK:
			*extra = held;
			return true;
		case TENURE_TOKENS_BAD_FORM:
			GUC_check_errmsg("invalid value for tenure.tokens: \"%s\"", *newval);
			GUC_check_errdetail("Each token must have the form lease=epoch, tokens separated by commas.");
			break;
		case TENURE_TOKENS_BAD_NAME:
			GUC_check_errmsg("invalid lease name in tenure.tokens: \"%s\"", *newval);
			GUC_check_errdetail("A lease name is 1 to %d bytes long, contains neither \",\" nor \"=\", and neither begins nor ends with white space.",
								TENURE_NAME_MAX);
			break;
		case TENURE_TOKENS_BAD_EPOCH:
			GUC_check_errmsg("invalid epoch in tenure.tokens: \"%s\"", *newval);
			GUC_check_errdetail("An epoch is a positive bigint, as returned by tenure.acquire().");
			break;
		case TENURE_TOKENS_DUPLICATE:
			/* formatted now: duplicate points into tokens */
			GUC_check_errmsg("lease \"%s\" appears twice in tenure.tokens",
							 duplicate);
			break;
		case TENURE_TOKENS_TOO_LONG:
		case TENURE_TOKENS_TOO_MANY:
			Assert(false);		/* measured above */
			break;
	}
	tenure_guc_free(held);
	return false;
}

/*
 * Assign hook of tenure.tokens: remember the value; stamp a value offered
 * by an explicit assignment with the transaction that assigns it, the
 * first time it is assigned (see TenureTokensValue).
 */
void
tenure_tokens_assign(const char *newval, void *extra)
{
	TenureTokensValue *held = (TenureTokensValue *) extra;

	tenure_tokens_value = held;
	tenure_tokens = held ? TenureTokensOf(held) : NULL;
	if (held != NULL && held->offered)
	{
		held->offered = false;
		if (IsTransactionState())
			held->presented_in = tenure_fence_serial;
	}
}

/*
 * Whether the current value of tenure.tokens was presented by this
 * transaction (see TenureTokensValue).
 */
static bool
tenure_tokens_count(void)
{
	return tenure_tokens_value != NULL &&
		tenure_tokens_value->presented_in == tenure_fence_serial;
}

/*
 * The token tenure.tokens holds for a lease, whether or not it counts in
 * this transaction; 0 if none.
 */
static int64
tenure_token_of(const char *name)
{
	const TenureToken *found = tenure_tokens_find(tenure_tokens, name);

	return found ? found->epoch : 0;
}

/*
 * The token this transaction presents for a lease; 0 if none.  Only a
 * value of tenure.tokens assigned in this very transaction counts:
 * nothing is ever presented implicitly, and nothing an earlier
 * transaction, an earlier client of a pooled connection, a role or
 * database setting or the configuration left in the setting counts.
 */
static int64
tenure_presented(const char *name)
{
	if (!tenure_tokens_count())
		return 0;
	return tenure_token_of(name);
}

/*
 * Wait until no transaction that issues a new epoch for a lease of fence
 * lock view n is between its commit record and the publication of that
 * epoch: such a transaction holds the view's lock in ExclusiveLock mode
 * from its PRE_COMMIT until after its COMMIT callback.
 */
static void
tenure_fence_wait_publication(int n)
{
	LOCKTAG		tag;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, tenure_fence_rel(n));
	(void) LockAcquire(&tag, RowExclusiveLock, false, false);
	(void) LockRelease(&tag, RowExclusiveLock, false);
}

/*
 * Check a write to "table" fenced by lease "name"; raise TN002 if it does
 * not carry the current epoch of a live tenure.  If fence_lock is not
 * NULL, set it to the lease's fence lock view (-1 if the lease has no
 * shared entry: it has not been held since the server started).
 *
 * At the statement, a token newer than the epoch shared memory knows may
 * belong to a new tenure or claim whose transaction is visible but has not
 * yet published its epoch (it does so in its COMMIT callback, under its
 * fence lock): wait for that lock once, then look again, so that a writer
 * that read the epoch from tenure.lease or current_epoch() never gets
 * TN002 for it.  At COMMIT the caller holds the fence lock already.
 */
void
tenure_fence_check(const char *name, const char *table, bool at_commit,
				   int *fence_lock)
{
	TenureKey	key;
	TenureFenceView view;
	int64		presented;
	int64		current = 0;
	bool		live = false;
	bool		known;
	bool		waited = false;
	bool		loaded = false;
	int			lock = -1;
	int64		now;

	presented = tenure_presented(name);
	tenure_make_key(&key, MyDatabaseId, name);
retry:
	now = tenure_mono_now();
	tenure_state_fence(&key, now, presented,
					   at_commit ? TENURE_FENCED_COMMIT_ACCEPTED :
					   TENURE_FENCED_STATEMENT_ACCEPTED, &view);
	known = view.known;
	if (known)
	{
		current = view.epoch;
		live = view.live;
		lock = view.fence_lock;
	}
	if (fence_lock)
		*fence_lock = lock;

	if (presented != 0 && presented == current && live)
		return;

	if (presented > current && known && !at_commit && !waited)
	{
		tenure_fence_wait_publication(lock);
		waited = true;
		goto retry;
	}

	/* a tenure that a promotion continued, not loaded yet (src/README, P2) */
	if (!known && !at_commit && !loaded && tenure_ensure_continued(name, &key))
	{
		loaded = true;
		goto retry;
	}

	/* rejected, whichever the reason */
	tenure_state_fence_rejected(&key, at_commit ? TENURE_FENCED_COMMIT_REJECTED :
								TENURE_FENCED_STATEMENT_REJECTED);

	if (presented == 0)
	{
		int64		left = tenure_token_of(name);

		ereport(ERROR,
				(errcode(ERRCODE_TENURE_FENCED),
				 errmsg("table \"%s\" is fenced by lease \"%s\" and the transaction presents no epoch for it",
						table, name),
				 left != 0 ?
				 errdetail("tenure.tokens holds epoch " INT64_FORMAT " for the lease, but this transaction did not present it: the value was set before the transaction began, restored, or set by a trigger.",
						   left) : 0,
				 errhint("Present the epoch in the writing transaction with SET LOCAL tenure.tokens = '%s=<epoch>', set_config(..., true) or tenure.present(..., true).",
						 name)));
	}
	if (!known && !at_commit)
	{
		/*
		 * Not held since the server started: name the latest epoch from
		 * the lease's row, without taking a lease slot for it.  (Not at
		 * COMMIT, where the lease was known at the statement: only an
		 * entry evicted since then is missing, and no catalog access
		 * belongs there.)
		 */
		TenureSpi	spi;
		TenureRow	row;

		tenure_spi_begin(&spi);
		tenure_load_row(name, &row, false);
		tenure_spi_end(&spi);
		current = row.epoch;
	}
	if (!live)
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_FENCED),
				 at_commit ?
				 errmsg("commit of a write to table \"%s\" fenced by lease \"%s\" rejected: the lease has no live tenure",
						table, name) :
				 errmsg("write to table \"%s\" fenced by lease \"%s\" rejected: the lease has no live tenure",
						table, name),
				 known || !at_commit ?
				 errdetail("The transaction presented epoch " INT64_FORMAT "; the latest epoch is " INT64_FORMAT ".",
						   presented, current) :
				 errdetail("The transaction presented epoch " INT64_FORMAT ".", presented),
				 errhint("A fenced-out writer must not retry: its tenure has ended.")));
	else
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_FENCED),
				 at_commit ?
				 errmsg("commit of a write to table \"%s\" fenced by lease \"%s\" rejected: epoch " INT64_FORMAT " is not current",
						table, name, presented) :
				 errmsg("write to table \"%s\" fenced by lease \"%s\" rejected: epoch " INT64_FORMAT " is not current",
						table, name, presented),
				 errdetail("The transaction presented epoch " INT64_FORMAT "; the current epoch is " INT64_FORMAT ".",
						   presented, current),
				 errhint("A fenced-out writer must not retry: another tenure or epoch has replaced its own.")));
}

/*
 * Note that this transaction uses a lease's fence in the given mode;
 * fence_lock is the lease's fence lock view, or -1 if not known.
 */
void
tenure_fence_note(const char *lease, const char *table, LOCKMODE mode,
				  int fence_lock)
{
	ListCell   *lc;
	MemoryContext old;
	TenureFenceUse *use;

	if (tenure_fence_checked)
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_FENCED),
				 table != NULL ?
				 errmsg("write to table \"%s\" fenced by lease \"%s\" after the commit-time check",
						table, lease) :
				 errmsg("lease \"%s\" used after the commit-time check", lease),
				 errdetail("The transaction's fences were checked when it began to commit; nothing done later can be checked.")));

	foreach(lc, tenure_fence_uses)
	{
		use = lfirst(lc);
		if (strcmp(use->lease, lease) == 0)
		{
			if (mode > use->mode)
				use->mode = mode;
			if (use->table == NULL && table != NULL)
				use->table = MemoryContextStrdup(TopTransactionContext, table);
			if (use->fence_lock < 0)
				use->fence_lock = fence_lock;
			return;
		}
	}

	old = MemoryContextSwitchTo(TopTransactionContext);
	use = palloc0(sizeof(TenureFenceUse));
	strlcpy(use->lease, lease, sizeof(use->lease));
	use->table = table ? pstrdup(table) : NULL;
	use->mode = mode;
	use->fence_lock = fence_lock;
	tenure_fence_uses = lappend(tenure_fence_uses, use);
	MemoryContextSwitchTo(old);
}

/*
 * Whether this transaction wrote a fenced table.
 */
bool
tenure_fence_wrote(void)
{
	ListCell   *lc;

	foreach(lc, tenure_fence_uses)
		if (((TenureFenceUse *) lfirst(lc))->table != NULL)
			return true;
	return false;
}

/*
 * The OID of fence lock view number n, a member of the installed extension
 * (objects.c).
 */
static Oid
tenure_fence_rel(int n)
{
	Assert(n >= 0 && n < TENURE_FENCE_LOCKS);
	return tenure_objects(false)->fence_locks[n];
}

/*
 * list_sort comparator: the order in which a transaction takes its fence
 * locks, by view, the stronger mode first; leases whose view is unknown,
 * which take no lock, last.
 */
static int
tenure_fence_use_cmp(const ListCell *a, const ListCell *b)
{
	const TenureFenceUse *ua = lfirst(a);
	const TenureFenceUse *ub = lfirst(b);

	if ((ua->fence_lock < 0) != (ub->fence_lock < 0))
		return ua->fence_lock >= 0 ? -1 : 1;
	if (ua->fence_lock != ub->fence_lock)
		return ua->fence_lock < ub->fence_lock ? -1 : 1;
	if (ua->mode != ub->mode)
		return ua->mode > ub->mode ? -1 : 1;
	return strcmp(ua->lease, ub->lease);
}

/*
 * PRE_COMMIT: take the fence locks in a fixed order and check every fenced
 * write (src/README, F2 to F4 and F7).  May raise an ERROR, which aborts
 * the transaction.
 */
void
tenure_fence_precommit(void)
{
	ListCell   *lc;

	/* whatever happens from here on is not checked: refuse it */
	tenure_fence_checked = true;
	if (tenure_fence_uses == NIL)
		return;

	/*
	 * Nothing waits between the fence locks and the commit record (F11).
	 * PostgreSQL runs the ON COMMIT actions of temporary tables after the
	 * PRE_COMMIT callbacks, and they can wait for other sessions' locks:
	 * dropping a table takes locks on what depends on it, emptying one
	 * waits for any lock on it or its indexes.  Run them here, before any
	 * fence lock; PostgreSQL's own pass then finds the tables dropped, or
	 * empties them again under the locks this pass took.  A superuser's
	 * commit is left alone: a superuser can hold any lock anyway, and the
	 * isolation specs stop a commit past its check this way.
	 */
	if (!superuser())
		PreCommit_on_commit_actions();

	/*
	 * Claims and new tenures learn their lease's view here.  One that has
	 * no view would publish its epoch without excluding writers, and a
	 * known lease without one would be checked unlocked: internal errors,
	 * never silent.  (A write to a lease with no entry needs no lock: its
	 * check fails, the lease having no live tenure.)
	 */
	foreach(lc, tenure_fence_uses)
	{
		TenureFenceUse *use = lfirst(lc);
		TenureKey	key;
		TenureFenceView view;

		if (use->fence_lock >= 0)
			continue;
		tenure_make_key(&key, MyDatabaseId, use->lease);
		tenure_state_fence(&key, tenure_mono_now(), 0, TENURE_FENCED_NONE,
						   &view);
		use->fence_lock = view.fence_lock;
		if (use->fence_lock < 0 && (view.has_entry || use->mode == ExclusiveLock))
			elog(ERROR, "lease \"%s\" has no fence lock", use->lease);
	}

	list_sort(tenure_fence_uses, tenure_fence_use_cmp);
	foreach(lc, tenure_fence_uses)
	{
		TenureFenceUse *use = lfirst(lc);

		if (use->fence_lock >= 0)
		{
			LOCKTAG		tag;

			SET_LOCKTAG_RELATION(tag, MyDatabaseId,
								 tenure_fence_rel(use->fence_lock));
			if (use->mode == ExclusiveLock && tenure_claim_timeout > 0)
			{
				/*
				 * A new epoch waits for writers that are committing; one
				 * stuck (in a synchronous replication wait, say) must not
				 * stall it, and every fenced writer queued behind it,
				 * forever.
				 */
				int			nestlevel = NewGUCNestLevel();
				char		ms[32];

				snprintf(ms, sizeof(ms), "%d",
						 LockTimeout > 0 ? Min(LockTimeout, tenure_claim_timeout) :
						 tenure_claim_timeout);
				(void) set_config_option("lock_timeout", ms, PGC_USERSET,
										 PGC_S_SESSION, GUC_ACTION_SAVE, true,
										 0, false);
				(void) LockAcquire(&tag, use->mode, false, false);
				AtEOXact_GUC(true, nestlevel);
			}
			else
				(void) LockAcquire(&tag, use->mode, false, false);
		}

		if (use->table != NULL)
			tenure_fence_check(use->lease, use->table, true, NULL);
	}
}

/*
 * PRE_PREPARE: nothing written from here on could be checked at COMMIT
 * PREPARED, where no callback runs; refuse it like a write after the
 * commit-time check.
 */
void
tenure_fence_seal(void)
{
	tenure_fence_checked = true;
}

/*
 * Forget the transaction's fence uses and check (commit, abort or
 * prepare); the next transaction has a new serial.
 */
void
tenure_fence_reset(void)
{
	tenure_fence_serial++;
	tenure_writing = 0;
	tenure_writing_saved = NIL;
	tenure_fence_uses = NIL;
	tenure_fence_checked = false;
}

/*
 * Fail unless tenure.fenced says that the lease the trigger names fences
 * its table (see tenure_fence_trigger_fired()).  Known pairs are kept, so
 * that a fenced table's writes read tenure.fenced again only after the
 * table's cache entry was invalidated (its triggers changed, VACUUM,
 * ANALYZE, an invalidation overflow), or when the backend writes more
 * than TENURE_FENCE_KNOWN fenced tables in turn.
 */
static void
tenure_fence_trigger_owned(TriggerData *trigdata, const char *function)
{
	Oid			relid = RelationGetRelid(trigdata->tg_relation);
	const char *lease = trigdata->tg_trigger->tgargs[0];
	char	   *fenced_by;
	TenureFenceKnown *slot;
	int			i;

	for (i = 0; i < TENURE_FENCE_KNOWN; i++)
		if (tenure_fence_known[i].relid == relid &&
			strcmp(tenure_fence_known[i].lease, lease) == 0)
			return;

	fenced_by = tenure_fenced_by(relid);
	if (fenced_by == NULL || strcmp(fenced_by, lease) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s on table \"%s\" names lease \"%s\", which does not fence the table",
						function, RelationGetRelationName(trigdata->tg_relation), lease),
				 fenced_by == NULL ?
				 errdetail("tenure.fenced lists no lease for the table.") :
				 errdetail("tenure.fenced lists lease \"%s\" for the table.", fenced_by),
				 errhint("Use tenure.fence_table() to fence a table, and drop the trigger.")));
	if (strlen(lease) > TENURE_NAME_MAX)
		return;					/* (not a lease name: nothing to keep) */
	/* a free slot, else the next in turn */
	slot = NULL;
	for (i = 0; i < TENURE_FENCE_KNOWN && slot == NULL; i++)
		if (!OidIsValid(tenure_fence_known[i].relid))
			slot = &tenure_fence_known[i];
	if (slot == NULL)
	{
		slot = &tenure_fence_known[tenure_fence_known_next];
		tenure_fence_known_next = (tenure_fence_known_next + 1) % TENURE_FENCE_KNOWN;
	}
	slot->relid = relid;
	strlcpy(slot->lease, lease, sizeof(slot->lease));
}

/*
 * Refuse a fence trigger function fired other than fence_table() creates
 * it: as a BEFORE ... FOR EACH STATEMENT trigger (the fence trigger), or
 * an AFTER ... FOR EACH ROW trigger (the apply trigger, for_row), with the
 * lease's name as its one argument, on a table that tenure.fenced says
 * that lease fences.  Whoever may create triggers on a table can name
 * these functions and any lease in one; without the last check such a
 * trigger would let any role fence its tables by another role's lease,
 * which only the lease's owner may do (fence_table()), take that lease's
 * fence lock at its commits and count its writes in that lease's
 * statistics.  (The event triggers refuse to replace or disable the
 * triggers fence_table() made: fence_ddl.c.)
 */
static void
tenure_fence_trigger_fired(FunctionCallInfo fcinfo, const char *function,
						   bool for_row)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	bool		as_made;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s must be called as a trigger", function)));
	if (for_row)
		as_made = TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) &&
			TRIGGER_FIRED_AFTER(trigdata->tg_event);
	else
		as_made = TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event) &&
			TRIGGER_FIRED_BEFORE(trigdata->tg_event);
	if (!as_made || trigdata->tg_trigger->tgnargs != 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("%s was fired in an unsupported way", function),
				 for_row ?
				 errdetail("It must be an AFTER ... FOR EACH ROW trigger whose one argument names the lease.") :
				 errdetail("It must be a BEFORE ... FOR EACH STATEMENT trigger whose one argument names the lease."),
				 errhint("Use tenure.fence_table() to fence a table.")));
	tenure_fence_trigger_owned(trigdata, function);
}

/*
 * Trigger function tenure.fence_trigger(lease): BEFORE ... FOR EACH
 * STATEMENT on INSERT, UPDATE, DELETE and TRUNCATE of a fenced table.
 */
Datum
pg_tenure_fence_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	const char *lease;
	const char *table;
	int			fence_lock = -1;

	tenure_fence_trigger_fired(fcinfo, "tenure.fence_trigger()", false);

	tenure_require_loaded();
	lease = trigdata->tg_trigger->tgargs[0];
	table = RelationGetRelationName(trigdata->tg_relation);

	/* apply's TRUNCATE and tablesync's COPY: say why, as the row trigger does */
	if (IsLogicalWorker())
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_FENCED),
				 errmsg("logical replication cannot write table \"%s\", which is fenced by lease \"%s\"",
						table, lease),
				 errdetail("A logical replication worker presents no epoch, so the fence rejects every change it applies."),
				 errhint("Stop replicating the table into this database, or unfence it with tenure.unfence_table().")));
	tenure_fence_check(lease, table, false, &fence_lock);
	tenure_fence_note(lease, table, RowExclusiveLock, fence_lock);

	return PointerGetDatum(NULL);
}

/*
 * tenure.present(lease, epoch, is_local)
 *
 * Present a token for the lease, replacing any earlier one, for the
 * transaction (is_local) or the session.
 */
Datum
pg_tenure_present(PG_FUNCTION_ARGS)
{
	char	   *name;
	int64		epoch;
	bool		is_local;
	const TenureTokens *others;
	size_t		kept_len;
	char	   *kept;
	char	   *value;

	tenure_arg_not_null(fcinfo, 0, "lease");
	tenure_arg_not_null(fcinfo, 1, "epoch");
	tenure_arg_not_null(fcinfo, 2, "is_local");
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	epoch = PG_GETARG_INT64(1);
	is_local = PG_GETARG_BOOL(2);
	if (!tenure_token_name_ok(name, strlen(name)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid lease name \"%s\"", name),
				 errdetail("A lease name is 1 to %d bytes long, contains neither \",\" nor \"=\", and neither begins nor ends with white space.",
						   TENURE_NAME_MAX)));
	if (epoch <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epoch must be positive"),
				 errdetail("The epoch given is " INT64_FORMAT ".", epoch)));

	/*
	 * The other leases' tokens, then this one.  Only tokens this
	 * transaction presented are kept: re-presenting a value left by an
	 * earlier transaction would make it count.
	 */
	others = tenure_tokens_count() ? tenure_tokens : NULL;
	kept_len = tenure_tokens_print(others, name, NULL, 0);
	kept = palloc(kept_len + 1);
	(void) tenure_tokens_print(others, name, kept, kept_len + 1);
	value = psprintf("%s%s%s=" INT64_FORMAT,
					 kept, kept_len > 0 ? "," : "", name, epoch);

	(void) set_config_option("tenure.tokens", value,
							 PGC_USERSET, PGC_S_SESSION,
							 is_local ? GUC_ACTION_LOCAL : GUC_ACTION_SET,
							 true, 0, false);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(pg_tenure_fence_apply_trigger);

/*
 * Trigger function tenure.fence_apply_trigger(lease): AFTER ... FOR EACH
 * ROW on INSERT, UPDATE and DELETE of a fenced table, enabled REPLICA, so
 * that it fires only under session_replication_role = replica.
 *
 * Logical replication apply writes rows without firing statement triggers,
 * and presents no epoch: in a logical replication worker every write is
 * rejected.  (Apply's TRUNCATE fires the statement trigger, which rejects
 * it for want of a token.)  Any other session that set
 * session_replication_role = replica gets the statement trigger's check,
 * made again here for each row, so that a replication tool that writes
 * rows like the apply worker does is checked too.
 */
Datum
pg_tenure_fence_apply_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	const char *lease;
	const char *table;
	int			fence_lock = -1;

	tenure_fence_trigger_fired(fcinfo, "tenure.fence_apply_trigger()", true);

	lease = trigdata->tg_trigger->tgargs[0];
	table = RelationGetRelationName(trigdata->tg_relation);

	if (IsLogicalWorker())
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_FENCED),
				 errmsg("logical replication cannot write table \"%s\", which is fenced by lease \"%s\"",
						table, lease),
				 errdetail("A logical replication worker presents no epoch, so the fence rejects every change it applies."),
				 errhint("Stop replicating the table into this database, or unfence it with tenure.unfence_table().")));

	tenure_require_loaded();
	tenure_fence_check(lease, table, false, &fence_lock);
	tenure_fence_note(lease, table, RowExclusiveLock, fence_lock);
	return PointerGetDatum(NULL);
}
