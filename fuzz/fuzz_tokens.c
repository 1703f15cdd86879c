/*-------------------------------------------------------------------------
 *
 * fuzz_tokens.c
 *		libFuzzer harness of the tenure.tokens parser and re-printer in
 *		src/tokens.c, the file the server runs.
 *
 * An input is a value of the setting, up to its first NUL byte (a GUC
 * value is a C string).  For each one the harness checks, and aborts with
 * a message (which libFuzzer records with the input) on any failure:
 *
 * 1. The parser agrees with a reading of the syntax written here apart
 *    from it (model_parse()): the same verdict, the same error, the same
 *    tokens, the same repeated name.
 * 2. Parsed tokens are sorted by name without repeats, every name is a
 *    lease name and every epoch is positive.
 * 3. Re-printing round-trips: the rendering of parsed tokens parses to
 *    the same tokens; a rendering into a short buffer is a prefix of the
 *    whole; a rendering that leaves one lease out parses to the others.
 * 4. Every token is found by its name; a name not there is not found.
 *
 * The setting's bounds (64 kB, 1000 tokens) need inputs larger than a
 * fuzzer explores well: LLVMFuzzerInitialize() checks them once, with the
 * values the regression test fence_tokens uses, unless the environment
 * sets FUZZ_TOKENS_NO_TABLE (fuzz/run --planted does, to show that the
 * fuzzing itself, not the table, finds a planted bug).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "pg_tenure.h"
#include "tokens.h"

int			LLVMFuzzerInitialize(int *argc, char ***argv);
int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A token as the model reads it. */
typedef struct ModelToken
{
	char		name[TENURE_NAME_MAX + 1];
	int64		epoch;
} ModelToken;

static const char *const tokens_error_names[] = {
	"OK", "TOO_LONG", "TOO_MANY", "BAD_FORM", "BAD_NAME", "BAD_EPOCH",
	"DUPLICATE"
};

/*
 * Report a broken property with the value that broke it, and abort.
 */
static void
fail(const char *value, const char *what)
{
	const unsigned char *c;

	fprintf(stderr, "fuzz_tokens: %s\nfuzz_tokens: value: \"", what);
	for (c = (const unsigned char *) value; *c; c++)
		if (*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\')
			fputc(*c, stderr);
		else
			fprintf(stderr, "\\x%02x", *c);
	fprintf(stderr, "\"\n");
	abort();
}

/* The SQL lexer's blanks: tenure.tokens ignores them around names, epochs. */
static bool
model_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

/*
 * The blanks strtoll() skips before a number: isspace() in the C locale,
 * which adds "\v" to the above.
 */
static bool
model_strtoll_blank(char c)
{
	return model_blank(c) || c == '\v';
}

/* The rule for lease names, from doc/reference.md (Concepts). */
static bool
model_lease_name(const char *s, size_t len)
{
	size_t		i;

	if (len < 1 || len > TENURE_NAME_MAX)
		return false;
	for (i = 0; i < len; i++)
		if (s[i] == ',' || s[i] == '=')
			return false;
	return !model_blank(s[0]) && !model_blank(s[len - 1]);
}

/*
 * The epoch in s[0 .. len): after strtoll()'s blanks an optional sign and
 * decimal digits, then only blanks; positive and at most INT64_MAX.
 */
static bool
model_epoch(const char *s, size_t len, int64 *epoch)
{
	size_t		i = 0;
	bool		negative = false;
	bool		digits = false;
	uint64		v = 0;

	while (i < len && model_strtoll_blank(s[i]))
		i++;
	if (i < len && (s[i] == '+' || s[i] == '-'))
		negative = s[i++] == '-';
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++)
	{
		digits = true;
		if (v > (PG_UINT64_MAX - 9) / 10)
			v = PG_UINT64_MAX;	/* out of range, whatever follows */
		else
			v = v * 10 + (s[i] - '0');
	}
	while (i < len && model_blank(s[i]))
		i++;
	if (!digits || i != len || negative || v == 0 || v > PG_INT64_MAX)
		return false;
	*epoch = (int64) v;
	return true;
}

/* qsort comparator of the model's tokens */
static int
model_cmp(const void *a, const void *b)
{
	return strcmp(((const ModelToken *) a)->name,
				  ((const ModelToken *) b)->name);
}

/*
 * Read a value the way doc/reference.md (Settings) describes it: split at
 * every comma; a last piece of blanks only (the empty value, or after a
 * final comma) ends the value; every other piece is "name=epoch" with
 * blanks around both.  Fills tokens (room for one more than the commas),
 * sorted by name, and on TENURE_TOKENS_DUPLICATE the smallest name that
 * appears twice.
 */
static TenureTokensError
model_parse(const char *v, ModelToken *tokens, int *count, char *repeated)
{
	size_t		len = strlen(v);
	size_t		from = 0;
	size_t		i;
	int			commas = 0;

	*count = 0;
	if (len > TENURE_TOKENS_MAX_BYTES)
		return TENURE_TOKENS_TOO_LONG;
	for (i = 0; i < len; i++)
		commas += v[i] == ',';
	if (commas >= TENURE_TOKENS_MAX_COUNT)
		return TENURE_TOKENS_TOO_MANY;

	for (;;)
	{
		const char *comma = memchr(v + from, ',', len - from);
		size_t		to = comma ? (size_t) (comma - v) : len;
		size_t		eq;
		size_t		ns;
		size_t		ne;

		if (comma == NULL)
		{
			for (i = from; i < to && model_blank(v[i]); i++)
				;
			if (i == to)
				break;
		}
		for (eq = from; eq < to && v[eq] != '='; eq++)
			;
		if (eq == to)
			return TENURE_TOKENS_BAD_FORM;
		for (ns = from; ns < eq && model_blank(v[ns]); ns++)
			;
		for (ne = eq; ne > ns && model_blank(v[ne - 1]); ne--)
			;
		if (!model_lease_name(v + ns, ne - ns))
			return TENURE_TOKENS_BAD_NAME;
		memcpy(tokens[*count].name, v + ns, ne - ns);
		tokens[*count].name[ne - ns] = '\0';
		if (!model_epoch(v + eq + 1, to - eq - 1, &tokens[*count].epoch))
			return TENURE_TOKENS_BAD_EPOCH;
		(*count)++;
		if (comma == NULL)
			break;
		from = to + 1;
	}

	qsort(tokens, *count, sizeof(ModelToken), model_cmp);
	for (i = 1; i < (size_t) *count; i++)
		if (strcmp(tokens[i - 1].name, tokens[i].name) == 0)
		{
			strcpy(repeated, tokens[i].name);
			return TENURE_TOKENS_DUPLICATE;
		}
	return TENURE_TOKENS_OK;
}

/*
 * Measure and parse a value with src/tokens.c; on success *out is the
 * tokens (malloc'd, exactly as large as measured, so that ASan sees any
 * write past it), else NULL.
 */
static TenureTokensError
real_parse(const char *value, TenureTokens **out, const char **repeated)
{
	size_t		len;
	size_t		size;
	TenureTokensError err;
	TenureTokens *tokens;

	*out = NULL;
	*repeated = NULL;
	err = tenure_tokens_measure(value, &len, &size);
	if (len != strlen(value))
		fail(value, "measure: wrong length");
	if (err != TENURE_TOKENS_OK)
		return err;
	tokens = malloc(size);
	err = tenure_tokens_parse(value, tokens, size, repeated);
	if (err == TENURE_TOKENS_OK)
		*out = tokens;
	else if (err == TENURE_TOKENS_DUPLICATE)
		*out = tokens;			/* *repeated points into it */
	else
		free(tokens);
	return err;
}

/* Whether two parsed token lists are the same. */
static bool
same_tokens(const TenureTokens *a, const TenureTokens *b)
{
	int			i;

	if (a->count != b->count)
		return false;
	for (i = 0; i < a->count; i++)
		if (strcmp(a->items[i].lease, b->items[i].lease) != 0 ||
			a->items[i].epoch != b->items[i].epoch)
			return false;
	return true;
}

/*
 * Check a value against all four properties; expect, unless negative,
 * is the verdict the value must get (the start-up table).
 */
static void
check_value(const char *value, int expect, unsigned int seed)
{
	static ModelToken model[TENURE_TOKENS_MAX_COUNT + 1];
	char		model_repeated[TENURE_NAME_MAX + 1];
	char		msg[256];
	int			model_count;
	TenureTokensError model_err;
	TenureTokensError err;
	TenureTokens *tokens;
	const char *repeated;
	size_t		n;
	char	   *buf;
	char	   *shortbuf;
	size_t		k;
	int			i;

	model_err = model_parse(value, model, &model_count, model_repeated);
	err = real_parse(value, &tokens, &repeated);

	/* 1. the parser agrees with the model */
	if (err != model_err)
	{
		snprintf(msg, sizeof(msg), "parser says %s, the syntax says %s",
				 tokens_error_names[err], tokens_error_names[model_err]);
		fail(value, msg);
	}
	if (expect >= 0 && err != (TenureTokensError) expect)
	{
		snprintf(msg, sizeof(msg), "parser says %s, the regression tests say %s",
				 tokens_error_names[err], tokens_error_names[expect]);
		fail(value, msg);
	}
	if (err == TENURE_TOKENS_DUPLICATE)
	{
		if (strcmp(repeated, model_repeated) != 0)
			fail(value, "parser and syntax name different repeated leases");
		free(tokens);
		return;
	}
	if (err != TENURE_TOKENS_OK)
		return;
	if (tokens->count != model_count)
		fail(value, "parser and syntax read different numbers of tokens");
	for (i = 0; i < model_count; i++)
		if (strcmp(tokens->items[i].lease, model[i].name) != 0 ||
			tokens->items[i].epoch != model[i].epoch)
			fail(value, "parser and syntax read different tokens");

	/* 2. sorted, no repeats, lease names, positive epochs */
	for (i = 0; i < tokens->count; i++)
	{
		const char *lease = tokens->items[i].lease;

		if (i > 0 && strcmp(tokens->items[i - 1].lease, lease) >= 0)
			fail(value, "parsed tokens not sorted or repeated");
		if (!tenure_token_name_ok(lease, strlen(lease)) ||
			tenure_name_check(lease, strlen(lease), TENURE_NAME_MAX, true) != TENURE_NAME_OK)
			fail(value, "parsed a name that is not a lease name");
		if (tokens->items[i].epoch <= 0)
			fail(value, "parsed an epoch that is not positive");
	}

	/* 3. the rendering parses to the same tokens */
	n = tenure_tokens_print(tokens, NULL, NULL, 0);
	buf = malloc(n + 1);
	if (tenure_tokens_print(tokens, NULL, buf, n + 1) != n || strlen(buf) != n)
		fail(value, "rendering has not the length the printer said");
	{
		TenureTokens *again;
		const char *r;

		if (real_parse(buf, &again, &r) != TENURE_TOKENS_OK)
			fail(value, "the rendering of its tokens does not parse");
		if (!same_tokens(tokens, again))
			fail(value, "the rendering of its tokens parses to other tokens");
		free(again);
	}
	/* ... a rendering into a short buffer is a prefix of the whole ... */
	k = seed % (n + 1);
	shortbuf = k > 0 ? malloc(k) : NULL;
	if (tenure_tokens_print(tokens, NULL, shortbuf, k) != n)
		fail(value, "a short rendering has not the length of the whole");
	if (k > 0 && (strlen(shortbuf) != k - 1 || memcmp(shortbuf, buf, k - 1) != 0))
		fail(value, "a short rendering is not a prefix of the whole");
	free(shortbuf);
	/* ... and leaving a lease out leaves exactly its token out */
	for (i = 0; i < tokens->count; i += Max(1, tokens->count / 3))
	{
		TenureTokens *others;
		const char *r;
		size_t		m = tenure_tokens_print(tokens, tokens->items[i].lease, NULL, 0);
		char	   *obuf = malloc(m + 1);
		int			j;

		(void) tenure_tokens_print(tokens, tokens->items[i].lease, obuf, m + 1);
		if (real_parse(obuf, &others, &r) != TENURE_TOKENS_OK)
			fail(value, "a rendering without one lease does not parse");
		if (others->count != tokens->count - 1)
			fail(value, "a rendering without one lease has not one token less");
		for (j = 0; j < others->count; j++)
		{
			const TenureToken *t = &tokens->items[j < i ? j : j + 1];

			if (strcmp(others->items[j].lease, t->lease) != 0 ||
				others->items[j].epoch != t->epoch)
				fail(value, "a rendering without one lease changes the others");
		}
		free(others);
		free(obuf);
	}
	free(buf);

	/* 4. lookups find every token, and nothing else */
	for (i = 0; i < tokens->count; i++)
	{
		char		probe[TENURE_NAME_MAX + 2];
		const TenureToken *found;
		size_t		plen = strlen(tokens->items[i].lease);
		int			j;

		if (tenure_tokens_find(tokens, tokens->items[i].lease) != &tokens->items[i])
			fail(value, "a token is not found by its name");
		/* a neighbour of the name: its last byte changed, or one more */
		memcpy(probe, tokens->items[i].lease, plen + 1);
		if (seed & 1)
			probe[plen - 1] ^= 1 + (seed >> 1) % 255;
		else
		{
			probe[plen] = (char) (1 + (seed >> 1) % 255);
			probe[plen + 1] = '\0';
		}
		found = tenure_tokens_find(tokens, probe);
		for (j = 0; j < tokens->count; j++)
			if (strncmp(tokens->items[j].lease, probe, TENURE_NAME_MAX) == 0)
				break;
		if (found != (j < tokens->count ? &tokens->items[j] : NULL))
			fail(value, "a lookup of a name disagrees with a linear search");
	}
	if (tenure_tokens_find(tokens, "") != NULL)
		fail(value, "the empty name is found");
	free(tokens);
}

/*
 * The bounds, and the values of the regression test fence_tokens with
 * their verdicts.
 */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const struct
	{
		const char *value;
		TenureTokensError verdict;
	}			table[] = {
		{"fence_tokens=4294967296", TENURE_TOKENS_OK},
		{" fence_tokens = 12 ,\tfence_tokens_b=9223372036854775807 ", TENURE_TOKENS_OK},
		{"", TENURE_TOKENS_OK},
		{"a=1,", TENURE_TOKENS_OK},
		{"fence_tokens", TENURE_TOKENS_BAD_FORM},
		{"fence_tokens=", TENURE_TOKENS_BAD_EPOCH},
		{"=5", TENURE_TOKENS_BAD_NAME},
		{"  =5", TENURE_TOKENS_BAD_NAME},
		{"fence_tokens=abc", TENURE_TOKENS_BAD_EPOCH},
		{"fence_tokens=12abc", TENURE_TOKENS_BAD_EPOCH},
		{"fence_tokens=1.5", TENURE_TOKENS_BAD_EPOCH},
		{"fence_tokens=0", TENURE_TOKENS_BAD_EPOCH},
		{"fence_tokens=-4294967296", TENURE_TOKENS_BAD_EPOCH},
		{"fence_tokens=9223372036854775808", TENURE_TOKENS_BAD_EPOCH},
		{"fence_tokens=1 2", TENURE_TOKENS_BAD_EPOCH},
		{"fence_tokens=1=2", TENURE_TOKENS_BAD_EPOCH},
		{"fence_tokens=1;fence_tokens_b=2", TENURE_TOKENS_BAD_EPOCH},
		{"fence_tokens=1,,fence_tokens_b=2", TENURE_TOKENS_BAD_FORM},
		{",fence_tokens=1", TENURE_TOKENS_BAD_FORM},
		{"fence_tokens=1, fence_tokens=2", TENURE_TOKENS_DUPLICATE},
		{"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx=1", TENURE_TOKENS_BAD_NAME},
		{"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx=1", TENURE_TOKENS_OK},
	};
	char	   *big;
	size_t		len;
	int			i;

	if (getenv("FUZZ_TOKENS_NO_TABLE") != NULL)
		return 0;
	for (i = 0; i < (int) lengthof(table); i++)
		check_value(table[i].value, table[i].verdict, (unsigned int) i * 7919);

	/* the longest value, and one byte more */
	big = malloc(TENURE_TOKENS_MAX_BYTES + 2);
	memset(big, ' ', TENURE_TOKENS_MAX_BYTES + 1);
	memcpy(big, "a=1", 3);
	big[TENURE_TOKENS_MAX_BYTES] = '\0';
	check_value(big, TENURE_TOKENS_OK, 1);
	big[TENURE_TOKENS_MAX_BYTES] = ' ';
	big[TENURE_TOKENS_MAX_BYTES + 1] = '\0';
	check_value(big, TENURE_TOKENS_TOO_LONG, 2);

	/* the most tokens, and one more; a final comma counts as a token */
	len = 0;
	for (i = 1; i <= TENURE_TOKENS_MAX_COUNT + 1; i++)
	{
		len += sprintf(big + len, "%st%d=%d", i > 1 ? "," : "", i, i);
		if (i == TENURE_TOKENS_MAX_COUNT - 1)
		{
			check_value(big, TENURE_TOKENS_OK, 3);
			strcpy(big + len, ",");
			check_value(big, TENURE_TOKENS_OK, 4);
		}
		if (i == TENURE_TOKENS_MAX_COUNT)
		{
			check_value(big, TENURE_TOKENS_OK, 5);
			strcpy(big + len, ",");
			check_value(big, TENURE_TOKENS_TOO_MANY, 6);
		}
	}
	check_value(big, TENURE_TOKENS_TOO_MANY, 7);
	free(big);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *value = malloc(size + 1);
	unsigned int seed = 0;
	size_t		i;

	memcpy(value, data, size);
	value[size] = '\0';
	for (i = 0; i < size; i++)
		seed = seed * 31 + data[i];
	check_value(value, -1, seed);
	free(value);
	return 0;
}
