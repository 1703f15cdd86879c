-- A fenced commit that would run ON COMMIT actions after its fence check
-- is refused before it takes a fence lock (src/README, F11), unless a
-- superuser's: dropping or emptying a temporary table at commit could
-- wait for another session's lock while the commit holds a fence lock
-- that other roles' leases share.
SET client_min_messages = warning;  -- the extension may exist already
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET search_path = public;

CREATE ROLE tenure_test_oc;
GRANT USAGE ON SCHEMA tenure TO tenure_test_oc;
GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text)
  TO tenure_test_oc;
CREATE TABLE fence_oc_t (who text);
ALTER TABLE fence_oc_t OWNER TO tenure_test_oc;

SET ROLE tenure_test_oc;
SELECT tenure.create_lease('fence_oc', ttl => '5 min');
SELECT tenure.fence_table('fence_oc_t', 'fence_oc');
SELECT tenure.acquire('fence_oc', 'writer') AS e \gset

-- a fenced write in a transaction that created a table ON COMMIT DROP
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
CREATE TEMP TABLE oc_drop (x int) ON COMMIT DROP;
INSERT INTO fence_oc_t VALUES ('with ON COMMIT DROP');
COMMIT;

-- CREATE TABLE AS, and a statement run by PL/pgSQL, count too
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
CREATE TEMP TABLE oc_as ON COMMIT DROP AS SELECT 1 AS x;
INSERT INTO fence_oc_t VALUES ('with CREATE TABLE AS ON COMMIT DROP');
COMMIT;
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
DO $$ BEGIN EXECUTE 'CREATE TEMP TABLE oc_do (x int) ON COMMIT DROP'; END $$;
INSERT INTO fence_oc_t VALUES ('with EXECUTE ... ON COMMIT DROP');
COMMIT;

-- so does a table created in a savepoint that was rolled back
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
SAVEPOINT s;
CREATE TEMP TABLE oc_sp (x int) ON COMMIT DROP;
ROLLBACK TO SAVEPOINT s;
INSERT INTO fence_oc_t VALUES ('after a rolled back ON COMMIT DROP');
COMMIT;

-- a claim (a new epoch) is refused the same way, and claims nothing
BEGIN;
CREATE TEMP TABLE oc_claim (x int) ON COMMIT DROP;
SELECT tenure.claim_epoch('fence_oc', 'writer') > :e AS newer;
COMMIT;
SELECT tenure.current_epoch('fence_oc') = :e AS epoch_unchanged;

-- ON COMMIT PRESERVE ROWS, and temporary tables without a fenced write,
-- are fine
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
CREATE TEMP TABLE oc_keep (x int) ON COMMIT PRESERVE ROWS;
INSERT INTO oc_keep VALUES (1);
INSERT INTO fence_oc_t VALUES ('with ON COMMIT PRESERVE ROWS');
COMMIT;
BEGIN;
CREATE TEMP TABLE oc_alone (x int) ON COMMIT DROP;
COMMIT;

-- once the session has a table ON COMMIT DELETE ROWS, a fenced commit is
-- refused if its transaction used a temporary object (COMMIT empties the
-- table then), and accepted otherwise
CREATE TEMP TABLE oc_rows (x int) ON COMMIT DELETE ROWS;
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
INSERT INTO fence_oc_t VALUES ('without a temporary object');
COMMIT;
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
INSERT INTO oc_keep VALUES (2);
INSERT INTO fence_oc_t VALUES ('with a temporary object');
COMMIT;
-- (also once the table is gone)
DROP TABLE oc_rows;
BEGIN;
SELECT tenure.claim_epoch('fence_oc', 'writer') > :e AS newer;
SELECT count(*) FROM oc_keep;
COMMIT;
SELECT tenure.current_epoch('fence_oc') = :e AS epoch_unchanged;
DROP TABLE oc_keep;
RESET ROLE;

-- DISCARD ALL (a pooler's reset) drops every temporary table: the
-- session's tables ON COMMIT DELETE ROWS are forgotten; DISCARD TEMP,
-- which a rollback can undo, does not forget them
CREATE TEMP TABLE oc_rows (x int) ON COMMIT DELETE ROWS;
DISCARD TEMP;
SET ROLE tenure_test_oc;
CREATE TEMP TABLE oc_used (x int);
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
INSERT INTO oc_used VALUES (1);
INSERT INTO fence_oc_t VALUES ('with a temporary object, after DISCARD TEMP');
COMMIT;
DROP TABLE oc_used;
RESET ROLE;
DISCARD ALL;
SET search_path = public;
SET ROLE tenure_test_oc;
CREATE TEMP TABLE oc_used (x int);
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
INSERT INTO oc_used VALUES (1);
INSERT INTO fence_oc_t VALUES ('with a temporary object, after DISCARD ALL');
COMMIT;
DROP TABLE oc_used;
RESET ROLE;

-- a superuser's commit is not refused
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
CREATE TEMP TABLE oc_su (x int) ON COMMIT DROP;
INSERT INTO fence_oc_t VALUES ('a superuser, with ON COMMIT DROP');
COMMIT;

SELECT who FROM fence_oc_t ORDER BY who;

SELECT tenure.unfence_table('fence_oc_t');
SET ROLE tenure_test_oc;
SELECT tenure.release('fence_oc', 'writer');
SELECT tenure.drop_lease('fence_oc');
RESET ROLE;
DROP TABLE fence_oc_t;
REVOKE EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text)
  FROM tenure_test_oc;
REVOKE USAGE ON SCHEMA tenure FROM tenure_test_oc;
DROP ROLE tenure_test_oc;
