/*-------------------------------------------------------------------------
 *
 * epoch.h
 *		Declarations of epoch.c: issuing epochs and the epoch clock.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_EPOCH_H
#define TENURE_EPOCH_H

#include "pg_tenure.h"

/*
 * epoch.c: issuing epochs, and the epoch clock in shared memory of its own
 * (src/README, "Issuing epochs")
 */
extern Size tenure_epoch_shmem_size(void);
extern void tenure_epoch_shmem_init(void);
extern int64 tenure_issue_epoch(const char *name, int64 floor, bool *locked);

#endif							/* TENURE_EPOCH_H */
