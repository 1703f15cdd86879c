-- Fencing tokens: the setting tenure.tokens ('lease=epoch, ...') and
-- tenure.present().  Malformed values are rejected when they are set
-- (SQLSTATE 22023), and a rejected value changes nothing.
SET client_min_messages = warning;  -- the extension may exist already
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET search_path = public;

SHOW tenure.tokens;

-- well-formed values: blanks around names and epochs are ignored
SET tenure.tokens = 'fence_tokens=4294967296';
SHOW tenure.tokens;
SET tenure.tokens = ' fence_tokens = 12 ,	fence_tokens_b=9223372036854775807 ';
SHOW tenure.tokens;
SET tenure.tokens = '';
SHOW tenure.tokens;
SET tenure.tokens = 'fence_tokens=7';

-- malformed values, each rejected at SET; the last good value stays
SET tenure.tokens = 'fence_tokens';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = '=5';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = '  =5';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=abc';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=12abc';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=1.5';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=0';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=-4294967296';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=9223372036854775808';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=1 2';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=1=2';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=1;fence_tokens_b=2';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=1,,fence_tokens_b=2';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = ',fence_tokens=1';
\echo :LAST_ERROR_SQLSTATE
SET tenure.tokens = 'fence_tokens=1, fence_tokens=2';
\echo :LAST_ERROR_SQLSTATE
SELECT set_config('tenure.tokens',
				  repeat('x', 64) || '=1', false);
\echo :LAST_ERROR_SQLSTATE
SHOW tenure.tokens;

-- the same checks apply to SET LOCAL and set_config(..., true); the
-- failed SET aborts the transaction
BEGIN;
SET LOCAL tenure.tokens = 'fence_tokens=zero';
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT set_config('tenure.tokens', 'fence_tokens', true);
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
SHOW tenure.tokens;

-- a 63-byte lease name is the longest one
SELECT set_config('tenure.tokens', repeat('x', 63) || '=1', false) = repeat('x', 63) || '=1' AS accepted;

-- present() merges one token into the tokens the transaction presented,
-- replacing the lease's earlier token and keeping the others
BEGIN;
SET LOCAL tenure.tokens = 'fence_tokens_a=1, fence_tokens_b=2';
SELECT tenure.present('fence_tokens_c', 3, true);
SHOW tenure.tokens;
SELECT tenure.present('fence_tokens_a', 4, true);
SHOW tenure.tokens;
-- presenting a token for a lease that does not exist is harmless
SELECT tenure.present('fence_tokens_no_such_lease', 5, true);
SHOW tenure.tokens;
COMMIT;
-- tokens that an earlier transaction left in the setting are not carried
-- into a new presentation, where they would count again
SET tenure.tokens = 'fence_tokens_a=1, fence_tokens_b=2';
SELECT tenure.present('fence_tokens_c', 3);
SHOW tenure.tokens;
-- local presentation ends with the transaction
BEGIN;
SELECT tenure.present('fence_tokens_b', 6, true);
SHOW tenure.tokens;
COMMIT;
SHOW tenure.tokens;
RESET tenure.tokens;

-- present(): bad input, each rejected without changing the setting
SET tenure.tokens = 'fence_tokens=7';
SELECT tenure.present(NULL, 1);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.present('fence_tokens', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.present('fence_tokens', 1, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.present('fence_tokens', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.present('fence_tokens', -1);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.present('', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.present('fence_tokens,x', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.present('fence_tokens=x', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.present(repeat('x', 64), 1);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.present(' fence_tokens', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.present(E'fence_tokens\t', 1);
\echo :LAST_ERROR_SQLSTATE
SHOW tenure.tokens;
RESET tenure.tokens;

-- blanks around a name are not part of it: lease names cannot begin or
-- end with one (bad_input), so " a" and "a" name the same lease here
SET tenure.tokens = ' fence_tokens =3';
SHOW tenure.tokens;

-- the setting is bounded, and a value of any size is parsed in linear
-- time (plus sorting at most 1000 tokens): an oversize value is rejected
-- at once, whatever statement_timeout says
SET statement_timeout = '1s';
SELECT set_config('tenure.tokens',
				  string_agg('fence_tokens_' || i || '=' || i, ','), false)
  FROM generate_series(1, 60000) i;
\echo :LAST_ERROR_SQLSTATE
SELECT set_config('tenure.tokens',
				  string_agg('t' || i || '=' || i, ','), false)
  FROM generate_series(1, 1001) i;
\echo :LAST_ERROR_SQLSTATE
-- 1000 tokens are accepted; duplicates are found among them
SELECT length(set_config('tenure.tokens',
						 string_agg('fence_tokens_' || i || '=' || i, ', '), false)) > 0 AS accepted
  FROM generate_series(1, 1000) i;
SELECT set_config('tenure.tokens',
				  string_agg('fence_tokens_' || (i % 999) || '=' || i, ','), false)
  FROM generate_series(1, 1000) i;
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
RESET tenure.tokens;

-- the prefix is reserved: a misspelt setting is caught
SET tenure.token = 'fence_tokens=1';
\echo :LAST_ERROR_SQLSTATE
