-- Fencing and unfencing tables: who may, bad input, the lease's
-- dependents, names that need quoting, and what a fence covers.
SET client_min_messages = warning;  -- the extension may exist already
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET search_path = public;

CREATE ROLE tenure_test_fence_owner;
CREATE ROLE tenure_test_fence_other;
GRANT USAGE ON SCHEMA tenure TO tenure_test_fence_owner, tenure_test_fence_other;
GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text)
  TO tenure_test_fence_owner;

CREATE TABLE fence_admin_t (id int, who text);
ALTER TABLE fence_admin_t OWNER TO tenure_test_fence_owner;
GRANT SELECT, INSERT ON fence_admin_t TO tenure_test_fence_other;

SET ROLE tenure_test_fence_owner;
SELECT tenure.create_lease('fence_admin', ttl => '5 min');
RESET ROLE;

-- only the table's owner fences and unfences it
SET ROLE tenure_test_fence_other;
SELECT tenure.fence_table('fence_admin_t', 'fence_admin');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT count(*) AS fenced FROM tenure.fenced WHERE lease = 'fence_admin';
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'fence_admin_t'::regclass;

-- the owner (not a superuser) fences its own table with its own lease,
-- and unfences it
CREATE TABLE fence_admin_o (id int);
ALTER TABLE fence_admin_o OWNER TO tenure_test_fence_owner;
SET ROLE tenure_test_fence_owner;
SELECT tenure.fence_table('fence_admin_o', 'fence_admin');
SELECT tbl, lease FROM tenure.fenced WHERE lease = 'fence_admin';
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'fence_admin_o'::regclass;
RESET ROLE;
SET ROLE tenure_test_fence_other;
SELECT tenure.unfence_table('fence_admin_o');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE tenure_test_fence_owner;
SELECT tenure.unfence_table('fence_admin_o');
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'fence_admin_o'::regclass;
RESET ROLE;
DROP TABLE fence_admin_o;

-- a superuser may fence any table; the owner may unfence it, others not
SELECT tenure.fence_table('fence_admin_t', 'fence_admin');
SET ROLE tenure_test_fence_other;
SELECT tenure.unfence_table('fence_admin_t');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT tbl, lease FROM tenure.fenced WHERE lease = 'fence_admin';

-- the fence applies to every role that writes, and presenting a token
-- needs no privilege
SET ROLE tenure_test_fence_other;
INSERT INTO fence_admin_t VALUES (1, 'other, no token');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE tenure_test_fence_owner;
SELECT tenure.acquire('fence_admin', 'writer-1') AS e1 \gset
RESET ROLE;
SET ROLE tenure_test_fence_other;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_admin=' || :e1, true) IS NOT NULL AS presented;
INSERT INTO fence_admin_t VALUES (1, 'other, with the token');
COMMIT;
RESET ROLE;
SELECT * FROM fence_admin_t;

-- fencing twice
SELECT tenure.fence_table('fence_admin_t', 'fence_admin');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE fence_admin_u (id int);
-- unknown lease
SELECT tenure.fence_table('fence_admin_u', 'fence_admin_no_such_lease');
\echo :LAST_ERROR_SQLSTATE
-- unknown table
SELECT tenure.fence_table('fence_admin_no_such_table', 'fence_admin');
\echo :LAST_ERROR_SQLSTATE
-- not a table
CREATE VIEW fence_admin_v AS SELECT * FROM fence_admin_u;
SELECT tenure.fence_table('fence_admin_v', 'fence_admin');
\echo :LAST_ERROR_SQLSTATE
CREATE SEQUENCE fence_admin_s;
SELECT tenure.fence_table('fence_admin_s', 'fence_admin');
\echo :LAST_ERROR_SQLSTATE
DROP VIEW fence_admin_v;
DROP SEQUENCE fence_admin_s;
-- NULLs
SELECT tenure.fence_table(NULL, 'fence_admin');
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.fence_table('fence_admin_u', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.unfence_table(NULL);
\echo :LAST_ERROR_SQLSTATE
-- unfencing a table that is not fenced
SELECT tenure.unfence_table('fence_admin_u');
\echo :LAST_ERROR_SQLSTATE
-- none of these changed anything
SELECT tbl, lease FROM tenure.fenced WHERE lease LIKE 'fence_admin%' ORDER BY tbl::text;
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'fence_admin_u'::regclass;

-- one lease fences several tables; the view lists them
SELECT tenure.fence_table('fence_admin_u', 'fence_admin');
SELECT lease, holder, fences FROM tenure.leases WHERE lease = 'fence_admin';

-- a lease cannot be dropped while it fences a table
SELECT tenure.drop_lease('fence_admin');
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.unfence_table('fence_admin_u');
SELECT tenure.drop_lease('fence_admin');
\echo :LAST_ERROR_SQLSTATE
SELECT lease, holder IS NOT NULL AS held, fences FROM tenure.leases WHERE lease = 'fence_admin';
SET ROLE tenure_test_fence_owner;
SELECT tenure.unfence_table('fence_admin_t');
SELECT tenure.drop_lease('fence_admin');
RESET ROLE;
SELECT count(*) AS leases FROM tenure.leases WHERE lease = 'fence_admin';

-- names that need quoting: a schema and a table with blanks and capitals,
-- a lease with quotes
CREATE SCHEMA "Fence Admin";
CREATE TABLE "Fence Admin"."Odd ""Table""" (id int);
SELECT tenure.create_lease('fence_admin ''q''', ttl => '5 min');
SELECT tenure.fence_table('"Fence Admin"."Odd ""Table"""', 'fence_admin ''q''');
SELECT tbl, lease FROM tenure.fenced WHERE lease = 'fence_admin ''q''';
INSERT INTO "Fence Admin"."Odd ""Table""" VALUES (1);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.acquire('fence_admin ''q''', 'writer-q') AS eq \gset
BEGIN;
SELECT tenure.present('fence_admin ''q''', :eq, true);
INSERT INTO "Fence Admin"."Odd ""Table""" VALUES (2);
COMMIT;
BEGIN;
SELECT set_config('tenure.tokens', 'fence_admin ''q''=' || :eq, true) IS NOT NULL AS presented;
INSERT INTO "Fence Admin"."Odd ""Table""" VALUES (3);
COMMIT;
SELECT * FROM "Fence Admin"."Odd ""Table""" ORDER BY id;
SELECT tenure.fence_table('"Fence Admin"."Odd ""Table"""', 'fence_admin ''q''');
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.unfence_table('"Fence Admin"."Odd ""Table"""');
INSERT INTO "Fence Admin"."Odd ""Table""" VALUES (4);
DROP SCHEMA "Fence Admin" CASCADE;
SELECT tenure.drop_lease('fence_admin ''q''');

-- dropping a fenced table (a write to it, with the current epoch) removes
-- its fence: the lease lists no dangling table and can be dropped
SELECT tenure.create_lease('fence_admin_d', ttl => '5 min');
CREATE TABLE fence_admin_d_t (id int);
SELECT tenure.fence_table('fence_admin_d_t', 'fence_admin_d');
SELECT tenure.acquire('fence_admin_d', 'dropper') AS d_epoch \gset
BEGIN;
SELECT tenure.present('fence_admin_d', :d_epoch, true);
DROP TABLE fence_admin_d_t;
COMMIT;
SELECT lease, fences FROM tenure.leases WHERE lease = 'fence_admin_d';
SELECT tenure.drop_lease('fence_admin_d');
SELECT count(*) AS leases FROM tenure.leases WHERE lease = 'fence_admin_d';

-- a fenced partitioned table: writes through the parent and directly into
-- its partitions (present and future) all need the token
SELECT tenure.create_lease('fence_admin_p', ttl => '5 min');
CREATE TABLE fence_admin_p_t (k int, v text) PARTITION BY RANGE (k);
CREATE TABLE fence_admin_p_t1 PARTITION OF fence_admin_p_t FOR VALUES FROM (0) TO (100);
SELECT tenure.fence_table('fence_admin_p_t', 'fence_admin_p');
CREATE TABLE fence_admin_p_t2 PARTITION OF fence_admin_p_t FOR VALUES FROM (100) TO (200);
-- (pg_temp.outcome() shows ok or the SQLSTATE, whatever the message says)
\i sql/include/err.psql
SELECT s, pg_temp.outcome(s) AS outcome
  FROM unnest(ARRAY[
	'INSERT INTO fence_admin_p_t VALUES (1, ''parent'')',
	'INSERT INTO fence_admin_p_t1 VALUES (2, ''partition'')',
	'INSERT INTO fence_admin_p_t2 VALUES (102, ''later partition'')',
	'UPDATE fence_admin_p_t1 SET v = ''x'''
  ]) AS s;
SELECT count(*) AS rows_without_token FROM fence_admin_p_t;
SELECT tenure.acquire('fence_admin_p', 'writer-p') AS ep \gset
BEGIN;
SELECT tenure.present('fence_admin_p', :ep, true);
INSERT INTO fence_admin_p_t VALUES (3, 'parent, token'), (103, 'parent, token');
COMMIT;
SELECT s, pg_temp.outcome(s) AS outcome
  FROM unnest(ARRAY[
	'DELETE FROM fence_admin_p_t1',
	'TRUNCATE fence_admin_p_t2'
  ]) AS s;
SELECT * FROM fence_admin_p_t ORDER BY k;
SELECT tenure.unfence_table('fence_admin_p_t');
DROP TABLE fence_admin_p_t;
SELECT tenure.drop_lease('fence_admin_p');

-- The fence's trigger functions run only as the triggers fence_table()
-- makes.  Whoever may create triggers on a table can name them, and any
-- lease, in one: such a trigger refuses every write with SQLSTATE 39P01
-- and says why, rather than check nothing or use another role's lease.
GRANT CREATE ON SCHEMA public TO tenure_test_fence_other;
SET ROLE tenure_test_fence_owner;
SELECT tenure.create_lease('fence_admin_v', ttl => '5 min');
SELECT tenure.acquire('fence_admin_v', 'writer-v') AS ep_v \gset
RESET ROLE;
SET ROLE tenure_test_fence_other;
CREATE TABLE fence_admin_m (k int);
-- another role's lease, on a table of its own: its writes cannot use the
-- lease (its fence lock, its counters), with or without its epoch
CREATE TRIGGER m_fence BEFORE INSERT OR UPDATE OR DELETE ON fence_admin_m
  FOR EACH STATEMENT EXECUTE FUNCTION tenure.fence_trigger('fence_admin_v');
CREATE TRIGGER m_fence_apply AFTER INSERT ON fence_admin_m
  FOR EACH ROW EXECUTE FUNCTION tenure.fence_apply_trigger('fence_admin_v');
ALTER TABLE fence_admin_m ENABLE ALWAYS TRIGGER m_fence_apply;
RESET ROLE;
SELECT fenced_writes, fenced_writes_rejected, fenced_commits
  FROM tenure.lease_stats WHERE lease = 'fence_admin_v' \gset before_
SET ROLE tenure_test_fence_other;
INSERT INTO fence_admin_m VALUES (1);
\echo :LAST_ERROR_SQLSTATE
BEGIN;
SELECT tenure.present('fence_admin_v', :ep_v, true);
INSERT INTO fence_admin_m VALUES (1);
ROLLBACK;
ALTER TABLE fence_admin_m DISABLE TRIGGER m_fence;
BEGIN;
SELECT tenure.present('fence_admin_v', :ep_v, true);
INSERT INTO fence_admin_m VALUES (1);
ROLLBACK;
RESET ROLE;
SELECT fenced_writes = :before_fenced_writes AS writes_unchanged,
	   fenced_writes_rejected = :before_fenced_writes_rejected AS rejected_unchanged,
	   fenced_commits = :before_fenced_commits AS commits_unchanged
  FROM tenure.lease_stats WHERE lease = 'fence_admin_v';
-- a trigger naming another lease than the one that fences its table (a
-- superuser switched the event triggers off to make it)
SET ROLE tenure_test_fence_owner;
SELECT tenure.create_lease('fence_admin_w', ttl => '5 min');
SELECT tenure.acquire('fence_admin_w', 'writer-w') AS ep_w \gset
RESET ROLE;
CREATE TABLE fence_admin_w_t (k int);
ALTER TABLE fence_admin_w_t OWNER TO tenure_test_fence_owner;
SET ROLE tenure_test_fence_owner;
SELECT tenure.fence_table('fence_admin_w_t', 'fence_admin_w');
RESET ROLE;
ALTER EVENT TRIGGER tenure_fence_alter DISABLE;
ALTER EVENT TRIGGER tenure_fence_children DISABLE;
CREATE TRIGGER m_other BEFORE INSERT ON fence_admin_w_t
  FOR EACH STATEMENT EXECUTE FUNCTION tenure.fence_trigger('fence_admin_v');
BEGIN;
SELECT tenure.present('fence_admin_w', :ep_w, true);
INSERT INTO fence_admin_w_t VALUES (1);
ROLLBACK;
DROP TRIGGER m_other ON fence_admin_w_t;
ALTER EVENT TRIGGER tenure_fence_alter ENABLE ALWAYS;
ALTER EVENT TRIGGER tenure_fence_children ENABLE ALWAYS;
-- fenced by one lease, then by another, in one session: the triggers
-- follow the table's row of tenure.fenced
SET ROLE tenure_test_fence_owner;
BEGIN;
SELECT tenure.present('fence_admin_w', :ep_w, true);
INSERT INTO fence_admin_w_t VALUES (2);
COMMIT;
SELECT tenure.unfence_table('fence_admin_w_t');
SELECT tenure.fence_table('fence_admin_w_t', 'fence_admin_v');
BEGIN;
SELECT tenure.present('fence_admin_w', :ep_w, true);
INSERT INTO fence_admin_w_t VALUES (3);
ROLLBACK;
BEGIN;
SELECT tenure.present('fence_admin_v', :ep_v, true);
INSERT INTO fence_admin_w_t VALUES (4);
COMMIT;
SELECT k FROM fence_admin_w_t ORDER BY k;
SELECT tenure.unfence_table('fence_admin_w_t');
DROP TABLE fence_admin_w_t;
SELECT tenure.drop_lease('fence_admin_w');
RESET ROLE;
-- fired the wrong way, or without the lease's name
SET ROLE tenure_test_fence_other;
DROP TRIGGER m_fence ON fence_admin_m;
DROP TRIGGER m_fence_apply ON fence_admin_m;
CREATE TRIGGER m_after_stmt AFTER INSERT ON fence_admin_m
  FOR EACH STATEMENT EXECUTE FUNCTION tenure.fence_trigger('fence_admin');
CREATE TRIGGER m_before_row BEFORE UPDATE ON fence_admin_m
  FOR EACH ROW EXECUTE FUNCTION tenure.fence_apply_trigger('fence_admin');
CREATE TRIGGER m_no_arg BEFORE DELETE ON fence_admin_m
  FOR EACH STATEMENT EXECUTE FUNCTION tenure.fence_trigger();
INSERT INTO fence_admin_m VALUES (1);
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER m_after_stmt ON fence_admin_m;
INSERT INTO fence_admin_m VALUES (1);
UPDATE fence_admin_m SET k = 2;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM fence_admin_m;
\echo :LAST_ERROR_SQLSTATE
SELECT k FROM fence_admin_m;
-- (nor can SQL call them other than as a trigger)
SELECT tenure.fence_trigger();
\echo :LAST_ERROR_SQLSTATE
DROP TABLE fence_admin_m;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM tenure_test_fence_other;
SET ROLE tenure_test_fence_owner;
SELECT tenure.drop_lease('fence_admin_v');
RESET ROLE;

DROP TABLE fence_admin_t, fence_admin_u;
REVOKE EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text)
  FROM tenure_test_fence_owner;
REVOKE USAGE ON SCHEMA tenure FROM tenure_test_fence_owner, tenure_test_fence_other;
DROP ROLE tenure_test_fence_owner;
DROP ROLE tenure_test_fence_other;
