/*-------------------------------------------------------------------------
 *
 * catalog.h
 *		Declarations of catalog.c: SPI sessions and lease rows.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_CATALOG_H
#define TENURE_CATALOG_H

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
extern void tenure_load_row(const char *name, TenureRow *row, bool for_update);
extern bool tenure_load_committed(const char *name, TenureRow *row,
								  bool missing_ok, TenureCarry *carry);
extern void tenure_check_owner(const char *name, Oid owner, Oid caller);
extern Oid	tenure_known_owner(void);
extern void tenure_ensure_entry(const char *name, const TenureKey *key);
extern bool tenure_ensure_continued(const char *name, const TenureKey *key);
extern void tenure_load_entry(const TenureKey *key, const TenureRow *row,
							  const TenureCarry *carry);

#endif							/* TENURE_CATALOG_H */
