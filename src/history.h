/*-------------------------------------------------------------------------
 *
 * history.h
 *		Declarations of history_rows.c and history.c: tenure.history: its rows and its writer.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_HISTORY_H
#define TENURE_HISTORY_H

#include "nodes/pg_list.h"

#include "pg_tenure.h"

/*
 * history_rows.c: every statement that writes tenure.history
 *
 * Why a tenure ended, as tenure.history.end_reason names it.  Shared
 * memory records why a tenure ended (state.c, tenure_end()), and keeps an
 * end that happened outside a transaction until the history shows it
 * (tenure_state_ended()); claims, server restarts and promotions are
 * only ever written to the history.
 */
typedef enum TenureEndReason
{
	TENURE_END_NONE = 0,
	TENURE_END_RELEASED,
	TENURE_END_EXPIRED,
	TENURE_END_SESSION,
	TENURE_END_REVOKED,
	TENURE_END_CLAIMED,			/* written by claim_epoch() itself */
	TENURE_END_HANDED,			/* written by handoff() itself */
	TENURE_END_RESTARTED,		/* open when the server went down */
	TENURE_END_PROMOTED,		/* ... its epoch issued on an earlier timeline */
	TENURE_END_DROPPED
} TenureEndReason;

#define TENURE_END_REASONS	(TENURE_END_DROPPED + 1)

/*
 * The name of an end reason in tenure.history (NULL for TENURE_END_NONE):
 * the one table of them, which sql/end_reasons.sql compares with the
 * table's CHECK constraint.
 */
static inline const char *
tenure_end_reason_text(TenureEndReason reason)
{
	static const char *const names[TENURE_END_REASONS] = {
		[TENURE_END_NONE] = NULL,
		[TENURE_END_RELEASED] = "released",
		[TENURE_END_EXPIRED] = "expired",
		[TENURE_END_SESSION] = "session ended",
		[TENURE_END_REVOKED] = "revoked",
		[TENURE_END_CLAIMED] = "claimed",
		[TENURE_END_HANDED] = "handed over",
		[TENURE_END_RESTARTED] = "server restart",
		[TENURE_END_PROMOTED] = "promoted",
		[TENURE_END_DROPPED] = "dropped",
	};

	Assert((unsigned) reason < TENURE_END_REASONS);
	return names[reason];
}

extern void tenure_history_start(const char *name, int64 epoch,
								 const char *holder, bool session_bound);
extern void tenure_history_close(const char *name, const TenureKey *key);
extern bool tenure_history_close_restarted(List **continued);
extern bool tenure_history_close_ended(const char *name, int64 epoch,
									   const char *reason, TimestampTz ended);
extern void tenure_history_close_now(const char *name, TenureEndReason reason,
									 int64 first, int64 last);
extern void tenure_history_raise_ttl(const char *name);

/* history.c: the history writer, a worker the keeper starts */
extern struct BackgroundWorkerHandle *tenure_history_launch(Oid dbid, Oid after);
PGDLLEXPORT void tenure_history_main(Datum arg);

#endif							/* TENURE_HISTORY_H */
