/*-------------------------------------------------------------------------
 *
 * compat.h
 *		Differences between the PostgreSQL major versions pg_tenure builds
 *		against, kept in one place.
 *
 * Supported: PostgreSQL 15 and later.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_COMPAT_H
#define TENURE_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "pg_tenure requires PostgreSQL 15 or later"
#endif

/* PostgreSQL 18 adds a trailing logLockFailure argument. */
#if PG_VERSION_NUM >= 180000
#define tenure_lock_try(tag, mode, session) \
	LockAcquireExtended((tag), (mode), (session), true, false, NULL, false)
#else
#define tenure_lock_try(tag, mode, session) \
	LockAcquireExtended((tag), (mode), (session), true, false, NULL)
#endif

/* GUC check hooks allocate "extra" with malloc before 16, guc_malloc since. */
#if PG_VERSION_NUM >= 160000
#define tenure_guc_malloc(size) guc_malloc(LOG, (size))
#define tenure_guc_free(ptr) guc_free(ptr)
#else
#define tenure_guc_malloc(size) malloc(size)
#define tenure_guc_free(ptr) free(ptr)
#endif

/* Ownership checks became object_ownercheck() in 16. */
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_class.h"
#define tenure_class_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define tenure_class_ownercheck(relid, roleid) \
	pg_class_ownercheck((relid), (roleid))
#endif

/*
 * ALTER TABLE ... ALTER COLUMN ... SET EXPRESSION, which recomputes a
 * stored generated column, appeared in 17.
 */
#include "nodes/parsenodes.h"
static inline bool
tenure_at_sets_expression(AlterTableType subtype)
{
#if PG_VERSION_NUM >= 170000
	return subtype == AT_SetExpression;
#else
	(void) subtype;
	return false;
#endif
}

/* A backend's number among MaxBackends: MyProcNumber since 17. */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#define TENURE_MY_SLOT() ((int) MyProcNumber)
#else
#include "storage/backendid.h"
#define TENURE_MY_SLOT() ((int) MyBackendId - 1)
#endif

/*
 * pg_signal_backend() lets only superusers signal a backend that belongs
 * to a superuser or advertises no role, with one exception since 18:
 * roles with the privileges of pg_signal_autovacuum_worker may signal
 * autovacuum workers.  tenure_signal_exception_role(proc) is that role for
 * such a backend, or InvalidOid (acquire.c, tenure_may_terminate()).
 */
#if PG_VERSION_NUM >= 180000
#include "catalog/pg_authid.h"
#include "utils/backend_status.h"
#define tenure_signal_exception_role(proc) \
	(pgstat_get_backend_type_by_proc_number(GetNumberFromPGProc(proc)) == \
	 B_AUTOVAC_WORKER ? ROLE_PG_SIGNAL_AUTOVACUUM_WORKER : InvalidOid)
#else
#define tenure_signal_exception_role(proc) ((void) (proc), InvalidOid)
#endif

/*
 * A non-transactional logical message in the WAL, not flushed (the caller
 * flushes): LogLogicalMessage() takes whether to flush since 17.
 */
#include "replication/message.h"
#if PG_VERSION_NUM >= 170000
#define tenure_log_message(prefix, message, size) \
	LogLogicalMessage((prefix), (message), (size), false, false)
#else
#define tenure_log_message(prefix, message, size) \
	LogLogicalMessage((prefix), (message), (size), false)
#endif

/*
 * The wait event of every wait of pg_tenure: type and name "Extension" in
 * pg_stat_activity, on every major (the isolation specs look for it).
 * Since 17 an extension may register wait events under names of its own
 * (WaitEventExtensionNew()); pg_tenure does not.  PG_WAIT_EXTENSION stays
 * in 17 and 18, defined in utils/wait_classes.h, which utils/wait_event.h
 * pulls in.
 */
#include "utils/wait_event.h"
#define TENURE_WAIT_EVENT PG_WAIT_EXTENSION

#endif							/* TENURE_COMPAT_H */
