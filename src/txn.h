/*-------------------------------------------------------------------------
 *
 * txn.h
 *		Declarations of txn.c: transaction-bound actions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_TXN_H
#define TENURE_TXN_H

#include "pg_tenure.h"
#include "state.h"

typedef enum TenureActionKind
{
	TENURE_ACT_ACQUIRE,
	TENURE_ACT_CLAIM,
	TENURE_ACT_RELEASE,
	TENURE_ACT_DROP,
	TENURE_ACT_DROP_DATABASE_LEASES,	/* key.dbid: DROP EXTENSION or DATABASE */
	TENURE_ACT_HANDOFF,
	TENURE_ACT_ALTER
} TenureActionKind;

extern void tenure_txn_init(void);
extern void tenure_txn_remember(TenureActionKind kind, const TenureKey *key,
								int64 epoch, uint64 token);
extern void tenure_txn_issued(uint64 token, int64 epoch);
extern void tenure_txn_forget_acquire(uint64 token);
extern void tenure_txn_notify(const char *event, const char *lease,
							  const char *payload);
extern void tenure_txn_remember_claim(const TenureKey *key, int64 epoch,
									  int64 old_epoch, const char *holder);
extern int64 tenure_txn_claimed_epoch(const TenureKey *key);
extern void tenure_txn_remember_handoff(const TenureKey *key, int64 epoch,
										int64 old_epoch, const char *holder,
										const char *successor,
										bool session_bound);
extern void tenure_txn_drop_database_leases(Oid dbid);
extern void tenure_txn_check_not_handed(const TenureKey *key,
										TenureActionKind kind);
extern void tenure_txn_handoff_refused(TenureHandoffCheck check,
									   const char *name, const char *holder,
									   const char *successor, bool at_commit);
extern void tenure_txn_remember_alter(const TenureKey *key,
									  const TenureRow *row, bool pinned);
extern void tenure_txn_check_not_pinned(const TenureKey *key);

#endif							/* TENURE_TXN_H */
