/*-------------------------------------------------------------------------
 *
 * catalog.h
 *		Declarations of catalog.c: SPI sessions, direct access to
 *		pg_tenure's tables, and lease rows.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_CATALOG_H
#define TENURE_CATALOG_H

#include "access/genam.h"
#include "access/skey.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#include "pg_tenure.h"
#include "state.h"

/* catalog.c: an SPI session as the owner of pg_tenure's tables */
typedef struct TenureSpi
{
	Oid			save_userid;
	int			save_sec_context;
	int			guc_nestlevel;
} TenureSpi;

/* how long a backend waits for the keeper to answer */
#define TENURE_KEEPER_WAIT_US	((int64) 10 * USECS_PER_SEC)

extern void tenure_catalog_init(void);
extern void tenure_spi_begin(TenureSpi *spi);
extern void tenure_spi_end(TenureSpi *spi);
extern struct _SPI_plan *tenure_spi_plan(const char *sql, const char *types);
extern uint64 tenure_spi_exec(const char *sql, const char *types,
							  Datum *values, const bool *isnull, int expected);
extern int64 tenure_spi_int8(int col, bool *isnull);
/*
 * catalog.c: direct access to pg_tenure's tables, for the statements of
 * the hot path (see catalog.c, "Direct access").  The columns and indexes
 * it uses are named by these numbers; catalog.c finds each by its name and
 * shape.
 */
typedef enum TenureTableId
{
	TENURE_TABLE_LEASE,
	TENURE_TABLE_HISTORY
} TenureTableId;

typedef enum TenureLeaseCol
{
	TENURE_LEASE_NAME,
	TENURE_LEASE_ID,
	TENURE_LEASE_OWNER,
	TENURE_LEASE_TTL,
	TENURE_LEASE_HOLDOFF,
	TENURE_LEASE_LOCK_KEY,
	TENURE_LEASE_EPOCH,
	TENURE_LEASE_BASE,
	TENURE_LEASE_ISSUED_SYSID,
	TENURE_LEASE_ISSUED_TLI,
	TENURE_LEASE_FENCE_LOCK,
	TENURE_LEASE_NCOLS
} TenureLeaseCol;

typedef enum TenureHistoryCol
{
	TENURE_HISTORY_LEASE,
	TENURE_HISTORY_EPOCH,
	TENURE_HISTORY_HOLDER,
	TENURE_HISTORY_SESSION_BOUND,
	TENURE_HISTORY_STARTED,
	TENURE_HISTORY_ENDED,
	TENURE_HISTORY_END_REASON,
	TENURE_HISTORY_BOOT_ID,
	TENURE_HISTORY_ISSUED_SYSID,
	TENURE_HISTORY_ISSUED_TLI,
	TENURE_HISTORY_OPEN_TLI,
	TENURE_HISTORY_BASE,
	TENURE_HISTORY_TTL,
	TENURE_HISTORY_NCOLS
} TenureHistoryCol;

#define TENURE_TABLE_MAX_COLS	TENURE_HISTORY_NCOLS

/* the indexes direct access scans, each of one of the tables */
typedef enum TenureIndexId
{
	TENURE_INDEX_LEASE_NAME,	/* tenure.lease (name), its primary key */
	TENURE_INDEX_HISTORY_EPOCH, /* tenure.history (lease, epoch), its
								 * primary key */
	TENURE_INDEX_HISTORY_OPEN,	/* (lease) WHERE ended IS NULL */
	TENURE_INDEX_HISTORY_OPEN_BOOT	/* (boot_id) WHERE ended IS NULL */
} TenureIndexId;

#define TENURE_TABLE_INDEXES	3	/* the most of one table */

/*
 * One statement's access to one of the tables, from tenure_table_open()
 * to tenure_table_close().  slot holds the row found, locked or updated
 * last; its columns are read with tenure_table_get().
 */
typedef struct TenureTable
{
	Relation	rel;
	TenureTableId id;
	const AttrNumber *att;		/* attribute number of each column */
	Snapshot	snapshot;		/* registered */
	CommandId	cid;
	TupleTableSlot *slot;
	TupleTableSlot *out;		/* writes: the new row */
	EState	   *estate;			/* writes: index entries and checks */
	ResultRelInfo *rri;
	Oid			save_userid;
	int			save_sec_context;
} TenureTable;

/* false: the table has objects of the user's; run the SQL statement */
extern pg_nodiscard bool tenure_table_open(TenureTable *t, TenureTableId id,
										   LOCKMODE lockmode,
										   const char *command);
extern void tenure_table_close(TenureTable *t);
extern IndexScanDesc tenure_table_scan(TenureTable *t, TenureIndexId index,
									   ScanKey keys, int nkeys);
extern bool tenure_table_next(TenureTable *t, IndexScanDesc scan);
extern bool tenure_table_prev(TenureTable *t, IndexScanDesc scan);
extern bool tenure_table_skip_back(TenureTable *t, IndexScanDesc scan,
								   int64 n);
extern void tenure_table_end_scan(IndexScanDesc scan);
extern Datum tenure_table_get(TenureTable *t, int col, bool *isnull);
extern Datum tenure_table_copy(TenureTable *t, int col, bool *isnull);
extern TM_Result tenure_table_lock(TenureTable *t, LockTupleMode mode,
								   LockWaitPolicy wait, bool *traversed);
extern TM_Result tenure_table_update(TenureTable *t, int ncols,
									 const int *cols, const Datum *values,
									 const bool *isnull);
extern void tenure_table_insert(TenureTable *t, const Datum *values,
								const bool *isnull);
extern bool tenure_table_delete_unlocked(TenureTable *t);
extern bool tenure_lease_find(TenureTable *t, const char *name);
extern TM_Result tenure_lease_lock(TenureTable *t, const char *name,
								   LockTupleMode mode, LockWaitPolicy wait);

extern void tenure_load_row(const char *name, TenureRow *row, bool for_update);
extern void tenure_await_row_published(const char *name);
extern bool tenure_load_committed(const char *name, TenureRow *row,
								  bool missing_ok, TenureCarry *carry);
extern void tenure_check_owner(const char *name, Oid owner, Oid caller);
extern Oid	tenure_known_owner(void);
extern void tenure_ensure_entry(const char *name, const TenureKey *key);
extern bool tenure_ensure_continued(const char *name, const TenureKey *key);
extern void tenure_load_entry(const TenureKey *key, const TenureRow *row,
							  const TenureCarry *carry);

/* tenure.fenced, by its primary key */
extern char *tenure_fence_lease(Oid relid, bool *mine);
extern char *tenure_fenced_by(Oid relid);

#endif							/* TENURE_CATALOG_H */
