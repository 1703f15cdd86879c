/*-------------------------------------------------------------------------
 *
 * fence_ddl.c
 *		Keeping fences whole: the event trigger tenure._fence_ddl().
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
 * What it costs.  The trigger runs on everyone's DDL, so it looks only
 * where a command can concern a fence.  It first asks whether anything is
 * fenced at all (tenure_fence_any(), the first row of tenure.fenced): in a
 * database that fences nothing it is then done.  Otherwise it reads what
 * the command touched, calling pg_event_trigger_ddl_commands() and
 * pg_event_trigger_dropped_objects() directly (tenure_fence_ddl_objects()),
 * and looks those relations, their parents and their fences up by index
 * (tenure_fence_ddl_scope()): DDL on tables outside every fenced tree
 * costs a few index lookups, whatever the number of tables, partitions
 * and fences in the database.  Only a command that touches a fenced tree,
 * or a table with a fenced parent, goes on to the checks below, and the
 * SQL statements among them run with pinned planner settings
 * (tenure_fence_spi_begin()).
 *
 * Fences are set up and removed, by tenure.fence_table() and
 * tenure.unfence_table() and by this trigger, with the verbs of
 * fence_table.c.  The writes themselves are checked in fence.c
 * (src/README, F2 and F9).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/tablecmds.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "pg_tenure.h"
#include "state.h"
#include "objects.h"
#include "catalog.h"
#include "fence.h"
#include "fence_table.h"

PG_FUNCTION_INFO_V1(pg_tenure_fence_ddl);

/*
 * An edge of pg_inherits whose two sides are not fenced by the same lease,
 * found by tenure_fence_ddl_edges().
 */
typedef struct TenureFenceEdge
{
	Oid			child;
	Oid			parent;
	int32		seqno;			/* the child's inhseqno */
	bool		made;			/* this transaction made the edge */
	char	   *child_lease;	/* NULL if not fenced */
	char	   *parent_lease;	/* NULL if not fenced */
	char		child_kind;
} TenureFenceEdge;

/*
 * An object a DDL command touched: a row of pg_event_trigger_ddl_commands()
 * or pg_event_trigger_dropped_objects().
 */
typedef struct TenureDdlObject
{
	Oid			classid;
	Oid			objid;
	char	   *trigger;		/* a dropped trigger's name, else NULL */
} TenureDdlObject;

/*
 * What a command on ddl_command_end touched (tenure_fence_ddl_scope()).
 */
typedef struct TenureDdlScope
{
	List	   *reported;		/* relations the command reports */
	List	   *rels;			/* those, the tables of the triggers it
								 * reports, the partitions it attaches or
								 * detaches */
	bool		near;			/* one of rels is fenced, or has a fenced
								 * parent */
} TenureDdlScope;

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
 * The name of a dropped trigger: the third of the address_names of its
 * row of pg_event_trigger_dropped_objects() (schema, table, trigger).
 */
static char *
tenure_fence_ddl_trigger_name(Datum names)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	deconstruct_array(DatumGetArrayTypeP(names), TEXTOID, -1, false,
					  TYPALIGN_INT, &elems, &nulls, &n);
	return n >= 3 && !nulls[2] ? TextDatumGetCString(elems[2]) : NULL;
}

/*
 * The objects the current command touched, as the event trigger function
 * funcid reports them: pg_event_trigger_ddl_commands() (on
 * ddl_command_end) or pg_event_trigger_dropped_objects() (on sql_drop).
 * The function is called directly, in materialize mode, as the executor
 * calls a set-returning function: no statement to parse, plan or run.
 */
static List *
tenure_fence_ddl_objects(Oid funcid)
{
	FmgrInfo	flinfo;
	LOCAL_FCINFO(fcinfo, 0);
	ReturnSetInfo rsinfo;
	TupleTableSlot *slot;
	List	   *objects = NIL;

	fmgr_info(funcid, &flinfo);
	memset(&rsinfo, 0, sizeof(rsinfo));
	rsinfo.type = T_ReturnSetInfo;
	rsinfo.econtext = CreateStandaloneExprContext();
	rsinfo.allowedModes = SFRM_Materialize;
	rsinfo.returnMode = SFRM_ValuePerCall;
	InitFunctionCallInfoData(*fcinfo, &flinfo, 0, InvalidOid, NULL,
							 (Node *) &rsinfo);
	(void) FunctionCallInvoke(fcinfo);
	if (rsinfo.returnMode != SFRM_Materialize || rsinfo.setResult == NULL)
		elog(ERROR, "function %u did not return a materialized set", funcid);

	slot = MakeSingleTupleTableSlot(rsinfo.setDesc, &TTSOpsMinimalTuple);
	while (tuplestore_gettupleslot(rsinfo.setResult, true, false, slot))
	{
		TenureDdlObject *object = palloc0(sizeof(TenureDdlObject));
		bool		isnull;

		/* classid and objid lead both functions' rows */
		object->classid = DatumGetObjectId(slot_getattr(slot, 1, &isnull));
		object->objid = DatumGetObjectId(slot_getattr(slot, 2, &isnull));
		if (funcid == F_PG_EVENT_TRIGGER_DROPPED_OBJECTS &&
			object->classid == TriggerRelationId)
		{
			/* address_names, the 11th column */
			Datum		names = slot_getattr(slot, 11, &isnull);

			if (!isnull)
				object->trigger = tenure_fence_ddl_trigger_name(names);
		}
		objects = lappend(objects, object);
	}
	ExecDropSingleTupleTableSlot(slot);
	tuplestore_end(rsinfo.setResult);
	FreeExprContext(rsinfo.econtext, true);
	return objects;
}

/*
 * The table of trigger trigid, or InvalidOid.
 */
static Oid
tenure_fence_ddl_trigger_rel(Oid trigid)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			relid = InvalidOid;

	rel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_trigger_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(trigid));
	scan = systable_beginscan(rel, TriggerOidIndexId, true, NULL, 1, &key);
	if (HeapTupleIsValid(tup = systable_getnext(scan)))
		relid = ((Form_pg_trigger) GETSTRUCT(tup))->tgrelid;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return relid;
}

/*
 * Whether table relid is fenced, or has a fenced parent (is a new child of
 * a fenced table, say).
 */
static bool
tenure_fence_ddl_near(Oid relid)
{
	ListCell   *lc;

	if (tenure_fenced_by(relid) != NULL)
		return true;
	foreach(lc, tenure_rel_parents(relid))
		if (tenure_fenced_by(lfirst_oid(lc)) != NULL)
			return true;
	return false;
}

/*
 * The commonest commands, CREATE TABLE and ALTER TABLE, touch the one
 * relation their statement names (and the indexes and sequences they may
 * make for it, which no fence concerns), found without asking
 * pg_event_trigger_ddl_commands(), whose rows cost a third of what the
 * event trigger costs: where the command created it (CREATE TABLE, as
 * DefineRelation() chooses the schema), or as the command found it
 * (ALTER TABLE, by the same name and search path).  Sets scope->reported
 * and scope->rels; false for any other statement.
 */
static bool
tenure_fence_ddl_stmt_rel(Node *parsetree, TenureDdlScope *scope)
{
	Oid			relid;

	if (parsetree != NULL && IsA(parsetree, CreateStmt))
	{
		RangeVar   *rv = ((CreateStmt *) parsetree)->relation;

		relid = get_relname_relid(rv->relname, RangeVarGetCreationNamespace(rv));
	}
	else if (parsetree != NULL && IsA(parsetree, AlterTableStmt))
		relid = RangeVarGetRelid(((AlterTableStmt *) parsetree)->relation, NoLock, true);
	else
		return false;
	if (OidIsValid(relid))
	{
		scope->reported = list_make1_oid(relid);
		scope->rels = list_make1_oid(relid);
	}
	return true;
}

/*
 * The relations pg_event_trigger_ddl_commands() reports, and the tables of
 * the triggers it reports, into scope->reported and scope->rels.
 */
static void
tenure_fence_ddl_reported(TenureDdlScope *scope)
{
	ListCell   *lc;

	foreach(lc, tenure_fence_ddl_objects(F_PG_EVENT_TRIGGER_DDL_COMMANDS))
	{
		TenureDdlObject *object = lfirst(lc);

		if (object->classid == RelationRelationId)
		{
			scope->reported = list_append_unique_oid(scope->reported, object->objid);
			scope->rels = list_append_unique_oid(scope->rels, object->objid);
		}
		else if (object->classid == TriggerRelationId)
		{
			Oid			relid = tenure_fence_ddl_trigger_rel(object->objid);

			if (OidIsValid(relid))
				scope->rels = list_append_unique_oid(scope->rels, relid);
		}
	}
}

/*
 * What the command that fired ddl_command_end touched.  The relations it
 * reports are those it created or altered (CREATE SCHEMA reports each
 * table it creates, ALTER TABLE the table it alters); an ALTER TABLE that
 * attaches or detaches a partition reports the parent, so the partition
 * is read from the statement.  A trigger created or altered stands for
 * its table.  Every edge of pg_inherits that a command adds has its child
 * among these relations; a fence the command must check belongs to one of
 * them or, if the relation is new to a tree, to one of its parents.
 */
static void
tenure_fence_ddl_scope(EventTriggerData *trigdata, TenureDdlScope *scope)
{
	ListCell   *lc;

	scope->reported = NIL;
	scope->rels = NIL;
	scope->near = false;
	if (!tenure_fence_ddl_stmt_rel(trigdata->parsetree, scope))
		tenure_fence_ddl_reported(scope);
	if (trigdata->parsetree != NULL && IsA(trigdata->parsetree, AlterTableStmt))
	{
		foreach(lc, ((AlterTableStmt *) trigdata->parsetree)->cmds)
		{
			AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);
			Oid			relid;

			if (cmd->subtype != AT_AttachPartition &&
				cmd->subtype != AT_DetachPartition &&
				cmd->subtype != AT_DetachPartitionFinalize)
				continue;
			/* locked by the command, which resolved the same name */
			relid = RangeVarGetRelid(((PartitionCmd *) cmd->def)->name, NoLock, true);
			if (OidIsValid(relid))
				scope->rels = list_append_unique_oid(scope->rels, relid);
		}
	}
	foreach(lc, scope->rels)
	{
		if (tenure_fence_ddl_near(lfirst_oid(lc)))
		{
			scope->near = true;
			break;
		}
	}
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
		char	   *lease;

		if (other == edge->parent)
			continue;
		lease = tenure_fenced_by(other);
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
 * Add to edges (unless there already) the edges of pg_inherits in which
 * relid is the child, or with as_parent the parent, whose two sides are
 * not fenced by the same lease, as committed now, and which are this
 * transaction's business: it made the edge, or the fence of one of its
 * sides.  One left broken by a superuser who bypassed the event trigger
 * must not make everyone's DDL fail.  Partitioned indexes have edges too,
 * never fenced on either side.
 */
static List *
tenure_fence_ddl_edges(List *edges, Oid relid, bool as_parent)
{
	Relation	inh;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *found = NIL;
	ListCell   *lc;

	/* a catalog scan sees the latest committed state, and ours */
	inh = table_open(InheritsRelationId, AccessShareLock);
	ScanKeyInit(&key, as_parent ? Anum_pg_inherits_inhparent : Anum_pg_inherits_inhrelid,
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(inh, as_parent ? InheritsParentIndexId : InheritsRelidSeqnoIndexId,
							  true, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_inherits form = (Form_pg_inherits) GETSTRUCT(tup);
		TenureFenceEdge *edge = palloc0(sizeof(TenureFenceEdge));

		edge->child = form->inhrelid;
		edge->parent = form->inhparent;
		edge->seqno = form->inhseqno;
		edge->made = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data));
		found = lappend(found, edge);
	}
	systable_endscan(scan);
	table_close(inh, AccessShareLock);

	foreach(lc, found)
	{
		TenureFenceEdge *edge = lfirst(lc);
		ListCell   *le;
		bool		child_mine;
		bool		parent_mine;
		bool		known = false;

		foreach(le, edges)
			if (((TenureFenceEdge *) lfirst(le))->child == edge->child &&
				((TenureFenceEdge *) lfirst(le))->parent == edge->parent)
				known = true;
		if (known)
			continue;
		edge->child_lease = tenure_fence_lease(edge->child, &child_mine);
		edge->parent_lease = tenure_fence_lease(edge->parent, &parent_mine);
		if (!edge->made && !child_mine && !parent_mine)
			continue;
		if (edge->child_lease == NULL ? edge->parent_lease == NULL :
			edge->parent_lease != NULL && strcmp(edge->child_lease, edge->parent_lease) == 0)
			continue;
		edge->child_kind = get_rel_relkind(edge->child);
		edges = lappend(edges, edge);
	}
	return edges;
}

/*
 * Order of edges: by child, then by its inhseqno.
 */
static int
tenure_fence_edge_cmp(const ListCell *a, const ListCell *b)
{
	const TenureFenceEdge *ea = lfirst(a);
	const TenureFenceEdge *eb = lfirst(b);

	if (ea->child != eb->child)
		return ea->child < eb->child ? -1 : 1;
	return ea->seqno < eb->seqno ? -1 : ea->seqno > eb->seqno ? 1 : 0;
}

/*
 * Keep every tree whole after DDL (see pg_tenure_fence_ddl()): fence the
 * unfenced children of fenced tables with the parent's lease, level by
 * level, and raise an ERROR, aborting the DDL, for what cannot be fixed.
 * rels are the relations the command touched (tenure_fence_ddl_scope()):
 * their edges as children, then those of the tables fenced here, as
 * children and as parents.  Returns the tables fenced here.
 */
static List *
tenure_fence_ddl_trees(List *rels)
{
	List	   *fixed = NIL;

	for (;;)
	{
		List	   *edges = NIL;
		List	   *round = NIL;
		ListCell   *lc;

		foreach(lc, rels)
			edges = tenure_fence_ddl_edges(edges, lfirst_oid(lc), false);
		foreach(lc, fixed)
		{
			edges = tenure_fence_ddl_edges(edges, lfirst_oid(lc), false);
			edges = tenure_fence_ddl_edges(edges, lfirst_oid(lc), true);
		}
		if (edges == NIL)
			return fixed;
		list_sort(edges, tenure_fence_edge_cmp);

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
		/* see the fences just made */
		CommandCounterIncrement();
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

	tenure_fence_spi_begin(&spi);
	tenure_fence_query("SELECT f.tbl::pg_catalog.oid, r.srsubid, f.lease, f.xmin, r.xmin"
					   " FROM tenure.fenced f JOIN pg_catalog.pg_subscription_rel r"
					   "  ON r.srrelid OPERATOR(pg_catalog.=) f.tbl::pg_catalog.oid"
					   " ORDER BY 1, 2",
					   "", NULL);
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
 * Whether a table fenced by this command (tenure_fence_ddl_trees()) is
 * written by a logical replication subscription (a subscribed table
 * attached to a fenced tree).
 */
static bool
tenure_fence_ddl_subscribed(List *fenced)
{
	ListCell   *lc;

	foreach(lc, fenced)
		if (OidIsValid(tenure_rel_subscription(lfirst_oid(lc))))
			return true;
	return false;
}

/*
 * The query of tenure_fence_ddl_changed_triggers(): every trigger on the
 * fenced tables among $1 that bears a fence trigger's name or function,
 * and whether it has the right shape (TENURE_FENCE_TGTYPE, or
 * TENURE_FENCE_APPLY_TGTYPE on a table that holds rows; never a
 * partition's clone of its parent's trigger).  Built once per backend with
 * the tgtypes filled in, and kept, so that its plan is kept too
 * (tenure_spi_plan() keys plans by text).
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
				   " WHERE f.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) ANY ($1)"
				   "  AND (t.tgname OPERATOR(pg_catalog.=) ANY ('{tenure_fence,tenure_fence_apply}')"
				   "   OR t.tgfoid OPERATOR(pg_catalog.=) 'tenure.fence_trigger'::pg_catalog.regproc"
				   "   OR t.tgfoid OPERATOR(pg_catalog.=) 'tenure.fence_apply_trigger'::pg_catalog.regproc)"
				   " ORDER BY f.tbl::pg_catalog.oid, t.tgname",
				   TENURE_FENCE_TGTYPE, TENURE_FENCE_APPLY_TGTYPE);
	MemoryContextSwitchTo(old);
	return sql;
}

/*
 * The tables whose fence triggers a command on ddl_command_end may have
 * changed: the fenced ones among rels (tenure_fence_ddl_scope()) and the
 * tables fenced by this command, and below those their partitions and
 * children if the command enables or disables triggers or creates or
 * alters one (which may recurse to the partitions' clones).  As an oid[],
 * or (Datum) 0 if there is none.
 */
static Datum
tenure_fence_ddl_trigger_tables(List *rels, List *fenced, Node *parsetree,
								CommandTag tag)
{
	bool		recurse = (tag == CMDTAG_CREATE_TRIGGER || tag == CMDTAG_ALTER_TRIGGER);
	List	   *tables = NIL;
	Datum	   *oids;
	ListCell   *lc;
	int			n = 0;

	if (parsetree != NULL && IsA(parsetree, AlterTableStmt))
	{
		foreach(lc, ((AlterTableStmt *) parsetree)->cmds)
		{
			switch (((AlterTableCmd *) lfirst(lc))->subtype)
			{
				case AT_EnableTrig:
				case AT_EnableAlwaysTrig:
				case AT_EnableReplicaTrig:
				case AT_DisableTrig:
				case AT_EnableTrigAll:
				case AT_DisableTrigAll:
				case AT_EnableTrigUser:
				case AT_DisableTrigUser:
					recurse = true;
					break;
				default:
					break;
			}
		}
	}
	foreach(lc, list_concat_copy(rels, fenced))
	{
		Oid			relid = lfirst_oid(lc);

		if (tenure_fenced_by(relid) == NULL)
			continue;
		if (recurse)
			tables = list_concat_unique_oid(tables, find_all_inheritors(relid, NoLock, NULL));
		else
			tables = list_append_unique_oid(tables, relid);
	}
	if (tables == NIL)
		return (Datum) 0;
	oids = palloc(sizeof(Datum) * list_length(tables));
	foreach(lc, tables)
		oids[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	return PointerGetDatum(construct_array(oids, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
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
 * Only the triggers of tables (an oid[]: tenure_fence_ddl_trigger_tables())
 * that the command may have changed, and of those only the trigger rows
 * this transaction changed, are its business.  Dropped fence triggers:
 * tenure_fence_ddl_dropped_triggers().
 */
static void
tenure_fence_ddl_changed_triggers(bool creating, Datum tables)
{
	MemoryContext cxt = CurrentMemoryContext;
	TenureSpi	spi;
	Datum		args[1];
	char	   *table = NULL;
	char	   *trigger = NULL;
	char	   *lease = NULL;
	List	   *enable = NIL;
	ListCell   *lc;
	uint64		i;

	/* see the fences this event trigger itself just made */
	CommandCounterIncrement();
	tenure_fence_spi_begin(&spi);

	/* trigger rows with a fence trigger's name or function, and their shape */
	args[0] = tables;
	tenure_fence_query(tenure_fence_ddl_triggers_query(), "O", args);
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

	tenure_fence_spi_begin(&spi);

	/*
	 * Fence triggers dropped from tables that are still fenced, with
	 * whether the table is part of a tree.  (pg_temp in an address names
	 * the session's temporary schema.)
	 */
	tenure_fence_query("SELECT DISTINCT f.tbl::pg_catalog.oid, f.tbl::pg_catalog.text, f.lease,"
					   "  EXISTS (SELECT FROM pg_catalog.pg_inherits i"
					   "   WHERE i.inhrelid OPERATOR(pg_catalog.=) f.tbl::pg_catalog.oid)"
					   "  OR EXISTS (SELECT FROM pg_catalog.pg_inherits i"
					   "   WHERE i.inhparent OPERATOR(pg_catalog.=) f.tbl::pg_catalog.oid),"
					   "  pg_catalog.min(d.address_names[3]) OVER (PARTITION BY f.tbl)"
					   " FROM pg_catalog.pg_event_trigger_dropped_objects() d"
					   " JOIN tenure.fenced f ON f.tbl::pg_catalog.oid OPERATOR(pg_catalog.=)"
					   "  pg_catalog.to_regclass(pg_catalog.format('%I.%I',"
					   "   d.address_names[1], d.address_names[2]))::pg_catalog.oid"
					   " WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::pg_catalog.regclass"
					   " AND d.address_names[3] OPERATOR(pg_catalog.=) ANY ('{tenure_fence,tenure_fence_apply}')"
					   " ORDER BY 1",
					   "", NULL);
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
tenure_fence_ddl_check_query(const char *sql, const char *types, Datum *args,
							 const char *command)
{
	MemoryContext cxt = CurrentMemoryContext;
	TenureSpi	spi;
	List	   *leases = NIL;
	List	   *tables = NIL;
	ListCell   *lc1;
	ListCell   *lc2;
	uint64		i;

	tenure_fence_spi_begin(&spi);
	tenure_fence_query(sql, types, args);
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
	char	   *lease = tenure_fenced_by(relid);

	if (lease != NULL)
		tenure_fence_ddl_check(lease, get_rel_name(relid), command);
}

/*
 * Whether (classid, objid) is among the pairs classes and objids hold.
 */
static bool
tenure_fence_ddl_seen(List *classes, List *objids, Oid classid, Oid objid)
{
	ListCell   *lc1;
	ListCell   *lc2;

	forboth(lc1, classes, lc2, objids)
		if (lfirst_oid(lc1) == classid && lfirst_oid(lc2) == objid)
			return true;
	return false;
}

/*
 * Whether a fenced table other than relid has a column whose type is
 * built on the row type of relid: the walk of the query of
 * tenure_fence_ddl_rowtype_users(), through pg_depend by its index, so
 * that the query runs only when it has something to report.
 */
static bool
tenure_fence_ddl_rowtype_fenced(Oid relid)
{
	Oid			reltype = get_rel_type_id(relid);
	Relation	dep;
	List	   *classes;
	List	   *objids;
	ListCell   *lc1;
	ListCell   *lc2;
	int			i;

	if (!OidIsValid(reltype))
		return false;
	classes = list_make1_oid(TypeRelationId);
	objids = list_make1_oid(reltype);
	dep = table_open(DependRelationId, AccessShareLock);
	for (i = 0; i < list_length(objids); i++)
	{
		ScanKeyData key[2];
		SysScanDesc scan;
		HeapTuple	tup;

		ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(list_nth_oid(classes, i)));
		ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(list_nth_oid(objids, i)));
		scan = systable_beginscan(dep, DependReferenceIndexId, true, NULL, 2, key);
		while (HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);

			if ((d->classid != TypeRelationId && d->classid != RelationRelationId) ||
				(d->deptype != DEPENDENCY_NORMAL && d->deptype != DEPENDENCY_INTERNAL) ||
				tenure_fence_ddl_seen(classes, objids, d->classid, d->objid))
				continue;
			classes = lappend_oid(classes, d->classid);
			objids = lappend_oid(objids, d->objid);
		}
		systable_endscan(scan);
	}
	table_close(dep, AccessShareLock);

	forboth(lc1, classes, lc2, objids)
		if (lfirst_oid(lc1) == RelationRelationId && lfirst_oid(lc2) != relid &&
			tenure_fenced_by(lfirst_oid(lc2)) != NULL)
			return true;
	return false;
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
								 "o", args, command);
}

/*
 * The typed tables of composite type relid (its pg_class row), in OID
 * order, locked as ALTER TYPE ... CASCADE will lock them: each depends on
 * the type (pg_depend), and has it as reloftype.
 */
static List *
tenure_fence_ddl_typed_tables(Oid relid)
{
	Oid			reltype = get_rel_type_id(relid);
	List	   *tables = NIL;
	Relation	dep;
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;
	ListCell   *lc;

	if (!OidIsValid(reltype))
		return NIL;
	dep = table_open(DependRelationId, AccessShareLock);
	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(TypeRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(reltype));
	scan = systable_beginscan(dep, DependReferenceIndexId, true, NULL, 2, key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);

		if (d->classid == RelationRelationId && d->objsubid == 0)
			tables = list_append_unique_oid(tables, d->objid);
	}
	systable_endscan(scan);
	table_close(dep, AccessShareLock);

	foreach(lc, tables)
	{
		HeapTuple	reltup = SearchSysCache1(RELOID, ObjectIdGetDatum(lfirst_oid(lc)));
		bool		typed = false;

		if (HeapTupleIsValid(reltup))
		{
			typed = ((Form_pg_class) GETSTRUCT(reltup))->reloftype == reltype;
			ReleaseSysCache(reltup);
		}
		if (!typed)
			tables = foreach_delete_current(tables, lc);
	}
	list_sort(tables, list_oid_cmp);
	foreach(lc, tables)
		LockRelationOid(lfirst_oid(lc), AccessExclusiveLock);
	return tables;
}

/*
 * Whether table name, which ATTACH PARTITION is about to attach, holds no
 * row in it or in any of its partitions: it and its partitions are locked
 * as the command will lock them (ACCESS EXCLUSIVE, which waits for every
 * transaction that wrote them and keeps all others out), and then read
 * under a snapshot taken after the locks were granted, which sees what
 * this transaction wrote too.  Attaching it then changes no row of the
 * tree.  A foreign table may hold rows that no scan here can see: never
 * empty.
 */
static bool
tenure_fence_ddl_attach_empty(RangeVar *name)
{
	Oid			relid = RangeVarGetRelid(name, AccessExclusiveLock, true);
	Snapshot	snapshot;
	ListCell   *lc;
	bool		empty = true;

	if (!OidIsValid(relid))
		return false;
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	foreach(lc, find_all_inheritors(relid, AccessExclusiveLock, NULL))
	{
		char		relkind = get_rel_relkind(lfirst_oid(lc));
		Relation	rel;
		TableScanDesc scan;
		TupleTableSlot *slot;

		if (relkind == RELKIND_PARTITIONED_TABLE)
			continue;
		if (relkind != RELKIND_RELATION)
		{
			empty = false;
			break;
		}
		rel = table_open(lfirst_oid(lc), NoLock);
		slot = table_slot_create(rel, NULL);
		scan = table_beginscan(rel, snapshot, 0, NULL);
		empty = !table_scan_getnextslot(scan, ForwardScanDirection, slot);
		table_endscan(scan);
		ExecDropSingleTupleTableSlot(slot);
		table_close(rel, NoLock);
		if (!empty)
			break;
	}
	UnregisterSnapshot(snapshot);
	return empty;
}

/*
 * On ddl_command_start of ALTER TABLE and ALTER TYPE: subcommands that change the rows a
 * fenced tree holds are fenced writes, checked before they run:
 *
 * - ADD COLUMN, DROP COLUMN, ALTER COLUMN ... TYPE and (17 and later) SET
 *   EXPRESSION give every row a value, take one away or convert it (a
 *   USING expression or a volatile default can set anything);
 * - ATTACH PARTITION and INHERIT bring a table's rows into the tree,
 *   DETACH PARTITION and NO INHERIT take them out of it; but attaching a
 *   partition that holds no row, as pg_partman's maintenance does, changes
 *   no row of the tree and needs no token (tenure_fence_ddl_attach_empty();
 *   INHERIT locks the child in a mode that lets writers in while it runs,
 *   so it is always checked);
 * - SET UNLOGGED leaves every row to be lost at the next crash, and on
 *   every standby.
 *
 * Adding, dropping or retyping a column of any table or composite type
 * also changes the values of fenced columns of that row type (or of an
 * array, domain or composite type built on it): see
 * tenure_fence_ddl_rowtype_users().
 *
 * The tables are locked first, as the command itself will lock them, and
 * only then is tenure.fenced read, so that a fence_table() committed
 * before the command runs is seen: fence_table() locks the tree in a mode
 * that conflicts with each of these.  So is the parent named by INHERIT,
 * whose rows the child's join.  (ATTACH needs no look at the attached
 * table: if it is fenced, its parent must be fenced by the same lease, or
 * tenure_fence_ddl_trees() refuses the command.)  ALTER TYPE ... ADD, DROP
 * or ALTER ATTRIBUTE ... CASCADE does the same to the tables of the type
 * (typed tables).  A rewrite by a path not listed here is still checked,
 * on table_rewrite.
 */
static void
tenure_fence_ddl_alter(AlterTableStmt *stmt, const char *command)
{
	ListCell   *lc;
	RangeVar   *parent = NULL;
	bool		writes = false;
	bool		columns = false;
	Oid			relid;
	Oid			parentid = InvalidOid;
	List	   *typed = NIL;
	RangeVar   *attach = NULL;

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
			case AT_AttachPartition:
				attach = ((PartitionCmd *) cmd->def)->name;
				writes = true;
				break;
			case AT_SetUnLogged:
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
	if (stmt->objtype == OBJECT_TYPE)
		typed = tenure_fence_ddl_typed_tables(relid);
	else if (parent != NULL)
		/* ALTER TABLE ... INHERIT locks the parent so */
		parentid = RangeVarGetRelid(parent, ShareUpdateExclusiveLock, true);
	/* all locked: nothing fenced now is nothing fenced for this command */
	if (!tenure_fence_any())
		return;
	/* ATTACH PARTITION (alone in its statement) of a table with no rows */
	if (attach != NULL && list_length(stmt->cmds) == 1 &&
		(tenure_fenced_by(relid) == NULL || tenure_fence_ddl_attach_empty(attach)))
		return;

	if (columns && tenure_fence_ddl_rowtype_fenced(relid))
		tenure_fence_ddl_rowtype_users(relid, command);
	if (stmt->objtype == OBJECT_TYPE)
	{
		foreach(lc, typed)
			tenure_fence_ddl_write(lfirst_oid(lc), command);
		return;
	}
	tenure_fence_ddl_write(relid, command);
	if (OidIsValid(parentid))
		tenure_fence_ddl_write(parentid, command);
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
	Oid			relid;
	int32		reason;

	relid = DatumGetObjectId(OidFunctionCall0(F_PG_EVENT_TRIGGER_TABLE_REWRITE_OID));
	reason = DatumGetInt32(OidFunctionCall0(F_PG_EVENT_TRIGGER_TABLE_REWRITE_REASON));
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
								 "", NULL, command);
}

/*
 * Whether the command that fired sql_drop dropped a fenced table, one of
 * its columns, or a trigger named as a fence trigger is.
 */
static bool
tenure_fence_ddl_drops_fence(void)
{
	ListCell   *lc;

	foreach(lc, tenure_fence_ddl_objects(F_PG_EVENT_TRIGGER_DROPPED_OBJECTS))
	{
		TenureDdlObject *object = lfirst(lc);

		if (object->classid == RelationRelationId &&
			tenure_fenced_by(object->objid) != NULL)
			return true;
		if (object->classid == TriggerRelationId && object->trigger != NULL &&
			(strcmp(object->trigger, "tenure_fence") == 0 ||
			 strcmp(object->trigger, "tenure_fence_apply") == 0))
			return true;
	}
	return false;
}

/*
 * On sql_drop: check the drop of fenced tables and columns as writes,
 * forget dropped tables, and handle dropped fence triggers; nothing to do
 * unless the command dropped one of these.
 */
static void
tenure_fence_ddl_drop(const char *command)
{
	TenureSpi	spi;

	if (!tenure_fence_any() || !tenure_fence_ddl_drops_fence())
		return;
	tenure_fence_ddl_dropped_tables(command);
	tenure_fence_spi_begin(&spi);
	tenure_spi_exec("DELETE FROM tenure.fenced f"
					" USING pg_catalog.pg_event_trigger_dropped_objects() d"
					" WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
					" AND d.objsubid OPERATOR(pg_catalog.=) 0"
					" AND d.objid OPERATOR(pg_catalog.=) f.tbl::pg_catalog.oid",
					"", NULL, NULL, SPI_OK_DELETE);
	tenure_spi_end(&spi);
	tenure_fence_ddl_dropped_triggers();
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
tenure_fence_ddl_foreign(CommandTag tag, Node *parsetree, const TenureDdlScope *scope)
{
	bool		owner = false;
	List	   *seed = NIL;
	Datum	   *oids;
	ListCell   *lc;
	int			n = 0;

	/* a relation given to another role: its row type may be a column's */
	if (parsetree != NULL && IsA(parsetree, AlterTableStmt))
	{
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
	{
		tenure_fence_foreign_check(TENURE_FOREIGN_QUERY("SELECT f.tbl::pg_catalog.oid FROM tenure.fenced f",
														" AND o.tbl OPERATOR(pg_catalog.=) ANY ("
														"  SELECT d.tbl FROM dep d"
														"  JOIN pg_catalog.pg_event_trigger_ddl_commands() c"
														"   ON c.classid OPERATOR(pg_catalog.=) d.classid"
														"   AND c.objid OPERATOR(pg_catalog.=) d.objid)"),
								   (Datum) 0, false);
		return;
	}

	/* the fenced tables among those the command reports */
	foreach(lc, scope->reported)
		if (tenure_fenced_by(lfirst_oid(lc)) != NULL)
			seed = lappend_oid(seed, lfirst_oid(lc));
	if (seed == NIL)
		return;
	oids = palloc(sizeof(Datum) * list_length(seed));
	foreach(lc, seed)
		oids[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	tenure_fence_foreign_check(TENURE_FOREIGN_QUERY("SELECT pg_catalog.unnest($2::pg_catalog.oid[])", ""),
							   PointerGetDatum(construct_array(oids, n, OIDOID, sizeof(Oid),
															   true, TYPALIGN_INT)),
							   false);
}

/*
 * On ddl_command_end (see pg_tenure_fence_ddl()).  Nothing to do in a
 * database that fences nothing, nor for a command that touched no fenced
 * table and no child of one (tenure_fence_ddl_scope()), unless it changed
 * a subscription or an object a fenced table may use.
 */
static void
tenure_fence_ddl_end(EventTriggerData *trigdata)
{
	TenureDdlScope scope;
	List	   *fenced = NIL;
	Datum		tables;

	if (!tenure_fence_any())
		return;
	tenure_fence_ddl_scope(trigdata, &scope);
	if (scope.near)
		fenced = tenure_fence_ddl_trees(scope.rels);
	/* the fences made here are seen from now on */
	CommandCounterIncrement();
	tenure_fence_ddl_foreign(trigdata->tag, trigdata->parsetree, &scope);
	if (trigdata->tag == CMDTAG_CREATE_SUBSCRIPTION ||
		trigdata->tag == CMDTAG_ALTER_SUBSCRIPTION ||
		tenure_fence_ddl_subscribed(fenced))
		tenure_fence_ddl_subscriptions();
	if (!scope.near)
		return;
	tables = tenure_fence_ddl_trigger_tables(scope.rels, fenced,
											 trigdata->parsetree, trigdata->tag);
	if (tables != (Datum) 0)
		tenure_fence_ddl_changed_triggers(trigdata->tag == CMDTAG_CREATE_TRIGGER, tables);
}

/*
 * Whether pg_tenure is going away, from the trigger's own function
 * fn_oid, which lives in the extension's schema: it or the table
 * tenure.fenced is gone (being dropped, or moved away by a superuser).
 * Two syscache lookups, no scan of pg_extension: this runs on every DDL
 * command.
 */
static bool
tenure_fence_ddl_gone(Oid fn_oid)
{
	Oid			nsp = get_func_namespace(fn_oid);

	return !OidIsValid(nsp) || !OidIsValid(get_relname_relid("fenced", nsp));
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
 * It looks only at what the command touched (tenure_fence_ddl_scope()),
 * as committed now, and acts on the edges of pg_inherits, subscribed
 * tables and trigger rows whose catalog or tenure.fenced rows this
 * transaction wrote.  The invariant holds after every command, so only
 * the command's own changes can break it (short of a superuser bypassing
 * this trigger).
 */
Datum
pg_tenure_fence_ddl(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata = (EventTriggerData *) fcinfo->context;
	const char *command;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("tenure._fence_ddl() must be called as an event trigger")));

	/* our own DDL, or the extension going away */
	if (tenure_fence_utility_running() || tenure_fence_ddl_gone(fcinfo->flinfo->fn_oid))
		PG_RETURN_NULL();

	command = GetCommandTagName(trigdata->tag);
	if (strcmp(trigdata->event, "ddl_command_start") == 0)
	{
		if (IsA(trigdata->parsetree, AlterTableStmt))
			tenure_fence_ddl_alter((AlterTableStmt *) trigdata->parsetree, command);
	}
	else if (strcmp(trigdata->event, "table_rewrite") == 0)
		tenure_fence_ddl_rewrite(command);
	else if (strcmp(trigdata->event, "sql_drop") == 0)
		tenure_fence_ddl_drop(command);
	else
		tenure_fence_ddl_end(trigdata);
	PG_RETURN_NULL();
}
