-- A token counts only where the writing transaction presented it: no
-- value that PostgreSQL brings back (a savepoint's rollback, a function's
-- exit, a PL/pgSQL exception block, RESET, a role or database default, the
-- configuration) and no value set by a trigger ever counts.
--
-- Each restore path runs against each kind of value left in the session
-- before the transaction began: none, a stale epoch, the current epoch.
-- Every fenced INSERT below must fail with TN002; the controls at the end
-- show that an explicit presentation in the transaction still passes.
SET client_min_messages = warning;  -- the extension may exist already
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY terse
\set SHOW_CONTEXT never
SET search_path = public;

SELECT tenure.create_lease('fence_restore', ttl => '5 min', holdoff => '0');
CREATE TABLE fence_restore_t (id serial PRIMARY KEY, how text NOT NULL);
SELECT tenure.fence_table('fence_restore_t', 'fence_restore');
SELECT tenure.acquire('fence_restore', 'w') AS stale \gset
SELECT tenure.claim_epoch('fence_restore', 'w') AS cur \gset
SELECT :cur > :stale AS newer;

-- a function whose SET clause defends against a leaked token, and one
-- whose exception block touched the setting
CREATE FUNCTION fence_restore_defensive() RETURNS int
LANGUAGE sql SET tenure.tokens = '' AS 'SELECT 1';
CREATE FUNCTION fence_restore_catch() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		PERFORM set_config('tenure.tokens', '', true);
		RAISE EXCEPTION 'undo';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
END
$$;

-- every restore path, with whatever the session holds (:leak names it)
\set paths 'BEGIN; SAVEPOINT s; SET LOCAL tenure.tokens = \'\'; ROLLBACK TO s; INSERT INTO fence_restore_t (how) VALUES (\'savepoint rollback, \' || :\'leak\'); ROLLBACK; BEGIN; SELECT fence_restore_defensive() AS defended; INSERT INTO fence_restore_t (how) VALUES (\'function exit, \' || :\'leak\'); ROLLBACK; BEGIN; SELECT fence_restore_catch(); INSERT INTO fence_restore_t (how) VALUES (\'exception block, \' || :\'leak\'); ROLLBACK; BEGIN; RESET tenure.tokens; INSERT INTO fence_restore_t (how) VALUES (\'reset, \' || :\'leak\'); ROLLBACK;'

-- 1. a plain SET by an earlier transaction
\set leak 'no token'
SET tenure.tokens = '';
:paths
\set leak 'stale, plain SET'
SELECT set_config('tenure.tokens', 'fence_restore=' || :stale, false) IS NOT NULL AS left_behind;
:paths
\set leak 'current, plain SET'
SELECT set_config('tenure.tokens', 'fence_restore=' || :cur, false) IS NOT NULL AS left_behind;
:paths
RESET tenure.tokens;

-- 2. a role default, applied when the session starts and by RESET
\set leak 'stale, role default'
\set value 'fence_restore=' :stale
ALTER ROLE CURRENT_USER SET tenure.tokens = :'value';
\c
SET search_path = public;
SELECT current_setting('tenure.tokens') = :'value' AS role_default;
:paths
\set leak 'current, role default'
\set value 'fence_restore=' :cur
ALTER ROLE CURRENT_USER SET tenure.tokens = :'value';
\c
SET search_path = public;
:paths
ALTER ROLE CURRENT_USER RESET tenure.tokens;

-- 3. a database default
\set leak 'current, database default'
ALTER DATABASE :"DBNAME" SET tenure.tokens = :'value';
\c
SET search_path = public;
SELECT current_setting('tenure.tokens') = :'value' AS database_default;
:paths
ALTER DATABASE :"DBNAME" RESET tenure.tokens;

-- 4. the configuration file
\set leak 'current, configuration'
ALTER SYSTEM SET tenure.tokens = :'value';
SELECT pg_reload_conf();
\c
SET search_path = public;
SELECT current_setting('tenure.tokens') = :'value' AS configured;
:paths
ALTER SYSTEM RESET tenure.tokens;
SELECT pg_reload_conf();
\c
SET search_path = public;

-- 5. a trigger of another role: a role holding only TRIGGER privilege on
-- the fenced table adds a statement trigger that sorts before the fence
-- trigger and presents the current epoch; the write still needs its own
CREATE ROLE fence_restore_mallory;
GRANT USAGE, CREATE ON SCHEMA public TO fence_restore_mallory;
GRANT TRIGGER ON fence_restore_t TO fence_restore_mallory;
SET ROLE fence_restore_mallory;
CREATE FUNCTION fence_restore_help() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('tenure.tokens',
					   'fence_restore=' || tenure.current_epoch('fence_restore'),
					   true);
	RETURN NULL;
END
$$;
CREATE TRIGGER a_fence_restore_help BEFORE INSERT ON fence_restore_t
	FOR EACH STATEMENT EXECUTE FUNCTION fence_restore_help();
RESET ROLE;
SELECT tgname FROM pg_trigger
 WHERE tgrelid = 'fence_restore_t'::regclass AND tgname < 'tenure_fence'
 ORDER BY tgname;
INSERT INTO fence_restore_t (how) VALUES ('helped, no token');
BEGIN;
SELECT set_config('tenure.tokens', 'fence_restore=' || :stale, true) IS NOT NULL AS stale_presented;
INSERT INTO fence_restore_t (how) VALUES ('helped, stale token');
ROLLBACK;
-- nor does a trigger on another table that the transaction writes first:
-- mallory's own table, whose row trigger presents the current epoch
DROP TRIGGER a_fence_restore_help ON fence_restore_t;
SET ROLE fence_restore_mallory;
CREATE TABLE fence_restore_m (a int);
GRANT INSERT ON fence_restore_m TO PUBLIC;
CREATE TRIGGER fence_restore_m_help AFTER INSERT ON fence_restore_m
	FOR EACH ROW EXECUTE FUNCTION fence_restore_help();
RESET ROLE;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_restore=' || :stale, true) IS NOT NULL AS stale_presented;
INSERT INTO fence_restore_m VALUES (1);
SELECT current_setting('tenure.tokens') = 'fence_restore=' || :cur AS helper_ran;
INSERT INTO fence_restore_t (how) VALUES ('after the helper, stale token');
ROLLBACK;
DROP TABLE fence_restore_m;
DROP FUNCTION fence_restore_help();

-- nor can such a trigger change the fence or the lease in the writer's
-- name: pg_tenure's functions refuse to run from a trigger
SET ROLE fence_restore_mallory;
CREATE FUNCTION fence_restore_unfence() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM tenure.unfence_table('fence_restore_t');
	RETURN NULL;
END
$$;
CREATE TRIGGER z_fence_restore_unfence AFTER INSERT ON fence_restore_t
	FOR EACH STATEMENT EXECUTE FUNCTION fence_restore_unfence();
RESET ROLE;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_restore=' || :cur, true) IS NOT NULL AS presented;
INSERT INTO fence_restore_t (how) VALUES ('unfenced by a trigger');
ROLLBACK;
SELECT count(*) AS still_fenced FROM tenure.fenced WHERE tbl = 'fence_restore_t'::regclass;
DROP TRIGGER z_fence_restore_unfence ON fence_restore_t;
DROP FUNCTION fence_restore_unfence();

-- nor can it leave code to run at COMMIT, outside the trigger: a cursor
-- WITH HOLD runs its query when the transaction commits, so a trigger, or
-- any code that runs while rows are written, cannot declare one
SET ROLE fence_restore_mallory;
CREATE FUNCTION fence_restore_later() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'DECLARE fence_restore_c CURSOR WITH HOLD FOR SELECT '
		'pg_catalog.set_config(''tenure.tokens'', ''fence_restore='' || '
		'tenure.current_epoch(''fence_restore''), true)';
	RETURN NULL;
END
$$;
CREATE TRIGGER z_fence_restore_later AFTER INSERT ON fence_restore_t
	FOR EACH STATEMENT EXECUTE FUNCTION fence_restore_later();
CREATE FUNCTION fence_restore_later_default() RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE 'DECLARE fence_restore_d CURSOR WITH HOLD FOR SELECT 1';
	RETURN 1;
END
$$;
CREATE TABLE fence_restore_later_t (a int DEFAULT fence_restore_later_default());
GRANT INSERT ON fence_restore_later_t TO PUBLIC;
RESET ROLE;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_restore=' || :cur, true) IS NOT NULL AS presented;
INSERT INTO fence_restore_t (how) VALUES ('with a cursor left for COMMIT');
\echo :LAST_ERROR_SQLSTATE
COMMIT;
INSERT INTO fence_restore_later_t DEFAULT VALUES;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS written FROM fence_restore_t WHERE how = 'with a cursor left for COMMIT';
-- (a client's own holdable cursor is its own business)
BEGIN;
DECLARE fence_restore_own CURSOR WITH HOLD FOR SELECT 1 AS one;
COMMIT;
FETCH fence_restore_own;
CLOSE fence_restore_own;
DROP TRIGGER z_fence_restore_later ON fence_restore_t;
DROP TABLE fence_restore_later_t;
DROP FUNCTION fence_restore_later(), fence_restore_later_default();

-- 6. code that runs because rows are written, not because the client
-- called it: a column default, a CHECK constraint, an index expression, a
-- rule's action, COPY's defaults, a temporary table a previous client of
-- a pooled connection left behind.  Mallory's function presents the
-- current epoch in each; the stale writer's write still fails.
SET ROLE fence_restore_mallory;
CREATE FUNCTION fence_restore_present() RETURNS int
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('tenure.tokens',
					   'fence_restore=' || tenure.current_epoch('fence_restore'),
					   true);
	RETURN 1;
END
$$;
CREATE FUNCTION fence_restore_ok(int) RETURNS boolean
LANGUAGE sql AS 'SELECT fence_restore_present() = 1';
CREATE FUNCTION fence_restore_imm(int) RETURNS int
LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN fence_restore_present(); END';
CREATE TABLE fence_restore_default (a int DEFAULT fence_restore_present(), b int);
CREATE TABLE fence_restore_check (a int CHECK (fence_restore_ok(a)));
CREATE TABLE fence_restore_index (a int);
CREATE INDEX ON fence_restore_index (fence_restore_imm(a));
CREATE TABLE fence_restore_rule (a int);
CREATE RULE fence_restore_also AS ON INSERT TO fence_restore_rule
	DO ALSO SELECT fence_restore_present();
GRANT INSERT ON fence_restore_default, fence_restore_check,
	fence_restore_index, fence_restore_rule TO PUBLIC;
RESET ROLE;
\set stale_write 'SELECT set_config(\'tenure.tokens\', \'fence_restore=\' || :stale, true) IS NOT NULL AS stale_presented'
BEGIN;
:stale_write;
INSERT INTO fence_restore_default DEFAULT VALUES;
SELECT current_setting('tenure.tokens') = 'fence_restore=' || :cur AS default_ran;
INSERT INTO fence_restore_t (how) VALUES ('after a default');
ROLLBACK;
BEGIN;
:stale_write;
INSERT INTO fence_restore_check VALUES (1);
INSERT INTO fence_restore_t (how) VALUES ('after a check constraint');
ROLLBACK;
BEGIN;
:stale_write;
INSERT INTO fence_restore_index VALUES (1);
INSERT INTO fence_restore_t (how) VALUES ('after an index expression');
ROLLBACK;
BEGIN;
:stale_write;
INSERT INTO fence_restore_rule VALUES (1);
SELECT current_setting('tenure.tokens') = 'fence_restore=' || :cur AS rule_ran;
INSERT INTO fence_restore_t (how) VALUES ('after a rule');
ROLLBACK;
BEGIN;
:stale_write;
COPY fence_restore_default (b) FROM stdin;
1
\.
SELECT current_setting('tenure.tokens') = 'fence_restore=' || :cur AS copy_default_ran;
INSERT INTO fence_restore_t (how) VALUES ('after COPY');
ROLLBACK;
-- an immutable default, which the planner folds before any executor runs,
-- on her table or through her domain on the writer's own table
SET ROLE fence_restore_mallory;
CREATE TABLE fence_restore_folded (id int, a int DEFAULT fence_restore_imm(1));
GRANT INSERT ON fence_restore_folded TO PUBLIC;
CREATE DOMAIN fence_restore_dom AS int DEFAULT fence_restore_imm(1);
RESET ROLE;
CREATE TABLE fence_restore_own (id int, d fence_restore_dom);
BEGIN;
:stale_write;
INSERT INTO fence_restore_folded (id) VALUES (1);
SELECT current_setting('tenure.tokens') = 'fence_restore=' || :cur AS folded_default_ran;
INSERT INTO fence_restore_t (how) VALUES ('after a folded default');
ROLLBACK;
BEGIN;
:stale_write;
INSERT INTO fence_restore_own (id) VALUES (1);
SELECT current_setting('tenure.tokens') = 'fence_restore=' || :cur AS domain_default_ran;
INSERT INTO fence_restore_t (how) VALUES ('after a domain''s default');
ROLLBACK;
DROP TABLE fence_restore_own;
-- the same rule, run by a DO block (through SPI) or by EXPLAIN ANALYZE
BEGIN;
:stale_write;
DO $$ BEGIN INSERT INTO fence_restore_rule VALUES (1); END $$;
SELECT current_setting('tenure.tokens') = 'fence_restore=' || :cur AS rule_ran;
INSERT INTO fence_restore_t (how) VALUES ('after a rule run by DO');
ROLLBACK;
BEGIN;
:stale_write;
-- (the plan's output differs between majors: not shown)
\o /dev/null
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) INSERT INTO fence_restore_rule VALUES (1);
\o
SELECT current_setting('tenure.tokens') = 'fence_restore=' || :cur AS rule_ran;
INSERT INTO fence_restore_t (how) VALUES ('after a rule run by EXPLAIN ANALYZE');
ROLLBACK;
-- DDL that evaluates another role's code on rows: a CHECK constraint
-- validated by ALTER TABLE
SET ROLE fence_restore_mallory;
CREATE TABLE fence_restore_alter (a int);
INSERT INTO fence_restore_alter VALUES (1);
RESET ROLE;
BEGIN;
:stale_write;
SET LOCAL ROLE fence_restore_mallory;
ALTER TABLE fence_restore_alter ADD CHECK (fence_restore_ok(a));
RESET ROLE;
SELECT current_setting('tenure.tokens') = 'fence_restore=' || :cur AS check_ran;
INSERT INTO fence_restore_t (how) VALUES ('after DDL checked a constraint');
ROLLBACK;
-- a temporary table left on the connection, whose default presents
CREATE TEMP TABLE audit (a int DEFAULT length(set_config('tenure.tokens',
	'fence_restore=' || tenure.current_epoch('fence_restore'), true)));
BEGIN;
:stale_write;
INSERT INTO audit DEFAULT VALUES;
INSERT INTO fence_restore_t (how) VALUES ('after a temporary table''s default');
ROLLBACK;
DROP TABLE audit;
-- presenting in the writing statement itself does not count either:
-- present in a statement that writes nothing
BEGIN;
WITH p AS (SELECT set_config('tenure.tokens', 'fence_restore=' || :cur, true))
INSERT INTO fence_restore_t (how) SELECT 'presented by the insert itself' FROM p;
ROLLBACK;
SET ROLE fence_restore_mallory;
DROP TABLE fence_restore_default, fence_restore_check, fence_restore_index,
	fence_restore_rule, fence_restore_alter, fence_restore_folded;
DROP DOMAIN fence_restore_dom;
DROP FUNCTION fence_restore_ok(int), fence_restore_imm(int),
	fence_restore_present();
RESET ROLE;

-- nothing above was written
SELECT count(*) AS written FROM fence_restore_t;

-- controls: an explicit presentation in the transaction passes, and so
-- does a value this transaction presented and a savepoint's rollback
-- brought back; a value restored from before the transaction does not
BEGIN;
SELECT set_config('tenure.tokens', 'fence_restore=' || :cur, true) IS NOT NULL AS presented;
INSERT INTO fence_restore_t (how) VALUES ('presented');
SAVEPOINT s;
SET LOCAL tenure.tokens = '';
ROLLBACK TO s;
INSERT INTO fence_restore_t (how) VALUES ('presented, then restored within the transaction');
COMMIT;
BEGIN;
SELECT tenure.present('fence_restore', :cur, true);
INSERT INTO fence_restore_t (how) VALUES ('tenure.present');
COMMIT;
SELECT set_config('tenure.tokens', 'fence_restore=' || :cur, false) IS NOT NULL AS left_behind;
BEGIN;
SAVEPOINT s;
SET LOCAL tenure.tokens = 'fence_restore=1';
ROLLBACK TO s;
INSERT INTO fence_restore_t (how) VALUES ('restored from before the transaction');
ROLLBACK;
RESET tenure.tokens;
SELECT how FROM fence_restore_t ORDER BY id;

SELECT tenure.unfence_table('fence_restore_t');
DROP TABLE fence_restore_t;
DROP FUNCTION fence_restore_defensive(), fence_restore_catch();
REVOKE ALL ON SCHEMA public FROM fence_restore_mallory;
DROP ROLE fence_restore_mallory;
SELECT tenure.drop_lease('fence_restore');
