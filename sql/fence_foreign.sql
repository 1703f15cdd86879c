-- One role's fence never stops another role's commands on its own
-- objects: a fenced table may use only types, collations and functions
-- that its owner (or a superuser) owns, and never pg_tenure's own objects.
-- A command of another role on such an object could otherwise change the
-- fenced rows (DROP ... CASCADE drops a column, ALTER TYPE ... ADD
-- ATTRIBUTE changes every value) and the fence would refuse it.  The one
-- way in is a privilege the object's owner granted: a foreign key needs
-- REFERENCES, and the refusal then names the fence.
SET client_min_messages = warning;  -- the extension may exist already
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET search_path = public;

CREATE ROLE fence_foreign_bob;
CREATE ROLE fence_foreign_mallory;
GRANT USAGE, CREATE ON SCHEMA public TO fence_foreign_bob, fence_foreign_mallory;
GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text)
	TO fence_foreign_mallory;

-- bob's objects
SET ROLE fence_foreign_bob;
CREATE TABLE fence_foreign_b (id int PRIMARY KEY, note text);
CREATE TYPE fence_foreign_pair AS (a int, b int);
CREATE DOMAIN fence_foreign_pos AS int CHECK (VALUE > 0);
CREATE COLLATION fence_foreign_coll (provider = libc, locale = 'C');
CREATE FUNCTION fence_foreign_twice(int) RETURNS int
	LANGUAGE sql IMMUTABLE AS 'SELECT $1 * 2';
CREATE FUNCTION fence_foreign_twice_plus(int, int) RETURNS int
	LANGUAGE sql IMMUTABLE AS 'SELECT $1 * 2 + $2';
RESET ROLE;

-- mallory fences tables of her own with a lease nobody holds
SET ROLE fence_foreign_mallory;
SELECT tenure.create_lease('fence_foreign', ttl => '5 min', holdoff => '0');
CREATE TABLE fence_foreign_rowtype (id int, b fence_foreign_b);
SELECT tenure.fence_table('fence_foreign_rowtype', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE fence_foreign_array (id int, p fence_foreign_pair[]);
SELECT tenure.fence_table('fence_foreign_array', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE fence_foreign_domain (id int, n fence_foreign_pos);
SELECT tenure.fence_table('fence_foreign_domain', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE fence_foreign_coll_t (id int, s text COLLATE fence_foreign_coll);
SELECT tenure.fence_table('fence_foreign_coll_t', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE fence_foreign_gen (id int, d int GENERATED ALWAYS AS (fence_foreign_twice(id)) STORED);
SELECT tenure.fence_table('fence_foreign_gen', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
-- an operator or a text search configuration of bob's in a generated
-- column
RESET ROLE;
SET ROLE fence_foreign_bob;
CREATE OPERATOR === (leftarg = int, rightarg = int, function = fence_foreign_twice_plus);
CREATE TEXT SEARCH CONFIGURATION fence_foreign_cfg (COPY = pg_catalog.simple);
RESET ROLE;
SET ROLE fence_foreign_mallory;
CREATE TABLE fence_foreign_op (id int, g int GENERATED ALWAYS AS (id === 1) STORED);
SELECT tenure.fence_table('fence_foreign_op', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE fence_foreign_ts (t text,
	g tsvector GENERATED ALWAYS AS (to_tsvector('fence_foreign_cfg'::regconfig, t)) STORED);
SELECT tenure.fence_table('fence_foreign_ts', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
-- a type of a trusted extension that bob created: the type is the
-- bootstrap superuser's, but DROP EXTENSION is bob's
RESET ROLE;
GRANT CREATE ON DATABASE contrib_regression TO fence_foreign_bob;
SET ROLE fence_foreign_bob;
CREATE SCHEMA fence_foreign_ext;
GRANT USAGE ON SCHEMA fence_foreign_ext TO PUBLIC;
CREATE EXTENSION citext SCHEMA fence_foreign_ext;
RESET ROLE;
SET ROLE fence_foreign_mallory;
CREATE TABLE fence_foreign_ci (name fence_foreign_ext.citext);
SELECT tenure.fence_table('fence_foreign_ci', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE fence_foreign_ci;
RESET ROLE;
SET ROLE fence_foreign_bob;
DROP SCHEMA fence_foreign_ext CASCADE;
RESET ROLE;
REVOKE CREATE ON DATABASE contrib_regression FROM fence_foreign_bob;
SET ROLE fence_foreign_mallory;
-- to any depth: her own composite type with an attribute of bob's type
CREATE TYPE fence_foreign_wrap AS (inner_pair fence_foreign_pair);
CREATE TABLE fence_foreign_deep (id int, w fence_foreign_wrap);
SELECT tenure.fence_table('fence_foreign_deep', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
-- pg_tenure's own row types
CREATE TABLE fence_foreign_ours (id int, l tenure.lease, h tenure.history[]);
SELECT tenure.fence_table('fence_foreign_ours', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- pg_tenure's own tables, even for a superuser
SELECT tenure.fence_table('tenure.history', 'fence_foreign');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS fenced FROM tenure.fenced WHERE lease = 'fence_foreign';
-- so what an upgrade script runs on pg_tenure's tables always works
BEGIN;
ALTER TABLE tenure.lease ADD COLUMN fence_foreign_x int;
ALTER TABLE tenure.history ADD COLUMN fence_foreign_x int;
ALTER TABLE tenure.lease DROP COLUMN fence_foreign_x;
ROLLBACK;

-- a fence of her own types and the built-in ones is fine; adding a
-- column of bob's type to it afterwards is refused, with the current
-- epoch presented
SET ROLE fence_foreign_mallory;
CREATE TYPE fence_foreign_mine AS (x int);
CREATE TABLE fence_foreign_ok (id int, m fence_foreign_mine, t text);
SELECT tenure.fence_table('fence_foreign_ok', 'fence_foreign');
SELECT tenure.acquire('fence_foreign', 'm') AS e \gset
BEGIN;
SELECT set_config('tenure.tokens', 'fence_foreign=' || :e, true) IS NOT NULL AS presented;
ALTER TABLE fence_foreign_ok ADD COLUMN p fence_foreign_pair;
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
-- nor through her own type, changed to hold bob's
BEGIN;
SELECT set_config('tenure.tokens', 'fence_foreign=' || :e, true) IS NOT NULL AS presented;
ALTER TYPE fence_foreign_mine ADD ATTRIBUTE p fence_foreign_pair CASCADE;
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
-- nor by giving what it uses to bob (she may, as a member of his role):
-- her type, or a view whose row type a fenced column uses
RESET ROLE;
GRANT fence_foreign_bob TO fence_foreign_mallory;
SET ROLE fence_foreign_mallory;
ALTER TYPE fence_foreign_mine OWNER TO fence_foreign_bob;
\echo :LAST_ERROR_SQLSTATE
CREATE VIEW fence_foreign_v AS SELECT 1 AS one;
CREATE TABLE fence_foreign_viewtype (id int, v fence_foreign_v);
SELECT tenure.fence_table('fence_foreign_viewtype', 'fence_foreign');
ALTER VIEW fence_foreign_v OWNER TO fence_foreign_bob;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE fence_foreign_v OWNER TO fence_foreign_bob;
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.unfence_table('fence_foreign_viewtype');
DROP TABLE fence_foreign_viewtype;
DROP VIEW fence_foreign_v;
RESET ROLE;
REVOKE fence_foreign_bob FROM fence_foreign_mallory;
SET ROLE fence_foreign_mallory;
SELECT tenure.release('fence_foreign', 'm');
RESET ROLE;

-- a fence pins its lease (drop_lease is refused while it fences tables):
-- fencing by a lease needs its owner's privileges, like acquiring it
SELECT tenure.create_lease('fence_foreign_su');
SET ROLE fence_foreign_mallory;
CREATE TABLE fence_foreign_pin (id int);
\set VERBOSITY terse
SELECT tenure.fence_table('fence_foreign_pin', 'fence_foreign_su');
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
DROP TABLE fence_foreign_pin;
RESET ROLE;
SELECT tenure.drop_lease('fence_foreign_su');

-- a membership revoked after fencing (no event trigger sees it) leaves a
-- fence using bob's function; it never makes an unrelated ALTER of anybody
-- else fail
GRANT fence_foreign_mallory TO fence_foreign_bob;
SET ROLE fence_foreign_mallory;
CREATE TABLE fence_foreign_stale (x int, g int GENERATED ALWAYS AS (fence_foreign_twice(x)) STORED);
SELECT tenure.fence_table('fence_foreign_stale', 'fence_foreign');
RESET ROLE;
REVOKE fence_foreign_mallory FROM fence_foreign_bob;
CREATE FUNCTION fence_foreign_unrelated() RETURNS int LANGUAGE sql AS 'SELECT 1';
ALTER FUNCTION fence_foreign_unrelated() COST 7;
DROP FUNCTION fence_foreign_unrelated();
SET ROLE fence_foreign_mallory;
SELECT tenure.unfence_table('fence_foreign_stale');
DROP TABLE fence_foreign_stale;
RESET ROLE;

-- bob's commands on his own objects all work
SET ROLE fence_foreign_bob;
ALTER TABLE fence_foreign_b ADD COLUMN extra int;
ALTER TABLE fence_foreign_b DROP COLUMN extra;
ALTER TYPE fence_foreign_pair ADD ATTRIBUTE c int CASCADE;
DROP TYPE fence_foreign_pair CASCADE;
DROP DOMAIN fence_foreign_pos CASCADE;
DROP COLLATION fence_foreign_coll CASCADE;
DROP FUNCTION fence_foreign_twice(int) CASCADE;
DROP OPERATOR === (int, int) CASCADE;
DROP FUNCTION fence_foreign_twice_plus(int, int) CASCADE;
DROP TEXT SEARCH CONFIGURATION fence_foreign_cfg CASCADE;
DROP TABLE fence_foreign_b CASCADE;
RESET ROLE;

-- the one way in: a foreign key from mallory's fenced table to bob's
-- needs bob's REFERENCES grant, and bob's DELETE that cascades into the
-- fenced table is refused naming the fence
SET ROLE fence_foreign_bob;
CREATE TABLE fence_foreign_parent (id int PRIMARY KEY);
INSERT INTO fence_foreign_parent VALUES (1);
GRANT REFERENCES ON fence_foreign_parent TO fence_foreign_mallory;
RESET ROLE;
SET ROLE fence_foreign_mallory;
CREATE TABLE fence_foreign_child (id int REFERENCES fence_foreign_parent ON DELETE CASCADE);
INSERT INTO fence_foreign_child VALUES (1);
SELECT tenure.fence_table('fence_foreign_child', 'fence_foreign');
RESET ROLE;
SET ROLE fence_foreign_bob;
DELETE FROM fence_foreign_parent;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- clean up
SET ROLE fence_foreign_mallory;
SELECT tenure.unfence_table('fence_foreign_ok');
SELECT tenure.unfence_table('fence_foreign_child');
DROP TABLE fence_foreign_rowtype, fence_foreign_array, fence_foreign_domain,
	fence_foreign_coll_t, fence_foreign_gen, fence_foreign_deep,
	fence_foreign_ours, fence_foreign_ok, fence_foreign_child,
	fence_foreign_op, fence_foreign_ts;
SELECT count(*) AS fenced FROM tenure.fenced WHERE lease = 'fence_foreign';
DROP TYPE fence_foreign_wrap, fence_foreign_mine;
SELECT tenure.drop_lease('fence_foreign');
RESET ROLE;
DROP TABLE fence_foreign_parent;
REVOKE ALL ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text)
	FROM fence_foreign_mallory;
REVOKE ALL ON SCHEMA public FROM fence_foreign_bob, fence_foreign_mallory;
DROP ROLE fence_foreign_bob;
DROP ROLE fence_foreign_mallory;
