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
 * Validate an interval argument and return it in microseconds.  Zero is
 * accepted only when allow_zero is set.
 */
int64
tenure_arg_interval(FunctionCallInfo fcinfo, int argno, const char *argname,
					bool allow_zero, int64 max_us)
{
	Interval   *iv;
	int64		us;

	tenure_arg_not_null(fcinfo, argno, argname);
	iv = PG_GETARG_INTERVAL_P(argno);
	if (iv->month != 0 ||
		pg_add_s64_overflow((int64) iv->day * USECS_PER_DAY, iv->time, &us))
		us = -1;				/* no fixed length, or absurd */
	if (us < 0 || us > max_us || (us == 0 && !allow_zero))
	{
		char	   *given = DatumGetCString(DirectFunctionCall1(interval_out,
																IntervalPGetDatum(iv)));

		if (allow_zero)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"%s\" must be between 0 and 1 day", argname),
					 errdetail("The value given is %s.", given),
					 iv->month != 0 ? errhint("Months and years have no fixed length; use days.") : 0));
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("argument \"%s\" must be greater than zero and at most 1 day",
							argname),
					 errdetail("The value given is %s.", given),
					 iv->month != 0 ? errhint("Months and years have no fixed length; use days.") : 0));
	}
	return us;
}
