/*-------------------------------------------------------------------------
 *
 * history.c
 *		The history writer: a short-lived background worker that writes to
 *		tenure.history the ends of tenures that happen outside any
 *		transaction (expiry, session end, revocation) and closes the
 *		tenures left open when the server went down (restart, crash,
 *		promotion), soon after they happen rather than at the lease's next
 *		tenure.
 *
 * The keeper starts it (keeper.c), one run at a time, when shared memory
 * says a database has such ends (state.c, tenure_state_history_job()):
 *
 * - a run for a database connects to it, and in one transaction closes
 *   the rows of earlier server starts and the rows of the tenures shared
 *   memory saw end, then tells shared memory which ends are written;
 * - a listing run, after the server became ready, connects to no
 *   database, reads pg_database (a shared catalog) and queues a run for
 *   every database that accepts connections.
 *
 * A database without pg_tenure costs a connection and a catalog lookup.
 * Nothing here is needed for correctness: the next tenure of a lease still
 * closes whatever is left open (history_rows.c, tenure_history_close()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "pg_tenure.h"
#include "state.h"
#include "objects.h"
#include "catalog.h"
#include "history.h"

/*
 * Start a run of the history writer for database dbid, or the listing run
 * (dbid InvalidOid, listing databases with OIDs above "after"); its start
 * and exit set the keeper's latch.  NULL if no background worker slot is
 * free.
 */
BackgroundWorkerHandle *
tenure_history_launch(Oid dbid, Oid after)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "pg_tenure", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "tenure_history_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "pg_tenure history", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "pg_tenure history", BGW_MAXLEN);
	worker.bgw_main_arg = ObjectIdGetDatum(dbid);
	memcpy(worker.bgw_extra, &after, sizeof(Oid));
	worker.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return NULL;
	return handle;
}

/*
 * The listing run: queue a run for every database that accepts
 * connections, in OID order from "after" on, as many as shared memory has
 * room for.
 */
static void
tenure_history_list(Oid after)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	int			room = tenure_state_history_room();
	int			size = 64;
	Oid		   *dbids = palloc(sizeof(Oid) * size);
	int			n = 0;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (!db->datallowconn || db->oid <= after)
			continue;
		if (n == size)
		{
			size *= 2;
			dbids = repalloc(dbids, sizeof(Oid) * size);
		}
		dbids[n++] = db->oid;
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();

	qsort(dbids, n, sizeof(Oid), oid_cmp);
	tenure_state_history_add_dbs(dbids, Min(n, room), n > room);
}

/*
 * The settings a run relies on, forced before it connects: set with
 * PGC_S_OVERRIDE, they win over every database and role setting
 * (ALTER DATABASE/ROLE ... SET), which a database's owner may have chosen
 * to stall or break the run.  Never queue behind a lock, nor run a
 * statement, for long: one run at a time serves every database.
 */
static void
tenure_history_settings(void)
{
	static const char *const settings[][2] = {
		{"lock_timeout", "1000"},
		{"statement_timeout", "10000"},
		{"idle_in_transaction_session_timeout", "0"},
		{"default_transaction_read_only", "off"},
		{"default_transaction_isolation", "read committed"},
		{"default_transaction_deferrable", "off"},
		{"session_replication_role", "origin"},
		{"search_path", "pg_catalog, pg_temp"},
		{"synchronous_commit", "on"},
		{"row_security", "on"},
		{"jit", "off"},
		{"check_function_bodies", "on"},
		{"client_min_messages", "notice"},
		{"log_min_messages", "warning"},
	};
	size_t		i;

	for (i = 0; i < lengthof(settings); i++)
		SetConfigOption(settings[i][0], settings[i][1], PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * Bring a lease whose tenure continues after a promotion into shared
 * memory, in a subtransaction: a failure (the lease table is full) is
 * logged and leaves the lease to be loaded when its holder calls, without
 * undoing the run's other work.
 */
static void
tenure_history_load_continued(const char *name)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	TenureKey	key;

	tenure_make_key(&key, MyDatabaseId, name);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		(void) tenure_ensure_continued(name, &key);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ereport(LOG,
				(errmsg("pg_tenure cannot load lease \"%s\", whose tenure continues after the promotion: %s",
						name, edata->message),
				 errdetail("It is loaded when its holder next calls.")));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}

/*
 * Lock tenure.lease and tenure.history for the whole run, in that order
 * and without waiting, before the run reads either: false, having locked
 * neither for long, if the extension is not installed or either table is
 * locked in a mode the run conflicts with (DROP EXTENSION under way, a
 * superuser's DDL).  A run that held one of the tables while it waited
 * for the other could deadlock with DROP EXTENSION, which locks them in
 * an order of its own, and the deadlock detector could cancel the user's
 * DROP.  Only superusers, and on PostgreSQL 17 and later roles a
 * superuser gave MAINTAIN on them (pg_maintain), can lock these tables in
 * such modes; other roles may only read them, and cannot make runs skip,
 * which only delays the writing in any case.  Locking the
 * extension object first would not do: any role can lock it
 * (pg_get_object_address()) and queue a DROP EXTENSION behind that lock.
 */
static bool
tenure_history_lock_tables(void)
{
	const TenureObjects *objs = tenure_objects(true);
	Oid			lease;
	Oid			history;

	if (objs == NULL)
		return false;
	lease = objs->lease;
	history = objs->history;
	/* the strongest modes the run takes: it reads one, updates the other */
	if (!ConditionalLockRelationOid(lease, AccessShareLock) ||
		!ConditionalLockRelationOid(history, RowExclusiveLock))
	{
		ereport(LOG,
				(errmsg("pg_tenure history writer skipped database \"%s\": tenure.lease or tenure.history is locked",
						get_database_name(MyDatabaseId)),
				 errdetail("The ends of tenures in this database are written by its next run, or by the next tenure of each lease.")));
		return false;
	}
	/* a DROP EXTENSION that committed since the look-up */
	objs = tenure_objects(true);
	return objs != NULL && objs->lease == lease && objs->history == history;
}

/*
 * A run for the database this worker is connected to.
 */
static void
tenure_history_write(void)
{
	TenureEnded *ends;
	bool	   *written;
	int			count;
	int			i;
	MemoryContext oldcxt;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "writing ends of tenures to tenure.history");

	/*
	 * A database without the extension: nothing but this look-up.  Objects
	 * named like pg_tenure's that are not the installed extension's are
	 * never touched (tenure_spi_begin() checks them too, failing the run).
	 */
	if (!tenure_history_lock_tables())
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		pgstat_report_activity(STATE_IDLE, NULL);
		return;
	}

	/* both are read after the commit, which frees the transaction's memory */
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	ends = tenure_state_history_pending(MyDatabaseId, &count);
	written = palloc0(sizeof(bool) * Max(count, 1));
	MemoryContextSwitchTo(oldcxt);
	{
		TenureSpi	spi;
		List	   *continued = NIL;
		ListCell   *lc;

		tenure_spi_begin(&spi);
		tenure_history_close_restarted(&continued);
		for (i = 0; i < count; i++)
			written[i] = tenure_history_close_ended(ends[i].key.name,
													ends[i].epoch,
													ends[i].reason,
													ends[i].ended);
		tenure_spi_end(&spi);

		/*
		 * Tenures that continue after a promotion are in shared memory from
		 * now on, as tenure.leases shows them (src/README, P2), not only
		 * once their holders call.
		 */
		foreach(lc, continued)
			tenure_history_load_continued(lfirst(lc));
	}
	PopActiveSnapshot();
	CommitTransactionCommand();

	/* a row another transaction had locked is written later */
	for (i = 0; i < count; i++)
		if (written[i])
			tenure_state_history_written(&ends[i].key, ends[i].epoch);
	pfree(ends);
	pfree(written);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Entry point of a run of the history writer.
 */
void
tenure_history_main(Datum arg)
{
	Oid			dbid = DatumGetObjectId(arg);
	Oid			after;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	tenure_require_loaded();

	memcpy(&after, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	tenure_history_settings();
	if (!OidIsValid(dbid))
	{
		BackgroundWorkerInitializeConnection(NULL, NULL, 0);
		tenure_history_list(after);
	}
	else
	{
		BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);
		tenure_history_write();
	}
	proc_exit(0);
}
