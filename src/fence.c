/*-------------------------------------------------------------------------
 *
 * fence.c
 *		Commit-time fencing: tables fenced by a lease accept writes only from
 *		transactions that present the lease's current epoch, checked when the
 *		statement starts and, decisively, when the transaction commits.
 *
 * Tokens.  A transaction presents "lease=epoch" pairs through the setting
 * tenure.tokens (SET LOCAL works through transaction poolers) or
 * tenure.present().  A backend holding a session-bound tenure presents that
 * tenure's epoch without saying so; nothing else is presented implicitly.
 *
 * The check.  A fenced write passes iff the lease has a live tenure whose
 * epoch equals the presented token.  The fence trigger checks at once and
 * records the lease; at XACT_EVENT_PRE_COMMIT the transaction takes a
 * transaction-level ShareLock on each recorded lease's fence tag (advisory,
 * field4 TENURE_FENCE_LOCK_FIELD4), in lease-name order, and checks again.
 * A transaction that starts a tenure or claims an epoch takes ExclusiveLock
 * on the same tag at its PRE_COMMIT and publishes the new epoch in its
 * COMMIT callback, before its locks are released.  Locks are released
 * after a commit becomes visible, so a writer that passed is visible before
 * any newer epoch is published, and a writer that checks later sees the
 * newer epoch: the fence is linearizable with claims and new tenures.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "pg_tenure.h"

PG_FUNCTION_INFO_V1(tenure_fence_trigger);
PG_FUNCTION_INFO_V1(tenure_present);
PG_FUNCTION_INFO_V1(tenure_fence_table);
PG_FUNCTION_INFO_V1(tenure_unfence_table);

/* Parsed value of tenure.tokens, kept as the setting's "extra". */
typedef struct TenureTokens
{
	int			count;
	struct
	{
		char		lease[TENURE_NAME_MAX + 1];
		int64		epoch;
	}			items[FLEXIBLE_ARRAY_MEMBER];
} TenureTokens;

/* A lease whose fence this transaction must pass or hold at commit. */
typedef struct TenureFenceUse
{
	char		lease[TENURE_NAME_MAX + 1];
	char	   *table;			/* first fenced table written, or NULL */
	LOCKMODE	mode;			/* ShareLock for writes, ExclusiveLock for
								 * new epochs */
} TenureFenceUse;

char	   *tenure_tokens_string = NULL;
static TenureTokens *tenure_tokens = NULL;

/* leases this transaction wrote through or issues epochs for */
static List *tenure_fence_uses = NIL;

/*
 * Whether a lease name may appear in tenure.tokens.
 */
static bool
tenure_token_name_ok(const char *s, int len)
{
	int			i;

	if (len < 1 || len > TENURE_NAME_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (s[i] == ',' || s[i] == '=')
			return false;
	return true;
}

/*
 * Check hook of tenure.tokens: parse "lease=epoch[, lease=epoch ...]".
 * Whitespace around names and epochs is ignored.  No catalog access here.
 */
bool
tenure_tokens_check(char **newval, void **extra, GucSource source)
{
	const char *p = *newval ? *newval : "";
	int			n = 0;
	TenureTokens *tokens;
	const char *c;

	for (c = p; *c; c++)
		if (*c == ',')
			n++;
	tokens = tenure_guc_malloc(offsetof(TenureTokens, items) +
							   sizeof(tokens->items[0]) * (n + 1));
	if (tokens == NULL)
		return false;
	tokens->count = 0;

	while (*p)
	{
		const char *start;
		const char *end;
		const char *eq;
		char	   *endptr;
		int64		epoch;
		int			i;

		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0' && tokens->count == 0)
			break;
		start = p;
		while (*p && *p != ',')
			p++;
		end = p;
		if (*p == ',')
			p++;

		eq = memchr(start, '=', end - start);
		if (eq == NULL)
		{
			GUC_check_errmsg("invalid value for tenure.tokens: \"%s\"", *newval);
			GUC_check_errdetail("Each token must have the form lease=epoch, tokens separated by commas.");
			tenure_guc_free(tokens);
			return false;
		}
		/* trim the name */
		{
			const char *ns = start;
			const char *ne = eq;

			while (ns < ne && (*ns == ' ' || *ns == '\t'))
				ns++;
			while (ne > ns && (ne[-1] == ' ' || ne[-1] == '\t'))
				ne--;
			if (!tenure_token_name_ok(ns, ne - ns))
			{
				GUC_check_errmsg("invalid lease name in tenure.tokens: \"%s\"", *newval);
				GUC_check_errdetail("A lease name is 1 to %d bytes long and contains neither \",\" nor \"=\".",
									TENURE_NAME_MAX);
				tenure_guc_free(tokens);
				return false;
			}
			for (i = 0; i < tokens->count; i++)
				if (strlen(tokens->items[i].lease) == (size_t) (ne - ns) &&
					strncmp(tokens->items[i].lease, ns, ne - ns) == 0)
					break;
			if (i < tokens->count)
			{
				GUC_check_errmsg("lease \"%.*s\" appears twice in tenure.tokens", (int) (ne - ns), ns);
				tenure_guc_free(tokens);
				return false;
			}
			memcpy(tokens->items[tokens->count].lease, ns, ne - ns);
			tokens->items[tokens->count].lease[ne - ns] = '\0';
		}
		/* the epoch: a positive bigint, then only blanks up to the comma */
		errno = 0;
		epoch = strtoll(eq + 1, &endptr, 10);
		while (endptr < end && (*endptr == ' ' || *endptr == '\t'))
			endptr++;
		if (errno != 0 || endptr != end || endptr == eq + 1 || epoch <= 0)
		{
			GUC_check_errmsg("invalid epoch in tenure.tokens: \"%s\"", *newval);
			GUC_check_errdetail("An epoch is a positive bigint, as returned by tenure.acquire().");
			tenure_guc_free(tokens);
			return false;
		}
		tokens->items[tokens->count].epoch = epoch;
		tokens->count++;
	}

	*extra = tokens;
	return true;
}

/*
 * Assign hook of tenure.tokens.
 */
void
tenure_tokens_assign(const char *newval, void *extra)
{
	tenure_tokens = (TenureTokens *) extra;
}

/*
 * The token this transaction presents for a lease: from tenure.tokens, or
 * the epoch of a session-bound tenure this backend holds.  0 if none.
 * Caller holds the LWLock; lease may be NULL.
 */
static int64
tenure_presented(const char *name, const TenureLease *lease)
{
	int			i;

	if (tenure_tokens != NULL)
		for (i = 0; i < tenure_tokens->count; i++)
			if (strcmp(tenure_tokens->items[i].lease, name) == 0)
				return tenure_tokens->items[i].epoch;

	if (lease != NULL && lease->state == TENURE_HELD && lease->session_bound &&
		lease->holder_pid == MyProcPid &&
		lease->holder_start == MyStartTimestamp)
		return lease->epoch;
	return 0;
}

/*
 * Check a write to "table" fenced by lease "name"; raise TN002 if it does
 * not carry the current epoch of a live tenure.  If tag is not NULL, fill
 * it with the lease's fence lock tag.
 */
static void
tenure_fence_check(const char *name, const char *table, bool at_commit,
				   LOCKTAG *tag)
{
	TenureKey	key;
	TenureLease *lease;
	int64		presented;
	int64		current = 0;
	bool		live = false;
	bool		known;
	int64		now = tenure_mono_now();

	tenure_make_key(&key, MyDatabaseId, name);
	LWLockAcquire(tenure_shared->lock, LW_SHARED);
	lease = hash_search(tenure_leases, &key, HASH_FIND, NULL);
	known = lease != NULL && !lease->dropped;
	if (known)
	{
		current = lease->epoch;
		live = tenure_is_live(lease, now);
		if (tag)
			SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId,
								 (uint32) ((uint64) lease->lease_id >> 32),
								 (uint32) lease->lease_id,
								 TENURE_FENCE_LOCK_FIELD4);
	}
	presented = tenure_presented(name, known ? lease : NULL);
	LWLockRelease(tenure_shared->lock);

	if (presented != 0 && presented == current && live)
		return;

	if (presented == 0)
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_FENCED),
				 errmsg("table \"%s\" is fenced by lease \"%s\" and the transaction presents no epoch for it",
						table, name),
				 errhint("Present the holder's epoch with SET LOCAL tenure.tokens = '%s=<epoch>' or tenure.present().",
						 name)));
	else if (!live)
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_FENCED),
				 errmsg("%s to table \"%s\" fenced by lease \"%s\" rejected: the lease has no live tenure",
						at_commit ? "commit of a write" : "write", table, name),
				 errdetail("The transaction presented epoch " INT64_FORMAT "; the latest epoch is " INT64_FORMAT ".",
						   presented, current),
				 errhint("A fenced-out writer must not retry: its tenure has ended.")));
	else
		ereport(ERROR,
				(errcode(ERRCODE_TENURE_FENCED),
				 errmsg("%s to table \"%s\" fenced by lease \"%s\" rejected: epoch " INT64_FORMAT " is not current",
						at_commit ? "commit of a write" : "write", table, name, presented),
				 errdetail("The transaction presented epoch " INT64_FORMAT "; the current epoch is " INT64_FORMAT ".",
						   presented, current),
				 errhint("A fenced-out writer must not retry: another tenure or epoch has replaced its own.")));
}

/*
 * Note that this transaction uses a lease's fence in the given mode.
 */
void
tenure_fence_note(const char *lease, const char *table, LOCKMODE mode)
{
	ListCell   *lc;
	MemoryContext old;
	TenureFenceUse *use;

	foreach(lc, tenure_fence_uses)
	{
		use = lfirst(lc);
		if (strcmp(use->lease, lease) == 0)
		{
			if (mode > use->mode)
				use->mode = mode;
			if (use->table == NULL && table != NULL)
				use->table = MemoryContextStrdup(TopTransactionContext, table);
			return;
		}
	}

	old = MemoryContextSwitchTo(TopTransactionContext);
	use = palloc0(sizeof(TenureFenceUse));
	strlcpy(use->lease, lease, sizeof(use->lease));
	use->table = table ? pstrdup(table) : NULL;
	use->mode = mode;
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

static int
tenure_fence_use_cmp(const ListCell *a, const ListCell *b)
{
	return strcmp(((TenureFenceUse *) lfirst(a))->lease,
				  ((TenureFenceUse *) lfirst(b))->lease);
}

/*
 * PRE_COMMIT: take the fence locks in lease-name order and check every
 * fenced write.  May raise an ERROR, which aborts the transaction.
 */
void
tenure_fence_precommit(void)
{
	ListCell   *lc;

	if (tenure_fence_uses == NIL)
		return;

	list_sort(tenure_fence_uses, tenure_fence_use_cmp);
	foreach(lc, tenure_fence_uses)
	{
		TenureFenceUse *use = lfirst(lc);
		LOCKTAG		tag;
		TenureKey	key;
		TenureLease *lease;
		bool		have_tag = false;

		/* the tag needs the lease id, which shared memory knows */
		tenure_make_key(&key, MyDatabaseId, use->lease);
		LWLockAcquire(tenure_shared->lock, LW_SHARED);
		lease = hash_search(tenure_leases, &key, HASH_FIND, NULL);
		if (lease != NULL)
		{
			SET_LOCKTAG_ADVISORY(tag, MyDatabaseId,
								 (uint32) ((uint64) lease->lease_id >> 32),
								 (uint32) lease->lease_id,
								 TENURE_FENCE_LOCK_FIELD4);
			have_tag = true;
		}
		LWLockRelease(tenure_shared->lock);

		if (have_tag)
			(void) LockAcquire(&tag, use->mode, false, false);

		if (use->table != NULL)
			tenure_fence_check(use->lease, use->table, true, NULL);
	}
}

/*
 * Forget the transaction's fence uses (commit or abort).
 */
void
tenure_fence_reset(void)
{
	tenure_fence_uses = NIL;
}

/*
 * Trigger function tenure.fence_trigger(lease): BEFORE ... FOR EACH
 * STATEMENT on INSERT, UPDATE, DELETE and TRUNCATE of a fenced table.
 */
Datum
tenure_fence_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	const char *lease;
	const char *table;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("tenure.fence_trigger() must be called as a trigger")));
	if (!TRIGGER_FIRED_FOR_STATEMENT(trigdata->tg_event) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		trigdata->tg_trigger->tgnargs != 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("tenure.fence_trigger() must be a BEFORE ... FOR EACH STATEMENT trigger with the lease as its argument"),
				 errhint("Use tenure.fence_table() to fence a table.")));

	tenure_require_loaded();
	lease = trigdata->tg_trigger->tgargs[0];
	table = RelationGetRelationName(trigdata->tg_relation);

	tenure_fence_check(lease, table, false, NULL);
	tenure_fence_note(lease, table, ShareLock);

	return PointerGetDatum(NULL);
}

/*
 * tenure.present(lease, epoch, is_local)
 *
 * Present a token for the lease, replacing any earlier one, for the
 * transaction (is_local) or the session.
 */
Datum
tenure_present(PG_FUNCTION_ARGS)
{
	char	   *name;
	int64		epoch;
	bool		is_local;
	StringInfoData buf;
	int			i;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null",
						PG_ARGISNULL(0) ? "lease name" :
						PG_ARGISNULL(1) ? "epoch" : "is_local")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	epoch = PG_GETARG_INT64(1);
	is_local = PG_GETARG_BOOL(2);
	if (!tenure_token_name_ok(name, strlen(name)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid lease name \"%s\"", name),
				 errdetail("A lease name is 1 to %d bytes long and contains neither \",\" nor \"=\".",
						   TENURE_NAME_MAX)));
	if (epoch <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("epoch must be positive"),
				 errdetail("The epoch given is " INT64_FORMAT ".", epoch)));

	initStringInfo(&buf);
	if (tenure_tokens != NULL)
		for (i = 0; i < tenure_tokens->count; i++)
			if (strcmp(tenure_tokens->items[i].lease, name) != 0)
				appendStringInfo(&buf, "%s=" INT64_FORMAT ",",
								 tenure_tokens->items[i].lease,
								 tenure_tokens->items[i].epoch);
	appendStringInfo(&buf, "%s=" INT64_FORMAT, name, epoch);

	(void) set_config_option("tenure.tokens", buf.data,
							 PGC_USERSET, PGC_S_SESSION,
							 is_local ? GUC_ACTION_LOCAL : GUC_ACTION_SET,
							 true, 0, false);
	PG_RETURN_VOID();
}

/*
 * Record in tenure.fenced that lease "name" fences table relid.
 */
static void
tenure_fenced_record(Oid relid, const char *name)
{
	TenureSpi	spi;
	Datum		args[2];

	tenure_spi_begin(&spi);
	args[0] = ObjectIdGetDatum(relid);
	args[1] = CStringGetTextDatum(name);
	tenure_spi_exec("INSERT INTO tenure.fenced (tbl, lease) VALUES ($1::pg_catalog.regclass, $2)",
					"ot", args, NULL, SPI_OK_INSERT);
	tenure_spi_end(&spi);
}

/*
 * Forget that table relid is fenced; false if it was not.
 */
static bool
tenure_fenced_forget(Oid relid)
{
	TenureSpi	spi;
	Datum		args[1];
	uint64		n;

	tenure_spi_begin(&spi);
	args[0] = ObjectIdGetDatum(relid);
	n = tenure_spi_exec("DELETE FROM tenure.fenced WHERE tbl OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
						"o", args, NULL, SPI_OK_DELETE);
	tenure_spi_end(&spi);
	return n > 0;
}

/*
 * Fail unless the current user owns the table.
 */
static void
tenure_check_table_owner(Oid relid)
{
	if (!tenure_class_ownercheck(relid, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s", get_rel_name(relid)),
				 errhint("Only the owner of a table can fence or unfence it.")));
}

/*
 * tenure.fence_table(tbl, lease)
 */
Datum
tenure_fence_table(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *name;
	char	   *qualified;
	StringInfoData sql;
	Datum		args[2];
	Oid			types[2] = {OIDOID, TEXTOID};
	char		relkind;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", PG_ARGISNULL(0) ? "table" : "lease name")));
	relid = PG_GETARG_OID(0);
	name = text_to_cstring(PG_GETARG_TEXT_PP(1));

	tenure_require_loaded();
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot fence a table during recovery")));
	relkind = get_rel_relkind(relid);
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", get_rel_name(relid))));
	tenure_check_table_owner(relid);
	qualified = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										   get_rel_name(relid));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	args[0] = ObjectIdGetDatum(relid);
	args[1] = CStringGetTextDatum(name);
	if (SPI_execute_with_args("SELECT 1 FROM tenure.lease WHERE name OPERATOR(pg_catalog.=) $2::pg_catalog.text",
							  2, types, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_with_args failed");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("lease \"%s\" does not exist", name),
				 errhint("Create it with tenure.create_lease().")));
	if (SPI_execute_with_args("SELECT lease FROM tenure.fenced WHERE tbl OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
							  2, types, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_with_args failed");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("table %s is already fenced by lease \"%s\"", qualified,
						SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1)),
				 errhint("Unfence it first with tenure.unfence_table().")));

	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "CREATE TRIGGER tenure_fence BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %s"
					 " FOR EACH STATEMENT EXECUTE FUNCTION tenure.fence_trigger(%s)",
					 qualified, quote_literal_cstr(name));
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "SPI_execute failed: %s", sql.data);
	resetStringInfo(&sql);
	appendStringInfo(&sql, "ALTER TABLE %s ENABLE ALWAYS TRIGGER tenure_fence", qualified);
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "SPI_execute failed: %s", sql.data);
	SPI_finish();

	tenure_fenced_record(relid, name);
	PG_RETURN_VOID();
}

/*
 * tenure.unfence_table(tbl)
 */
Datum
tenure_unfence_table(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *qualified;
	StringInfoData sql;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table must not be null")));
	relid = PG_GETARG_OID(0);

	tenure_require_loaded();
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot unfence a table during recovery")));
	if (get_rel_name(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	tenure_check_table_owner(relid);
	qualified = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										   get_rel_name(relid));

	if (!tenure_fenced_forget(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table %s is not fenced", qualified)));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	initStringInfo(&sql);
	appendStringInfo(&sql, "DROP TRIGGER tenure_fence ON %s", qualified);
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "SPI_execute failed: %s", sql.data);
	SPI_finish();
	PG_RETURN_VOID();
}
