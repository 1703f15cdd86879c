/*-------------------------------------------------------------------------
 *
 * args.c
 *		Checks of the arguments of pg_tenure's SQL functions, shared by
 *		every file that defines one.
 *
 * Each check names the argument by its SQL name (argname), as the
 * function's signature spells it, so that a message reads the same
 * whichever function raised it and can be translated as a whole.  A
 * failed check raises 22004 (null) or 22023 (invalid) before the function
 * changes anything.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "pg_tenure.h"
#include "args.h"
#include "tokens.h"

/*
 * Fail with 22004 if the argument is null.
 */
void
tenure_arg_not_null(FunctionCallInfo fcinfo, int argno, const char *argname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"%s\" must not be null", argname)));
}

/*
 * Validate a lease name or holder argument and return it as a C string.
 */
char *
tenure_arg_text(FunctionCallInfo fcinfo, int argno, const char *argname,
				int maxlen)
{
	char	   *s;
	int			len;

	tenure_arg_not_null(fcinfo, argno, argname);
	s = text_to_cstring(PG_GETARG_TEXT_PP(argno));
	len = strlen(s);
	if (tenure_name_check(s, len, maxlen, false) != TENURE_NAME_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be between 1 and %d bytes long",
						argname, maxlen),
				 len > 0 ? errdetail_plural("The value given is %d byte long.",
											"The value given is %d bytes long.",
											len, len) : 0));
	return s;
}

/*
 * Validate a lease name argument: 1 to TENURE_NAME_MAX bytes, neither ","
 * nor "=", which separate tokens in tenure.tokens, and no blank at either
 * end (the rules are tokens.c's, which the setting's parser applies too).
 */
char *
tenure_arg_lease(FunctionCallInfo fcinfo, int argno)
{
	char	   *s = tenure_arg_text(fcinfo, argno, "lease", TENURE_NAME_MAX);

	switch (tenure_name_check(s, strlen(s), TENURE_NAME_MAX, true))
	{
		case TENURE_NAME_OK:
			break;
		case TENURE_NAME_BAD_LENGTH:
			Assert(false);		/* tenure_arg_text() checked */
			break;
		case TENURE_NAME_SEPARATOR:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lease name \"%s\" contains \",\" or \"=\"", s),
					 errdetail("Lease names appear in tenure.tokens, where these characters separate tokens.")));
			break;
		case TENURE_NAME_BLANK_END:
			/* tenure.tokens ignores blanks around names: " a" would count for "a" */
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lease name \"%s\" begins or ends with white space", s),
					 errdetail("Lease names appear in tenure.tokens, which ignores white space around them.")));
			break;
	}
	return s;
}

/*
 * Convert an interval to microseconds, with checked arithmetic: days count
 * 24 hours, and months and years, which have no fixed length, are refused,
 * as are the infinite intervals of PostgreSQL 17 and a value whose days
 * and time add up beyond a bigint of microseconds.  The result must lie
 * between min_us and max_us.  On TENURE_INTERVAL_OK, *us is set.
 *
 * The same conversion reads a lease's stored ttl and hold-off (catalog.c),
 * so that a value accepted here reads back as the same microseconds.
 */
TenureIntervalCheck
tenure_interval_us(const Interval *iv, int64 min_us, int64 max_us, int64 *us)
{
	int64		days_us;
	int64		total;

	if ((iv->month == PG_INT32_MAX && iv->day == PG_INT32_MAX &&
		 iv->time == PG_INT64_MAX) ||
		(iv->month == PG_INT32_MIN && iv->day == PG_INT32_MIN &&
		 iv->time == PG_INT64_MIN))
		return TENURE_INTERVAL_INFINITE;
	if (iv->month != 0)
		return TENURE_INTERVAL_MONTHS;
	if (pg_mul_s64_overflow((int64) iv->day, USECS_PER_DAY, &days_us) ||
		pg_add_s64_overflow(days_us, iv->time, &total) ||
		total < min_us || total > max_us)
		return TENURE_INTERVAL_OUT_OF_RANGE;
	*us = total;
	return TENURE_INTERVAL_OK;
}

/*
 * A bound of an interval argument as a message shows it: "1 day",
 * "2 hours", "30 s", "0.5 s".  Into buf of size TENURE_BOUND_TEXT_MAX.
 */
void
tenure_bound_text(int64 us, char *buf)
{
	if (us % USECS_PER_DAY == 0)
		snprintf(buf, TENURE_BOUND_TEXT_MAX, INT64_FORMAT " %s",
				 us / USECS_PER_DAY, us == USECS_PER_DAY ? "day" : "days");
	else if (us % USECS_PER_HOUR == 0)
		snprintf(buf, TENURE_BOUND_TEXT_MAX, INT64_FORMAT " %s",
				 us / USECS_PER_HOUR, us == USECS_PER_HOUR ? "hour" : "hours");
	else if (us % USECS_PER_SEC == 0)
		snprintf(buf, TENURE_BOUND_TEXT_MAX, INT64_FORMAT " s",
				 us / USECS_PER_SEC);
	else
		snprintf(buf, TENURE_BOUND_TEXT_MAX, "%.6f s",
				 (double) us / USECS_PER_SEC);
}

/*
 * Validate an interval argument and return it in microseconds: between 0
 * (only if allow_zero; else 1 microsecond) and max_us, converted by
 * tenure_interval_us().  Fails with 22023, naming the argument and its
 * bounds, before the function changes anything.
 */
int64
tenure_arg_interval(FunctionCallInfo fcinfo, int argno, const char *argname,
					bool allow_zero, int64 max_us)
{
	Interval   *iv;
	int64		us = 0;
	TenureIntervalCheck check;
	char		bound[TENURE_BOUND_TEXT_MAX];
	char	   *given;

	tenure_arg_not_null(fcinfo, argno, argname);
	iv = PG_GETARG_INTERVAL_P(argno);
	check = tenure_interval_us(iv, allow_zero ? 0 : 1, max_us, &us);
	if (check == TENURE_INTERVAL_OK)
		return us;

	tenure_bound_text(max_us, bound);
	given = DatumGetCString(DirectFunctionCall1(interval_out,
												IntervalPGetDatum(iv)));
	if (allow_zero)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be between 0 and %s", argname, bound),
				 errdetail("The value given is %s.", given),
				 check == TENURE_INTERVAL_MONTHS ?
				 errhint("Months and years have no fixed length; use days.") : 0));
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"%s\" must be greater than zero and at most %s",
						argname, bound),
				 errdetail("The value given is %s.", given),
				 check == TENURE_INTERVAL_MONTHS ?
				 errhint("Months and years have no fixed length; use days.") : 0));
	return 0;					/* keep compiler quiet */
}
