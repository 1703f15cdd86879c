/*-------------------------------------------------------------------------
 *
 * args.h
 *		Declarations of args.c: checks of SQL arguments.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_ARGS_H
#define TENURE_ARGS_H

#include "pg_tenure.h"

/*
 * args.c: checks of SQL arguments
 *
 * Bounds of the interval arguments (doc/reference.md, Bounds): a lease's
 * ttl is 1 microsecond to TENURE_MAX_TTL_US, its fixed hold-off 0 to
 * TENURE_MAX_HOLDOFF_US, acquire's wait and the await functions' timeout
 * 0 to TENURE_MAX_WAIT_US.  Whatever is added to a monotonic time in
 * microseconds stays far from overflowing a bigint.
 */
#define TENURE_MAX_TTL_US		((int64) USECS_PER_DAY)
#define TENURE_MAX_HOLDOFF_US	((int64) USECS_PER_DAY)
#define TENURE_MAX_WAIT_US		((int64) USECS_PER_DAY)

/* Why an interval does not convert to microseconds within bounds. */
typedef enum TenureIntervalCheck
{
	TENURE_INTERVAL_OK = 0,
	TENURE_INTERVAL_MONTHS,		/* months or years: no fixed length */
	TENURE_INTERVAL_INFINITE,	/* 'infinity' or '-infinity' (17 and later) */
	TENURE_INTERVAL_OUT_OF_RANGE	/* outside the bounds, or beyond a bigint
									 * of microseconds */
} TenureIntervalCheck;

/* room for tenure_bound_text() */
#define TENURE_BOUND_TEXT_MAX	32

extern TenureIntervalCheck tenure_interval_us(const Interval *iv,
											  int64 min_us, int64 max_us,
											  int64 *us);
extern void tenure_bound_text(int64 us, char *buf);
extern void tenure_arg_not_null(FunctionCallInfo fcinfo, int argno,
								const char *argname);
extern char *tenure_arg_text(FunctionCallInfo fcinfo, int argno,
							 const char *argname, int maxlen);
extern char *tenure_arg_lease(FunctionCallInfo fcinfo, int argno);
extern int64 tenure_arg_interval(FunctionCallInfo fcinfo, int argno,
								 const char *argname, bool allow_zero,
								 int64 max_us);

#endif							/* TENURE_ARGS_H */
