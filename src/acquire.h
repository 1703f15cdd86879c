/*-------------------------------------------------------------------------
 *
 * acquire.h
 *		Declarations of acquire.c: starting a tenure.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_ACQUIRE_H
#define TENURE_ACQUIRE_H

#include "pg_tenure.h"
#include "state.h"

extern int64 tenure_acquire_lease(const char *name, const char *holder,
								  int64 wait_us, bool session_bound,
								  TenureBusy *busy, bool *started);

#endif							/* TENURE_ACQUIRE_H */
