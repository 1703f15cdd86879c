/*-------------------------------------------------------------------------
 *
 * fence_ddl.c
 *		Setting fences up and keeping them whole: tenure.fence_table(),
 *		tenure.unfence_table() and the event trigger tenure._fence_ddl().
 *
 * What a fence covers.  Statement triggers fire only for the table a
 * statement names, so a fence covers a whole partition or inheritance
 * tree, by one lease: fence_table() takes only a root, and the event
 * trigger tenure._fence_ddl() fences tables that join a fenced tree and
 * refuses DDL that would leave an edge of pg_inherits with one side
 * fenced, or fenced by two leases.  Foreign tables (written by another
 * server) and logical replication targets cannot be fenced (apply is also
 * rejected row by row: fence.c).  DDL that changes a fenced tree's rows (a
 * column added, dropped or retyped, a table attached, detached or dropped,
 * a rewrite) is checked as a write by the same event trigger.  The fence
 * triggers themselves cannot be disabled, replaced or renamed.
 *
 * The writes themselves are checked in fence.c (src/README, F2 and F9).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_subscription.h"
#include "catalog/pg_subscription_rel.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/tablecmds.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "pg_tenure.h"

PG_FUNCTION_INFO_V1(tenure_fence_table);
PG_FUNCTION_INFO_V1(tenure_unfence_table);
PG_FUNCTION_INFO_V1(tenure_fence_ddl);

/*
 * A table's schema-qualified, quoted name, for messages and DDL.
 */
static char *
tenure_rel_qualified(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* set while pg_tenure itself runs DDL, which fires event triggers */
static bool tenure_fence_ddl_running = false;

/*
 * Run a query with OID arguments in pg_tenure's SPI session under the
 * latest snapshot, not the transaction's: who is fenced must be read as
 * committed now, or a REPEATABLE READ transaction attaching a partition
 * would not see a fence committed after its snapshot was taken (see
 * tenure_fence_table()).  The command counter advances as usual, so the
 * transaction's own changes are seen too.  $1 is an oid, $2 an oid[].
 */
static void
tenure_fence_query(const char *sql, int nargs, Datum *args)
{
	static const char *const types[] = {"", "o", "oO"};
	int			rc;

	Assert(nargs >= 0 && nargs < (int) lengthof(types));
	/* planned once per backend (catalog.c): event triggers run on all DDL */
	rc = SPI_execute_snapshot(tenure_spi_plan(sql, types[nargs]), args, NULL,
							  GetLatestSnapshot(), InvalidSnapshot, false,
							  true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_snapshot failed: %s", SPI_result_code_string(rc));
}

/*
 * The lease that fences table relid as committed now, or NULL.  Inside an
 * SPI session; the result outlives it.
 */
static char *
tenure_fenced_by(Oid relid)
{
	Datum		args[1];
	char	   *lease;

	args[0] = ObjectIdGetDatum(relid);
	tenure_fence_query("SELECT lease FROM tenure.fenced"
					   " WHERE tbl OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
					   1, args);
	if (SPI_processed == 0)
		return NULL;
	lease = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	return strcpy(SPI_palloc(strlen(lease) + 1), lease);
}

/*
 * The tables relid inherits from, as a partition or an inheritance child,
 * in inhseqno order.  A catalog scan: it sees the latest committed state.
 */
static List *
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
static Oid
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
static const char *
tenure_subscription_name(Oid subid)
{
	char	   *name = get_subscription_name(subid, true);

	return name ? name : "?";
}

/*
 * Run one utility statement as the current user.
 */
static void
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
					   1, args);
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
static void
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
static void
tenure_fence_one(Oid relid, const char *lease)
{
	MemoryContext cxt = CurrentMemoryContext;
	TenureSpi	spi;
	Datum		args[2];
	char	   *qualified;
	StringInfoData sql;
	List	   *left;

	tenure_spi_begin(&spi);
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

	tenure_spi_begin(&spi);
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

	tenure_require_loaded();
	tenure_require_primary(fcinfo);
	tenure_require_not_trigger(fcinfo);

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
 * fenced_only, only a fenced parent counts (inside an SPI session).
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
 * What shapes a fenced table's rows, followed through pg_depend from the
 * tables (and the expressions of their generated columns) to the types,
 * collations, functions, operators (and their classes and families), text
 * search configurations and dictionaries and composite types' relations
 * they use, to any depth.  A command on any of these can change the fenced
 * rows (ALTER TYPE ... ADD ATTRIBUTE, DROP TYPE ... CASCADE drops a
 * column), so each must belong to the table's owner (or a role whose
 * privileges its owner has) or a superuser, and so must the extension it
 * belongs to, if any (a trusted extension created by another role owns
 * objects of the bootstrap superuser, but its DROP is that role's); and
 * none may be one of pg_tenure's own: otherwise a fence set up by one role
 * would refuse another role's commands on its own objects, or pull
 * pg_tenure's tables into a fence.  (src/README, F9.)
 * The seed is a query of the tables to check, column "tbl" (oid).
 */
#define TENURE_FOREIGN_QUERY(seed, filter) \
	"WITH RECURSIVE tables (tbl) AS (" seed ")," \
	" edges (classid, objid, refclassid, refobjid) AS (" \
	"  SELECT d.classid, d.objid, d.refclassid, d.refobjid FROM pg_catalog.pg_depend d" \
	"   WHERE d.refclassid OPERATOR(pg_catalog.=) ANY (ARRAY[" \
	"    'pg_catalog.pg_type'::pg_catalog.regclass, 'pg_catalog.pg_class'::pg_catalog.regclass," \
	"    'pg_catalog.pg_collation'::pg_catalog.regclass, 'pg_catalog.pg_proc'::pg_catalog.regclass," \
	"    'pg_catalog.pg_operator'::pg_catalog.regclass, 'pg_catalog.pg_opclass'::pg_catalog.regclass," \
	"    'pg_catalog.pg_opfamily'::pg_catalog.regclass, 'pg_catalog.pg_ts_config'::pg_catalog.regclass," \
	"    'pg_catalog.pg_ts_dict'::pg_catalog.regclass" \
	"   ]::pg_catalog.oid[])" \
	"   AND d.deptype OPERATOR(pg_catalog.=) ANY ('{n,i,a}'::pg_catalog.\"char\"[])" \
	"  UNION ALL" \
	"  SELECT 'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid, t.oid," \
	"   'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid, t.typrelid" \
	"   FROM pg_catalog.pg_type t WHERE t.typrelid OPERATOR(pg_catalog.<>) 0)," \
	" dep (classid, objid, tbl) AS (" \
	"  SELECT s.classid, s.objid, s.tbl FROM (" \
	"   SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid AS classid," \
	"    t.tbl AS objid, t.tbl FROM tables t" \
	"   UNION ALL" \
	"   SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass::pg_catalog.oid, d.oid, d.adrelid" \
	"    FROM pg_catalog.pg_attrdef d JOIN pg_catalog.pg_attribute a" \
	"    ON a.attrelid OPERATOR(pg_catalog.=) d.adrelid AND a.attnum OPERATOR(pg_catalog.=) d.adnum" \
	"    WHERE d.adrelid OPERATOR(pg_catalog.=) ANY (SELECT t.tbl FROM tables t)" \
	"    AND a.attgenerated OPERATOR(pg_catalog.<>) ''" \
	"  ) s" \
	"  UNION" \
	"  SELECT e.refclassid, e.refobjid, dep.tbl FROM edges e JOIN dep" \
	"   ON e.classid OPERATOR(pg_catalog.=) dep.classid AND e.objid OPERATOR(pg_catalog.=) dep.objid)," \
	" owned (classid, objid, tbl, objowner, ours, ext) AS (" \
	"  SELECT dep.classid, dep.objid, dep.tbl, COALESCE(c.relowner, ty.typowner, co.collowner, p.proowner," \
	"   op.oprowner, oc.opcowner, ofa.opfowner, tc.cfgowner, td.dictowner)," \
	"   EXISTS (SELECT FROM pg_catalog.pg_depend x" \
	"    WHERE x.classid OPERATOR(pg_catalog.=) dep.classid AND x.objid OPERATOR(pg_catalog.=) dep.objid" \
	"    AND x.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass" \
	"    AND x.refobjid OPERATOR(pg_catalog.=) $1 AND x.deptype OPERATOR(pg_catalog.=) 'e')," \
	"   (SELECT e.extowner OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) e.extname" \
	"     FROM pg_catalog.pg_depend x JOIN pg_catalog.pg_extension e" \
	"     ON e.oid OPERATOR(pg_catalog.=) x.refobjid" \
	"    WHERE x.classid OPERATOR(pg_catalog.=) dep.classid AND x.objid OPERATOR(pg_catalog.=) dep.objid" \
	"    AND x.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass" \
	"    AND x.deptype OPERATOR(pg_catalog.=) 'e' LIMIT 1)" \
	"  FROM dep" \
	"  LEFT JOIN pg_catalog.pg_class c ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass" \
	"   AND c.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_type ty ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass" \
	"   AND ty.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_collation co ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_collation'::pg_catalog.regclass" \
	"   AND co.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_proc p ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass" \
	"   AND p.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_operator op ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass" \
	"   AND op.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_opclass oc ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_opclass'::pg_catalog.regclass" \
	"   AND oc.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_opfamily ofa ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_opfamily'::pg_catalog.regclass" \
	"   AND ofa.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_ts_config tc ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_ts_config'::pg_catalog.regclass" \
	"   AND tc.oid OPERATOR(pg_catalog.=) dep.objid" \
	"  LEFT JOIN pg_catalog.pg_ts_dict td ON dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_ts_dict'::pg_catalog.regclass" \
	"   AND td.oid OPERATOR(pg_catalog.=) dep.objid)" \
	" SELECT o.tbl::pg_catalog.regclass::pg_catalog.text," \
	"  pg_catalog.pg_describe_object(o.classid, o.objid, 0)," \
	"  r.rolname, o.ours, w.extname" \
	" FROM owned o JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) o.tbl" \
	" CROSS JOIN LATERAL (VALUES (o.objowner, NULL::pg_catalog.text)," \
	"  (pg_catalog.split_part(o.ext, ' ', 1)::pg_catalog.oid, pg_catalog.split_part(o.ext, ' ', 2))) AS w (owner, extname)" \
	" JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) w.owner" \
	" WHERE (o.ours" \
	"  OR NOT (r.rolsuper OR pg_catalog.pg_has_role(w.owner, t.relowner, 'USAGE')))" \
	filter \
	" ORDER BY 4 DESC, 1, 2 LIMIT 1"

/*
 * Refuse if a table the seed query names depends on an object of another
 * role or of pg_tenure (TENURE_FOREIGN_QUERY).  fencing: the tables are
 * being fenced by fence_table(), rather than changed by DDL.
 */
static void
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
	tenure_spi_begin(&spi);
	tenure_fence_query(sql, tables ? 2 : 1, args);
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
tenure_fence_table(PG_FUNCTION_ARGS)
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

	tenure_spi_begin(&spi);
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
tenure_unfence_table(PG_FUNCTION_ARGS)
{
	List	   *rels = tenure_fence_targets(fcinfo);
	Oid			relid = linitial_oid(rels);
	ListCell   *lc;
	TenureSpi	spi;
	bool		fenced;
	Oid			parent = InvalidOid;
	Oid			child = InvalidOid;

	tenure_spi_begin(&spi);
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
	tenure_spi_end(&spi);

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

/*
 * The fence of a partition or inheritance edge, read by tenure_fence_ddl().
 */
typedef struct TenureFenceEdge
{
	Oid			child;
	Oid			parent;
	char	   *child_lease;	/* NULL if not fenced */
	char	   *parent_lease;	/* NULL if not fenced */
	char		child_kind;
} TenureFenceEdge;

/*
 * Whether column col of an SPI result, an xmin (or NULL), is this
 * transaction or one of its subtransactions.
 */
static bool
tenure_xmin_current(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		xmin = SPI_getbinval(tup, desc, col, &isnull);

	return !isnull && TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin));
}

/*
 * Before an unfenced child is fenced with its parent: refuse if it also
 * inherits from a table not fenced by the same lease (multiple
 * inheritance), which could then never be fenced as one tree.
 */
static void
tenure_fence_ddl_other_parents(const TenureFenceEdge *edge)
{
	ListCell   *lc;

	foreach(lc, tenure_rel_parents(edge->child))
	{
		Oid			other = lfirst_oid(lc);
		TenureSpi	spi;
		char	   *lease;

		if (other == edge->parent)
			continue;
		tenure_spi_begin(&spi);
		lease = tenure_fenced_by(other);
		tenure_spi_end(&spi);
		if (lease == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot make table %s a child of both a fenced and an unfenced table",
							tenure_rel_qualified(edge->child)),
					 errdetail("Table %s is fenced by lease \"%s\", table %s is not fenced. A fence covers whole inheritance trees: writes through table %s would not be checked.",
							   tenure_rel_qualified(edge->parent), edge->parent_lease,
							   tenure_rel_qualified(other),
							   tenure_rel_qualified(other))));
		if (strcmp(lease, edge->parent_lease) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot make table %s a child of tables fenced by different leases",
							tenure_rel_qualified(edge->child)),
					 errdetail("Table %s is fenced by lease \"%s\", table %s by lease \"%s\". All tables of a partition or inheritance tree are fenced by the same lease.",
							   tenure_rel_qualified(edge->parent), edge->parent_lease,
							   tenure_rel_qualified(other), lease)));
	}
}

/*
 * Keep every tree whole after DDL (see tenure_fence_ddl()): fence unfenced
 * children of fenced tables with the parent's lease, level by level, and
 * raise an ERROR, aborting the DDL, for what cannot be fixed.
 */
static void
tenure_fence_ddl_trees(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *fixed = NIL;

	for (;;)
	{
		List	   *edges = NIL;
		List	   *round = NIL;
		ListCell   *lc;
		TenureSpi	spi;
		uint64		i;

		/*
		 * Every edge whose two sides are not fenced by the same lease, as
		 * committed now (a REPEATABLE READ snapshot might predate a fence).
		 * Partitioned indexes have edges too, never fenced on either side.
		 * Only edges this transaction made, or whose fences it made, are
		 * its business: one left broken by a superuser who bypassed the
		 * event trigger must not make everyone's DDL fail.
		 */
		tenure_spi_begin(&spi);
		tenure_fence_query("SELECT i.inhrelid, i.inhparent, fc.lease, fp.lease, c.relkind,"
						   "  i.xmin, fc.xmin, fp.xmin"
						   " FROM pg_catalog.pg_inherits i"
						   " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid"
						   " LEFT JOIN tenure.fenced fc"
						   "  ON fc.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) i.inhrelid"
						   " LEFT JOIN tenure.fenced fp"
						   "  ON fp.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) i.inhparent"
						   " WHERE fc.lease IS DISTINCT FROM fp.lease"
						   " ORDER BY i.inhrelid, i.inhseqno",
						   0, NULL);
		for (i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			TenureFenceEdge *edge;
			bool		isnull;
			char	   *child_lease = SPI_getvalue(tup, desc, 3);
			char	   *parent_lease = SPI_getvalue(tup, desc, 4);
			MemoryContext old;

			if (!tenure_xmin_current(tup, desc, 6) &&
				!tenure_xmin_current(tup, desc, 7) &&
				!tenure_xmin_current(tup, desc, 8))
				continue;

			/* in the caller's context: SPI's goes away with the session */
			old = MemoryContextSwitchTo(cxt);
			edge = palloc(sizeof(TenureFenceEdge));
			edge->child = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull));
			edge->parent = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
			edge->child_lease = child_lease ? pstrdup(child_lease) : NULL;
			edge->parent_lease = parent_lease ? pstrdup(parent_lease) : NULL;
			edge->child_kind = DatumGetChar(SPI_getbinval(tup, desc, 5, &isnull));
			edges = lappend(edges, edge);
			MemoryContextSwitchTo(old);
		}
		tenure_spi_end(&spi);

		if (edges == NIL)
			return;

		foreach(lc, edges)
		{
			TenureFenceEdge *edge = lfirst(lc);

			if (edge->child_lease == NULL &&
				(edge->child_kind == RELKIND_RELATION ||
				 edge->child_kind == RELKIND_PARTITIONED_TABLE))
			{
				/* a new child of a fenced table: fenced with it */
				if (list_member_oid(fixed, edge->child))
					elog(ERROR, "table %u was fenced but is not recorded as fenced",
						 edge->child);
				if (!list_member_oid(round, edge->child))
				{
					if (get_rel_persistence(edge->child) == RELPERSISTENCE_TEMP)
						ereport(ERROR,
								(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
								 errmsg("cannot make temporary table %s a partition or child of fenced table %s",
										tenure_rel_qualified(edge->child),
										tenure_rel_qualified(edge->parent)),
								 errdetail("Table %s is fenced by lease \"%s\". A temporary table is dropped when its session ends, or by DISCARD, where no fence can check it.",
										   tenure_rel_qualified(edge->parent),
										   edge->parent_lease)));
					tenure_fence_ddl_other_parents(edge);
					tenure_fence_one(edge->child, edge->parent_lease);
					round = lappend_oid(round, edge->child);
				}
			}
			else if (edge->child_lease == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot make foreign table %s a partition or child of fenced table %s",
								tenure_rel_qualified(edge->child),
								tenure_rel_qualified(edge->parent)),
						 errdetail("Table %s is fenced by lease \"%s\". Writes to a foreign table are made by another server, where no fence can check them.",
								   tenure_rel_qualified(edge->parent),
								   edge->parent_lease)));
			else if (edge->parent_lease == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot make fenced table %s a partition or child of unfenced table %s",
								tenure_rel_qualified(edge->child),
								tenure_rel_qualified(edge->parent)),
						 errdetail("Table %s is fenced by lease \"%s\". A fence covers whole partition and inheritance trees: writes through table %s would not be checked.",
								   tenure_rel_qualified(edge->child),
								   edge->child_lease,
								   tenure_rel_qualified(edge->parent)),
						 errhint("Unfence table %s first, or fence the root of table %s by the same lease first.",
								 tenure_rel_qualified(edge->child),
								 tenure_rel_qualified(edge->parent))));
			else
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot make table %s a partition or child of a table fenced by another lease",
								tenure_rel_qualified(edge->child)),
						 errdetail("Table %s is fenced by lease \"%s\", table %s by lease \"%s\". All tables of a partition or inheritance tree are fenced by the same lease.",
								   tenure_rel_qualified(edge->child),
								   edge->child_lease,
								   tenure_rel_qualified(edge->parent),
								   edge->parent_lease)));
		}
		fixed = list_concat(fixed, round);
	}
}

/*
 * After DDL: refuse if this transaction made a fenced table a logical
 * replication target (a subscription created or refreshed, a subscribed
 * table attached to a fenced tree).  A target made otherwise (by a
 * superuser past the event trigger) is left to the apply trigger, so that
 * the subscription can still be altered, disabled or fixed.
 */
static void
tenure_fence_ddl_subscriptions(void)
{
	TenureSpi	spi;
	Oid			relid = InvalidOid;
	Oid			subid = InvalidOid;
	char	   *lease = NULL;
	uint64		i;

	tenure_spi_begin(&spi);
	tenure_fence_query("SELECT f.tbl::pg_catalog.oid, r.srsubid, f.lease, f.xmin, r.xmin"
					   " FROM tenure.fenced f JOIN pg_catalog.pg_subscription_rel r"
					   "  ON r.srrelid OPERATOR(pg_catalog.=) f.tbl::pg_catalog.oid"
					   " ORDER BY 1, 2",
					   0, NULL);
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *v;

		if (!tenure_xmin_current(tup, desc, 4) &&
			!tenure_xmin_current(tup, desc, 5))
			continue;
		relid = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull));
		subid = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
		v = SPI_getvalue(tup, desc, 3);
		lease = strcpy(SPI_palloc(strlen(v) + 1), v);
		break;
	}
	tenure_spi_end(&spi);

	if (OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("logical replication subscription \"%s\" cannot write fenced table %s",
						tenure_subscription_name(subid),
						tenure_rel_qualified(relid)),
				 errdetail("Table %s is fenced by lease \"%s\". Logical replication applies changes without presenting an epoch, so the fence would reject them all.",
						   tenure_rel_qualified(relid), lease),
				 errhint("Leave the table out of the subscription's publications, or unfence it first.")));
}

/*
 * pg_trigger.tgtype of the fence triggers tenure_fence_one() creates:
 * tenure_fence is BEFORE INSERT, DELETE, UPDATE and TRUNCATE, per
 * statement; tenure_fence_apply is AFTER INSERT, DELETE and UPDATE, per row.
 */
#define TENURE_FENCE_TGTYPE \
	(TRIGGER_TYPE_BEFORE | TRIGGER_TYPE_STATEMENT | TRIGGER_TYPE_INSERT | \
	 TRIGGER_TYPE_DELETE | TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_TRUNCATE)
#define TENURE_FENCE_APPLY_TGTYPE \
	(TRIGGER_TYPE_AFTER | TRIGGER_TYPE_ROW | TRIGGER_TYPE_INSERT | \
	 TRIGGER_TYPE_DELETE | TRIGGER_TYPE_UPDATE)

/*
 * The query of tenure_fence_ddl_changed_triggers(): every trigger on a
 * fenced table that bears a fence trigger's name or function, and whether
 * it has the right shape (TENURE_FENCE_TGTYPE, or TENURE_FENCE_APPLY_TGTYPE
 * on a table that holds rows; never a partition's clone of its parent's
 * trigger).  Built once per backend with the tgtypes filled in, and kept,
 * so that its plan is kept too (tenure_spi_plan() keys plans by text).
 */
static const char *
tenure_fence_ddl_triggers_query(void)
{
	static char *sql = NULL;
	MemoryContext old;

	if (sql != NULL)
		return sql;
	old = MemoryContextSwitchTo(TopMemoryContext);
	sql = psprintf("SELECT f.tbl::pg_catalog.text, t.tgname, f.lease, t.xmin, t.tgenabled,"
				   "  t.tgnargs OPERATOR(pg_catalog.=) 1"
				   "  AND t.tgargs OPERATOR(pg_catalog.=) (pg_catalog.convert_to(f.lease,"
				   "   pg_catalog.getdatabaseencoding()) OPERATOR(pg_catalog.||)"
				   "   pg_catalog.decode('00', 'hex'))"
				   "  AND t.tgqual IS NULL"
				   "  AND pg_catalog.cardinality(t.tgattr::pg_catalog.int2[]) OPERATOR(pg_catalog.=) 0"
				   "  AND t.tgparentid OPERATOR(pg_catalog.=) 0"
				   "  AND ((t.tgname OPERATOR(pg_catalog.=) 'tenure_fence'"
				   "    AND t.tgfoid OPERATOR(pg_catalog.=) 'tenure.fence_trigger'::pg_catalog.regproc"
				   "    AND t.tgtype OPERATOR(pg_catalog.=) %d)"
				   "   OR (t.tgname OPERATOR(pg_catalog.=) 'tenure_fence_apply'"
				   "    AND c.relkind OPERATOR(pg_catalog.=) 'r'"
				   "    AND t.tgfoid OPERATOR(pg_catalog.=) 'tenure.fence_apply_trigger'::pg_catalog.regproc"
				   "    AND t.tgtype OPERATOR(pg_catalog.=) %d)),"
				   "  f.tbl::pg_catalog.oid"
				   " FROM tenure.fenced f JOIN pg_catalog.pg_trigger t"
				   "  ON t.tgrelid OPERATOR(pg_catalog.=) f.tbl::pg_catalog.oid"
				   " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.tgrelid"
				   " WHERE t.tgname OPERATOR(pg_catalog.=) ANY ('{tenure_fence,tenure_fence_apply}')"
				   "  OR t.tgfoid OPERATOR(pg_catalog.=) 'tenure.fence_trigger'::pg_catalog.regproc"
				   "  OR t.tgfoid OPERATOR(pg_catalog.=) 'tenure.fence_apply_trigger'::pg_catalog.regproc"
				   " ORDER BY f.tbl::pg_catalog.oid, t.tgname",
				   TENURE_FENCE_TGTYPE, TENURE_FENCE_APPLY_TGTYPE);
	MemoryContextSwitchTo(old);
	return sql;
}

/*
 * The fence triggers of every fenced table stay as tenure_fence_one()
 * made them: a BEFORE ... FOR EACH STATEMENT trigger tenure_fence on
 * INSERT, UPDATE, DELETE and TRUNCATE, enabled ALWAYS, and (on a table
 * that holds rows) an AFTER ... FOR EACH ROW trigger tenure_fence_apply,
 * enabled REPLICA, both with the table's lease as their one argument and
 * neither with a column list or a WHEN condition.
 *
 * - Disabling one (ALTER TABLE ... DISABLE TRIGGER, as pg_restore
 *   --disable-triggers does), enabling it for other replication roles,
 *   replacing it with another shape or renaming it would leave the table
 *   fenced in name while writes commit unchecked: refused.
 * - CREATE [OR REPLACE] TRIGGER (creating) makes a trigger enabled ORIGIN;
 *   one of the right shape is enabled as it must be at once (a restore
 *   does the same with its next command).
 *
 * As for trees, only trigger rows this transaction changed are its
 * business.  Dropped fence triggers: tenure_fence_ddl_dropped_triggers().
 */
static void
tenure_fence_ddl_changed_triggers(bool creating)
{
	MemoryContext cxt = CurrentMemoryContext;
	TenureSpi	spi;
	char	   *table = NULL;
	char	   *trigger = NULL;
	char	   *lease = NULL;
	List	   *enable = NIL;
	ListCell   *lc;
	uint64		i;

	/* see the fences this event trigger itself just made */
	CommandCounterIncrement();
	tenure_spi_begin(&spi);

	/* trigger rows with a fence trigger's name or function, and their shape */
	tenure_fence_query(tenure_fence_ddl_triggers_query(), 0, NULL);
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *name = SPI_getvalue(tup, desc, 2);
		char		enabled = DatumGetChar(SPI_getbinval(tup, desc, 5, &isnull));
		bool		shape = DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));
		char		expect = strcmp(name, "tenure_fence") == 0 ?
			TRIGGER_FIRES_ALWAYS : TRIGGER_FIRES_ON_REPLICA;
		MemoryContext old;

		if (!tenure_xmin_current(tup, desc, 4) || (shape && enabled == expect))
			continue;
		/* values kept past tenure_spi_end go to the caller's context */
		old = MemoryContextSwitchTo(cxt);
		if (shape && creating && enabled == TRIGGER_FIRES_ON_ORIGIN)
		{
			Oid			relid = DatumGetObjectId(SPI_getbinval(tup, desc, 7, &isnull));

			enable = lappend(enable,
							 psprintf("ALTER TABLE %s ENABLE %s TRIGGER %s",
									  tenure_rel_qualified(relid),
									  expect == TRIGGER_FIRES_ALWAYS ? "ALWAYS" : "REPLICA",
									  quote_identifier(name)));
			MemoryContextSwitchTo(old);
			continue;
		}
		table = pstrdup(SPI_getvalue(tup, desc, 1));
		trigger = pstrdup(name);
		lease = pstrdup(SPI_getvalue(tup, desc, 3));
		MemoryContextSwitchTo(old);
		break;
	}
	tenure_spi_end(&spi);

	if (table != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot change trigger \"%s\" of table %s, which is fenced by lease \"%s\"",
						trigger, table, lease),
				 errdetail("Writes to a fenced table are checked by its fence triggers; disabled, replaced or renamed, they would let writes commit unchecked."),
				 errhint("Unfence the table, or the root of its tree, with tenure.unfence_table() first.")));
	foreach(lc, enable)
		tenure_fence_utility((const char *) lfirst(lc));
}

/*
 * On sql_drop: a fence trigger dropped (DROP TRIGGER, as pg_restore
 * --clean does before it drops the table) from a table fenced on its own
 * unfences the table, as unfence_table would; its other fence trigger, if
 * any, still checks until it is dropped too or the table is fenced again.
 * In a partition or inheritance tree it is refused: unfencing is done from
 * the root, for the whole tree.
 */
static void
tenure_fence_ddl_dropped_triggers(void)
{
	TenureSpi	spi;
	SPITupleTable *dropped;
	uint64		n;
	uint64		i;

	tenure_spi_begin(&spi);

	/*
	 * Fence triggers dropped from tables that are still fenced, with
	 * whether the table is part of a tree.  (pg_temp in an address names
	 * the session's temporary schema.)
	 */
	tenure_fence_query("SELECT DISTINCT f.tbl::pg_catalog.oid, f.tbl::pg_catalog.text, f.lease,"
					   "  EXISTS (SELECT FROM pg_catalog.pg_inherits i"
					   "   WHERE i.inhrelid OPERATOR(pg_catalog.=) f.tbl::pg_catalog.oid"
					   "   OR i.inhparent OPERATOR(pg_catalog.=) f.tbl::pg_catalog.oid),"
					   "  pg_catalog.min(d.address_names[3]) OVER (PARTITION BY f.tbl)"
					   " FROM pg_catalog.pg_event_trigger_dropped_objects() d"
					   " JOIN tenure.fenced f ON f.tbl::pg_catalog.oid OPERATOR(pg_catalog.=)"
					   "  pg_catalog.to_regclass(pg_catalog.format('%I.%I',"
					   "   d.address_names[1], d.address_names[2]))::pg_catalog.oid"
					   " WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::pg_catalog.regclass"
					   " AND d.address_names[3] OPERATOR(pg_catalog.=) ANY ('{tenure_fence,tenure_fence_apply}')"
					   " ORDER BY 1",
					   0, NULL);
	/* (tenure_fence_forget() runs statements of its own) */
	dropped = SPI_tuptable;
	n = SPI_processed;
	for (i = 0; i < n; i++)
	{
		HeapTuple	tup = dropped->vals[i];
		TupleDesc	desc = dropped->tupdesc;
		bool		isnull;

		if (DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot drop trigger \"%s\" of table %s in a fenced partition or inheritance tree",
							SPI_getvalue(tup, desc, 5), SPI_getvalue(tup, desc, 2)),
					 errdetail("The tree is fenced by lease \"%s\". Writes to a fenced table are checked by its fence triggers, and a tree is fenced whole.",
							   SPI_getvalue(tup, desc, 3)),
					 errhint("Unfence the root of the tree with tenure.unfence_table() first.")));
	}
	for (i = 0; i < n; i++)
	{
		HeapTuple	tup = dropped->vals[i];
		TupleDesc	desc = dropped->tupdesc;
		bool		isnull;

		ereport(NOTICE,
				(errmsg("table %s is no longer fenced by lease \"%s\"",
						SPI_getvalue(tup, desc, 2), SPI_getvalue(tup, desc, 3)),
				 errdetail("A fence trigger of the table was dropped.")));
		tenure_fence_forget(DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull)));
	}
	tenure_spi_end(&spi);
}

/*
 * Error context of a fenced write made by DDL: arg is the command's tag.
 */
static void
tenure_fence_ddl_write_context(void *arg)
{
	errcontext("%s changes the rows of a fenced table and is checked as a write to it",
			   (const char *) arg);
}

/*
 * A fenced write by the DDL command tagged command, to table (its name, for
 * messages) fenced by lease: checked now, as the fence trigger checks a
 * statement, and again at COMMIT.
 */
static void
tenure_fence_ddl_check(const char *lease, const char *table, const char *command)
{
	ErrorContextCallback callback;
	int			fence_lock = -1;

	callback.callback = tenure_fence_ddl_write_context;
	callback.arg = (void *) command;
	callback.previous = error_context_stack;
	error_context_stack = &callback;
	tenure_require_loaded();
	tenure_fence_check(lease, table, false, &fence_lock);
	tenure_fence_note(lease, table, RowExclusiveLock, fence_lock);
	error_context_stack = callback.previous;
}

/*
 * Run a query (see tenure_fence_query()) whose rows are (lease, table
 * name) pairs, and check each as a fenced write by the DDL command.
 */
static void
tenure_fence_ddl_check_query(const char *sql, int nargs, Datum *args,
							 const char *command)
{
	MemoryContext cxt = CurrentMemoryContext;
	TenureSpi	spi;
	List	   *leases = NIL;
	List	   *tables = NIL;
	ListCell   *lc1;
	ListCell   *lc2;
	uint64		i;

	tenure_spi_begin(&spi);
	tenure_fence_query(sql, nargs, args);
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext old = MemoryContextSwitchTo(cxt);

		leases = lappend(leases, pstrdup(SPI_getvalue(tup, desc, 1)));
		tables = lappend(tables, pstrdup(SPI_getvalue(tup, desc, 2)));
		MemoryContextSwitchTo(old);
	}
	tenure_spi_end(&spi);

	forboth(lc1, leases, lc2, tables)
		tenure_fence_ddl_check(lfirst(lc1), lfirst(lc2), command);
}

/*
 * DDL that changes the rows of table relid, or the rows its partition or
 * inheritance tree holds, is a write to its fence, if it is fenced.
 */
static void
tenure_fence_ddl_write(Oid relid, const char *command)
{
	TenureSpi	spi;
	char	   *lease;

	tenure_spi_begin(&spi);
	lease = tenure_fenced_by(relid);
	tenure_spi_end(&spi);
	if (lease != NULL)
		tenure_fence_ddl_check(lease, get_rel_name(relid), command);
}

/*
 * Fenced tables with a column whose type is built on the row type of
 * relid (a table or a composite type): the type itself, an array or a
 * domain over it, or a composite type with such an attribute, to any
 * depth, followed through pg_depend.  Adding or dropping an attribute of
 * that row type changes the values those columns hold, without a rewrite:
 * a fenced write to each such table.  (They are not locked: the command
 * does not lock them either.)
 */
static void
tenure_fence_ddl_rowtype_users(Oid relid, const char *command)
{
	Datum		args[1];

	args[0] = ObjectIdGetDatum(relid);
	tenure_fence_ddl_check_query("WITH RECURSIVE dep (classid, objid) AS ("
								 "  SELECT 'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid, c.reltype"
								 "   FROM pg_catalog.pg_class c"
								 "   WHERE c.oid OPERATOR(pg_catalog.=) $1"
								 "   AND c.reltype OPERATOR(pg_catalog.<>) 0"
								 "  UNION"
								 "  SELECT d.classid, d.objid FROM pg_catalog.pg_depend d JOIN dep"
								 "   ON d.refclassid OPERATOR(pg_catalog.=) dep.classid"
								 "   AND d.refobjid OPERATOR(pg_catalog.=) dep.objid"
								 "   WHERE d.classid OPERATOR(pg_catalog.=) ANY (ARRAY["
								 "    'pg_catalog.pg_type'::pg_catalog.regclass,"
								 "    'pg_catalog.pg_class'::pg_catalog.regclass]::pg_catalog.oid[])"
								 "   AND d.deptype OPERATOR(pg_catalog.=) ANY ('{n,i}'::pg_catalog.\"char\"[]))"
								 " SELECT DISTINCT ON (f.lease) f.lease, c.relname"
								 " FROM dep JOIN tenure.fenced f"
								 "  ON f.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) dep.objid"
								 " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) dep.objid"
								 " WHERE dep.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
								 " AND dep.objid OPERATOR(pg_catalog.<>) $1"
								 " ORDER BY f.lease, c.relname",
								 1, args, command);
}

/*
 * The typed tables of composite type relid (its pg_class row), locked as
 * ALTER TYPE ... CASCADE will lock them, are written by that command.
 */
static void
tenure_fence_ddl_typed_tables(Oid relid, const char *command)
{
	MemoryContext cxt = CurrentMemoryContext;
	TenureSpi	spi;
	Datum		args[1];
	List	   *tables = NIL;
	ListCell   *lc;
	uint64		i;

	tenure_spi_begin(&spi);
	args[0] = ObjectIdGetDatum(relid);
	tenure_fence_query("SELECT t.oid FROM pg_catalog.pg_class t JOIN pg_catalog.pg_class c"
					   "  ON t.reloftype OPERATOR(pg_catalog.=) c.reltype"
					   " WHERE c.oid OPERATOR(pg_catalog.=) $1 ORDER BY 1",
					   1, args);
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(cxt);

		tables = lappend_oid(tables,
							 DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															SPI_tuptable->tupdesc, 1,
															&isnull)));
		MemoryContextSwitchTo(old);
	}
	tenure_spi_end(&spi);

	foreach(lc, tables)
	{
		LockRelationOid(lfirst_oid(lc), AccessExclusiveLock);
		tenure_fence_ddl_write(lfirst_oid(lc), command);
	}
}

/*
 * On ddl_command_start of ALTER TABLE and ALTER TYPE: subcommands that change the rows a
 * fenced tree holds are fenced writes, checked before they run:
 *
 * - ADD COLUMN, DROP COLUMN, ALTER COLUMN ... TYPE and (17 and later) SET
 *   EXPRESSION give every row a value, take one away or convert it (a
 *   USING expression or a volatile default can set anything);
 * - ATTACH PARTITION and INHERIT bring a table's rows into the tree,
 *   DETACH PARTITION and NO INHERIT take them out of it;
 * - SET UNLOGGED leaves every row to be lost at the next crash, and on
 *   every standby.
 *
 * Adding, dropping or retyping a column of any table or composite type
 * also changes the values of fenced columns of that row type (or of an
 * array, domain or composite type built on it): see
 * tenure_fence_ddl_rowtype_users().
 *
 * The table is locked first, as the command itself will lock it, so that a
 * fence_table() committed before the command runs is seen: fence_table()
 * locks the tree in a mode that conflicts with each of these.  So is the
 * parent named by INHERIT, whose rows the child's join.  (ATTACH needs no
 * look at the attached table: if it is fenced, its parent must be fenced
 * by the same lease, or tenure_fence_ddl_trees() refuses the command.)
 * ALTER TYPE ... ADD, DROP or ALTER ATTRIBUTE ... CASCADE does the same to
 * the tables of the type (typed tables).  A rewrite by a path not listed
 * here is still checked, on table_rewrite.
 */
static void
tenure_fence_ddl_alter(AlterTableStmt *stmt, const char *command)
{
	ListCell   *lc;
	RangeVar   *parent = NULL;
	bool		writes = false;
	bool		columns = false;
	Oid			relid;

	if (stmt->objtype != OBJECT_TABLE && stmt->objtype != OBJECT_TYPE)
		return;
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		switch (cmd->subtype)
		{
			case AT_AddInherit:
				parent = (RangeVar *) cmd->def;
				/* FALLTHROUGH */
			case AT_AddColumn:
			case AT_DropColumn:
			case AT_AlterColumnType:
				columns = true;
				writes = true;
				break;
			case AT_SetUnLogged:
			case AT_AttachPartition:
			case AT_DetachPartition:
			case AT_DetachPartitionFinalize:
			case AT_DropInherit:
				writes = true;
				break;
			default:
				if (tenure_at_sets_expression(cmd->subtype))
					writes = true;
				break;
		}
	}
	if (!writes)
		return;

	relid = AlterTableLookupRelation(stmt, AlterTableGetLockLevel(stmt->cmds));
	if (!OidIsValid(relid))
		return;
	if (columns)
		tenure_fence_ddl_rowtype_users(relid, command);
	if (stmt->objtype == OBJECT_TYPE)
	{
		tenure_fence_ddl_typed_tables(relid, command);
		return;
	}
	tenure_fence_ddl_write(relid, command);
	if (parent != NULL)
	{
		/* ALTER TABLE ... INHERIT locks the parent so */
		Oid			parentid = RangeVarGetRelid(parent, ShareUpdateExclusiveLock, true);

		if (OidIsValid(parentid))
			tenure_fence_ddl_write(parentid, command);
	}
}

/*
 * On table_rewrite: a rewrite that recomputes values (a volatile default,
 * a column's new type or expression), by whichever command, is a fenced
 * write.  A rewrite for a new persistence or access method changes no
 * value.
 */
static void
tenure_fence_ddl_rewrite(const char *command)
{
	TenureSpi	spi;
	Oid			relid;
	int32		reason;
	bool		isnull;

	tenure_spi_begin(&spi);
	tenure_spi_exec("SELECT pg_catalog.pg_event_trigger_table_rewrite_oid(),"
					"  pg_catalog.pg_event_trigger_table_rewrite_reason()",
					"", NULL, NULL, SPI_OK_SELECT);
	relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 1, &isnull));
	reason = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
										 SPI_tuptable->tupdesc, 2, &isnull));
	tenure_spi_end(&spi);

	if (reason & (AT_REWRITE_DEFAULT_VAL | AT_REWRITE_COLUMN_REWRITE))
		tenure_fence_ddl_write(relid, command);
}

/*
 * On sql_drop: dropping a fenced table, on its own, with its tree or by a
 * cascade, deletes every row it holds, and dropping one of its columns
 * (also by a cascade from the column's type, domain, collation, function
 * or extension) deletes a value of every row: fenced writes, checked
 * before the drop commits.  (To drop fenced tables without presenting the
 * epoch, unfence them first.)
 */
static void
tenure_fence_ddl_dropped_tables(const char *command)
{
	tenure_fence_ddl_check_query("SELECT DISTINCT ON (f.lease) f.lease, d.address_names[2]"
								 " FROM pg_catalog.pg_event_trigger_dropped_objects() d"
								 " JOIN tenure.fenced f"
								 "  ON f.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) d.objid"
								 " WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
								 " ORDER BY f.lease, d.address_names[2]",
								 0, NULL, command);
}

/*
 * On ddl_command_end: a fenced table that the command created or altered,
 * or (for a command on a type, domain, collation or function, or one that
 * gives a relation, whose row type a column may use, to another owner) any
 * fenced table that uses an object the command changed, must still use
 * only objects of its owner or a superuser (TENURE_FOREIGN_QUERY).  Other
 * fenced tables are not the command's business: a role's ALTER of an
 * object no fence uses never fails for a fence.
 */
static void
tenure_fence_ddl_foreign(CommandTag tag, Node *parsetree)
{
	bool		owner = false;

	/* a relation given to another role: its row type may be a column's */
	if (parsetree != NULL && IsA(parsetree, AlterTableStmt))
	{
		ListCell   *lc;

		foreach(lc, ((AlterTableStmt *) parsetree)->cmds)
			if (((AlterTableCmd *) lfirst(lc))->subtype == AT_ChangeOwner)
				owner = true;
	}
	if (owner || tag == CMDTAG_ALTER_TYPE || tag == CMDTAG_ALTER_DOMAIN ||
		tag == CMDTAG_ALTER_COLLATION || tag == CMDTAG_ALTER_FUNCTION ||
		tag == CMDTAG_ALTER_PROCEDURE || tag == CMDTAG_ALTER_ROUTINE ||
		tag == CMDTAG_ALTER_OPERATOR || tag == CMDTAG_ALTER_OPERATOR_CLASS ||
		tag == CMDTAG_ALTER_OPERATOR_FAMILY ||
		tag == CMDTAG_ALTER_TEXT_SEARCH_CONFIGURATION ||
		tag == CMDTAG_ALTER_TEXT_SEARCH_DICTIONARY)
		tenure_fence_foreign_check(TENURE_FOREIGN_QUERY("SELECT f.tbl::pg_catalog.oid FROM tenure.fenced f",
														" AND o.tbl OPERATOR(pg_catalog.=) ANY ("
														"  SELECT d.tbl FROM dep d"
														"  JOIN pg_catalog.pg_event_trigger_ddl_commands() c"
														"   ON c.classid OPERATOR(pg_catalog.=) d.classid"
														"   AND c.objid OPERATOR(pg_catalog.=) d.objid)"),
								   (Datum) 0, false);
	else
		tenure_fence_foreign_check(TENURE_FOREIGN_QUERY("SELECT f.tbl::pg_catalog.oid FROM tenure.fenced f"
														" WHERE f.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ("
														"  SELECT c.objid FROM pg_catalog.pg_event_trigger_ddl_commands() c"
														"  WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass)", ""),
								   (Datum) 0, false);
}

/*
 * Event trigger tenure._fence_ddl(), on ddl_command_start of ALTER TABLE,
 * on table_rewrite, on sql_drop, and on ddl_command_end of every command
 * that can create a table, attach or inherit one, or add a table to a
 * subscription (the install script lists them): check DDL that changes a
 * fenced tree's rows as a write to its fence; forget dropped tables; keep
 * every partition and inheritance tree fenced whole, by one lease, or
 * refuse the command; refuse a fenced table as a logical replication
 * target; refuse to disable, replace or drop a fence trigger.
 *
 * It does not ask pg_event_trigger_ddl_commands() what the command touched
 * (CREATE SCHEMA does not report the tables it creates): it looks at every
 * edge of pg_inherits and every subscribed table, as committed now, and
 * acts on those whose catalog or tenure.fenced rows this transaction
 * wrote.  The invariant holds after every command, so only the
 * transaction's own changes can break it (short of a superuser bypassing
 * this trigger).
 */
Datum
tenure_fence_ddl(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata = (EventTriggerData *) fcinfo->context;
	const char *command;
	TenureSpi	spi;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("tenure._fence_ddl() must be called as an event trigger")));

	/* our own DDL, or the extension going away */
	if (tenure_fence_ddl_running || tenure_objects_gone())
		PG_RETURN_NULL();

	command = GetCommandTagName(trigdata->tag);
	if (strcmp(trigdata->event, "ddl_command_start") == 0)
	{
		if (IsA(trigdata->parsetree, AlterTableStmt))
			tenure_fence_ddl_alter((AlterTableStmt *) trigdata->parsetree, command);
		PG_RETURN_NULL();
	}
	if (strcmp(trigdata->event, "table_rewrite") == 0)
	{
		tenure_fence_ddl_rewrite(command);
		PG_RETURN_NULL();
	}
	if (strcmp(trigdata->event, "sql_drop") == 0)
	{
		tenure_fence_ddl_dropped_tables(command);
		tenure_spi_begin(&spi);
		tenure_spi_exec("DELETE FROM tenure.fenced f"
						" USING pg_catalog.pg_event_trigger_dropped_objects() d"
						" WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
						" AND d.objsubid OPERATOR(pg_catalog.=) 0"
						" AND d.objid OPERATOR(pg_catalog.=) f.tbl::pg_catalog.oid",
						"", NULL, NULL, SPI_OK_DELETE);
		tenure_spi_end(&spi);
		tenure_fence_ddl_dropped_triggers();
		PG_RETURN_NULL();
	}

	tenure_fence_ddl_trees();
	tenure_fence_ddl_foreign(trigdata->tag, trigdata->parsetree);
	tenure_fence_ddl_subscriptions();
	tenure_fence_ddl_changed_triggers(trigdata->tag == CMDTAG_CREATE_TRIGGER);
	PG_RETURN_NULL();
}
