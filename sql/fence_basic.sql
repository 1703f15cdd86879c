-- Fencing, single session: which writes a fenced table accepts.
--
-- A write passes iff the lease has a live tenure whose epoch equals the
-- token the transaction presents; the check runs when the statement starts
-- and again at COMMIT, and every failure is SQLSTATE TN002.
SET client_min_messages = warning;  -- the extension may exist already
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
-- the test role may be named like the extension's schema ("$user" in
-- search_path): keep this file's objects in public
SET search_path = public;

SELECT tenure.create_lease('fence_basic', ttl => '5 min');
CREATE TABLE fence_basic_t (id int PRIMARY KEY, v text NOT NULL);
-- not fenced yet: anyone writes
INSERT INTO fence_basic_t VALUES (1, 'before the fence');

SELECT tenure.fence_table('fence_basic_t', 'fence_basic');
-- one statement-level BEFORE trigger for all four events, firing in every
-- session_replication_role (tgenabled A)
SELECT tgname, pg_get_triggerdef(oid) AS def, tgenabled
  FROM pg_trigger WHERE tgrelid = 'fence_basic_t'::regclass;
SELECT tbl, lease FROM tenure.fenced WHERE lease = 'fence_basic';
SELECT lease, holder, fences FROM tenure.leases WHERE lease = 'fence_basic';

-- the lease has never been held: nothing can be presented that passes
INSERT INTO fence_basic_t VALUES (2, 'nobody holds the lease');
\echo :LAST_ERROR_SQLSTATE

SELECT tenure.acquire('fence_basic', 'writer-1') AS e1 \gset

-- no token
INSERT INTO fence_basic_t VALUES (2, 'no token');
\echo :LAST_ERROR_SQLSTATE
UPDATE fence_basic_t SET v = 'no token';
\echo :LAST_ERROR_SQLSTATE
DELETE FROM fence_basic_t;
\echo :LAST_ERROR_SQLSTATE
TRUNCATE fence_basic_t;
\echo :LAST_ERROR_SQLSTATE
COPY fence_basic_t FROM stdin;
2	copy without a token
\.
\echo :LAST_ERROR_SQLSTATE

-- a token for another lease only is no token for this one
BEGIN;
SET LOCAL tenure.tokens = 'fence_basic_other=4294967296';
INSERT INTO fence_basic_t VALUES (2, 'token of another lease');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- a token greater than the current epoch is rejected too
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || (:e1 + 1), true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (2, 'future token');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- and so is a smaller one that was never issued
BEGIN;
SET LOCAL tenure.tokens = 'fence_basic=1';
INSERT INTO fence_basic_t VALUES (2, 'token never issued');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- the current epoch passes, for every kind of write
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e1, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (2, 'current token');
UPDATE fence_basic_t SET v = v || ', updated' WHERE id = 2;
DELETE FROM fence_basic_t WHERE id = 1;
COPY fence_basic_t FROM stdin;
3	copied with the current token
\.
INSERT INTO fence_basic_t VALUES (3, 'conflict') ON CONFLICT (id)
  DO UPDATE SET v = fence_basic_t.v || ', upserted';
COMMIT;
SELECT * FROM fence_basic_t ORDER BY id;

-- the holder claims a new epoch: the old token is stale at once
SELECT tenure.claim_epoch('fence_basic', 'writer-1') AS e2 \gset
SELECT :e2 > :e1 AS newer_epoch;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e1, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (4, 'stale token');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e1, true) IS NOT NULL AS presented;
UPDATE fence_basic_t SET v = 'stale token';
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e1, true) IS NOT NULL AS presented;
DELETE FROM fence_basic_t;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e1, true) IS NOT NULL AS presented;
TRUNCATE fence_basic_t;
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- nothing changed
SELECT * FROM fence_basic_t ORDER BY id;

-- the new epoch passes, TRUNCATE included
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
UPDATE fence_basic_t SET v = 'new epoch' WHERE id = 2;
TRUNCATE fence_basic_t;
INSERT INTO fence_basic_t VALUES (10, 'after truncate');
COMMIT;
SELECT * FROM fence_basic_t ORDER BY id;

-- session_replication_role = replica does not switch the fence off
SET session_replication_role = replica;
INSERT INTO fence_basic_t VALUES (11, 'replica role, no token');
\echo :LAST_ERROR_SQLSTATE
TRUNCATE fence_basic_t;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e1, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (11, 'replica role, stale token');
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (11, 'replica role, current token');
COMMIT;
RESET session_replication_role;

-- the decisive check is at COMMIT, with the token presented then: a
-- transaction that no longer presents its token is rolled back
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (12, 'token withdrawn before commit');
SET LOCAL tenure.tokens = '';
COMMIT;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (12, 'token replaced before commit');
SELECT set_config('tenure.tokens', 'fence_basic=' || :e1, true) IS NOT NULL AS presented;
COMMIT;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows_12 FROM fence_basic_t WHERE id = 12;

-- PREPARE TRANSACTION after a fenced write is refused (the transaction is
-- rolled back, nothing is prepared)
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (13, 'prepared');
PREPARE TRANSACTION 'fence_basic_p1';
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'fence_basic_p1';
SELECT count(*) AS rows_13 FROM fence_basic_t WHERE id = 13;
-- a transaction that presents a token but writes no fenced table can
-- still be prepared
CREATE TABLE fence_basic_unfenced (id int);
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_unfenced VALUES (1);
PREPARE TRANSACTION 'fence_basic_p2';
COMMIT PREPARED 'fence_basic_p2';
SELECT count(*) AS unfenced_rows FROM fence_basic_unfenced;
DROP TABLE fence_basic_unfenced;

-- SET LOCAL, set_config(..., true) and present(..., true) last for the
-- transaction only, whether it commits or rolls back
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
SELECT current_setting('tenure.tokens') = 'fence_basic=' || :e2 AS presented_in_transaction;
INSERT INTO fence_basic_t VALUES (14, 'set_config local');
COMMIT;
SHOW tenure.tokens;
INSERT INTO fence_basic_t VALUES (15, 'after the transaction');
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT tenure.present('fence_basic', :e2, true);
INSERT INTO fence_basic_t VALUES (15, 'present local');
COMMIT;
SHOW tenure.tokens;
BEGIN;
SET LOCAL tenure.tokens = 'fence_basic=4294967296';
ROLLBACK;
SHOW tenure.tokens;
INSERT INTO fence_basic_t VALUES (16, 'after rollback');
\echo :LAST_ERROR_SQLSTATE
-- a token counts only in the transaction that presents it: a plain SET,
-- or present() without is_local, left in the session by an earlier
-- transaction (or by an earlier client of a pooled connection) counts for
-- nothing, and the message says how to present a token
SELECT tenure.present('fence_basic', :e2);
SELECT current_setting('tenure.tokens') = 'fence_basic=' || :e2 AS left_in_session;
INSERT INTO fence_basic_t VALUES (16, 'token left by an earlier transaction');
\echo :LAST_ERROR_SQLSTATE
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, false) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (16, 'token left by an earlier transaction');
-- nor does a value a role setting applies when the session starts
\set role_token 'fence_basic=' :e2
ALTER ROLE CURRENT_USER SET tenure.tokens = :'role_token';
\c
SET search_path = public;
SELECT current_setting('tenure.tokens') = :'role_token' AS set_by_role;
INSERT INTO fence_basic_t VALUES (16, 'token of a role setting');
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE CURRENT_USER RESET tenure.tokens;
\c
SET search_path = public;
-- within the transaction that sets it, a plain SET counts
BEGIN;
SELECT tenure.present('fence_basic', :e2);
INSERT INTO fence_basic_t VALUES (16, 'present in the transaction');
COMMIT;
INSERT INTO fence_basic_t VALUES (17, 'and no more afterwards');
\echo :LAST_ERROR_SQLSTATE
-- a SET LOCAL undone by a rolled back savepoint restores the earlier
-- token of the same transaction, which still counts
BEGIN;
SET LOCAL tenure.tokens = 'fence_basic=1';
SAVEPOINT s1;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
ROLLBACK TO SAVEPOINT s1;
SHOW tenure.tokens;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
SAVEPOINT s2;
SET LOCAL tenure.tokens = 'fence_basic=1';
ROLLBACK TO SAVEPOINT s2;
INSERT INTO fence_basic_t VALUES (17, 'token restored by a savepoint rollback');
COMMIT;
RESET tenure.tokens;

-- the tenure ends: its epoch stays the latest one but passes no more
SELECT tenure.release('fence_basic', 'writer-1');
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (18, 'released');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
-- a new tenure: a new epoch, the previous one stays stale
SELECT tenure.acquire('fence_basic', 'writer-2') AS e3 \gset
SELECT :e3 > :e2 AS newer_epoch;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e2, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (18, 'previous tenure');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_basic=' || :e3, true) IS NOT NULL AS presented;
INSERT INTO fence_basic_t VALUES (18, 'new tenure');
COMMIT;

SELECT * FROM fence_basic_t ORDER BY id;

-- unfenced: the trigger and the record are gone, writes need no token
SELECT tenure.unfence_table('fence_basic_t');
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'fence_basic_t'::regclass;
SELECT lease, fences FROM tenure.leases WHERE lease = 'fence_basic';
INSERT INTO fence_basic_t VALUES (30, 'unfenced');
DELETE FROM fence_basic_t WHERE id < 30;
SELECT * FROM fence_basic_t ORDER BY id;

DROP TABLE fence_basic_t;
SELECT tenure.drop_lease('fence_basic');

-- nothing is presented implicitly, not even in the session of a
-- session-bound holder (a pooled connection lends its session to others)
SELECT tenure.create_lease('fence_basic_sb', ttl => '5 min');
CREATE TABLE fence_basic_sb_t (id int);
SELECT tenure.fence_table('fence_basic_sb_t', 'fence_basic_sb');
SELECT tenure.acquire('fence_basic_sb', 'writer-s', session_bound => true) AS esb \gset
SHOW tenure.tokens;
INSERT INTO fence_basic_sb_t VALUES (1);
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT tenure.present('fence_basic_sb', :esb, true);
INSERT INTO fence_basic_sb_t VALUES (2);
COMMIT;
SELECT * FROM fence_basic_sb_t;
SELECT tenure.release('fence_basic_sb', 'writer-s');
SELECT tenure.unfence_table('fence_basic_sb_t');
DROP TABLE fence_basic_sb_t;
SELECT tenure.drop_lease('fence_basic_sb');
