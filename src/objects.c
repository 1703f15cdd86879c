/*-------------------------------------------------------------------------
 *
 * objects.c
 *		pg_tenure's own objects: finding the tables, views and functions
 *		that CREATE EXTENSION pg_tenure installed, and checking that they
 *		are still what it installed, before any code of pg_tenure uses them.
 *
 * The C code reaches the extension's objects only through this file.  An
 * object counts only as a member of the installed extension (pg_depend,
 * deptype 'e'), found in the extension's own schema, never by its name
 * alone; and that schema must be named tenure, owned by a superuser, and
 * let no other role create objects in it, so that nobody but a superuser
 * can add, rename or replace anything a qualified name such as
 * tenure.lease resolves to.  The fence lock views live in schema
 * tenure_lock, also the extension's, which no role but superusers may use:
 * whoever can name a relation can lock it.  The extension's owner, as whom pg_tenure
 * runs its statements, must be a superuser.  When any of this does not
 * hold, every use fails closed with SQLSTATE 55000 and a message that
 * says what is wrong; nothing reads or writes a look-alike.
 *
 * The install script makes the same checks of a schema tenure that
 * existed before CREATE EXTENSION (pg_tenure--*.sql).
 *
 * The OIDs are cached per backend and forgotten when pg_namespace,
 * pg_proc or one of the extension's relations changes (syscache and
 * relcache callbacks), and at DROP/CREATE EXTENSION, which changes both.
 * Changing the extension's members with ALTER EXTENSION ... ADD/DROP,
 * which only its (superuser) owner can do, is not watched.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "pg_tenure.h"
#include "objects.h"

static TenureObjects tenure_objects_cache;
static bool tenure_objects_valid = false;
static uint64 tenure_objects_resets = 0;

static void
tenure_objects_forget(void)
{
	tenure_objects_valid = false;
	tenure_objects_resets++;
}

static void
tenure_objects_syscache_reset(Datum arg, int cacheid, uint32 hashvalue)
{
	tenure_objects_forget();
}

static void
tenure_objects_relcache_reset(Datum arg, Oid relid)
{
	int			i;

	/* only the relations cached, or all: not any change while loading */
	if (!OidIsValid(relid) ||
		relid == tenure_objects_cache.lease ||
		relid == tenure_objects_cache.history ||
		relid == tenure_objects_cache.fenced)
	{
		tenure_objects_forget();
		return;
	}
	for (i = 0; i < TENURE_FENCE_LOCKS; i++)
		if (relid == tenure_objects_cache.fence_locks[i])
		{
			tenure_objects_forget();
			return;
		}
}

/*
 * At library load: register the cache callbacks (registering later could
 * find the callback slots taken, which is FATAL).
 */
void
tenure_objects_init(void)
{
	CacheRegisterSyscacheCallback(NAMESPACEOID, tenure_objects_syscache_reset, (Datum) 0);
	CacheRegisterSyscacheCallback(PROCOID, tenure_objects_syscache_reset, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, tenure_objects_syscache_reset, (Datum) 0);
	CacheRegisterRelcacheCallback(tenure_objects_relcache_reset, (Datum) 0);
}

/*
 * The owner and schema of extension ext, read from pg_extension; false if
 * it has no row.
 */
static bool
tenure_extension_row(Oid ext, Oid *owner, Oid *nsp)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	bool		found = false;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		*owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
		*nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
		found = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * Fail closed: pg_tenure's schema or objects are not what it installed.
 */
static void
tenure_objects_refuse(const char *what, const char *detail_fmt, const char *arg)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("pg_tenure's %s is not as the extension installed it", what),
			 errdetail_internal(detail_fmt, arg),
			 errhint("Only a superuser may own or create objects in schema \"tenure\"; reinstall pg_tenure if its objects were changed.")));
}

/*
 * Whether a role other than a superuser (or PUBLIC) holds any privilege of
 * mode on the schema whose pg_namespace row is tup; sets *grantee to it.
 */
static bool
tenure_schema_granted(HeapTuple tup, AclMode mode, Oid *grantee)
{
	Form_pg_namespace nspform = (Form_pg_namespace) GETSTRUCT(tup);
	Datum		acldatum;
	bool		isnull;
	Acl		   *acl;
	Oid		   *roles;
	int			nroles;
	int			i;

	acldatum = SysCacheGetAttr(NAMESPACEOID, tup, Anum_pg_namespace_nspacl, &isnull);
	if (isnull)
		return false;			/* the default: only the owner */
	acl = DatumGetAclP(acldatum);
	if (aclmask(acl, ACL_ID_PUBLIC, nspform->nspowner, mode, ACLMASK_ANY) != 0)
	{
		*grantee = ACL_ID_PUBLIC;
		return true;
	}
	nroles = aclmembers(acl, &roles);
	for (i = 0; i < nroles; i++)
	{
		if (superuser_arg(roles[i]))
			continue;
		if (aclmask(acl, roles[i], nspform->nspowner, mode, ACLMASK_ANY) != 0)
		{
			*grantee = roles[i];
			return true;
		}
	}
	return false;
}

/*
 * The relation "name" in the extension's schema, which must be a member of
 * the extension.
 */
static Oid
tenure_objects_member_rel(const char *name, Oid nsp, Oid ext)
{
	Oid			rel = get_relname_relid(name, nsp);

	if (!OidIsValid(rel))
		tenure_objects_refuse("schema",
							  "Relation \"tenure.%s\" does not exist.", name);
	if (getExtensionOfObject(RelationRelationId, rel) != ext)
		tenure_objects_refuse("schema",
							  "Relation \"tenure.%s\" is not a member of extension pg_tenure.", name);
	return rel;
}

/*
 * The trigger function "name"() in the extension's schema, a member of the
 * extension.
 */
static Oid
tenure_objects_member_func(const char *name, Oid ext)
{
	List	   *qualified = list_make2(makeString("tenure"), makeString(pstrdup(name)));
	Oid			fn = LookupFuncName(qualified, 0, NULL, true);

	if (!OidIsValid(fn))
		tenure_objects_refuse("schema",
							  "Function \"tenure.%s()\" does not exist.", name);
	if (getExtensionOfObject(ProcedureRelationId, fn) != ext)
		tenure_objects_refuse("schema",
							  "Function \"tenure.%s()\" is not a member of extension pg_tenure.", name);
	return fn;
}

/*
 * Find and check the extension's objects (see the file header).
 */
static bool
tenure_objects_load(TenureObjects *objs, bool missing_ok)
{
	Oid			ext;
	HeapTuple	tup;
	Form_pg_namespace nspform;
	Oid			grantee;
	Oid			lock_nsp;
	int			i;

	ext = get_extension_oid("pg_tenure", true);
	if (!OidIsValid(ext))
	{
		if (missing_ok)
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("pg_tenure is not installed in this database"),
				 errhint("Run CREATE EXTENSION pg_tenure.")));
	}
	objs->extension = ext;
	if (!tenure_extension_row(ext, &objs->owner, &objs->namespace))
	{
		if (missing_ok)
			return false;
		tenure_objects_refuse("extension", "%s", "Extension pg_tenure has no catalog row.");
	}
	if (!superuser_arg(objs->owner))
		tenure_objects_refuse("extension",
							  "The owner of extension pg_tenure, role \"%s\", is not a superuser.",
							  GetUserNameFromId(objs->owner, true));

	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(objs->namespace));
	if (!HeapTupleIsValid(tup))
		tenure_objects_refuse("schema", "%s", "The extension's schema does not exist.");
	nspform = (Form_pg_namespace) GETSTRUCT(tup);
	if (strcmp(NameStr(nspform->nspname), "tenure") != 0)
	{
		char	   *name = pstrdup(NameStr(nspform->nspname));

		ReleaseSysCache(tup);
		tenure_objects_refuse("schema",
							  "The extension's schema is named \"%s\", not \"tenure\".", name);
	}
	if (!superuser_arg(nspform->nspowner))
	{
		Oid			owner = nspform->nspowner;

		ReleaseSysCache(tup);
		tenure_objects_refuse("schema",
							  "Schema \"tenure\" is owned by role \"%s\", which is not a superuser.",
							  GetUserNameFromId(owner, true));
	}
	if (tenure_schema_granted(tup, ACL_CREATE, &grantee))
	{
		ReleaseSysCache(tup);
		tenure_objects_refuse("schema",
							  "Role \"%s\" may create objects in schema \"tenure\".",
							  grantee == ACL_ID_PUBLIC ? "PUBLIC" :
							  GetUserNameFromId(grantee, true));
	}
	ReleaseSysCache(tup);

	objs->lease = tenure_objects_member_rel("lease", objs->namespace, ext);
	objs->history = tenure_objects_member_rel("history", objs->namespace, ext);
	objs->fenced = tenure_objects_member_rel("fenced", objs->namespace, ext);
	/* the fence lock views, in a schema only superusers may use */
	lock_nsp = get_namespace_oid("tenure_lock", true);
	if (!OidIsValid(lock_nsp) ||
		getExtensionOfObject(NamespaceRelationId, lock_nsp) != ext)
		tenure_objects_refuse("schema", "%s",
							  "Schema \"tenure_lock\" is not a member of extension pg_tenure.");
	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(lock_nsp));
	if (!HeapTupleIsValid(tup))
		tenure_objects_refuse("schema", "%s", "Schema \"tenure_lock\" does not exist.");
	if (!superuser_arg(((Form_pg_namespace) GETSTRUCT(tup))->nspowner) ||
		tenure_schema_granted(tup, ACL_USAGE | ACL_CREATE, &grantee))
	{
		ReleaseSysCache(tup);
		tenure_objects_refuse("schema", "%s",
							  "Schema \"tenure_lock\" is owned by a role that is not a superuser, or other roles may use it.");
	}
	ReleaseSysCache(tup);
	for (i = 0; i < TENURE_FENCE_LOCKS; i++)
	{
		char		name[NAMEDATALEN];

		snprintf(name, sizeof(name), "fence_lock_%d", i);
		objs->fence_locks[i] = tenure_objects_member_rel(name, lock_nsp, ext);
	}
	objs->fence_trigger = tenure_objects_member_func("fence_trigger", ext);
	objs->fence_apply_trigger = tenure_objects_member_func("fence_apply_trigger", ext);
	return true;
}

/*
 * pg_tenure's objects in this database, checked (see the file header).
 * Raises an error if they are not as installed, and if the extension is not
 * installed unless missing_ok, when it returns NULL.
 */
const TenureObjects *
tenure_objects(bool missing_ok)
{
	while (!tenure_objects_valid)
	{
		uint64		resets = tenure_objects_resets;
		TenureObjects objs;

		memset(&objs, 0, sizeof(objs));
		if (!tenure_objects_load(&objs, missing_ok))
			return NULL;
		tenure_objects_cache = objs;
		/* look again if an invalidation arrived during the lookups */
		tenure_objects_valid = (resets == tenure_objects_resets);
	}
	return &tenure_objects_cache;
}
