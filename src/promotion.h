/*-------------------------------------------------------------------------
 *
 * promotion.h
 *		Declarations of promotion.c: what a promotion kept.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_PROMOTION_H
#define TENURE_PROMOTION_H

#include "pg_tenure.h"

/* What the promotion of this server, in this run, kept (src/README, P1). */
typedef enum TenurePromotion
{
	TENURE_PROMOTION_UNKNOWN = 0,	/* the keeper has not looked yet */
	TENURE_PROMOTION_NONE,		/* not promoted in this run of the server */
	TENURE_PROMOTION_LOST,		/* promoted without the proof: the old
								 * primary may have committed more */
	TENURE_PROMOTION_KEPT		/* promoted after replaying the old
								 * primary's shutdown checkpoint */
} TenurePromotion;

/*
 * A tenure live in a primary's shared memory when its keeper exited at a
 * clean shutdown (src/README, P5): the list the keeper writes to the WAL.
 */
typedef struct TenureLive
{
	Oid			dbid;
	int64		epoch;			/* the tenure's latest epoch */
	int64		ttl_us;			/* its ttl then */
	int64		remaining_us;	/* how long it had to live then */
} TenureLive;

extern int	tenure_promotion_live_cmp(const void *a, const void *b);
extern Size tenure_promotion_shmem_size(void);
extern void tenure_promotion_shmem_init(void);
extern void tenure_promotion_examine(void);
extern TenurePromotion tenure_promotion_state(TimeLineID *prev_tli);
extern bool tenure_promotion_recent(TimestampTz ready);
extern bool tenure_promotion_listed(Oid dbid, int64 epoch);
extern int64 *tenure_promotion_listed_epochs(Oid dbid, int *count);
extern TenureLive *tenure_promotion_carried(int *count);
extern int64 tenure_promotion_demotion_left(int64 ready_mono, int64 now_mono);
extern void tenure_promotion_log_live(TenureLive *live, int count,
									  int64 demotion_left_us);

#endif							/* TENURE_PROMOTION_H */
