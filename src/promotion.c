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
 * The proof also needs the list of the tenures that were live in the old
 * primary's shared memory when its keeper exited at that shutdown (P5):
 * its keeper writes it to the WAL as a logical message just before the
 * shutdown checkpoint (tenure_promotion_log_live()), and only the tenures
 * it names may continue.  A tenure that had expired, or had ended with a
 * restart of the old primary, while its row in tenure.history was still
 * open, is not in it.
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
 *		tenure_promotion_recent()	a restart soon after a promotion
 *		tenure_promotion_listed(), tenure_promotion_listed_epochs()
 *									the old primary's live tenures
 *		tenure_promotion_carried()	the same, for the keeper's own list
 *		tenure_promotion_demotion_left()
 *									how long a replaced primary may serve
 *		tenure_promotion_live_cmp()	the order of a list of tenures
 *		tenure_promotion_log_live()	the keeper, at a clean shutdown
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
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"
#include "compat.h"
#include "promotion.h"

/* the prefix of the logical message of live tenures, and its header */
#define TENURE_LIVE_PREFIX	"pg_tenure.live"
#define TENURE_LIVE_VERSION	2

typedef struct TenureLiveHeader
{
	uint32		version;
	int32		count;			/* TenureLive entries after the header */
	TimestampTz written;		/* when, on the old primary's clock */
	int64		demotion_left_us;	/* how long an earlier primary, replaced
									 * without the proof, may still serve */
} TenureLiveHeader;

/* what a record is, for tenure_promotion_find_live() */
typedef enum TenureLiveFound
{
	TENURE_LIVE_NOT_LIST,
	TENURE_LIVE_LIST,
	TENURE_LIVE_LOST			/* a list, but it proves nothing */
} TenureLiveFound;

/*
 * How far back from the shutdown checkpoint the list is looked for: what
 * the server wrote between its keeper's exit and that checkpoint (aborts
 * of the sessions a fast shutdown ends, standby snapshots) is far less.
 */
#define TENURE_LIVE_MAX_RECORDS	10000

typedef struct TenurePromotionShared
{
	slock_t		mutex;			/* protects the fields below */
	TenurePromotion state;
	TimeLineID	prev_tli;		/* the old timeline, if promoted */
	TimestampTz created;		/* when this struct was created: the start
								 * of this run of the server, also after a
								 * crash (written once, before any reader) */
	TimestampTz promoted_at;	/* when the current timeline began with a
								 * promotion, in this run or an earlier one;
								 * 0 if it did not (written before state) */

	/*
	 * The old primary's live tenures, sorted by database and epoch: written
	 * by the keeper before it sets state to TENURE_PROMOTION_KEPT, read
	 * only after that, never changed again.
	 */
	int			nlive;
	TenureLive	live[FLEXIBLE_ARRAY_MEMBER];	/* tenure.max_leases */
} TenurePromotionShared;

static TenurePromotionShared *tenure_promotion = NULL;

/*
 * Bytes of shared memory the result needs.
 */
Size
tenure_promotion_shmem_size(void)
{
	return MAXALIGN(add_size(offsetof(TenurePromotionShared, live),
							 mul_size(sizeof(TenureLive), tenure_max_leases)));
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
									   tenure_promotion_shmem_size(), &found);
	if (!found)
	{
		SpinLockInit(&tenure_promotion->mutex);
		tenure_promotion->state = TENURE_PROMOTION_UNKNOWN;
		tenure_promotion->prev_tli = 0;
		tenure_promotion->created = GetCurrentTimestamp();
		tenure_promotion->nlive = 0;
		tenure_promotion->promoted_at = 0;
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

/*
 * Whether this server, not promoted in this run, became ready less than
 * tenure.demotion_bound after the promotion that began its timeline in an
 * earlier run: the old primary of that promotion may still serve its
 * holders, whatever that promotion kept, which a restart cannot tell any
 * more (src/README, P3).
 */
bool
tenure_promotion_recent(TimestampTz ready)
{
	TimestampTz promoted_at;

	if (tenure_promotion_state(NULL) != TENURE_PROMOTION_NONE)
		return false;
	promoted_at = tenure_promotion->promoted_at;
	return promoted_at != 0 &&
		ready < TimestampTzPlusMilliseconds(promoted_at, tenure_demotion_bound);
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
 * The order of the list: by database, then epoch.  Also sorts arrays of
 * structs that begin with a TenureLive.
 */
int
tenure_promotion_live_cmp(const void *a, const void *b)
{
	const TenureLive *x = a;
	const TenureLive *y = b;

	if (x->dbid != y->dbid)
		return x->dbid < y->dbid ? -1 : 1;
	if (x->epoch != y->epoch)
		return x->epoch < y->epoch ? -1 : 1;
	return 0;
}

/*
 * Whether the old primary's keeper listed the tenure of database dbid at
 * epoch as live when it exited (P5).  False unless the promotion kept
 * every transaction.
 */
bool
tenure_promotion_listed(Oid dbid, int64 epoch)
{
	TenureLive	key;

	if (tenure_promotion_state(NULL) != TENURE_PROMOTION_KEPT)
		return false;
	key.dbid = dbid;
	key.epoch = epoch;
	return bsearch(&key, tenure_promotion->live, tenure_promotion->nlive,
				   sizeof(TenureLive), tenure_promotion_live_cmp) != NULL;
}

/*
 * The epochs of database dbid that tenure_promotion_listed() finds, in a
 * palloc'd array of *count.
 */
int64 *
tenure_promotion_listed_epochs(Oid dbid, int *count)
{
	int64	   *epochs;
	int			i;

	*count = 0;
	if (tenure_promotion_state(NULL) != TENURE_PROMOTION_KEPT)
		return palloc(sizeof(int64));
	epochs = palloc(sizeof(int64) * Max(tenure_promotion->nlive, 1));
	for (i = 0; i < tenure_promotion->nlive; i++)
		if (tenure_promotion->live[i].dbid == dbid)
			epochs[(*count)++] = tenure_promotion->live[i].epoch;
	return epochs;
}

/*
 * The whole list, in a palloc'd array of *count (none unless the promotion
 * kept every transaction): the keeper adds to its own list those of them
 * that no backend has loaded yet (keeper.c).
 */
TenureLive *
tenure_promotion_carried(int *count)
{
	TenureLive *live;

	*count = 0;
	if (tenure_promotion_state(NULL) != TENURE_PROMOTION_KEPT)
		return palloc(sizeof(TenureLive));
	*count = tenure_promotion->nlive;
	live = palloc(sizeof(TenureLive) * Max(*count, 1));
	memcpy(live, tenure_promotion->live, sizeof(TenureLive) * *count);
	return live;
}

/*
 * How long, from now, a primary that this server replaced without the
 * proof may still serve its holders (P3): after such a promotion in this
 * run, until ready + tenure.demotion_bound; after a restart soon after a
 * promotion (tenure_promotion_recent()), until that promotion +
 * tenure.demotion_bound; otherwise 0.  Goes into the list of live tenures,
 * whose promotion then counts as without the proof (P5).
 */
int64
tenure_promotion_demotion_left(int64 ready_mono, int64 now_mono)
{
	int64		bound_us = (int64) tenure_demotion_bound * 1000;

	switch (tenure_promotion_state(NULL))
	{
		case TENURE_PROMOTION_LOST:
			return Max(ready_mono + bound_us - now_mono, 0);
		case TENURE_PROMOTION_NONE:
			if (tenure_promotion->promoted_at == 0)
				return 0;
			return Max(TimestampTzPlusMilliseconds(tenure_promotion->promoted_at,
												   tenure_demotion_bound) -
					   GetCurrentTimestamp(), 0);
		default:
			return 0;
	}
}

/*
 * Write the live tenures to the WAL and flush it: the keeper, as it exits
 * on a primary.  At a clean shutdown the postmaster waits for every
 * background worker to exit before the checkpointer writes the shutdown
 * checkpoint, so the message comes before it.  Sorts live in place.
 */
void
tenure_promotion_log_live(TenureLive *live, int count, int64 demotion_left_us)
{
	TenureLiveHeader header;
	StringInfoData buf;
	XLogRecPtr	lsn;

	qsort(live, count, sizeof(TenureLive), tenure_promotion_live_cmp);
	header.version = TENURE_LIVE_VERSION;
	header.count = count;
	header.written = GetCurrentTimestamp();
	header.demotion_left_us = demotion_left_us;
	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, (char *) &header, sizeof(header));
	appendBinaryStringInfo(&buf, (char *) live, sizeof(TenureLive) * count);
	lsn = tenure_log_message(TENURE_LIVE_PREFIX, buf.data, buf.len);
	XLogFlush(lsn);
	pfree(buf.data);
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
 * Whether the record just read is the old primary's list of live tenures.
 * A message of the same prefix from a session (a database of its own) is
 * not, and is passed over.  A list is copied into shared memory without
 * the tenures that had less to live than the time from the list to the
 * shutdown checkpoint at ckpt_time (both by the old primary's clock, the
 * checkpoint's to the second): the keeper writes it as it exits, which is
 * not always at the shutdown (P5).  It proves nothing if an earlier
 * primary may still serve (P3), if that time is negative (the clock went
 * back), or if it does not fit this server's tenure.max_leases.
 */
static TenureLiveFound
tenure_promotion_take_live(XLogReaderState *reader, pg_time_t ckpt_time)
{
	xl_logical_message xlrec;
	TenureLiveHeader header;
	char	   *data = XLogRecGetData(reader);
	Size		len = XLogRecGetDataLen(reader);
	TenureLive *live;
	int64		elapsed;
	int			i;

	if (XLogRecGetRmid(reader) != RM_LOGICALMSG_ID ||
		(XLogRecGetInfo(reader) & ~XLR_INFO_MASK) != XLOG_LOGICAL_MESSAGE ||
		len < SizeOfLogicalMessage)
		return TENURE_LIVE_NOT_LIST;
	memcpy(&xlrec, data, SizeOfLogicalMessage);
	/* the keeper has no database: pg_logical_emit_message() cannot pass */
	if (xlrec.transactional || OidIsValid(xlrec.dbId) ||
		xlrec.prefix_size != sizeof(TENURE_LIVE_PREFIX) ||
		len < SizeOfLogicalMessage + xlrec.prefix_size + sizeof(header) ||
		memcmp(data + SizeOfLogicalMessage, TENURE_LIVE_PREFIX,
			   sizeof(TENURE_LIVE_PREFIX)) != 0)
		return TENURE_LIVE_NOT_LIST;
	data += SizeOfLogicalMessage + xlrec.prefix_size;
	memcpy(&header, data, sizeof(header));
	if (header.version != TENURE_LIVE_VERSION || header.count < 0 ||
		header.count > tenure_max_leases ||
		xlrec.message_size != sizeof(header) + sizeof(TenureLive) * (Size) header.count)
		return TENURE_LIVE_LOST;
	elapsed = time_t_to_timestamptz(ckpt_time) + USECS_PER_SEC - header.written;
	if (header.demotion_left_us > 0 || elapsed < 0)
		return TENURE_LIVE_LOST;

	live = (TenureLive *) (data + sizeof(header));
	tenure_promotion->nlive = 0;
	for (i = 0; i < header.count; i++)
	{
		TenureLive	t;

		memcpy(&t, &live[i], sizeof(TenureLive));
		if (t.remaining_us > elapsed)
			tenure_promotion->live[tenure_promotion->nlive++] = t;
	}
	return TENURE_LIVE_LIST;
}

/*
 * Look back from the old timeline's shutdown checkpoint, just read, for
 * the list of live tenures its keeper wrote as it exited (P5).  The search
 * stops without one at the start of that run of the old primary (a
 * shutdown or end-of-recovery checkpoint, or an end-of-recovery record),
 * after TENURE_LIVE_MAX_RECORDS records, and at WAL that cannot be read
 * any more; that is logged.
 */
static bool
tenure_promotion_find_live(XLogReaderState *reader)
{
	XLogRecPtr	prev = XLogRecGetPrev(reader);
	CheckPoint	checkpoint;
	int			i;

	memcpy(&checkpoint, XLogRecGetData(reader), sizeof(CheckPoint));
	for (i = 0; i < TENURE_LIVE_MAX_RECORDS; i++)
	{
		uint8		info;

		if (XLogRecPtrIsInvalid(prev) ||
			tenure_promotion_read(reader, prev, false) == NULL)
			break;
		switch (tenure_promotion_take_live(reader, checkpoint.time))
		{
			case TENURE_LIVE_LIST:
				return true;
			case TENURE_LIVE_LOST:
				ereport(LOG,
						(errmsg("pg_tenure: the old primary's list of live tenures proves nothing"),
						 errdetail("An earlier primary replaced without the proof may still serve, or the list does not fit tenure.max_leases, or the old primary's clock went back.")));
				return false;
			case TENURE_LIVE_NOT_LIST:
				break;
		}
		info = XLogRecGetInfo(reader) & ~XLR_INFO_MASK;
		if (XLogRecGetRmid(reader) == RM_XLOG_ID &&
			(info == XLOG_CHECKPOINT_SHUTDOWN || info == XLOG_END_OF_RECOVERY))
			break;
		prev = XLogRecGetPrev(reader);
	}
	ereport(LOG,
			(errmsg("pg_tenure found no list of live tenures before the old primary's shutdown checkpoint")));
	return false;
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
	{
		tenure_promotion->promoted_at = promoted;
		result = TENURE_PROMOTION_NONE;
	}
	else if ((prev = XLogRecGetPrev(reader)) != InvalidXLogRecPtr &&
			 tenure_promotion_read(reader, prev, false) != NULL &&
			 tenure_promotion_clean_end(reader, prev_tli, switchpoint) &&
			 tenure_promotion_find_live(reader))
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
