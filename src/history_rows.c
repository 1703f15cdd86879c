/*-------------------------------------------------------------------------
 *
 * history_rows.c
 *		Every statement that writes tenure.history: opening a tenure's or
 *		claim's row, closing rows with the reason their tenure ended,
 *		trimming a lease's rows, and raising an open row's ttl.
 *
 * The reasons are named by tenure_end_reason_text() (history.h), the one
 * table of them; no statement spells one.  sql/end_reasons.sql checks the
 * table against the CHECK constraint of tenure.history.end_reason, through
 * pg_tenure_end_reasons(), a C function that the extension does not create
 * (so it costs nothing in its SQL surface): the test binds it itself.
 *
 * The statements that run on every acquire and release reach the rows by
 * direct access (catalog.c): the new tenure's row, the trim, the end a
 * transaction makes itself, and, before a new tenure, the look for rows
 * left open, which usually finds none.  Where tenure.history or
 * tenure.lease has triggers, rules, row security, columns or constraints
 * of the user's, which direct access would not apply, they run as the SQL
 * statements that each names instead.  Closing rows left open and the
 * history writer's statements run through SPI.  A lease's rows change
 * under its row lock in tenure.lease, or skip rows another transaction
 * has locked (src/README, F10, "History").  Who calls what:
 *
 *		tenure_history_start() - a new tenure, claim or hand-off (acquire.c,
 *			lease.c), after tenure_issue_epoch()
 *		tenure_history_close() - before a new tenure: the end shared memory
 *			saw, and rows left open by a server restart (acquire.c)
 *		tenure_history_close_now() - an end the transaction itself makes:
 *			release, drop_lease, claim_epoch, handoff (lease.c)
 *		tenure_history_close_restarted(), tenure_history_close_ended() -
 *			the history writer (history.c), inside its SPI session
 *		tenure_history_raise_ttl() - alter_lease (lease.c), inside its SPI
 *			session
 *
 * Reads of the history that belong to a lease's row stay with it:
 * create_lease continues a dropped lease's lineage (lease.c), and loading
 * a lease asks whether a holder from before a restart may still believe
 * (catalog.c, tenure_carry_of(), which runs under that load's
 * snapshot).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/stratnum.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"
#include "state.h"
#include "catalog.h"
#include "history.h"
#include "promotion.h"

PG_FUNCTION_INFO_V1(pg_tenure_end_reasons);

/*
 * The end reason of a tenure open when an earlier server went down (SQL;
 * the arguments are parameters: this cluster's system identifier, the
 * current timeline, and the names of TENURE_END_PROMOTED and
 * TENURE_END_RESTARTED).
 */
#define TENURE_RESTART_REASON(sysid, tli, promoted, restarted) \
	"CASE WHEN issued_sysid OPERATOR(pg_catalog.=) " sysid \
	" AND issued_tli OPERATOR(pg_catalog.<) " tli \
	" THEN " promoted " ELSE " restarted " END"

/*
 * Whether a row of tenure.history (in an UPDATE of the table) is a tenure
 * that continues after this server's promotion (catalog.c,
 * tenure_carry_of(); src/README, P2): not session-bound, the latest epoch
 * of its lease, issued by this cluster, and listed live by the old
 * primary's keeper (listed, an int8[], P5; empty unless the promotion kept
 * every transaction: tenure_continued_listed()).
 */
#define TENURE_CONTINUED(sysid, listed) \
	"COALESCE(NOT session_bound" \
	" AND issued_sysid OPERATOR(pg_catalog.=) " sysid \
	" AND epoch OPERATOR(pg_catalog.=) ANY (" listed ")" \
	" AND epoch OPERATOR(pg_catalog.=) (SELECT l.epoch FROM tenure.lease l" \
	"  WHERE l.name OPERATOR(pg_catalog.=) history.lease), false)"

/*
 * The epochs of this database's tenures that the old primary's keeper
 * listed as live (an int8[]), as a parameter of TENURE_CONTINUED.
 */
static Datum
tenure_continued_listed(void)
{
	int			count;
	int64	   *epochs = tenure_promotion_listed_epochs(MyDatabaseId, &count);
	Datum	   *elems = palloc(sizeof(Datum) * Max(count, 1));
	int			i;

	for (i = 0; i < count; i++)
		elems[i] = Int64GetDatum(epochs[i]);
	return PointerGetDatum(construct_array(elems, count, INT8OID, sizeof(int64),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * The values the lease's row gives a new history row (tenure.lease's
 * issued_sysid, issued_tli, base, ttl), as the calling transaction left
 * it, into values and isnull (by TenureHistoryCol); *found is false if
 * the lease has no row.  Returns false, with nothing read, if tenure.lease
 * has objects of the user's (catalog.c).
 */
static bool
tenure_history_lease_values(const char *name, Datum *values, bool *isnull,
							bool *found)
{
	TenureTable lease;

	if (!tenure_table_open(&lease, TENURE_TABLE_LEASE, AccessShareLock, NULL))
		return false;
	*found = tenure_lease_find(&lease, name);
	if (*found)
	{
		values[TENURE_HISTORY_ISSUED_SYSID] =
			tenure_table_copy(&lease, TENURE_LEASE_ISSUED_SYSID,
							  &isnull[TENURE_HISTORY_ISSUED_SYSID]);
		values[TENURE_HISTORY_ISSUED_TLI] =
			tenure_table_copy(&lease, TENURE_LEASE_ISSUED_TLI,
							  &isnull[TENURE_HISTORY_ISSUED_TLI]);
		/* open where it was issued (TENURE_CONTINUED moves it on) */
		values[TENURE_HISTORY_OPEN_TLI] = values[TENURE_HISTORY_ISSUED_TLI];
		isnull[TENURE_HISTORY_OPEN_TLI] = isnull[TENURE_HISTORY_ISSUED_TLI];
		values[TENURE_HISTORY_BASE] =
			tenure_table_copy(&lease, TENURE_LEASE_BASE,
							  &isnull[TENURE_HISTORY_BASE]);
		values[TENURE_HISTORY_TTL] =
			tenure_table_copy(&lease, TENURE_LEASE_TTL,
							  &isnull[TENURE_HISTORY_TTL]);
	}
	tenure_table_close(&lease);
	return true;
}

/*
 * The trim of tenure_history_trim() by its SQL statement, in an SPI
 * session of its own; rows another transaction is closing are left for a
 * later pass.
 */
static void
tenure_history_trim_sql(const char *name)
{
	TenureSpi	spi;
	Datum		args[2];

	args[0] = CStringGetTextDatum(name);
	args[1] = Int64GetDatum((int64) tenure_history_per_lease);
	tenure_spi_begin(&spi);
	tenure_spi_exec("DELETE FROM tenure.history"
					" WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
					"  SELECT ctid FROM tenure.history WHERE lease OPERATOR(pg_catalog.=) $1"
					"  AND epoch OPERATOR(pg_catalog.<) (SELECT epoch FROM tenure.history"
					"   WHERE lease OPERATOR(pg_catalog.=) $1 ORDER BY epoch DESC"
					"   OFFSET $2 OPERATOR(pg_catalog.-) 1 LIMIT 1)"
					"  FOR UPDATE SKIP LOCKED))",
					"ti", args, NULL, SPI_OK_DELETE);
	tenure_spi_end(&spi);
}

/*
 * Trim the lease's rows to the tenure.history_per_lease most recent, as
 * DELETE FROM tenure.history WHERE ctid = ANY (ARRAY(SELECT ctid FROM
 * tenure.history WHERE lease = $1 AND epoch < (the epoch of its N-th
 * newest row) FOR UPDATE SKIP LOCKED)) does, by direct access: the lease's
 * rows newest first, by the primary key, the N newest counted as an
 * index-only scan counts them; each row after them is deleted unless
 * another transaction holds it (a later pass will) or a concurrent one
 * changed it (the DELETE's snapshot would not see the new version).  By
 * that statement where the table has objects of the user's.
 */
static void
tenure_history_trim(const char *name)
{
	TenureTable t;
	ScanKeyData key;
	IndexScanDesc scan;

	if (!tenure_table_open(&t, TENURE_TABLE_HISTORY, RowExclusiveLock, "DELETE"))
	{
		tenure_history_trim_sql(name);
		return;
	}
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ,
				CStringGetTextDatum(name));
	scan = tenure_table_scan(&t, TENURE_INDEX_HISTORY_EPOCH, &key, 1);
	if (tenure_table_skip_back(&t, scan, tenure_history_per_lease))
	{
		while (tenure_table_prev(&t, scan))
			(void) tenure_table_delete_unlocked(&t);
	}
	tenure_table_end_scan(scan);
	tenure_table_close(&t);
}

/*
 * Insert the history row of a new tenure or epoch by direct access (see
 * tenure_history_start()); the row meets the table's constraints (it is
 * open: no end_reason).  Returns false, with nothing written, if
 * tenure.history or tenure.lease has objects of the user's.
 */
static bool
tenure_history_insert(const char *name, int64 epoch, const char *holder,
					  bool session_bound)
{
	TenureTable t;
	Datum		values[TENURE_HISTORY_NCOLS];
	bool		isnull[TENURE_HISTORY_NCOLS] = {0};
	bool		found;

	if (!tenure_table_open(&t, TENURE_TABLE_HISTORY, RowExclusiveLock, "INSERT"))
		return false;
	if (!tenure_history_lease_values(name, values, isnull, &found))
	{
		tenure_table_close(&t);
		return false;
	}
	if (found)
	{
		values[TENURE_HISTORY_LEASE] = CStringGetTextDatum(name);
		values[TENURE_HISTORY_EPOCH] = Int64GetDatum(epoch);
		values[TENURE_HISTORY_HOLDER] = CStringGetTextDatum(holder);
		values[TENURE_HISTORY_SESSION_BOUND] = BoolGetDatum(session_bound);
		values[TENURE_HISTORY_STARTED] = TimestampTzGetDatum(GetCurrentTimestamp());
		isnull[TENURE_HISTORY_ENDED] = true;
		isnull[TENURE_HISTORY_END_REASON] = true;
		values[TENURE_HISTORY_BOOT_ID] = Int64GetDatum(tenure_boot_id());
		tenure_table_insert(&t, values, isnull);
	}
	tenure_table_close(&t);
	return true;
}

/*
 * tenure_history_insert() by its SQL statement, in an SPI session of its
 * own: the statement applies what the user added to the tables.
 */
static void
tenure_history_insert_sql(const char *name, int64 epoch, const char *holder,
						  bool session_bound)
{
	TenureSpi	spi;
	Datum		args[5];

	args[0] = CStringGetTextDatum(name);
	args[1] = Int64GetDatum(epoch);
	args[2] = CStringGetTextDatum(holder);
	args[3] = BoolGetDatum(session_bound);
	args[4] = Int64GetDatum(tenure_boot_id());
	tenure_spi_begin(&spi);
	tenure_spi_exec("INSERT INTO tenure.history (lease, epoch, holder, session_bound, started,"
					" boot_id, issued_sysid, issued_tli, open_tli, base, ttl)"
					" SELECT $1, $2, $3, $4, pg_catalog.clock_timestamp(), $5,"
					" issued_sysid, issued_tli, issued_tli, base, ttl FROM tenure.lease"
					" WHERE name OPERATOR(pg_catalog.=) $1",
					"titbi", args, NULL, SPI_OK_INSERT);
	tenure_spi_end(&spi);
}

/*
 * Record a new tenure or epoch in tenure.history and trim the lease's rows
 * to the tenure.history_per_lease most recent; after tenure_issue_epoch.
 * The row keeps the lease's base and where the epoch was issued, so that
 * create_lease can continue a dropped lease's lineage, and its ttl, so
 * that a lease created again under its name keeps the hold-off of a holder
 * it dropped after a restart (catalog.c, tenure_carry_of()).  As INSERT
 * INTO tenure.history ... SELECT ... FROM tenure.lease WHERE name = $1,
 * by direct access, or by that statement where either table has objects
 * of the user's (catalog.c).
 *
 * Finding the rows beyond the most recent N costs a scan of N index
 * entries, so the trim runs only when the lease's committed tenures and
 * claims since its shared entry was loaded (at its first use after server
 * start, or after its slot went to another lease) number a multiple of
 * TENURE_HISTORY_TRIM_EVERY: a lease keeps its N most recent rows and
 * usually at most TENURE_HISTORY_TRIM_EVERY - 1 more (more only while
 * rows another transaction is closing are skipped).
 */
void
tenure_history_start(const char *name, int64 epoch, const char *holder,
					 bool session_bound)
{
	TenureKey	key;

	if (!tenure_history_insert(name, epoch, holder, session_bound))
		tenure_history_insert_sql(name, epoch, holder, session_bound);

	tenure_make_key(&key, MyDatabaseId, name);
	if (tenure_state_history_trim_due(&key))
		tenure_history_trim(name);
}

/*
 * Whether a row of tenure.history that a new statement's snapshot sees is
 * open and has a key in one of the ranges (each: strategy and value of
 * the index's one column) of index, which is partial on ended IS NULL.
 * Such rows are what the UPDATEs that close rows would look at; when
 * there are none, they would change nothing.  True, without a look, where
 * the table has objects of the user's: the UPDATEs find out.
 */
static bool
tenure_history_any_open(TenureIndexId index, int nranges,
						const StrategyNumber *strategies,
						const RegProcedure *procs, const Datum *keys)
{
	TenureTable t;
	bool		found = false;
	int			i;

	if (!tenure_table_open(&t, TENURE_TABLE_HISTORY, AccessShareLock, NULL))
		return true;
	for (i = 0; i < nranges && !found; i++)
	{
		ScanKeyData key;
		IndexScanDesc scan;
		bool		isnull;

		ScanKeyInit(&key, 1, strategies[i], procs[i], keys[i]);
		scan = tenure_table_scan(&t, index, &key, 1);
		while (!found && tenure_table_next(&t, scan))
		{
			(void) tenure_table_get(&t, TENURE_HISTORY_ENDED, &isnull);
			found = isnull;
		}
		tenure_table_end_scan(scan);
	}
	tenure_table_close(&t);
	return found;
}

/*
 * Whether the lease has an open row in tenure.history.
 */
static bool
tenure_history_lease_open(const char *name)
{
	StrategyNumber strategy = BTEqualStrategyNumber;
	RegProcedure proc = F_TEXTEQ;
	Datum		key = CStringGetTextDatum(name);

	return tenure_history_any_open(TENURE_INDEX_HISTORY_OPEN, 1, &strategy,
								   &proc, &key);
}

/*
 * Whether a row of any lease is open in tenure.history since an earlier
 * server start (its boot_id is another).
 */
static bool
tenure_history_restart_open(void)
{
	static const StrategyNumber strategies[2] = {BTLessStrategyNumber,
	BTGreaterStrategyNumber};
	static const RegProcedure procs[2] = {F_INT8LT, F_INT8GT};
	Datum		keys[2];

	keys[0] = keys[1] = Int64GetDatum(tenure_boot_id());
	return tenure_history_any_open(TENURE_INDEX_HISTORY_OPEN_BOOT, 2,
								   strategies, procs, keys);
}

/*
 * Tenures of other leases left open by a server restart are closed by
 * tenure_history_close() too, until a transaction of this backend that
 * closed them has committed: rows of an earlier boot appear only when the
 * server starts (every backend is new then) or when a dump is restored,
 * and a restored lease's own rows are closed at its next tenure all the
 * same.  (A row skipped because another transaction held it stays open if
 * that transaction rolls back, until the lease's next tenure.)
 */
static bool tenure_restart_rows_closed = false;
static TransactionId tenure_restart_rows_xid = InvalidTransactionId;

/*
 * Close the rows of every lease left open by a server restart, unless a
 * transaction of this backend did so and committed, or this transaction
 * did already.  Looks for such rows first: when there are none (what a
 * backend usually finds), closing them would change nothing, and counts
 * as done once the keeper knows what a promotion kept.
 */
static void
tenure_history_close_restarted_once(void)
{
	if (!tenure_restart_rows_closed &&
		TransactionIdIsValid(tenure_restart_rows_xid) &&
		!TransactionIdIsCurrentTransactionId(tenure_restart_rows_xid) &&
		TransactionIdDidCommit(tenure_restart_rows_xid))
		tenure_restart_rows_closed = true;
	if (!tenure_restart_rows_closed &&
		!(TransactionIdIsValid(tenure_restart_rows_xid) &&
		  TransactionIdIsCurrentTransactionId(tenure_restart_rows_xid)))
	{
		TenureSpi	spi;
		bool		done;

		if (!tenure_history_restart_open())
			done = tenure_promotion_state(NULL) != TENURE_PROMOTION_UNKNOWN;
		else
		{
			tenure_spi_begin(&spi);
			done = tenure_history_close_restarted(NULL);
			tenure_spi_end(&spi);
		}
		if (done)
			tenure_restart_rows_xid = GetTopTransactionId();
	}
}

/*
 * Whether the row of tenure.history in t->slot is an open row of the
 * lease; with *this_run set if this server run opened it (boot_id).
 */
static bool
tenure_history_open_row(TenureTable *t, const char *name, bool *this_run)
{
	bool		isnull;

	(void) tenure_table_get(t, TENURE_HISTORY_ENDED, &isnull);
	if (!isnull ||
		strcmp(TextDatumGetCString(tenure_table_get(t, TENURE_HISTORY_LEASE,
													&isnull)), name) != 0)
		return false;
	*this_run = DatumGetInt64(tenure_table_get(t, TENURE_HISTORY_BOOT_ID,
											   &isnull)) == tenure_boot_id();
	return true;
}

/*
 * tenure_history_close()'s UPDATE by direct access, where every open row
 * of the lease is this server run's: what a new tenure finds when its
 * predecessor's session ended, or its tenure expired or was taken over,
 * and the history writer has not closed the row yet (a failover waits for
 * this).  For such rows the UPDATE sets ended to the end shared memory
 * saw, or now, and end_reason to that end's reason for its epoch, else
 * "expired"; rows another transaction holds are skipped, as FOR UPDATE
 * SKIP LOCKED does.  Returns false, having changed nothing, where a row
 * of an earlier server run is open, or the table has objects of the
 * user's: the UPDATE then does it.
 */
static bool
tenure_history_close_this_run(const char *name, const TenureKey *lease_key)
{
	static const int cols[2] = {TENURE_HISTORY_ENDED, TENURE_HISTORY_END_REASON};
	TenureTable t;
	ScanKeyData key;
	IndexScanDesc scan;
	Datum		values[2];
	bool		isnull[2] = {0};
	bool		this_run = true;
	bool		any = false;
	int			pass;
	const char *reason = NULL;
	int64		epoch = 0;
	TimestampTz ended = 0;

	if (!tenure_table_open(&t, TENURE_TABLE_HISTORY, RowExclusiveLock, "UPDATE"))
		return false;
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_TEXTEQ,
				CStringGetTextDatum(name));

	/*
	 * The first pass only looks: whether there is anything to close (after
	 * a release, usually not), and whether the UPDATE must close rows of
	 * earlier runs.
	 */
	for (pass = 0; pass < 2 && this_run && (pass == 0 || any); pass++)
	{
		/* how shared memory saw the tenure end, once there is a row to close */
		if (pass == 1)
			reason = tenure_state_ended(lease_key, &epoch, &ended);
		scan = tenure_table_scan(&t, TENURE_INDEX_HISTORY_OPEN, &key, 1);
		while (this_run && tenure_table_next(&t, scan))
		{
			bool		traversed;
			bool		epoch_null;
			int64		row_epoch;

			if (!tenure_history_open_row(&t, name, &this_run) || !this_run)
				continue;
			any = true;
			if (pass == 0)
				continue;
			if (tenure_table_lock(&t, LockTupleExclusive, LockWaitSkip,
								  &traversed) != TM_Ok)
				continue;		/* another transaction is closing it */
			if (traversed && (!tenure_history_open_row(&t, name, &this_run) ||
							  !this_run))
			{
				this_run = true;	/* its new version is not ours to close */
				continue;
			}
			row_epoch = DatumGetInt64(tenure_table_get(&t, TENURE_HISTORY_EPOCH,
													   &epoch_null));
			values[0] = TimestampTzGetDatum(reason != NULL ? ended :
											GetCurrentTimestamp());
			values[1] = CStringGetTextDatum(reason != NULL && row_epoch == epoch ?
											reason :
											tenure_end_reason_text(TENURE_END_EXPIRED));
			(void) tenure_table_update(&t, 2, cols, values, isnull);
		}
		tenure_table_end_scan(scan);
	}
	tenure_table_close(&t);
	return this_run;
}

/*
 * Record in tenure.history the end of every tenure of the lease that the
 * table still shows open: the one shared memory says ended, and any left
 * open by a server restart; and the tenures of other leases left open by
 * a server restart (see above).  Under the lease's row lock, after
 * tenure_issue_epoch(): nobody else opens a row of the lease meanwhile,
 * so when the lease has no open row (after a release, what a new tenure
 * usually finds) there is nothing to close.
 */
void
tenure_history_close(const char *name, const TenureKey *key)
{
	TenureSpi	spi;
	Datum		args[12];
	bool		nulls[12] = {0};
	const char *reason;
	int64		epoch = 0;
	TimestampTz ended = 0;

	/*
	 * Tenures of any lease that were open when the server went down.  Rows
	 * another transaction has locked are skipped: it is closing them
	 * itself, or, if it rolls back, a later tenure will.  Waiting for it
	 * could mean waiting for a client idle in the transaction of an
	 * acquisition of another lease, which nobody takes over and so nobody
	 * ends (see tenure_end_abandoned()).
	 */
	tenure_history_close_restarted_once();
	if (tenure_history_close_this_run(name, key))
		return;
	if (!tenure_history_lease_open(name))
		return;
	reason = tenure_state_ended(key, &epoch, &ended);

	/*
	 * This lease's tenure that shared memory saw end.  A row locked by
	 * another transaction is one that transaction closes as "server
	 * restart" (above), or is closing for an acquisition of this lease
	 * that we took over and that has ended by now: skip it rather than
	 * wait.
	 */
	args[0] = CStringGetTextDatum(name);
	args[1] = Int64GetDatum(epoch);
	args[2] = reason ? CStringGetTextDatum(reason) : (Datum) 0;
	nulls[2] = (reason == NULL);
	args[3] = TimestampTzGetDatum(ended);
	nulls[3] = (reason == NULL);
	args[4] = Int64GetDatum(tenure_boot_id());
	args[5] = TimestampTzGetDatum(tenure_ready_time());
	args[6] = Int64GetDatum((int64) GetSystemIdentifier());
	args[7] = Int64GetDatum((int64) GetWALInsertionTimeLine());
	args[8] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_PROMOTED));
	args[9] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_RESTARTED));
	args[10] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_EXPIRED));
	args[11] = tenure_continued_listed();
	tenure_spi_begin(&spi);
	tenure_spi_exec("UPDATE tenure.history SET"
					" ended = CASE WHEN boot_id OPERATOR(pg_catalog.<>) $5"
					"  AND NOT " TENURE_CONTINUED("$7", "$12")
					"  THEN GREATEST(started, $6)"
					"  ELSE COALESCE($4, pg_catalog.clock_timestamp()) END,"
					" end_reason = CASE WHEN boot_id OPERATOR(pg_catalog.<>) $5"
					"  AND NOT " TENURE_CONTINUED("$7", "$12")
					"  THEN " TENURE_RESTART_REASON("$7", "$8", "$9", "$10")
					"  WHEN epoch OPERATOR(pg_catalog.=) $2 THEN COALESCE($3, $11)"
					"  ELSE $11 END"
					" WHERE ended IS NULL AND ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
					"  SELECT ctid FROM tenure.history"
					"  WHERE lease OPERATOR(pg_catalog.=) $1 AND ended IS NULL"
					"  FOR UPDATE SKIP LOCKED))",
					"titziziitttI", args, nulls, SPI_OK_UPDATE);
	tenure_spi_end(&spi);
}

/*
 * Close, in tenure.history, every tenure of this database left open when
 * an earlier server went down: "promoted" if its epoch was issued by this
 * cluster on an earlier timeline (the server it ran on was replaced by a
 * promotion, or an archive recovery ended), else "server restart"; ended
 * when this server became ready.  Tenures that continue after a promotion
 * that kept every transaction (TENURE_CONTINUED) become this server's
 * instead; their leases' names are appended to *continued (if not NULL),
 * in TopTransactionContext.  Rows another transaction has locked are
 * skipped: it is closing them itself, or a later pass will.  Returns
 * false, changing nothing, while the keeper has not yet found out what a
 * promotion kept.
 * Inside an SPI session, on a primary.
 */
bool
tenure_history_close_restarted(List **continued)
{
	Datum		args[7];
	bool		nulls[7] = {0};

	/* until the keeper knows what a promotion kept, a later pass will */
	if (tenure_promotion_state(NULL) == TENURE_PROMOTION_UNKNOWN)
		return false;
	args[0] = Int64GetDatum(tenure_boot_id());
	args[1] = TimestampTzGetDatum(tenure_ready_time());
	args[2] = Int64GetDatum((int64) GetSystemIdentifier());
	args[3] = Int64GetDatum((int64) GetWALInsertionTimeLine());
	args[4] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_PROMOTED));
	args[5] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_RESTARTED));
	args[6] = tenure_continued_listed();
	/* tenures that continue are this server's from now on */
	if (tenure_promotion_state(NULL) == TENURE_PROMOTION_KEPT)
	{
		uint64		i;
		uint64		n;

		n = tenure_spi_exec("UPDATE tenure.history SET boot_id = $1, open_tli = $4"
							" WHERE ended IS NULL AND " TENURE_CONTINUED("$3", "$7")
							" AND ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
							"  SELECT ctid FROM tenure.history"
							"  WHERE ended IS NULL AND (boot_id OPERATOR(pg_catalog.<) $1"
							"  OR boot_id OPERATOR(pg_catalog.>) $1)"
							"  FOR UPDATE SKIP LOCKED))"
							" RETURNING lease",
							"iziittI", args, nulls, SPI_OK_UPDATE_RETURNING);
		for (i = 0; continued != NULL && i < n; i++)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(TopTransactionContext);

			*continued = lappend(*continued,
								 SPI_getvalue(SPI_tuptable->vals[i],
											  SPI_tuptable->tupdesc, 1));
			MemoryContextSwitchTo(oldcxt);
		}
	}
	tenure_spi_exec("UPDATE tenure.history"
					" SET ended = GREATEST(started, $2),"
					" end_reason = " TENURE_RESTART_REASON("$3", "$4", "$5", "$6")
					" WHERE ended IS NULL AND NOT " TENURE_CONTINUED("$3", "$7")
					" AND ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
					"  SELECT ctid FROM tenure.history"
					"  WHERE ended IS NULL AND (boot_id OPERATOR(pg_catalog.<) $1"
					"  OR boot_id OPERATOR(pg_catalog.>) $1)"
					"  FOR UPDATE SKIP LOCKED))",
					"iziittI", args, nulls, SPI_OK_UPDATE);
	return true;
}

/*
 * Write to tenure.history the end of a tenure of the lease that shared
 * memory saw end outside a transaction (expiry, session end, revocation):
 * the open rows of the lease up to that tenure's epoch; later ones belong
 * to tenures that started since.  Returns whether the tenure's own row was
 * among them (not skipped: another transaction had it locked).  Inside an
 * SPI session.
 */
bool
tenure_history_close_ended(const char *name, int64 epoch, const char *reason,
						   TimestampTz ended)
{
	Datum		args[5];
	uint64		i;

	args[0] = CStringGetTextDatum(name);
	args[1] = Int64GetDatum(epoch);
	args[2] = CStringGetTextDatum(reason);
	args[3] = TimestampTzGetDatum(ended);
	args[4] = CStringGetTextDatum(tenure_end_reason_text(TENURE_END_EXPIRED));
	tenure_spi_exec("UPDATE tenure.history SET ended = GREATEST(started, $4),"
					" end_reason = CASE WHEN epoch OPERATOR(pg_catalog.=) $2"
					"  THEN $3 ELSE $5 END"
					" WHERE ended IS NULL AND ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
					"  SELECT ctid FROM tenure.history"
					"  WHERE lease OPERATOR(pg_catalog.=) $1 AND ended IS NULL"
					"  AND epoch OPERATOR(pg_catalog.<=) $2"
					"  FOR UPDATE SKIP LOCKED))"
					" RETURNING epoch",
					"titzt", args, NULL, SPI_OK_UPDATE_RETURNING);
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		if (DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i],
										SPI_tuptable->tupdesc, 1, &isnull)) == epoch)
			return true;
	}
	return false;
}

/*
 * Whether the row of tenure.history in t->slot is one of the lease's
 * open rows with epochs from first to last.
 */
static bool
tenure_history_closes(TenureTable *t, const char *name, int64 first,
					  int64 last)
{
	bool		isnull;
	int64		epoch;

	(void) tenure_table_get(t, TENURE_HISTORY_ENDED, &isnull);
	if (!isnull)
		return false;
	epoch = DatumGetInt64(tenure_table_get(t, TENURE_HISTORY_EPOCH, &isnull));
	return epoch >= first && epoch <= last &&
		strcmp(TextDatumGetCString(tenure_table_get(t, TENURE_HISTORY_LEASE,
													&isnull)), name) == 0;
}

/*
 * tenure_history_close_now() by its SQL statement, in an SPI session of
 * its own.
 */
static void
tenure_history_close_now_sql(const char *name, TenureEndReason reason,
							 int64 first, int64 last)
{
	TenureSpi	spi;
	Datum		args[4];

	args[0] = CStringGetTextDatum(name);
	args[1] = CStringGetTextDatum(tenure_end_reason_text(reason));
	args[2] = Int64GetDatum(first);
	args[3] = Int64GetDatum(last);
	tenure_spi_begin(&spi);
	tenure_spi_exec("UPDATE tenure.history SET ended = pg_catalog.clock_timestamp(),"
					" end_reason = $2"
					" WHERE lease OPERATOR(pg_catalog.=) $1 AND ended IS NULL"
					" AND epoch OPERATOR(pg_catalog.>=) $3"
					" AND epoch OPERATOR(pg_catalog.<=) $4",
					"ttii", args, NULL, SPI_OK_UPDATE);
	tenure_spi_end(&spi);
}

/*
 * Close, now, the lease's open rows with epochs from first to last, for a
 * reason the calling transaction makes itself (a release, drop_lease, a
 * claim or a hand-off), waiting for rows another transaction has locked.
 * Under the lease's row lock.  As UPDATE tenure.history SET ended =
 * clock_timestamp(), end_reason = reason WHERE lease = $1 AND ended IS
 * NULL AND epoch BETWEEN first AND last, by direct access: a row a
 * concurrent transaction updated is checked again in its newest version
 * (READ COMMITTED).  The reason is one of tenure_end_reason_text()'s, which
 * sql/end_reasons.sql compares with the CHECK constraint of end_reason.
 * By that statement where the table has objects of the user's.
 */
void
tenure_history_close_now(const char *name, TenureEndReason reason,
						 int64 first, int64 last)
{
	static const int cols[2] = {TENURE_HISTORY_ENDED, TENURE_HISTORY_END_REASON};
	TenureTable t;
	ScanKeyData keys[3];
	IndexScanDesc scan;
	Datum		values[2];
	bool		isnull[2] = {0};
	bool		all = first == PG_INT64_MIN;

	Assert(tenure_end_reason_text(reason) != NULL);
	if (!tenure_table_open(&t, TENURE_TABLE_HISTORY, RowExclusiveLock, "UPDATE"))
	{
		tenure_history_close_now_sql(name, reason, first, last);
		return;
	}
	values[1] = CStringGetTextDatum(tenure_end_reason_text(reason));

	/* a range of epochs by the primary key; all of them by the open rows */
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_TEXTEQ,
				CStringGetTextDatum(name));
	ScanKeyInit(&keys[1], 2, BTGreaterEqualStrategyNumber, F_INT8GE,
				Int64GetDatum(first));
	ScanKeyInit(&keys[2], 2, BTLessEqualStrategyNumber, F_INT8LE,
				Int64GetDatum(last));
	scan = tenure_table_scan(&t, all ? TENURE_INDEX_HISTORY_OPEN :
							 TENURE_INDEX_HISTORY_EPOCH, keys, all ? 1 : 3);
	while (tenure_table_next(&t, scan))
	{
		TM_Result	r = TM_Updated;

		while (r == TM_Updated && tenure_history_closes(&t, name, first, last))
		{
			values[0] = TimestampTzGetDatum(GetCurrentTimestamp());
			r = tenure_table_update(&t, 2, cols, values, isnull);
		}
	}
	tenure_table_end_scan(scan);
	tenure_table_close(&t);
}

/*
 * The lease's ttl grew (alter_lease): its open rows know the longer ttl
 * from now on, which a lease created again under the name after a restart
 * reads (catalog.c, tenure_carry_of(); src/README, H2).  Inside an
 * SPI session, after the lease's row was updated.
 */
void
tenure_history_raise_ttl(const char *name)
{
	Datum		args[1];

	args[0] = CStringGetTextDatum(name);
	tenure_spi_exec("UPDATE tenure.history h SET ttl = l.ttl FROM tenure.lease l"
					" WHERE h.lease OPERATOR(pg_catalog.=) $1 AND h.ended IS NULL"
					" AND l.name OPERATOR(pg_catalog.=) $1"
					" AND (h.ttl IS NULL OR h.ttl OPERATOR(pg_catalog.<) l.ttl)",
					"t", args, NULL, SPI_OK_UPDATE);
}

/*
 * pg_tenure_end_reasons() returns text[]
 *
 * Every name tenure_end_reason_text() gives, in the enum's order.  Not
 * created by the extension: sql/end_reasons.sql binds it to compare the
 * names with the CHECK constraint of tenure.history.end_reason.
 */
Datum
pg_tenure_end_reasons(PG_FUNCTION_ARGS)
{
	Datum		names[TENURE_END_REASONS];
	int			n = 0;
	int			r;

	for (r = 0; r < TENURE_END_REASONS; r++)
	{
		const char *name = tenure_end_reason_text((TenureEndReason) r);

		if (name != NULL)
			names[n++] = CStringGetTextDatum(name);
	}
	PG_RETURN_ARRAYTYPE_P(construct_array(names, n, TEXTOID, -1, false,
										  TYPALIGN_INT));
}
