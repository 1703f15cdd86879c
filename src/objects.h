/*-------------------------------------------------------------------------
 *
 * objects.h
 *		Declarations of objects.c: the extension's own objects, as installed.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_OBJECTS_H
#define TENURE_OBJECTS_H

#include "pg_tenure.h"

/* objects.c: the extension's own objects, as installed */
typedef struct TenureObjects
{
	Oid			extension;
	Oid			owner;			/* the extension's owner, a superuser */
	Oid			namespace;		/* schema tenure */
	Oid			lease;			/* tenure.lease */
	Oid			history;		/* tenure.history */
	Oid			fenced;			/* tenure.fenced */
	Oid			fence_locks[TENURE_FENCE_LOCKS];	/* tenure_lock.fence_lock_N */
	Oid			fence_trigger;	/* tenure.fence_trigger() */
	Oid			fence_apply_trigger;	/* tenure.fence_apply_trigger() */
} TenureObjects;

extern void tenure_objects_init(void);
extern const TenureObjects *tenure_objects(bool missing_ok);

#endif							/* TENURE_OBJECTS_H */
