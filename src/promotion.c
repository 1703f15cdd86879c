/*-------------------------------------------------------------------------
 *
 * promotion.c
 *		What a promotion kept: whether the server was promoted in this run,
 *		and whether the standby it was had replayed every transaction the
 *		old primary committed.
 *
 * The proof a standby has is the old primary's clean shutdown: the last
 * record of the old timeline is the shutdown checkpoint that ended the old
 * primary's WAL, and the new timeline begins right after it (src/README,
 * P1).  Nothing else counts: synchronous replication is no proof (a
 * standby cannot see the old primary's settings, and a synchronous wait
 * cut short commits locally).
 *
 * The keeper examines the WAL once, at its first start after the server
 * started or was promoted, before it makes the server ready to hold
 * tenures (keeper.c); the result stays in a struct of this file's own in
 * shared memory.  Backends that load a lease's entry read it
 * (catalog.c): while it is not known yet they wait for the keeper.
 *
 * INTERFACE ROUTINES
 *		tenure_promotion_shmem_size(), tenure_promotion_shmem_init()
 *		tenure_promotion_examine()	the keeper, at its first start
 *		tenure_promotion_state()	what it found
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/timeline.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xlogreader.h"
#include "access/xlogutils.h"
#include "catalog/pg_control.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"
#include "promotion.h"

typedef struct TenurePromotionShared
{
	slock_t		mutex;			/* protects the fields below */
	TenurePromotion state;
	TimeLineID	prev_tli;		/* the old timeline, if promoted */
	TimestampTz created;		/* when this struct was created: the start
								 * of this run of the server, also after a
								 * crash (written once, before any reader) */
} TenurePromotionShared;

static TenurePromotionShared *tenure_promotion = NULL;

/*
 * Bytes of shared memory the result needs.
 */
Size
tenure_promotion_shmem_size(void)
{
	return MAXALIGN(sizeof(TenurePromotionShared));
}

/*
 * Create or attach to the result; called from shmem_startup_hook.  After a
 * crash the struct is created again: a crash ends every tenure, so a
 * promotion before it is no promotion of this run (P1).
 */
void
tenure_promotion_shmem_init(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	tenure_promotion = ShmemInitStruct("pg_tenure promotion",
									   sizeof(TenurePromotionShared), &found);
	if (!found)
	{
		SpinLockInit(&tenure_promotion->mutex);
		tenure_promotion->state = TENURE_PROMOTION_UNKNOWN;
		tenure_promotion->prev_tli = 0;
		tenure_promotion->created = GetCurrentTimestamp();
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * What the keeper found; *prev_tli is the old timeline when the result is
 * TENURE_PROMOTION_KEPT or TENURE_PROMOTION_LOST.
 */
TenurePromotion
tenure_promotion_state(TimeLineID *prev_tli)
{
	TenurePromotion state;

	SpinLockAcquire(&tenure_promotion->mutex);
	state = tenure_promotion->state;
	if (prev_tli != NULL)
		*prev_tli = tenure_promotion->prev_tli;
	SpinLockRelease(&tenure_promotion->mutex);
	return state;
}

static void
tenure_promotion_set(TenurePromotion state, TimeLineID prev_tli)
{
	SpinLockAcquire(&tenure_promotion->mutex);
	tenure_promotion->state = state;
	tenure_promotion->prev_tli = prev_tli;
	SpinLockRelease(&tenure_promotion->mutex);
}

/*
 * Read the record at or after lsn; NULL if there is none or it cannot be
 * read.
 */
static XLogRecord *
tenure_promotion_read(XLogReaderState *reader, XLogRecPtr lsn, bool find)
{
	char	   *errormsg = NULL;
	XLogRecord *record;

	if (find)
	{
		lsn = XLogFindNextRecord(reader, lsn);
		if (XLogRecPtrIsInvalid(lsn))
			return NULL;
	}
	XLogBeginRead(reader, lsn);
	record = XLogReadRecord(reader, &errormsg);
	if (record == NULL && errormsg != NULL)
		ereport(LOG,
				(errmsg("pg_tenure cannot read the WAL record at %X/%X: %s",
						LSN_FORMAT_ARGS(lsn), errormsg)));
	return record;
}

/*
 * When the first record of the timeline was written, if it is the
 * end-of-recovery record of a promotion; 0 otherwise.  An archive recovery
 * that ends by itself (recovery.signal, a recovery target) writes an
 * end-of-recovery checkpoint instead: that is a restart of the server, and
 * ends every tenure as a restart does.
 */
static TimestampTz
tenure_promotion_time(XLogReaderState *reader)
{
	xl_end_of_recovery xlrec;

	if (XLogRecGetRmid(reader) != RM_XLOG_ID ||
		(XLogRecGetInfo(reader) & ~XLR_INFO_MASK) != XLOG_END_OF_RECOVERY)
		return 0;
	memcpy(&xlrec, XLogRecGetData(reader), sizeof(xl_end_of_recovery));
	return xlrec.end_time;
}

/*
 * Whether the record just read is a shutdown checkpoint of timeline tli
 * that ends at end: the old primary's clean shutdown, the last record it
 * wrote (an end-of-recovery checkpoint has another previous timeline, and
 * proves nothing about what its server wrote after it).
 */
static bool
tenure_promotion_clean_end(XLogReaderState *reader, TimeLineID tli,
						   XLogRecPtr end)
{
	CheckPoint	checkpoint;

	if (XLogRecGetRmid(reader) != RM_XLOG_ID ||
		(XLogRecGetInfo(reader) & ~XLR_INFO_MASK) != XLOG_CHECKPOINT_SHUTDOWN)
		return false;
	memcpy(&checkpoint, XLogRecGetData(reader), sizeof(CheckPoint));
	return checkpoint.ThisTimeLineID == tli &&
		checkpoint.PrevTimeLineID == tli &&
		reader->EndRecPtr == end;
}

/*
 * The WAL around the switch from timeline prev_tli, which ended at
 * switchpoint, to this one: whether the switch happened in this run of
 * the server (after its shared memory was created, at its start or after
 * a crash: recovery runs after that), and whether the old timeline ended
 * with a clean shutdown.
 */
static TenurePromotion
tenure_promotion_read_switch(TimeLineID prev_tli, XLogRecPtr switchpoint)
{
	ReadLocalXLogPageNoWaitPrivate *private;
	XLogReaderState *reader;
	TenurePromotion result = TENURE_PROMOTION_LOST;
	TimestampTz promoted;
	XLogRecPtr	prev;

	private = palloc0(sizeof(ReadLocalXLogPageNoWaitPrivate));
	reader = XLogReaderAllocate(wal_segment_size, NULL,
								XL_ROUTINE(.page_read = &read_local_xlog_page_no_wait,
										   .segment_open = &wal_segment_open,
										   .segment_close = &wal_segment_close),
								private);
	if (reader == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));

	if (tenure_promotion_read(reader, switchpoint, true) == NULL)
		result = TENURE_PROMOTION_LOST;
	else if ((promoted = tenure_promotion_time(reader)) == 0 ||
			 promoted < tenure_promotion->created)
		result = TENURE_PROMOTION_NONE;
	else if ((prev = XLogRecGetPrev(reader)) != InvalidXLogRecPtr &&
			 tenure_promotion_read(reader, prev, false) != NULL &&
			 tenure_promotion_clean_end(reader, prev_tli, switchpoint))
		result = TENURE_PROMOTION_KEPT;
	XLogReaderFree(reader);
	pfree(private);
	return result;
}

/*
 * Find out what the promotion of this server, if any, kept (see the file
 * header), once per run of the server: the keeper calls it at each start,
 * outside a transaction, before the server is ready.  A failure to read
 * the WAL is logged and counts as a promotion that lost transactions.
 */
void
tenure_promotion_examine(void)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	TimeLineID	tli;
	List	   *history;
	TimeLineHistoryEntry *prev;
	volatile TenurePromotion result = TENURE_PROMOTION_NONE;
	volatile TimeLineID prev_tli = 0;

	if (tenure_promotion_state(NULL) != TENURE_PROMOTION_UNKNOWN)
		return;
	tli = GetWALInsertionTimeLine();
	if (tli <= 1)
	{
		tenure_promotion_set(TENURE_PROMOTION_NONE, 0);
		return;
	}

	cxt = AllocSetContextCreate(CurrentMemoryContext, "pg_tenure promotion",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		history = readTimeLineHistory(tli);
		if (list_length(history) < 2)
			result = TENURE_PROMOTION_NONE;
		else
		{
			prev = (TimeLineHistoryEntry *) lsecond(history);
			prev_tli = prev->tli;
			result = tenure_promotion_read_switch(prev->tli, prev->end);
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(LOG,
				(errmsg("pg_tenure cannot tell whether the promotion to timeline %u lost transactions: %s",
						tli, edata->message),
				 errdetail("Tenures of the old primary end as \"promoted\".")));
		result = TENURE_PROMOTION_LOST;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);

	if (result == TENURE_PROMOTION_KEPT)
		ereport(LOG,
				(errmsg("pg_tenure: the promotion from timeline %u kept every transaction of the old primary; its tenures continue",
						prev_tli)));
	else if (result == TENURE_PROMOTION_LOST)
		ereport(LOG,
				(errmsg("pg_tenure: the promotion from timeline %u may have lost transactions of the old primary; its tenures end",
						prev_tli)));
	tenure_promotion_set(result, prev_tli);
}
