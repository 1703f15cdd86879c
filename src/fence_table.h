/*-------------------------------------------------------------------------
 *
 * fence_table.h
 *		Declarations of fence_table.c: setting fences up and taking them down.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_FENCE_TABLE_H
#define TENURE_FENCE_TABLE_H

#include "pg_tenure.h"

/*
 * fence_table.c: setting fences up and taking them down; the verbs the
 * event trigger (fence_ddl.c) shares with tenure.fence_table() and
 * tenure.unfence_table()
 */
extern char *tenure_rel_qualified(Oid relid);
extern void tenure_fence_spi_begin(struct TenureSpi *spi);
extern void tenure_fence_query(const char *sql, const char *types, Datum *args);
extern bool tenure_fence_any(void);
extern List *tenure_rel_parents(Oid relid);
extern Oid	tenure_rel_subscription(Oid relid);
extern const char *tenure_subscription_name(Oid subid);
extern void tenure_fence_utility(const char *sql);
extern bool tenure_fence_utility_running(void);
extern void tenure_fence_forget(Oid relid);
extern void tenure_fence_one(Oid relid, const char *lease);
extern void tenure_fence_foreign_check(const char *sql, Datum tables,
									   bool fencing);

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
 * The seed is a query of the tables to check, column "tbl" (oid); filter
 * is appended to the final WHERE clause.  fence_table.c and fence_ddl.c
 * build their queries with it, and tenure_fence_foreign_check() runs them.
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

#endif							/* TENURE_FENCE_TABLE_H */
