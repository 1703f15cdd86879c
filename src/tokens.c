/*-------------------------------------------------------------------------
 *
 * tokens.c
 *		The syntax of tenure.tokens and the rules for lease and holder
 *		names: parsing a value into tokens, rendering tokens back as a
 *		value, looking a lease's token up, and checking a name.
 *
 * A value of tenure.tokens is "lease=epoch[, lease=epoch ...]".  Blanks
 * (scanner_isspace()) around names and epochs are ignored, and so is one
 * comma after the last token; an epoch is a positive bigint; a lease
 * appears at most once.  A lease name is 1 to TENURE_NAME_MAX bytes long,
 * contains neither "," nor "=" and neither begins nor ends with a blank,
 * so that every lease name can be presented as a token and means itself
 * there.  The SQL functions (args.c) and the setting (fence.c) apply the
 * same rules by calling this file.
 *
 * Nothing here allocates memory, raises an error or reads shared or
 * catalog state: the callers allocate (the setting's check hook with the
 * GUC allocator) and report (with the messages and SQLSTATEs the
 * regression tests pin), each in its own way.  Besides libc and
 * PostgreSQL's port library the file uses one server function,
 * scanner_isspace(), so that the fuzz harnesses in fuzz/ build this very
 * file with a stand-in for it.
 *
 * TENURE_FUZZ_PLANT, defined only by "fuzz/run --planted", plants a known
 * off-by-one (1: parser, 2: printer, 3: name check) that the harnesses
 * must find.  The server build never defines it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "parser/scansup.h"

#include "pg_tenure.h"
#include "tokens.h"

#ifndef TENURE_FUZZ_PLANT
#define TENURE_FUZZ_PLANT 0
#endif

/*
 * Whether c is a blank that tenure.tokens ignores around names and epochs.
 * Lease names get the same test (tenure_name_check()), so that no name
 * gains or loses a blank on its way through the setting.
 */
static inline bool
tenure_token_blank(char c)
{
	return scanner_isspace(c);
}

/*
 * Check a name of len bytes (s need not be terminated) against the rules
 * for lease names (lease) or holders (!lease), maxlen being the longest
 * allowed.  Returns the first rule broken, in the order in which args.c
 * reports them, or TENURE_NAME_OK.
 */
TenureNameCheck
tenure_name_check(const char *s, size_t len, int maxlen, bool lease)
{
	size_t		i;
	size_t		last;

	if (len < 1 || len > (size_t) maxlen)
		return TENURE_NAME_BAD_LENGTH;
	if (!lease)
		return TENURE_NAME_OK;
	for (i = 0; i < len; i++)
		if (s[i] == ',' || s[i] == '=')
			return TENURE_NAME_SEPARATOR;
#if TENURE_FUZZ_PLANT == 3
	last = len > 1 ? len - 2 : 0;	/* planted: one byte short of the end */
#else
	last = len - 1;
#endif
	if (tenure_token_blank(s[0]) || tenure_token_blank(s[last]))
		return TENURE_NAME_BLANK_END;
	return TENURE_NAME_OK;
}

/*
 * Whether a lease name of len bytes may appear in tenure.tokens: whether
 * it is a valid lease name at all.
 */
bool
tenure_token_name_ok(const char *s, size_t len)
{
	return tenure_name_check(s, len, TENURE_NAME_MAX, true) == TENURE_NAME_OK;
}

/* qsort and bsearch comparator of tokens, by lease name */
static int
tenure_token_cmp(const void *a, const void *b)
{
	return strcmp(((const TenureToken *) a)->lease,
				  ((const TenureToken *) b)->lease);
}

/*
 * First step of parsing a value of tenure.tokens: check its bounds, which
 * keep parsing and lookups cheap whoever sets the value, and compute the
 * size of the TenureTokens that tenure_tokens_parse() needs for it (room
 * for one token more than the value has commas).  Sets *length to the
 * value's length in bytes.  Returns TENURE_TOKENS_OK,
 * TENURE_TOKENS_TOO_LONG or TENURE_TOKENS_TOO_MANY.
 */
TenureTokensError
tenure_tokens_measure(const char *value, size_t *length, size_t *size)
{
	size_t		len = strlen(value);
	int			commas = 0;
	const char *c;

	*length = len;
	*size = 0;
	if (len > TENURE_TOKENS_MAX_BYTES)
		return TENURE_TOKENS_TOO_LONG;
	for (c = value; *c; c++)
		if (*c == ',')
			commas++;
	if (commas + 1 > TENURE_TOKENS_MAX_COUNT)
		return TENURE_TOKENS_TOO_MANY;
	*size = offsetof(TenureTokens, items) + sizeof(TenureToken) * (commas + 1);
	return TENURE_TOKENS_OK;
}

/*
 * Second step: parse a value that tenure_tokens_measure() accepted into
 * tokens, size bytes that the caller allocated as it said.  On success the
 * tokens are sorted by lease name, for tenure_tokens_find().  On failure
 * returns the first error from the left (then, after every token was
 * read, TENURE_TOKENS_DUPLICATE with *duplicate pointing to the repeated
 * name inside tokens); the contents of tokens are then unspecified.
 * Linear in the value's length, plus sorting the tokens.
 */
TenureTokensError
tenure_tokens_parse(const char *value, TenureTokens *tokens, size_t size,
					const char **duplicate)
{
	const char *p = value;
	int			i;

	Assert(size >= offsetof(TenureTokens, items));
	tokens->count = 0;
	*duplicate = NULL;

	while (*p)
	{
		const char *start;
		const char *end;
		const char *eq;
		const char *ns;
		const char *ne;
		char	   *endptr;
		int64		epoch;

		while (tenure_token_blank(*p))
			p++;
		if (*p == '\0')
			break;				/* empty value, or blanks after a last comma */
		start = p;
		while (*p && *p != ',')
			p++;
		end = p;
		if (*p == ',')
			p++;

		eq = memchr(start, '=', end - start);
		if (eq == NULL)
			return TENURE_TOKENS_BAD_FORM;

		/* the name, without the blanks around it */
		ns = start;
		ne = eq;
		while (ns < ne && tenure_token_blank(*ns))
			ns++;
		while (ne > ns && tenure_token_blank(ne[-1]))
			ne--;
		if (!tenure_token_name_ok(ns, ne - ns))
			return TENURE_TOKENS_BAD_NAME;

		/* one token more than the commas read so far: measured for */
		Assert(offsetof(TenureTokens, items) +
			   sizeof(TenureToken) * (tokens->count + 1) <= size);
		memcpy(tokens->items[tokens->count].lease, ns, ne - ns);
		tokens->items[tokens->count].lease[ne - ns] = '\0';

		/*
		 * The epoch: a positive bigint, then only blanks up to the comma.
		 * (strtoll() skips isspace() blanks before the number, a set that
		 * includes "\v"; the blanks after it are ours.)
		 */
		errno = 0;
		epoch = strtoll(eq + 1, &endptr, 10);
#if TENURE_FUZZ_PLANT == 1
		while (endptr < end - 1 && tenure_token_blank(*endptr)) /* planted */
			endptr++;
#else
		while (endptr < end && tenure_token_blank(*endptr))
			endptr++;
#endif
		if (errno != 0 || endptr != end || endptr == eq + 1 || epoch <= 0)
			return TENURE_TOKENS_BAD_EPOCH;
		tokens->items[tokens->count].epoch = epoch;
		tokens->count++;
	}

	/* sorted by name, a lease named twice shows as two neighbours */
	if (tokens->count > 1)
		qsort(tokens->items, tokens->count, sizeof(TenureToken),
			  tenure_token_cmp);
	for (i = 1; i < tokens->count; i++)
		if (strcmp(tokens->items[i - 1].lease, tokens->items[i].lease) == 0)
		{
			*duplicate = tokens->items[i].lease;
			return TENURE_TOKENS_DUPLICATE;
		}
	return TENURE_TOKENS_OK;
}

/*
 * Render tokens (NULL: none) as a value of tenure.tokens,
 * "lease=epoch,lease=epoch", in their order and leaving out the token of
 * lease omit if omit is not NULL: a value that tenure_tokens_parse() reads
 * back as the same tokens.  Like snprintf(), writes at most size bytes,
 * the terminator included, into buf (which may be NULL if size is 0), and
 * returns the length of the whole rendering.
 */
size_t
tenure_tokens_print(const TenureTokens *tokens, const char *omit,
					char *buf, size_t size)
{
	size_t		len = 0;
	int			i;

	if (size > 0)
		buf[0] = '\0';
	for (i = 0; tokens != NULL && i < tokens->count; i++)
	{
		const TenureToken *token = &tokens->items[i];
		size_t		room;
		int			n;

		if (omit != NULL && strcmp(token->lease, omit) == 0)
			continue;
		/* what is left of buf, the terminator included */
		room = len < size ? size - len : 0;
#if TENURE_FUZZ_PLANT == 2
		room -= room > 0;		/* planted: one byte short */
#endif
		n = snprintf(room > 0 ? buf + len : NULL, room,
					 "%s%s=" INT64_FORMAT,
					 len > 0 ? "," : "", token->lease, token->epoch);
		Assert(n > 0);
		len += n;
	}
	return len;
}

/*
 * The token of lease name in tokens (NULL: none), or NULL if it has none.
 * The name is compared as far as a lease name can reach, TENURE_NAME_MAX
 * bytes, as the shared lease table's keys are (tenure_make_key()).
 */
const TenureToken *
tenure_tokens_find(const TenureTokens *tokens, const char *name)
{
	TenureToken key;

	if (tokens == NULL || tokens->count == 0)
		return NULL;
	strlcpy(key.lease, name, sizeof(key.lease));
	return bsearch(&key, tokens->items, tokens->count, sizeof(TenureToken),
				   tenure_token_cmp);
}
