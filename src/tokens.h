/*-------------------------------------------------------------------------
 *
 * tokens.h
 *		Declarations of tokens.c: the syntax of tenure.tokens and the rules for names.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TENURE_TOKENS_H
#define TENURE_TOKENS_H

#include "pg_tenure.h"

/*
 * tokens.c: the syntax of tenure.tokens and the rules for names, pure
 * functions that fuzz/ builds without a server
 */

/*
 * Bounds of tenure.tokens: a value longer than this, or with more tokens,
 * is rejected when it is set, so that parsing it, and looking tokens up in
 * it, stays cheap whoever sets it (ALTER ROLE ... SET included).
 */
#define TENURE_TOKENS_MAX_BYTES		65536
#define TENURE_TOKENS_MAX_COUNT		1000

/* One presented token. */
typedef struct TenureToken
{
	char		lease[TENURE_NAME_MAX + 1];
	int64		epoch;
} TenureToken;

/*
 * Parsed value of tenure.tokens, kept as the setting's "extra": the tokens
 * sorted by lease name, so that duplicates are found, and a lease's token
 * is looked up, by binary search.
 */
typedef struct TenureTokens
{
	int			count;
	TenureToken items[FLEXIBLE_ARRAY_MEMBER];
} TenureTokens;

/* Why a value of tenure.tokens was rejected. */
typedef enum TenureTokensError
{
	TENURE_TOKENS_OK = 0,
	TENURE_TOKENS_TOO_LONG,		/* over TENURE_TOKENS_MAX_BYTES */
	TENURE_TOKENS_TOO_MANY,		/* over TENURE_TOKENS_MAX_COUNT */
	TENURE_TOKENS_BAD_FORM,		/* a token without "=" */
	TENURE_TOKENS_BAD_NAME,		/* not a lease name */
	TENURE_TOKENS_BAD_EPOCH,	/* not a positive bigint */
	TENURE_TOKENS_DUPLICATE		/* a lease named twice */
} TenureTokensError;

/* Which rule a lease name or holder breaks. */
typedef enum TenureNameCheck
{
	TENURE_NAME_OK = 0,
	TENURE_NAME_BAD_LENGTH,		/* empty, or longer than allowed */
	TENURE_NAME_SEPARATOR,		/* a lease name with "," or "=" */
	TENURE_NAME_BLANK_END		/* a lease name beginning or ending with a
								 * blank */
} TenureNameCheck;

extern TenureNameCheck tenure_name_check(const char *s, size_t len,
										 int maxlen, bool lease);
extern bool tenure_token_name_ok(const char *s, size_t len);
extern TenureTokensError tenure_tokens_measure(const char *value,
											   size_t *length, size_t *size);
extern TenureTokensError tenure_tokens_parse(const char *value,
											 TenureTokens *tokens, size_t size,
											 const char **duplicate);
extern size_t tenure_tokens_print(const TenureTokens *tokens, const char *omit,
								  char *buf, size_t size);
extern const TenureToken *tenure_tokens_find(const TenureTokens *tokens,
											 const char *name);

#endif							/* TENURE_TOKENS_H */
