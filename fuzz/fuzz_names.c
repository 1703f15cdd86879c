/*-------------------------------------------------------------------------
 *
 * fuzz_names.c
 *		libFuzzer harness of the lease name and holder checks in
 *		src/tokens.c, which the SQL functions' argument checks (args.c),
 *		tenure.present() and the tenure.tokens parser all call.
 *
 * An input is a name, up to its first NUL byte (a text argument has
 * none).  For each one the harness checks, and aborts with a message
 * (which libFuzzer records with the input) on any failure:
 *
 * 1. The checks agree with the rules written here apart from them
 *    (model_lease(), model_holder()), including which rule a bad name
 *    breaks first, which decides the SQL function's message.
 * 2. A name that the lease check accepts can be presented: the token
 *    "name=1" parses to that very name with epoch 1 and is found by it,
 *    and renders back as "name=1".
 * 3. The parser accepts no lease name that the check refuses.  For a name
 *    without "," and "=" (a name with them reads as other tokens, whose
 *    names fuzz_tokens checks): if it has no blank at either end, so that
 *    the parser reads it as it is, "name=1" parses if and only if the
 *    check accepts the name; otherwise the parser reads the name without
 *    its blanks, and the check accepts what it read.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <stdio.h>
#include <stdlib.h>

#include "pg_tenure.h"
#include "tokens.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Report a broken property with the name that broke it, and abort.
 */
static void
fail(const char *name, const char *what)
{
	const unsigned char *c;

	fprintf(stderr, "fuzz_names: %s\nfuzz_names: name: \"", what);
	for (c = (const unsigned char *) name; *c; c++)
		if (*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\')
			fputc(*c, stderr);
		else
			fprintf(stderr, "\\x%02x", *c);
	fprintf(stderr, "\"\n");
	abort();
}

/* The SQL lexer's blanks, which tenure.tokens ignores around names. */
static bool
model_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

/*
 * The rule for lease names (doc/reference.md, Concepts), as the first
 * rule broken in the order of the SQL functions' messages: length,
 * separators, blanks.
 */
static TenureNameCheck
model_lease(const char *s, size_t len)
{
	if (len < 1 || len > TENURE_NAME_MAX)
		return TENURE_NAME_BAD_LENGTH;
	if (strchr(s, ',') != NULL || strchr(s, '=') != NULL)
		return TENURE_NAME_SEPARATOR;
	if (model_blank(s[0]) || model_blank(s[len - 1]))
		return TENURE_NAME_BLANK_END;
	return TENURE_NAME_OK;
}

/* The rule for holders: 1 to TENURE_HOLDER_MAX bytes, anything else goes. */
static TenureNameCheck
model_holder(size_t len)
{
	return len >= 1 && len <= TENURE_HOLDER_MAX ?
		TENURE_NAME_OK : TENURE_NAME_BAD_LENGTH;
}

/*
 * Parse a value with src/tokens.c into malloc'd tokens of the measured
 * size; NULL unless it parses.
 */
static TenureTokens *
parse(const char *value)
{
	size_t		len;
	size_t		size;
	TenureTokens *tokens;
	const char *repeated;

	if (tenure_tokens_measure(value, &len, &size) != TENURE_TOKENS_OK)
		return NULL;
	tokens = malloc(size);
	if (tenure_tokens_parse(value, tokens, size, &repeated) != TENURE_TOKENS_OK)
	{
		free(tokens);
		return NULL;
	}
	return tokens;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *name = malloc(size + 1);
	size_t		len;
	TenureNameCheck lease;
	char	   *token;
	TenureTokens *tokens;
	size_t		ns;
	size_t		ne;

	memcpy(name, data, size);
	name[size] = '\0';
	len = strlen(name);

	/* 1. the checks follow the rules */
	lease = tenure_name_check(name, len, TENURE_NAME_MAX, true);
	if (lease != model_lease(name, len))
		fail(name, "the lease name check disagrees with the rule");
	if (tenure_token_name_ok(name, len) != (lease == TENURE_NAME_OK))
		fail(name, "tenure.present()'s name check disagrees with the arguments'");
	if (tenure_name_check(name, len, TENURE_HOLDER_MAX, false) != model_holder(len))
		fail(name, "the holder check disagrees with the rule");
	if (tenure_name_check(name, len, TENURE_NAME_MAX, false) !=
		(len >= 1 && len <= TENURE_NAME_MAX ? TENURE_NAME_OK : TENURE_NAME_BAD_LENGTH))
		fail(name, "the length check of lease arguments disagrees with the rule");

	/* the name as a token, and where the parser's name would end */
	token = malloc(len + 3);
	memcpy(token, name, len);
	memcpy(token + len, "=1", 3);
	tokens = parse(token);
	for (ns = 0; ns < len && model_blank(name[ns]); ns++)
		;
	for (ne = len; ne > ns && model_blank(name[ne - 1]); ne--)
		;

	/* 2. an accepted name can be presented as itself */
	if (lease == TENURE_NAME_OK)
	{
		char		back[TENURE_NAME_MAX + 3];

		if (tokens == NULL)
			fail(name, "an accepted lease name cannot be presented in tenure.tokens");
		if (tokens->count != 1 || strcmp(tokens->items[0].lease, name) != 0 ||
			tokens->items[0].epoch != 1)
			fail(name, "an accepted lease name stands for another in tenure.tokens");
		if (tenure_tokens_find(tokens, name) != &tokens->items[0])
			fail(name, "an accepted lease name's token is not found by it");
		if (tenure_tokens_print(tokens, NULL, back, sizeof(back)) != len + 2 ||
			strcmp(back, token) != 0)
			fail(name, "an accepted lease name's token renders otherwise");
	}

	/* 3. the parser accepts no other lease name */
	if (strchr(name, ',') != NULL || strchr(name, '=') != NULL)
		;						/* other tokens, not this name */
	else if (ns == 0 && ne == len)
	{
		if ((tokens != NULL) != (lease == TENURE_NAME_OK))
			fail(name, "the parser and the lease name check disagree");
	}
	else if (tokens != NULL)
	{
		if (tokens->count != 1 ||
			strlen(tokens->items[0].lease) != ne - ns ||
			memcmp(tokens->items[0].lease, name + ns, ne - ns) != 0)
			fail(name, "the parser did not read the name without its blanks");
		if (tenure_name_check(tokens->items[0].lease, ne - ns,
							  TENURE_NAME_MAX, true) != TENURE_NAME_OK)
			fail(name, "the parser read a name the lease name check refuses");
	}

	free(tokens);
	free(token);
	free(name);
	return 0;
}
