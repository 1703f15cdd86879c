/*-------------------------------------------------------------------------
 *
 * history_rows.c
 *		Every statement that writes tenure.history: opening a tenure's or
 *		claim's row, closing rows with the reason their tenure ended,
 *		trimming a lease's rows, and raising an open row's ttl.
 *
 * The reasons are named by tenure_end_reason_text() (pg_tenure.h), the one
 * table of them; no statement spells one.  sql/end_reasons.sql checks the
 * table against the CHECK constraint of tenure.history.end_reason, through
 * pg_tenure_end_reasons(), a C function that the extension does not create
 * (so it costs nothing in its SQL surface): the test binds it itself.
 *
 * Every statement runs inside an SPI session (catalog.c,
 * tenure_spi_begin()).  A lease's rows change under its row lock in
 * tenure.lease, or skip rows another transaction has locked (src/README,
 * F10, "History").  Who calls what:
 *
 *		tenure_history_start() - a new tenure, claim or hand-off (acquire.c,
 *			lease.c), after tenure_issue_epoch()
 *		tenure_history_close() - before a new tenure: the end shared memory
 *			saw, and rows left open by a server restart (acquire.c)
 *		tenure_history_close_now() - an end the transaction itself makes:
 *			release, drop_lease, claim_epoch, handoff (lease.c)
 *		tenure_history_close_restarted(), tenure_history_close_ended() -
 *			the history writer (history.c)
 *		tenure_history_raise_ttl() - alter_lease (lease.c)
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

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

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
 * Record a new tenure or epoch in tenure.history and trim the lease's rows
 * to the tenure.history_per_lease most recent.  Inside an SPI session,
 * after tenure_issue_epoch.  The row keeps the lease's base and where the
 * epoch was issued, so that create_lease can continue a dropped lease's
 * lineage, and its ttl, so that a lease created again under its name
 * keeps the hold-off of a holder it dropped after a restart
 * (catalog.c, tenure_carry_of()).
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
	Datum		args[5];

	args[0] = CStringGetTextDatum(name);
	args[1] = Int64GetDatum(epoch);
	args[2] = CStringGetTextDatum(holder);
	args[3] = BoolGetDatum(session_bound);
	args[4] = Int64GetDatum(tenure_boot_id());
	tenure_spi_exec("INSERT INTO tenure.history (lease, epoch, holder, session_bound, started,"
					" boot_id, issued_sysid, issued_tli, open_tli, base, ttl)"
					" SELECT $1, $2, $3, $4, pg_catalog.clock_timestamp(), $5,"
					" issued_sysid, issued_tli, issued_tli, base, ttl FROM tenure.lease"
					" WHERE name OPERATOR(pg_catalog.=) $1",
					"titbi", args, NULL, SPI_OK_INSERT);

	tenure_make_key(&key, MyDatabaseId, name);
	if (!tenure_state_history_trim_due(&key))
		return;

	/* rows another transaction is closing are left for a later pass */
	args[1] = Int64GetDatum((int64) tenure_history_per_lease);
	tenure_spi_exec("DELETE FROM tenure.history"
					" WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
					"  SELECT ctid FROM tenure.history WHERE lease OPERATOR(pg_catalog.=) $1"
					"  AND epoch OPERATOR(pg_catalog.<) (SELECT epoch FROM tenure.history"
					"   WHERE lease OPERATOR(pg_catalog.=) $1 ORDER BY epoch DESC"
					"   OFFSET $2 OPERATOR(pg_catalog.-) 1 LIMIT 1)"
					"  FOR UPDATE SKIP LOCKED))",
					"ti", args, NULL, SPI_OK_DELETE);
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
 * did already.
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
		  TransactionIdIsCurrentTransactionId(tenure_restart_rows_xid)) &&
		tenure_history_close_restarted(NULL))
		tenure_restart_rows_xid = GetTopTransactionId();
}

/*
 * Record in tenure.history the end of every tenure of the lease that the
 * table still shows open: the one shared memory says ended, and any left
 * open by a server restart; and the tenures of other leases left open by
 * a server restart (see above).  Inside an SPI session.
 */
void
tenure_history_close(const char *name, const TenureKey *key)
{
	Datum		args[12];
	bool		nulls[12] = {0};
	const char *reason;
	int64		epoch = 0;
	TimestampTz ended = 0;

	reason = tenure_state_ended(key, &epoch, &ended);

	/*
	 * Tenures of any lease that were open when the server went down.  Rows
	 * another transaction has locked are skipped: it is closing them
	 * itself, or, if it rolls back, a later tenure will.  Waiting for it
	 * could mean waiting for a client idle in the transaction of an
	 * acquisition of another lease, which nobody takes over and so nobody
	 * ends (see tenure_end_abandoned()).
	 */
	tenure_history_close_restarted_once();

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
 * Close, now, the lease's open rows with epochs from first to last, for a
 * reason the calling transaction makes itself (a release, drop_lease, a
 * claim or a hand-off), waiting for rows another transaction has locked.
 * Inside an SPI session, under the lease's row lock.
 */
void
tenure_history_close_now(const char *name, TenureEndReason reason,
						 int64 first, int64 last)
{
	Datum		args[4];

	Assert(tenure_end_reason_text(reason) != NULL);
	args[0] = CStringGetTextDatum(name);
	args[1] = CStringGetTextDatum(tenure_end_reason_text(reason));
	args[2] = Int64GetDatum(first);
	args[3] = Int64GetDatum(last);
	tenure_spi_exec("UPDATE tenure.history SET ended = pg_catalog.clock_timestamp(),"
					" end_reason = $2"
					" WHERE lease OPERATOR(pg_catalog.=) $1 AND ended IS NULL"
					" AND epoch OPERATOR(pg_catalog.>=) $3"
					" AND epoch OPERATOR(pg_catalog.<=) $4",
					"ttii", args, NULL, SPI_OK_UPDATE);
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
