-- A fenced commit runs its transaction's ON COMMIT actions before it
-- takes a fence lock (src/README, F11), unless a superuser's: dropping or
-- emptying a temporary table at commit could otherwise wait for another
-- session's lock while the commit holds a fence lock that other roles'
-- leases share.  Nothing is refused: the actions run, and the commit
-- goes through.  (test/isolation/specs/fence_on_commit.spec shows that
-- the waits come before the fence lock.)
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

-- fenced writes with tables ON COMMIT DROP, made every way: the tables
-- are gone after COMMIT, the rows are there
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
CREATE TEMP TABLE oc_drop (x int) ON COMMIT DROP;
CREATE TEMP TABLE oc_as ON COMMIT DROP AS SELECT 1 AS x;
DO $$ BEGIN EXECUTE 'EXPLAIN ANALYZE CREATE TEMP TABLE oc_explain ON COMMIT DROP AS SELECT 1 AS x'; END $$;
DO $$ BEGIN EXECUTE 'CREATE TEMP TABLE oc_do (x int) ON COMMIT DROP'; END $$;
INSERT INTO oc_drop VALUES (1);
ALTER TABLE oc_drop ADD PRIMARY KEY (x);
ALTER TABLE oc_as ADD FOREIGN KEY (x) REFERENCES oc_drop;
INSERT INTO fence_oc_t VALUES ('with tables ON COMMIT DROP');
COMMIT;
SELECT count(*) AS left_over FROM pg_class
 WHERE relname IN ('oc_drop', 'oc_as', 'oc_explain', 'oc_do') AND relpersistence = 't';

-- a table ON COMMIT DELETE ROWS is emptied, once the transaction used it
CREATE TEMP TABLE oc_rows (x int PRIMARY KEY) ON COMMIT DELETE ROWS;
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
INSERT INTO oc_rows VALUES (1), (2);
INSERT INTO fence_oc_t VALUES ('with a table ON COMMIT DELETE ROWS');
COMMIT;
SELECT count(*) AS rows_left FROM oc_rows;

-- a claim with both kinds publishes its epoch
BEGIN;
CREATE TEMP TABLE oc_claim (x int) ON COMMIT DROP;
INSERT INTO oc_rows VALUES (3);
SELECT tenure.claim_epoch('fence_oc', 'writer') > :e AS newer;
COMMIT;
SELECT tenure.current_epoch('fence_oc') > :e AS claimed,
       (SELECT count(*) FROM oc_rows) AS rows_left,
       to_regclass('pg_temp.oc_claim') IS NULL AS dropped;
SELECT tenure.current_epoch('fence_oc') AS e \gset

DROP TABLE oc_rows;
RESET ROLE;

-- a superuser's commit runs them where PostgreSQL does
BEGIN;
SELECT tenure.present('fence_oc', :e, true);
CREATE TEMP TABLE oc_su (x int) ON COMMIT DROP;
INSERT INTO fence_oc_t VALUES ('a superuser, with a table ON COMMIT DROP');
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
