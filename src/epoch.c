/*-------------------------------------------------------------------------
 *
 * epoch.c
 *		Issuing epochs: a lease's next epoch, written to its row, and the
 *		epoch clock that keeps an epoch from ever being issued twice.
 *
 * src/README, "Issuing epochs", argues why no epoch is issued twice for a
 * lease name in a database of this cluster, also after a crash that lost
 * the commit that issued it; the code cites its invariants (E1 .. E8).
 *
 * The clock lives in shared memory of its own, a TenureEpochClock that
 * only this file knows (not the lease table's struct, state.c):
 *
 * - tenure_epoch_clock->mutex, a spinlock, protects tli and last.  It is
 *   held for a few instructions, never across a call that may fail or
 *   wait, and never together with the lease table's LWLock.
 * - tli is the timeline of last, 0 until the first draw after the server
 *   started (shared memory is made anew after a crash, so a crash
 *   restarts the clock too: E4b).
 *
 * INTERFACE ROUTINES
 *
 * at server start (tenure.c's shared memory hooks):
 *		tenure_epoch_shmem_size() - bytes of the clock
 *		tenure_epoch_shmem_init() - create or attach to it
 *
 * on a primary (its row is read and written by direct access, catalog.c,
 * or by SQL statements where tenure.lease has objects of the user's):
 *		tenure_issue_epoch() - the lease's next epoch, written to its row
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/pg_control.h"
#include "common/int.h"
#include "executor/spi.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"

#include "pg_tenure.h"
#include "catalog.h"
#include "epoch.h"

/* The epoch clock (src/README, E1 .. E4). */
typedef struct TenureEpochClock
{
	slock_t		mutex;			/* protects the two fields below */
	TimeLineID	tli;			/* timeline of last; 0: not started */
	int64		last;			/* largest clock value an epoch used */
} TenureEpochClock;

static TenureEpochClock *tenure_epoch_clock = NULL;

/* What tenure_issue_epoch() reads of a lease's row, locked. */
typedef struct TenureEpochRow
{
	int64		stored;			/* its latest epoch */
	int64		base;
	bool		foreign;		/* issued by another cluster: import it */
	bool		has_tli;		/* issued_tli is known */
	int64		issued_tli;
} TenureEpochRow;

/*
 * The largest timeline and WAL position the clock can represent: the
 * clock is (timeline << 50) | (LSN >> 3), a positive int64.
 */
#define TENURE_CLOCK_LSN_BITS	50
#define TENURE_CLOCK_MAX_TLI	((TimeLineID) 8191)		/* 2^13 - 1 */
#define TENURE_CLOCK_MAX_LSN	((XLogRecPtr) 1 << (TENURE_CLOCK_LSN_BITS + 3))

/*
 * Bytes of shared memory the clock needs.
 */
Size
tenure_epoch_shmem_size(void)
{
	return MAXALIGN(sizeof(TenureEpochClock));
}

/*
 * Create or attach to the clock; called from shmem_startup_hook.
 */
void
tenure_epoch_shmem_init(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	tenure_epoch_clock = ShmemInitStruct("pg_tenure epoch clock",
										 sizeof(TenureEpochClock), &found);
	if (!found)
	{
		SpinLockInit(&tenure_epoch_clock->mutex);
		tenure_epoch_clock->tli = 0;
		tenure_epoch_clock->last = 0;
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * C(tli, lsn) = (timeline << 50) | (LSN >> 3), the clock of a WAL position
 * (src/README, E1).  Timelines up to 8191 and positions below 2^53 (8 PiB)
 * fit a positive int64; beyond them it raises SQLSTATE 54000 naming the
 * lease.
 */
static int64
tenure_clock_of(const char *name, TimeLineID tli, XLogRecPtr lsn)
{
	if (tli > TENURE_CLOCK_MAX_TLI)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot issue a new epoch for lease \"%s\"", name),
				 errdetail("WAL timeline %u exceeds %u, the largest timeline pg_tenure epochs can represent.",
						   tli, TENURE_CLOCK_MAX_TLI)));
	if (lsn >= TENURE_CLOCK_MAX_LSN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot issue a new epoch for lease \"%s\"", name),
				 errdetail("WAL position %X/%X is beyond 8 PiB, the largest position pg_tenure epochs can represent.",
						   LSN_FORMAT_ARGS(lsn))));
	return (int64) (((uint64) tli << TENURE_CLOCK_LSN_BITS) | (lsn >> 3));
}

/*
 * The next value an issue may use: one more than the largest value an
 * issue used on timeline tli.  The clock (re)starts at start on its first
 * use after the server started and whenever the timeline changed (a
 * promotion): src/README, E2 and E4.
 */
static int64
tenure_clock_draw(TimeLineID tli, int64 start)
{
	int64		value;

	SpinLockAcquire(&tenure_epoch_clock->mutex);
	if (tenure_epoch_clock->tli != tli)
	{
		tenure_epoch_clock->tli = tli;
		tenure_epoch_clock->last = start - 1;
	}
	value = tenure_epoch_clock->last + 1;
	SpinLockRelease(&tenure_epoch_clock->mutex);
	return value;
}

/*
 * An issue on timeline tli used clock value "value": later draws return
 * more.  Called once the issue's row change is in the WAL (src/README,
 * E2).
 */
static void
tenure_clock_used(TimeLineID tli, int64 value)
{
	SpinLockAcquire(&tenure_epoch_clock->mutex);
	if (tenure_epoch_clock->tli == tli)
		tenure_epoch_clock->last = Max(tenure_epoch_clock->last, value);
	SpinLockRelease(&tenure_epoch_clock->mutex);
}

/*
 * Whether the lease has a row that a new statement's snapshot sees (SELECT
 * 1 FROM tenure.lease WHERE name = $1).
 */
static bool
tenure_epoch_row_exists(const char *name)
{
	TenureTable t;
	bool		found;

	/* (the caller reads the row by direct access, under a lock) */
	if (!tenure_table_open(&t, TENURE_TABLE_LEASE, AccessShareLock, NULL))
		elog(ERROR, "tenure.lease changed while an epoch was issued");
	found = tenure_lease_find(&t, name);
	tenure_table_close(&t);
	return found;
}

/*
 * Lock the lease's row (tenure.lease, opened by t) as SELECT ... FOR NO KEY
 * UPDATE does, and read what issuing needs.  With locked NULL, wait for
 * the row lock; else take it only if it is free (SKIP LOCKED), and return
 * false with *locked set if another transaction holds it.  Fails with
 * 42704 if there is no such lease.
 */
static bool
tenure_epoch_lock_row(TenureTable *t, const char *name, bool *locked,
					  TenureEpochRow *row)
{
	TM_Result	r = TM_Deleted;
	bool		isnull;
	Datum		d;

	if (tenure_lease_find(t, name))
		r = tenure_lease_lock(t, name, LockTupleNoKeyExclusive,
							  locked != NULL ? LockWaitSkip : LockWaitBlock);
	if (locked != NULL)
	{
		*locked = false;
		/* locked by another transaction, or dropped (reported below) */
		if (r != TM_Ok && tenure_epoch_row_exists(name))
		{
			*locked = true;
			return false;
		}
	}
	if (r != TM_Ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("lease \"%s\" does not exist", name),
				 errhint("Create it with tenure.create_lease().")));
	row->stored = DatumGetInt64(tenure_table_get(t, TENURE_LEASE_EPOCH, &isnull));
	row->base = DatumGetInt64(tenure_table_get(t, TENURE_LEASE_BASE, &isnull));
	d = tenure_table_get(t, TENURE_LEASE_ISSUED_SYSID, &isnull);
	row->foreign = isnull ? row->stored > 0 :
		DatumGetInt64(d) != (int64) GetSystemIdentifier();
	d = tenure_table_get(t, TENURE_LEASE_ISSUED_TLI, &isnull);
	row->issued_tli = isnull ? 0 : DatumGetInt64(d);
	row->has_tli = !isnull;
	return true;
}

/*
 * tenure_epoch_lock_row() by its SQL statements, inside an SPI session.
 */
static bool
tenure_epoch_lock_row_sql(const char *name, bool *locked, TenureEpochRow *row)
{
	Datum		args[1];
	bool		isnull;
	int64		issued_sysid;

	args[0] = CStringGetTextDatum(name);
	if (locked != NULL)
	{
		/* a caller that does not wait takes the row only if it is free */
		tenure_spi_exec("SELECT epoch, base, issued_sysid, issued_tli FROM tenure.lease"
						" WHERE name OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE SKIP LOCKED",
						"t", args, NULL, SPI_OK_SELECT);
		*locked = false;
		if (SPI_processed == 0)
		{
			/* locked by another transaction, or dropped (reported below) */
			tenure_spi_exec("SELECT 1 FROM tenure.lease WHERE name OPERATOR(pg_catalog.=) $1",
							"t", args, NULL, SPI_OK_SELECT);
			if (SPI_processed == 1)
			{
				*locked = true;
				return false;
			}
		}
	}
	else
		tenure_spi_exec("SELECT epoch, base, issued_sysid, issued_tli FROM tenure.lease"
						" WHERE name OPERATOR(pg_catalog.=) $1 FOR NO KEY UPDATE",
						"t", args, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("lease \"%s\" does not exist", name),
				 errhint("Create it with tenure.create_lease().")));
	row->stored = tenure_spi_int8(1, NULL);
	row->base = tenure_spi_int8(2, NULL);
	issued_sysid = tenure_spi_int8(3, &isnull);
	row->foreign = isnull ? row->stored > 0 :
		issued_sysid != (int64) GetSystemIdentifier();
	row->issued_tli = tenure_spi_int8(4, &isnull);
	row->has_tli = !isnull;
	return true;
}

/*
 * tenure_epoch_write() by its SQL statement, inside an SPI session.
 */
static void
tenure_epoch_write_sql(const char *name, int64 epoch, int64 base,
					   TimeLineID tli)
{
	Datum		args[5];

	args[0] = CStringGetTextDatum(name);
	args[1] = Int64GetDatum(epoch);
	args[2] = Int64GetDatum(base);
	args[3] = Int64GetDatum((int64) GetSystemIdentifier());
	args[4] = Int64GetDatum((int64) tli);
	tenure_spi_exec("UPDATE tenure.lease SET epoch = $2, base = $3,"
					" issued_sysid = $4, issued_tli = $5"
					" WHERE name OPERATOR(pg_catalog.=) $1",
					"tiiii", args, NULL, SPI_OK_UPDATE);
	/* the row is locked: only a trigger or rule of the user's can skip it */
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the epoch of lease \"%s\" was not written to tenure.lease", name),
				 errdetail("A trigger or rule on tenure.lease skipped the update of its row."),
				 errhint("Triggers and rules on pg_tenure's tables must not skip or redirect its writes.")));
}

/*
 * Write the issued epoch to the lease's row, locked in t->slot (UPDATE
 * tenure.lease SET epoch, base, issued_sysid, issued_tli).  The values
 * meet the row's constraints: base stays >= 0 (tenure_epoch_next() only
 * raises it, to epoch - clock > base).
 */
static void
tenure_epoch_write(TenureTable *t, const char *name, int64 epoch, int64 base,
				   TimeLineID tli)
{
	static const int cols[4] = {TENURE_LEASE_EPOCH, TENURE_LEASE_BASE,
	TENURE_LEASE_ISSUED_SYSID, TENURE_LEASE_ISSUED_TLI};
	Datum		values[4];
	bool		isnull[4] = {0};

	Assert(base >= 0);
	values[0] = Int64GetDatum(epoch);
	values[1] = Int64GetDatum(base);
	values[2] = Int64GetDatum((int64) GetSystemIdentifier());
	values[3] = Int64GetDatum((int64) tli);
	/* we hold the row's lock: nobody else changed it */
	if (tenure_table_update(t, 4, cols, values, isnull) != TM_Ok)
		elog(ERROR, "could not write the epoch of lease \"%s\"", name);
}

/*
 * The lease's next epoch, max(stored + 1, base + clock, floor + 1), for a
 * row locked and imported (row->base raised); raises row->base where the
 * epoch would exceed base + clock (src/README, E5).  Fails rather than
 * issue an epoch that may have been issued before (E8), or one beyond
 * int64.
 */
static int64
tenure_epoch_next(const char *name, TenureEpochRow *row, TimeLineID tli,
				  int64 clock, int64 floor)
{
	int64		epoch;
	int64		candidate;

	/* src/README, E8 */
	if (!row->foreign && row->has_tli && row->issued_tli <= (int64) tli &&
		row->stored - row->base > clock)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot issue a new epoch for lease \"%s\": the epoch clock went back", name),
				 errdetail("This cluster issued epoch " INT64_FORMAT " for the lease (base " INT64_FORMAT "), above its epoch clock, now at " INT64_FORMAT ".",
						   row->stored, row->base, clock),
				 errhint("The cluster's WAL position or timeline went back (pg_resetwal, or an older copy of the data directory started without archive recovery). Raise the base of every lease to the highest epoch issued for it, as the README's section on epochs says.")));

	if (pg_add_s64_overflow(row->stored, 1, &epoch))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot issue a new epoch for lease \"%s\"", name),
				 errdetail("The lease's latest epoch is " INT64_FORMAT ", the largest bigint.",
						   row->stored)));
	if (pg_add_s64_overflow(row->base, clock, &candidate))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("cannot issue a new epoch for lease \"%s\"", name),
				 errdetail("The lease's base " INT64_FORMAT " plus the cluster clock " INT64_FORMAT " exceeds the largest bigint.",
						   row->base, clock),
				 errhint("The base of a lease restored from another cluster is the latest epoch issued there.")));
	epoch = Max(epoch, candidate);
	if (floor >= epoch)
	{
		if (pg_add_s64_overflow(floor, 1, &epoch))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("cannot issue a new epoch for lease \"%s\"", name),
					 errdetail("The latest epoch issued is " INT64_FORMAT ", the largest bigint.",
							   floor)));
	}
	/* keep epoch <= base + clock, which E8's check relies on */
	if (epoch - row->base > clock)
		row->base = epoch - clock;
	return epoch;
}

/*
 * The issue of clock value "clock" on timeline tli has written its row
 * change: make sure the WAL reaches the value (src/README, E2), record it
 * for later draws, and have the commit flush the WAL if it does not
 * cover the value yet (E3).
 */
static void
tenure_epoch_cover(const char *name, TimeLineID tli, int64 clock)
{
	XLogRecPtr	insert;
	XLogRecPtr	flushed;
	TimeLineID	flush_tli;

	/*
	 * The UPDATE record is in the WAL, and so past the value -- unless the
	 * row change was not logged at all (wal_level = minimal, and the table
	 * was created in this transaction): then a record that does nothing on
	 * replay takes WAL up to the value.
	 */
	insert = GetXLogInsertRecPtr();
	if (clock > tenure_clock_of(name, tli, insert))
	{
		Size		bytes = (Size) (clock - tenure_clock_of(name, tli, insert) + 1) * 8;
		char	   *filler = palloc0(bytes);

		XLogBeginInsert();
		XLogRegisterData(filler, bytes);
		(void) XLogInsert(RM_XLOG_ID, XLOG_NOOP);
		pfree(filler);
	}
	tenure_clock_used(tli, clock);

	flushed = GetFlushRecPtr(&flush_tli);
	if (flush_tli != tli || clock > tenure_clock_of(name, tli, flushed))
		ForceSyncCommit();
}

/*
 * Issue the lease's next epoch in its row and return it (src/README,
 * "Issuing epochs"), once every transaction that changed the lease before
 * is published (tenure_await_row_published()).  floor is the latest epoch
 * shared memory has seen for the lease in this database since the server
 * started.  With locked non-NULL the call does not wait for the lease's
 * row: if another transaction holds it, it returns 0 with *locked set,
 * without the wait.
 * Fails with 42704 for an unknown lease, 55000 where the epoch clock went
 * back (E8), 54000 beyond the limits of int64 or the clock.
 */
int64
tenure_issue_epoch(const char *name, int64 floor, bool *locked)
{
	TenureTable t;
	TenureSpi	spi;
	TenureEpochRow row;
	TimeLineID	tli;
	int64		clock;
	int64		epoch;
	bool		direct;

	/* direct access, or the SQL statements if the table has user objects */
	direct = tenure_table_open(&t, TENURE_TABLE_LEASE, RowExclusiveLock,
							   "SELECT FOR NO KEY UPDATE");
	if (!direct)
		tenure_spi_begin(&spi);
	if (!(direct ? tenure_epoch_lock_row(&t, name, locked, &row) :
		  tenure_epoch_lock_row_sql(name, locked, &row)))
	{
		if (direct)
			tenure_table_close(&t);
		else
			tenure_spi_end(&spi);
		return 0;
	}

	/* a row issued elsewhere: its epochs continue above what it brought (E7) */
	if (row.foreign)
		row.base = Max(row.base, row.stored);

	/* drawn after the row lock: every earlier issue of the lease recorded its value (E2) */
	if (RecoveryInProgress())
		elog(ERROR, "cannot issue an epoch during recovery");
	tli = GetWALInsertionTimeLine();
	clock = tenure_clock_draw(tli, tenure_clock_of(name, tli, GetXLogInsertRecPtr()) + 1);

	epoch = tenure_epoch_next(name, &row, tli, clock, floor);
	if (direct)
	{
		tenure_epoch_write(&t, name, epoch, row.base, tli);
		tenure_table_close(&t);
	}
	else
	{
		tenure_epoch_write_sql(name, epoch, row.base, tli);
		tenure_spi_end(&spi);
	}

	tenure_epoch_cover(name, tli, clock);
	tenure_await_row_published(name);
	return epoch;
}
