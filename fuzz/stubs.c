/*-------------------------------------------------------------------------
 *
 * stubs.c
 *		The few server functions that src/tokens.c and the harnesses need,
 *		for a build outside the server.  Everything else they use comes
 *		from libc and PostgreSQL's port library (snprintf, qsort, strlcpy).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "parser/scansup.h"

/*
 * The server's scanner_isspace() (src/backend/parser/scansup.c), which
 * matches the SQL lexer's {space}: the blanks tenure.tokens ignores and
 * lease names may not begin or end with.  This is PostgreSQL 15's set;
 * a major that changes the lexer's blanks must change it here too.
 */
bool
scanner_isspace(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f';
}

/*
 * A failed Assert: report it the way the server does, then abort, which
 * libFuzzer records as a crash with its input.
 */
void
ExceptionalCondition(const char *conditionName, const char *errorType,
					 const char *fileName, int lineNumber)
{
	fprintf(stderr, "TRAP: %s(\"%s\", File: \"%s\", Line: %d)\n",
			errorType, conditionName, fileName, lineNumber);
	abort();
}
