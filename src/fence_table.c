/*-------------------------------------------------------------------------
 *
 * fence_table.c
 *		Setting fences up and taking them down: tenure.fence_table(),
 *		tenure.unfence_table(), and the verbs on fences that the event
 *		trigger (fence_ddl.c) shares with them.
 *
 * A fence is a row of tenure.fenced, which names a table and its lease,
 * and the fence triggers on that table (tenure_fence_one()).
 * fence_table() fences a whole partition or inheritance tree by one lease,
 * from its root, and refuses a tree that no fence could cover: a temporary
 * or foreign table in it, a logical replication target, a descendant that
 * also inherits from a table outside the tree, a table that uses objects
 * of another role or of pg_tenure.  unfence_table() removes the fence of a
 * whole tree.  What a fence covers, and how DDL keeps trees whole:
 * fence_ddl.c.
 *
 * INTERFACE ROUTINES (for the event trigger, fence_ddl.c)
 *
 * Fences:
 *		tenure_fence_one()		fence one table by a lease
 *		tenure_fence_forget()	forget that a table is fenced
 *		tenure_fence_any()		whether anything is fenced, as committed now
 *		(the lease that fences a table, as committed now, is catalog.c's
 *		tenure_fence_lease() and tenure_fenced_by(): the fence triggers
 *		ask it too)
 *		tenure_fence_spi_begin() an SPI session with the planner settings
 *								pinned, for every statement of the fence
 *		tenure_fence_query()	run a query under the latest snapshot
 *		tenure_fence_utility()	run pg_tenure's own DDL, which the event
 *								trigger lets pass while
 *								tenure_fence_utility_running()
 *
 * Tables and subscriptions, for messages and tree walks:
 *		tenure_rel_qualified(), tenure_rel_parents(),
 *		tenure_rel_subscription(), tenure_subscription_name()
 *
 * What shapes a fenced table's rows (src/README, F9):
 *		tenure_fence_foreign_check() runs a query that TENURE_FOREIGN_QUERY
 *		(fence_table.h) builds
 *
 * The writes themselves are checked in fence.c (src/README, F2).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_subscription.h"
#include "catalog/pg_subscription_rel.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "pg_tenure.h"
#include "objects.h"
#include "catalog.h"
#include "args.h"
#include "fence.h"
#include "fence_table.h"

PG_FUNCTION_INFO_V1(pg_tenure_fence_table);
PG_FUNCTION_INFO_V1(pg_tenure_unfence_table);

/*
 * A table's schema-qualified, quoted name, for messages and DDL.
 */
char *
tenure_rel_qualified(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * Planner settings that every statement of the fence runs with, whatever
 * the session set.  A session with enable_seqscan = off, say, would have
 * catalog queries costed near 1e10, planned strangely and JIT-compiled on
 * every DDL command; the event trigger runs on everyone's DDL, so its
 * plans must not depend on anyone's settings.  Each method is enabled (as
 * by default), and JIT is off: these statements read a few catalog rows.
 */
static const char *const tenure_fence_planner[][2] = {
	{"enable_bitmapscan", "on"},
	{"enable_gathermerge", "on"},
	{"enable_hashagg", "on"},
	{"enable_hashjoin", "on"},
	{"enable_incremental_sort", "on"},
	{"enable_indexonlyscan", "on"},
	{"enable_indexscan", "on"},
	{"enable_material", "on"},
	{"enable_memoize", "on"},
	{"enable_mergejoin", "on"},
	{"enable_nestloop", "on"},
	{"enable_parallel_append", "on"},
	{"enable_parallel_hash", "on"},
	{"enable_seqscan", "on"},
	{"enable_sort", "on"},
	{"enable_tidscan", "on"},
	{"jit", "off"},
};

/*
 * Begin an SPI session (tenure_spi_begin()) with the planner settings
 * above, set at its GUC nest level: tenure_spi_end() puts the session's
 * own back.  Every SPI session of fence_table.c and fence_ddl.c begins
 * here.
 */
void
tenure_fence_spi_begin(TenureSpi *spi)
{
	int			i;

	tenure_spi_begin(spi);
	for (i = 0; i < (int) lengthof(tenure_fence_planner); i++)
		(void) set_config_option(tenure_fence_planner[i][0], tenure_fence_planner[i][1],
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * Run a query in pg_tenure's SPI session (tenure_fence_spi_begin()) under
 * the latest snapshot, not the transaction's: who is fenced must be read
 * as committed now, or a REPEATABLE READ transaction attaching a partition
 * would not see a fence committed after its snapshot was taken (see
 * pg_tenure_fence_table()).  The command counter advances as usual, so the
 * transaction's own changes are seen too.  types has a letter per
 * argument, as for tenure_spi_plan(): 'o' oid, 'O' oid[].
 */
void
tenure_fence_query(const char *sql, const char *types, Datum *args)
{
	int			rc;

	/* planned once per backend (catalog.c), under the pinned settings */
	rc = SPI_execute_snapshot(tenure_spi_plan(sql, types), args, NULL,
							  GetLatestSnapshot(), InvalidSnapshot, false,
							  true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_snapshot failed: %s", SPI_result_code_string(rc));
}

/*
 * Whether any table of this database is fenced, as committed now (and
 * written by this transaction so far).  A scan of tenure.fenced that
 * stops at its first row: the event trigger asks it first, and has no
 * more to do in a database that fences nothing.
 */
bool
tenure_fence_any(void)
{
	Relation	rel;
	Snapshot	snapshot;
	SysScanDesc scan;
	bool		any;

	rel = table_open(tenure_objects(false)->fenced, AccessShareLock);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
	any = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, AccessShareLock);
	return any;
}

/*
 * The tables relid inherits from, as a partition or an inheritance child,
 * in inhseqno order.  A catalog scan: it sees the latest committed state.
 */
List *
tenure_rel_parents(Oid relid)
{
	Relation	inh;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *parents = NIL;

	inh = table_open(InheritsRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(inh, InheritsRelidSeqnoIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
		parents = lappend_oid(parents, ((Form_pg_inherits) GETSTRUCT(tup))->inhparent);
	systable_endscan(scan);
	table_close(inh, AccessShareLock);
	return parents;
}

/*
 * The root of the tree relid belongs to, following first parents.
 */
static Oid
tenure_rel_root(Oid relid)
{
	List	   *parents;

	while ((parents = tenure_rel_parents(relid)) != NIL)
		relid = linitial_oid(parents);
	return relid;
}

/*
 * A logical replication subscription of this database that writes table
 * relid (pg_subscription_rel is per database), or InvalidOid.
 */
Oid
tenure_rel_subscription(Oid relid)
{
	Relation	subrel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			subid = InvalidOid;

	subrel = table_open(SubscriptionRelRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_subscription_rel_srrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(subrel, SubscriptionRelSrrelidSrsubidIndexId,
							  true, NULL, 1, &key);
	if (HeapTupleIsValid(tup = systable_getnext(scan)))
		subid = ((Form_pg_subscription_rel) GETSTRUCT(tup))->srsubid;
	systable_endscan(scan);
	table_close(subrel, AccessShareLock);
	return subid;
}

/*
 * The name of subscription subid, for messages.
 */
const char *
tenure_subscription_name(Oid subid)
{
	char	   *name = get_subscription_name(subid, true);

	return name ? name : "?";
}

/* set while pg_tenure itself runs DDL, which fires event triggers */
static bool tenure_fence_ddl_running = false;

/*
 * Run one utility statement as the current user.
 */
void
tenure_fence_utility(const char *sql)
{
	bool		save = tenure_fence_ddl_running;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	tenure_fence_ddl_running = true;
	PG_TRY();
	{
		if (SPI_execute(sql, false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "SPI_execute failed: %s", sql);
	}
	PG_FINALLY();
	{
		tenure_fence_ddl_running = save;
	}
	PG_END_TRY();
	SPI_finish();
}

/*
 * Whether tenure_fence_utility() is running a statement: the event
 * trigger lets pg_tenure's own DDL pass.
 */
bool
tenure_fence_utility_running(void)
{
	return tenure_fence_ddl_running;
}

/*
 * The fence triggers table relid has now, as quoted names in cxt.  Inside
 * an SPI session.
 */
static List *
tenure_fence_triggers_of(Oid relid, MemoryContext cxt)
{
	Datum		args[1];
	List	   *names = NIL;
	uint64		i;

	args[0] = ObjectIdGetDatum(relid);
	tenure_fence_query("SELECT pg_catalog.quote_ident(tgname) FROM pg_catalog.pg_trigger"
					   " WHERE tgrelid OPERATOR(pg_catalog.=) $1"
					   " AND tgname OPERATOR(pg_catalog.=) ANY ('{tenure_fence,tenure_fence_apply}')",
					   "o", args);
	for (i = 0; i < SPI_processed; i++)
	{
		char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		MemoryContext old = MemoryContextSwitchTo(cxt);

		names = lappend(names, pstrdup(name));
		MemoryContextSwitchTo(old);
	}
	return names;
}

/*
 * Forget that table relid is fenced.  Inside an SPI session.
 */
void
tenure_fence_forget(Oid relid)
{
	Datum		args[1];

	args[0] = ObjectIdGetDatum(relid);
	tenure_spi_exec("DELETE FROM tenure.fenced WHERE tbl OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
					"o", args, NULL, SPI_OK_DELETE);
}

/*
 * Drop the triggers named (quoted) in names from table relid, as the
 * current user.
 */
static void
tenure_fence_drop_triggers(Oid relid, List *names)
{
	char	   *qualified = tenure_rel_qualified(relid);
	ListCell   *lc;

	foreach(lc, names)
		tenure_fence_utility(psprintf("DROP TRIGGER %s ON %s",
									  (char *) lfirst(lc), qualified));
}

/*
 * Fence one table: record it, then create its triggers as the current user
 * (who must be allowed to create triggers on it):
 *
 * - tenure_fence, BEFORE ... FOR EACH STATEMENT, enabled ALWAYS: the fence
 *   of every statement that names the table, in every
 *   session_replication_role;
 * - on tables that hold rows (not partitioned tables), tenure_fence_apply,
 *   AFTER ... FOR EACH ROW, enabled REPLICA: it fires only under
 *   session_replication_role = replica, where logical replication apply
 *   writes rows without firing statement triggers.  AFTER, not BEFORE: a
 *   BEFORE UPDATE or DELETE row trigger makes every ordinary UPDATE and
 *   DELETE lock each row first, even while the trigger is not enabled;
 *   an AFTER one costs them next to nothing, and still aborts the applied
 *   transaction before it commits.
 */
void
tenure_fence_one(Oid relid, const char *lease)
{
	MemoryContext cxt = CurrentMemoryContext;
	TenureSpi	spi;
	Datum		args[2];
	char	   *qualified;
	StringInfoData sql;
	List	   *left;

	tenure_fence_spi_begin(&spi);
	args[0] = ObjectIdGetDatum(relid);
	args[1] = CStringGetTextDatum(lease);
	tenure_spi_exec("INSERT INTO tenure.fenced (tbl, lease) VALUES ($1::pg_catalog.regclass, $2)",
					"ot", args, NULL, SPI_OK_INSERT);
	/*
	 * Fence triggers left without their row of tenure.fenced (restored in
	 * the post-data section alone, say) are replaced.
	 */
	left = tenure_fence_triggers_of(relid, cxt);
	tenure_spi_end(&spi);
	tenure_fence_drop_triggers(relid, left);

	qualified = tenure_rel_qualified(relid);
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "CREATE TRIGGER tenure_fence BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s"
					 " FOR EACH STATEMENT EXECUTE FUNCTION tenure.fence_trigger(%s)",
					 qualified, quote_literal_cstr(lease));
	tenure_fence_utility(sql.data);
	resetStringInfo(&sql);
	appendStringInfo(&sql, "ALTER TABLE %s ENABLE ALWAYS TRIGGER tenure_fence", qualified);
	tenure_fence_utility(sql.data);

	if (get_rel_relkind(relid) != RELKIND_RELATION)
		return;
	resetStringInfo(&sql);
	appendStringInfo(&sql,
					 "CREATE TRIGGER tenure_fence_apply AFTER INSERT OR UPDATE OR DELETE ON %s"
					 " FOR EACH ROW EXECUTE FUNCTION tenure.fence_apply_trigger(%s)",
					 qualified, quote_literal_cstr(lease));
	tenure_fence_utility(sql.data);
	resetStringInfo(&sql);
	appendStringInfo(&sql, "ALTER TABLE %s ENABLE REPLICA TRIGGER tenure_fence_apply", qualified);
	tenure_fence_utility(sql.data);
}

/*
 * Unfence one table: forget it and drop its triggers.
 */
static void
tenure_unfence_one(Oid relid)
{
	MemoryContext cxt = CurrentMemoryContext;
	TenureSpi	spi;
	List	   *triggers;

	tenure_fence_spi_begin(&spi);
	tenure_fence_forget(relid);
	triggers = tenure_fence_triggers_of(relid, cxt);
	tenure_spi_end(&spi);
	tenure_fence_drop_triggers(relid, triggers);
}

/*
 * Fail unless the current user owns the table (only the owner of a table
 * can fence or unfence it).
 */
static void
tenure_check_table_owner(Oid relid)
{
	if (!tenure_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
}

/*
 * Common checks of fence_table and unfence_table; returns the table and
 * all its partitions or inheritance descendants, the table first, each
 * locked in ShareRowExclusiveLock mode against concurrent DDL.
 */
static List *
tenure_fence_targets(FunctionCallInfo fcinfo)
{
	Oid			relid;
	char		relkind;
	List	   *rels;
	ListCell   *lc;

	tenure_arg_not_null(fcinfo, 0, "tbl");
	relid = PG_GETARG_OID(0);

	tenure_require_changes(fcinfo);

	/*
	 * find_all_inheritors() locks the descendants, not the table itself:
	 * lock it first, then look at what it is.
	 */
	LockRelationOid(relid, ShareRowExclusiveLock);
	relkind = get_rel_relkind(relid);
	if (relkind == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", get_rel_name(relid))));

	rels = find_all_inheritors(relid, ShareRowExclusiveLock, NULL);
	foreach(lc, rels)
		tenure_check_table_owner(lfirst_oid(lc));
	return rels;
}

/*
 * A parent, outside the tree rels (root first), of one of the tree's
 * descendants, or InvalidOid; *child is set to that descendant.  With
 * fenced_only, only a fenced parent counts.
 */
static Oid
tenure_tree_outside_parent(List *rels, bool fenced_only, Oid *child)
{
	ListCell   *lc;
	ListCell   *lp;

	for_each_from(lc, rels, 1)
	{
		foreach(lp, tenure_rel_parents(lfirst_oid(lc)))
		{
			Oid			parent = lfirst_oid(lp);

			if (list_member_oid(rels, parent) ||
				(fenced_only && tenure_fenced_by(parent) == NULL))
				continue;
			*child = lfirst_oid(lc);
			return parent;
		}
	}
	return InvalidOid;
}

/*
 * Refuse if a table the seed query names depends on an object of another
 * role or of pg_tenure (TENURE_FOREIGN_QUERY).  fencing: the tables are
 * being fenced by fence_table(), rather than changed by DDL.
 */
void
tenure_fence_foreign_check(const char *sql, Datum tables, bool fencing)
{
	TenureSpi	spi;
	Datum		args[2];
	char	   *table = NULL;
	char	   *object = NULL;
	char	   *owner = NULL;
	char	   *extname = NULL;
	bool		ours = false;

	args[0] = ObjectIdGetDatum(tenure_objects(false)->extension);
	args[1] = tables;
	tenure_fence_spi_begin(&spi);
	tenure_fence_query(sql, tables ? "oO" : "o", args);
	if (SPI_processed > 0)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);

		table = pstrdup(SPI_getvalue(tup, desc, 1));
		object = pstrdup(SPI_getvalue(tup, desc, 2));
		owner = pstrdup(SPI_getvalue(tup, desc, 3));
		ours = strcmp(SPI_getvalue(tup, desc, 4), "t") == 0;
		extname = SPI_getvalue(tup, desc, 5);
		if (extname != NULL)
			extname = pstrdup(extname);
		MemoryContextSwitchTo(old);
	}
	tenure_spi_end(&spi);
	if (table == NULL)
		return;

	if (ours)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 fencing ?
				 errmsg("cannot fence table %s because it uses %s, which belongs to pg_tenure",
						table, object) :
				 errmsg("fenced table %s cannot use %s, which belongs to pg_tenure",
						table, object),
				 errdetail("pg_tenure's own tables, views and types can never be part of a fence.")));
	if (extname != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 fencing ?
				 errmsg("cannot fence table %s because it uses %s of extension \"%s\", owned by role \"%s\"",
						table, object, extname, owner) :
				 errmsg("fenced table %s cannot use %s of extension \"%s\", owned by role \"%s\"",
						table, object, extname, owner),
				 errdetail("Role \"%s\" could drop extension \"%s\", which would change the fenced rows, and the fence would refuse it.",
						   owner, extname),
				 errhint("A fenced table may use only extensions that its owner or a superuser created.")));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 fencing ?
			 errmsg("cannot fence table %s because it uses %s, owned by role \"%s\"",
					table, object, owner) :
			 errmsg("fenced table %s cannot use %s, owned by role \"%s\"",
					table, object, owner),
			 errdetail("A command of role \"%s\" on %s could change the fenced rows, and the fence would refuse it.",
					   owner, object),
			 errhint("A fenced table may use only types, collations, functions and operators that its owner or a superuser owns.")));
}

/*
 * tenure.fence_table(tbl, lease)
 *
 * Fences a whole partition or inheritance tree by one lease: the table,
 * which must be the root of its tree, and every descendant.  Statement
 * triggers fire only for the table a statement names, and a write through
 * a parent fires only the parent's, so fences never cover part of a tree.
 * Refuses trees that hold a foreign table (its writes are made by another
 * server), that share a descendant with another tree, or that logical
 * replication writes into.  tenure._fence_ddl() keeps trees whole when
 * tables are created, attached or inherited later.
 *
 * Concurrent DDL.  The root and every descendant are locked in
 * ShareRowExclusiveLock mode, which conflicts with the lock that creating,
 * attaching or inheriting a child takes on its parent (AccessExclusiveLock
 * or ShareUpdateExclusiveLock), and held until commit.  So a child is
 * either added before: then this transaction waits for that DDL to commit
 * and finds the child in pg_inherits, which catalog scans read as
 * committed now; or after this transaction commits: then the DDL's event
 * trigger, which reads tenure.fenced under the latest snapshot whatever
 * the DDL's isolation level, sees the fence and fences the child.  Either
 * way no partition is left unfenced.
 */
Datum
pg_tenure_fence_table(PG_FUNCTION_ARGS)
{
	char	   *name;
	List	   *rels;
	List	   *parents;
	ListCell   *lc;
	Oid			relid;
	Oid			child = InvalidOid;
	Oid			other;
	TenureSpi	spi;
	Datum		args[1];

	tenure_arg_not_null(fcinfo, 1, "lease");
	name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	rels = tenure_fence_targets(fcinfo);
	relid = linitial_oid(rels);

	parents = tenure_rel_parents(relid);
	if (parents != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot fence table %s on its own", tenure_rel_qualified(relid)),
				 get_rel_relispartition(relid) ?
				 errdetail("It is a partition of table %s, and writes through a parent fire only the parent's triggers.",
						   tenure_rel_qualified(linitial_oid(parents))) :
				 errdetail("It inherits from table %s, and writes through a parent fire only the parent's triggers.",
						   tenure_rel_qualified(linitial_oid(parents))),
				 errhint("Fence its root table %s, which fences the whole tree.",
						 tenure_rel_qualified(tenure_rel_root(relid)))));

	foreach(lc, rels)
	{
		Oid			rel = lfirst_oid(lc);
		Oid			subid;

		if (get_rel_persistence(rel) == RELPERSISTENCE_TEMP)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 rel == relid ?
					 errmsg("cannot fence temporary table %s", tenure_rel_qualified(rel)) :
					 errmsg("cannot fence table %s because its partition or child %s is a temporary table",
							tenure_rel_qualified(relid), tenure_rel_qualified(rel)),
					 errdetail("A temporary table is dropped when its session ends, or by DISCARD, where no fence can check it.")));
		if (get_rel_relkind(rel) == RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot fence table %s because its partition or child %s is a foreign table",
							tenure_rel_qualified(relid), tenure_rel_qualified(rel)),
					 errdetail("Writes to a foreign table are made by another server, where no fence can check them.")));
		subid = tenure_rel_subscription(rel);
		if (OidIsValid(subid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot fence table %s because logical replication subscription \"%s\" writes to table %s",
							tenure_rel_qualified(relid),
							tenure_subscription_name(subid),
							tenure_rel_qualified(rel)),
					 errdetail("Logical replication applies changes without presenting an epoch, so the fence would reject them all."),
					 errhint("Stop replicating the table into this database first.")));
	}
	other = tenure_tree_outside_parent(rels, false, &child);
	if (OidIsValid(other))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot fence table %s because table %s in its tree also inherits from table %s",
						tenure_rel_qualified(relid), tenure_rel_qualified(child),
						tenure_rel_qualified(other)),
				 errdetail("A fence covers a whole inheritance tree, and writes through table %s, outside the tree, would not be checked.",
						   tenure_rel_qualified(other))));

	{
		Datum	   *oids = palloc(sizeof(Datum) * list_length(rels));
		int			n = 0;

		foreach(lc, rels)
			oids[n++] = ObjectIdGetDatum(lfirst_oid(lc));
		tenure_fence_foreign_check(TENURE_FOREIGN_QUERY("SELECT pg_catalog.unnest($2::pg_catalog.oid[])", ""),
								   PointerGetDatum(construct_array(oids, n, OIDOID, sizeof(Oid),
																   true, TYPALIGN_INT)),
								   true);
	}

	tenure_fence_spi_begin(&spi);
	args[0] = CStringGetTextDatum(name);
	/*
	 * Locked against a concurrent drop_lease until we commit.  A fence
	 * keeps its lease from being dropped, and its lock from being changed:
	 * only roles with the lease owner's privileges may set one up.
	 */
	tenure_spi_exec("SELECT owner FROM tenure.lease WHERE name OPERATOR(pg_catalog.=) $1"
					" FOR KEY SHARE",
					"t", args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("lease \"%s\" does not exist", name),
				 errhint("Create it with tenure.create_lease().")));
	{
		bool		isnull;
		Oid			owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc,
														   1, &isnull));

		tenure_check_owner(name, owner, spi.save_userid);
	}
	foreach(lc, rels)
	{
		char	   *by = tenure_fenced_by(lfirst_oid(lc));

		if (by != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("table %s is already fenced by lease \"%s\"",
							tenure_rel_qualified(lfirst_oid(lc)), by),
					 errhint("Unfence it first with tenure.unfence_table().")));
	}
	tenure_spi_end(&spi);

	foreach(lc, rels)
		tenure_fence_one(lfirst_oid(lc), name);
	PG_RETURN_VOID();
}

/*
 * tenure.unfence_table(tbl)
 *
 * Removes the fence of a whole tree: the table, which must not have a
 * fenced parent, and its partitions or inheritance descendants.
 */
Datum
pg_tenure_unfence_table(PG_FUNCTION_ARGS)
{
	List	   *rels = tenure_fence_targets(fcinfo);
	Oid			relid = linitial_oid(rels);
	ListCell   *lc;
	bool		fenced;
	Oid			parent = InvalidOid;
	Oid			child = InvalidOid;

	fenced = tenure_fenced_by(relid) != NULL;
	/* a partition or child of a fenced table stays fenced with it */
	foreach(lc, tenure_rel_parents(relid))
	{
		if (tenure_fenced_by(lfirst_oid(lc)) != NULL)
		{
			parent = lfirst_oid(lc);
			break;
		}
	}
	/* and so does a descendant that also inherits from a fenced table */
	if (fenced && !OidIsValid(parent))
		parent = tenure_tree_outside_parent(rels, true, &child);

	if (!fenced)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table %s is not fenced", tenure_rel_qualified(relid))));
	if (OidIsValid(parent) && !OidIsValid(child))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot unfence table %s because its parent %s is fenced",
						tenure_rel_qualified(relid),
						tenure_rel_qualified(parent)),
				 errhint("Unfence the root of its tree, which unfences its partitions and children too.")));
	if (OidIsValid(parent))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot unfence table %s because table %s in its tree also inherits from fenced table %s",
						tenure_rel_qualified(relid), tenure_rel_qualified(child),
						tenure_rel_qualified(parent)),
				 errhint("Remove that inheritance with ALTER TABLE ... NO INHERIT first.")));

	foreach(lc, rels)
		tenure_unfence_one(lfirst_oid(lc));
	PG_RETURN_VOID();
}

