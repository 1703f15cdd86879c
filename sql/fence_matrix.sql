--
-- What the fence covers: every path by which a row of a fenced table can
-- change, against every shape of fence, with no token, a stale token and
-- the current one.  A fence covers a whole partition or inheritance tree,
-- by one lease; what would leave part of a tree unfenced, or let a write
-- bypass the check, is refused when it is set up.
--
-- Each write runs in its own subtransaction and shows its outcome (ok, or
-- the SQLSTATE) and then how many rows each table holds and how many of
-- them differ from the seed rows: a write the fence let through shows
-- there, whatever the statement reported.  Tokens are presented only
-- inside the writing transaction (set_config(..., true)).
--
SET client_min_messages = warning;  -- the extension may exist already
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET search_path = public;

-- pg_temp.err(stmt[, tokens]) shows the error a statement raises and
-- pg_temp.outcome(stmt[, tokens]) its SQLSTATE (sql/include/err.psql)
\i sql/include/err.psql

SELECT tenure.create_lease('fence_matrix', ttl => '10 min');
SELECT tenure.create_lease('fence_matrix_other', ttl => '10 min');
-- a stale epoch, then the current one (claimed within the same tenure)
SELECT 'fence_matrix=' || tenure.acquire('fence_matrix', 'writer') AS t_stale \gset
SELECT 'fence_matrix=' || tenure.claim_epoch('fence_matrix', 'writer') AS t_right \gset
SELECT 'fence_matrix_other=' || tenure.acquire('fence_matrix_other', 'writer') AS t_other \gset
SELECT :'t_right' || ', ' || :'t_other' AS t_both \gset
CREATE TEMP TABLE tokens (name text PRIMARY KEY, token text);
INSERT INTO tokens VALUES ('none', ''), ('stale', :'t_stale'), ('right', :'t_right');

--
-- The tables.  A partitioned tree mx_p (partitions mx_p1, mx_p2) with a
-- foreign key to the unfenced mx_ref (ON DELETE CASCADE); an inheritance
-- tree mx_i (child mx_i1); around them, unfenced: a source table, an
-- updatable view, a table whose rule writes mx_p.
--
CREATE TABLE mx_ref (id int PRIMARY KEY);
CREATE TABLE mx_p (k int PRIMARY KEY, v text NOT NULL,
				   ref int REFERENCES mx_ref ON DELETE CASCADE)
	PARTITION BY RANGE (k);
CREATE TABLE mx_p1 PARTITION OF mx_p FOR VALUES FROM (0) TO (100);
CREATE TABLE mx_p2 PARTITION OF mx_p FOR VALUES FROM (100) TO (200);
CREATE TABLE mx_i (k int PRIMARY KEY, v text NOT NULL);
CREATE TABLE mx_i1 (PRIMARY KEY (k)) INHERITS (mx_i);
CREATE TABLE mx_src (k int, v text);
INSERT INTO mx_src VALUES (50, 'new'), (150, 'new');
CREATE VIEW mx_v AS SELECT k, v FROM mx_p WHERE k < 100;
CREATE TABLE mx_r (k int, v text);
CREATE RULE mx_r_to_p AS ON INSERT TO mx_r DO INSTEAD
	INSERT INTO mx_p (k, v) VALUES (NEW.k, NEW.v);

-- the rows of every table (- for a table dropped), and how many differ
-- from the seed rows
CREATE FUNCTION pg_temp.n(rel text, cond text DEFAULT 'true', only_rel bool DEFAULT true) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	c bigint;
BEGIN
	IF to_regclass(rel) IS NULL THEN
		RETURN '-';
	END IF;
	EXECUTE format('SELECT count(*) FROM %s %s WHERE %s',
				   CASE WHEN only_rel THEN 'ONLY' ELSE '' END, rel, cond) INTO c;
	RETURN c;
END
$$;
CREATE FUNCTION pg_temp.rows() RETURNS text
LANGUAGE sql AS $$
SELECT format('p1=%s p2=%s i=%s i1=%s changed=%s',
	pg_temp.n('mx_p1'), pg_temp.n('mx_p2'), pg_temp.n('mx_i'), pg_temp.n('mx_i1'),
	pg_temp.n('mx_p', $q$v <> 'seed'$q$, false)::int
	+ pg_temp.n('mx_i', $q$v <> 'seed'$q$, false)::int)
$$;

-- put the seed rows back (with the current token, once fenced):
-- mx_p1 1, 2 (row 1 refers to mx_ref 1), mx_p2 101, mx_i 1, mx_i1 2, 3
CREATE FUNCTION pg_temp.reseed() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM set_config('tenure.tokens', (SELECT token FROM tokens WHERE name = 'right'), true);
	INSERT INTO mx_ref VALUES (1) ON CONFLICT DO NOTHING;
	DELETE FROM mx_p;
	DELETE FROM mx_i;
	INSERT INTO mx_p VALUES (1, 'seed', 1), (2, 'seed', NULL), (101, 'seed', NULL);
	INSERT INTO mx_i VALUES (1, 'seed');
	INSERT INTO mx_i1 VALUES (2, 'seed'), (3, 'seed');
END
$$;

-- Runs stmt three times, each from the seed rows: with no token, a stale
-- token and the current one.  The enclosing transaction commits with the
-- current token presented, so writes that passed are checked at COMMIT
-- too; a write noted but not allowed would make the whole call fail.
CREATE FUNCTION pg_temp.matrix(stmt text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	t record;
	outcome text;
BEGIN
	FOR t IN SELECT * FROM tokens ORDER BY array_position(ARRAY['none', 'stale', 'right'], name) LOOP
		PERFORM pg_temp.reseed();
		outcome := pg_temp.outcome(stmt, t.token);
		RETURN NEXT format('%-5s %-5s %s', t.name, outcome, pg_temp.rows());
	END LOOP;
END
$$;

SELECT pg_temp.reseed();
SELECT pg_temp.rows() AS seed;

--
-- 1. A fence on the root of a partitioned tree covers the root and every
-- partition, by one lease.
--
SELECT tenure.fence_table('mx_p', 'fence_matrix');
SELECT tbl, lease FROM tenure.fenced WHERE tbl::text LIKE 'mx_p%' ORDER BY tbl::text;
-- a statement trigger on each table (ALWAYS), and a row trigger on the
-- tables that hold rows, which fires only under session_replication_role
-- = replica (logical replication apply; see 170_logical_apply.pl)
SELECT tgrelid::regclass AS tbl, tgname, tgenabled FROM pg_trigger
 WHERE tgname LIKE 'tenure_fence%' AND tgrelid::regclass::text LIKE 'mx_p%'
 ORDER BY tgrelid::regclass::text, tgname;

-- every way to write the tree: only the current token passes
SELECT pg_temp.matrix($$INSERT INTO mx_p VALUES (3, 'new')$$) AS "INSERT through the root";
SELECT pg_temp.matrix($$INSERT INTO mx_p1 VALUES (3, 'new')$$) AS "INSERT into a partition";
SELECT pg_temp.matrix($$INSERT INTO mx_p SELECT k, v FROM mx_src$$) AS "INSERT ... SELECT";
SELECT pg_temp.matrix($$UPDATE mx_p SET v = 'upd' WHERE k = 2$$) AS "UPDATE through the root";
SELECT pg_temp.matrix($$UPDATE mx_p1 SET v = 'upd'$$) AS "UPDATE a partition";
SELECT pg_temp.matrix($$UPDATE mx_p SET k = k + 100, v = 'moved' WHERE k = 2$$) AS "UPDATE moving a row to another partition";
SELECT pg_temp.matrix($$DELETE FROM mx_p WHERE k = 101$$) AS "DELETE through the root";
SELECT pg_temp.matrix($$DELETE FROM mx_p2$$) AS "DELETE from a partition";
SELECT pg_temp.matrix($$MERGE INTO mx_p t USING mx_src s ON t.k = s.k
	WHEN MATCHED THEN UPDATE SET v = 'upd'
	WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)$$) AS "MERGE";
SELECT pg_temp.matrix($$INSERT INTO mx_p VALUES (2, 'new') ON CONFLICT (k) DO UPDATE SET v = 'upd'$$) AS "INSERT ON CONFLICT DO UPDATE";
SELECT pg_temp.matrix($$INSERT INTO mx_p VALUES (2, 'new') ON CONFLICT (k) DO NOTHING$$) AS "INSERT ON CONFLICT DO NOTHING";
SELECT pg_temp.matrix($$TRUNCATE mx_p$$) AS "TRUNCATE the root";
SELECT pg_temp.matrix($$TRUNCATE mx_p2$$) AS "TRUNCATE a partition";
SELECT pg_temp.matrix($$INSERT INTO mx_v VALUES (4, 'new')$$) AS "INSERT through an updatable view";
SELECT pg_temp.matrix($$UPDATE mx_v SET v = 'upd'$$) AS "UPDATE through an updatable view";
SELECT pg_temp.matrix($$INSERT INTO mx_r VALUES (5, 'new')$$) AS "INSERT rewritten by a rule";
SELECT pg_temp.matrix($$DELETE FROM mx_ref WHERE id = 1$$) AS "ON DELETE CASCADE from an unfenced table";
SET client_min_messages = warning;  -- (the cascade's notices)
SELECT pg_temp.matrix($$TRUNCATE mx_ref CASCADE$$) AS "TRUNCATE ... CASCADE from an unfenced table";
RESET client_min_messages;
SELECT pg_temp.matrix($$WITH w AS (INSERT INTO mx_p VALUES (6, 'new') RETURNING k) SELECT count(*) FROM w$$) AS "INSERT in a CTE";
SELECT pg_temp.matrix($$WITH d AS (DELETE FROM mx_p1 RETURNING k, v) INSERT INTO mx_src SELECT * FROM d$$) AS "DELETE in a CTE";
-- (superusers only) session_replication_role = replica does not turn
-- the fence off
SELECT pg_temp.matrix($$SET LOCAL session_replication_role = replica; INSERT INTO mx_p VALUES (7, 'new'); UPDATE mx_p SET v = 'upd' WHERE k = 1; DELETE FROM mx_p WHERE k = 2$$) AS "writes under session_replication_role = replica";

-- COPY FROM STDIN, through the root, in a transaction of its own
-- (the fence's rejections show as their SQLSTATE)
\set VERBOSITY sqlstate
SELECT pg_temp.reseed();
BEGIN;
COPY mx_p (k, v) FROM STDIN;
8	new
\.
COMMIT;
SELECT pg_temp.rows() AS "COPY, no token";
BEGIN;
SELECT set_config('tenure.tokens', :'t_stale', true) IS NOT NULL AS stale_token;
COPY mx_p (k, v) FROM STDIN;
8	new
\.
COMMIT;
SELECT pg_temp.rows() AS "COPY, stale token";
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
COPY mx_p (k, v) FROM STDIN;
8	new
108	new
\.
COMMIT;
SELECT pg_temp.rows() AS "COPY, current token";

-- savepoints: a rejected write rolled back to a savepoint leaves the rest
-- of the transaction alone; a write with the current token inside a
-- savepoint commits
SELECT pg_temp.reseed();
BEGIN;
SAVEPOINT s;
INSERT INTO mx_p VALUES (9, 'new');
ROLLBACK TO SAVEPOINT s;
INSERT INTO mx_src VALUES (9, 'unfenced write');
COMMIT;
SELECT pg_temp.rows() AS "savepoint, no token";
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
SAVEPOINT s;
INSERT INTO mx_p VALUES (9, 'new');
RELEASE SAVEPOINT s;
COMMIT;
SELECT pg_temp.rows() AS "savepoint, current token";

-- a deferred trigger that writes the tree runs at COMMIT, before the
-- commit-time check, and is checked like any write
CREATE FUNCTION mx_deferred_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO mx_p VALUES (NEW.k, 'deferred');
	RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER mx_src_deferred AFTER INSERT ON mx_src
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION mx_deferred_write();
SELECT pg_temp.reseed();
INSERT INTO mx_src VALUES (10, 'new');
SELECT pg_temp.rows() AS "deferred trigger, no token";
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
INSERT INTO mx_src VALUES (10, 'new');
COMMIT;
SELECT pg_temp.rows() AS "deferred trigger, current token";
DROP TRIGGER mx_src_deferred ON mx_src;
DROP FUNCTION mx_deferred_write();
DELETE FROM mx_src WHERE k NOT IN (50, 150);
-- (Not covered here: a fenced write made after the commit-time check ran
-- fails with TN002 too.  Only another extension's PRE_COMMIT transaction
-- callback, running after pg_tenure's, can write then; SQL cannot.
-- test/t/171_write_after_check.pl builds such an extension.)
\set VERBOSITY default

--
-- 2. The same for an inheritance tree: UPDATE and DELETE of the parent
-- change the child's rows, and are fenced like the child's own.
--
SELECT tenure.fence_table('mx_i', 'fence_matrix');
SELECT tbl, lease FROM tenure.fenced WHERE tbl::text LIKE 'mx_i%' ORDER BY tbl::text;
SELECT pg_temp.matrix($$INSERT INTO mx_i VALUES (4, 'new')$$) AS "INSERT into the parent";
SELECT pg_temp.matrix($$INSERT INTO mx_i1 VALUES (4, 'new')$$) AS "INSERT into the child";
SELECT pg_temp.matrix($$UPDATE mx_i SET v = 'upd'$$) AS "UPDATE the parent (and child)";
SELECT pg_temp.matrix($$UPDATE ONLY mx_i SET v = 'upd'$$) AS "UPDATE ONLY the parent";
SELECT pg_temp.matrix($$UPDATE mx_i1 SET v = 'upd'$$) AS "UPDATE the child";
SELECT pg_temp.matrix($$DELETE FROM mx_i WHERE k = 3$$) AS "DELETE through the parent";
SELECT pg_temp.matrix($$DELETE FROM mx_i1$$) AS "DELETE from the child";
SELECT pg_temp.matrix($$MERGE INTO mx_i1 t USING mx_src s ON t.k = s.k
	WHEN NOT MATCHED THEN INSERT VALUES (s.k, s.v)$$) AS "MERGE into the child";
SELECT pg_temp.matrix($$INSERT INTO mx_i1 VALUES (2, 'new') ON CONFLICT (k) DO UPDATE SET v = 'upd'$$) AS "INSERT ON CONFLICT DO UPDATE";
SELECT pg_temp.matrix($$TRUNCATE mx_i$$) AS "TRUNCATE the parent";
SELECT pg_temp.matrix($$WITH w AS (UPDATE mx_i SET v = 'upd' RETURNING k) SELECT count(*) FROM w$$) AS "UPDATE in a CTE";

--
-- 3. A partition or inheritance child cannot be fenced on its own: writes
-- through its parent would not fire its trigger.  Nothing is fenced by the
-- refused call.
--
CREATE TABLE mx_q (k int, v text) PARTITION BY LIST (k);
CREATE TABLE mx_q1 PARTITION OF mx_q FOR VALUES IN (1);
CREATE TABLE mx_j (k int);
CREATE TABLE mx_j1 () INHERITS (mx_j);
SELECT pg_temp.err($$SELECT tenure.fence_table('mx_q1', 'fence_matrix')$$);
SELECT pg_temp.err($$SELECT tenure.fence_table('mx_j1', 'fence_matrix')$$);
SELECT pg_temp.err($$SELECT tenure.fence_table('mx_p1', 'fence_matrix')$$);
SELECT count(*) AS fenced_q_j FROM tenure.fenced WHERE tbl::text ~ '^mx_[qj]';
SELECT count(*) AS triggers_q_j FROM pg_trigger WHERE tgrelid::regclass::text ~ '^mx_[qj]';
-- a partition or child of a fenced table cannot be unfenced on its own
SELECT pg_temp.err($$SELECT tenure.unfence_table('mx_p1')$$);
SELECT pg_temp.err($$SELECT tenure.unfence_table('mx_i1')$$);

--
-- 4. One tree, one lease: mixing leases is refused.
--
-- a table fenced by another lease cannot join a fenced tree, even with
-- the tokens of both (attaching is a write to the tree: see 9.)
CREATE TABLE mx_x (k int PRIMARY KEY, v text NOT NULL, ref int);
SELECT tenure.fence_table('mx_x', 'fence_matrix_other');
SELECT pg_temp.err($$ALTER TABLE mx_p ATTACH PARTITION mx_x FOR VALUES FROM (200) TO (300)$$, :'t_both');
CREATE TABLE mx_ix (k int PRIMARY KEY, v text NOT NULL);
SELECT tenure.fence_table('mx_ix', 'fence_matrix_other');
SELECT pg_temp.err($$ALTER TABLE mx_ix INHERIT mx_i$$, :'t_both');
-- nor be fenced again by the tree's lease, as part of a tree or alone
SELECT pg_temp.err($$SELECT tenure.fence_table('mx_x', 'fence_matrix')$$);
SELECT count(*) AS x_attached FROM pg_inherits WHERE inhrelid IN ('mx_x'::regclass, 'mx_ix'::regclass);
-- a fenced table cannot join an unfenced tree either
CREATE TABLE mx_qx (k int, v text);
SELECT tenure.fence_table('mx_qx', 'fence_matrix');
SELECT pg_temp.err($$ALTER TABLE mx_q ATTACH PARTITION mx_qx FOR VALUES IN (2)$$);
SELECT pg_temp.err($$ALTER TABLE mx_ix INHERIT mx_j$$, :'t_other');
SELECT count(*) AS attached FROM pg_inherits WHERE inhrelid IN ('mx_qx'::regclass, 'mx_ix'::regclass);
SELECT tenure.unfence_table('mx_qx');
-- the refused tables were left as they were: fenced by their own lease
SELECT pg_temp.outcome($$INSERT INTO mx_x VALUES (250, 'new')$$, '') AS no_token,
	   pg_temp.outcome($$INSERT INTO mx_x VALUES (250, 'new')$$, :'t_right') AS tree_token,
	   pg_temp.outcome($$INSERT INTO mx_x VALUES (251, 'new')$$, :'t_other') AS own_token;
SELECT k FROM mx_x;
SELECT tbl, lease FROM tenure.fenced WHERE tbl::text IN ('mx_x', 'mx_ix') ORDER BY tbl::text;
SELECT tenure.unfence_table('mx_x');
SELECT tenure.unfence_table('mx_ix');

--
-- 5. Tables created or attached later join the fence of their tree, with
-- its lease, however they are created.
--
-- attached (a write to the tree, with the current token: see 9.)
CREATE TABLE mx_p3 (k int PRIMARY KEY, v text NOT NULL, ref int);
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
ALTER TABLE mx_p ATTACH PARTITION mx_p3 FOR VALUES FROM (300) TO (400);
-- created inside CREATE SCHEMA (which event triggers do not report table
-- by table)
CREATE SCHEMA mx_s
	CREATE TABLE mx_p4 PARTITION OF public.mx_p FOR VALUES FROM (400) TO (500)
	CREATE TABLE mx_i2 () INHERITS (public.mx_i);
-- a partitioned partition, and its own partition
CREATE TABLE mx_p5 PARTITION OF mx_p FOR VALUES FROM (500) TO (600) PARTITION BY RANGE (k);
CREATE TABLE mx_p5a PARTITION OF mx_p5 FOR VALUES FROM (500) TO (550);
-- a partitioned table attached with its partitions
CREATE TABLE mx_p6 (k int PRIMARY KEY, v text NOT NULL, ref int) PARTITION BY RANGE (k);
CREATE TABLE mx_p6a PARTITION OF mx_p6 FOR VALUES FROM (600) TO (700);
ALTER TABLE mx_p ATTACH PARTITION mx_p6 FOR VALUES FROM (600) TO (700);
-- an inheritance child added by ALTER TABLE ... INHERIT
CREATE TABLE mx_i3 (k int NOT NULL, v text NOT NULL);
ALTER TABLE mx_i3 INHERIT mx_i;
COMMIT;
SELECT tbl, lease FROM tenure.fenced
 WHERE tbl::text ~ '^(mx_s\.)?mx_[pi]' ORDER BY tbl::text;
-- the new tables take no write without a token, through the root or not
\set VERBOSITY sqlstate
INSERT INTO mx_p VALUES (450, 'new');
INSERT INTO mx_s.mx_p4 VALUES (450, 'new');
INSERT INTO mx_p6a VALUES (650, 'new');
UPDATE mx_i SET v = 'upd';
INSERT INTO mx_s.mx_i2 VALUES (10, 'new');
SELECT (SELECT count(*) FROM mx_p WHERE k >= 300) AS new_partition_rows,
	   (SELECT count(*) FROM mx_i WHERE v <> 'seed') AS changed_i;

-- DETACH and NO INHERIT (writes to the tree, with the current token) leave
-- both sides fenced (unfence the detached table explicitly)
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
ALTER TABLE mx_p DETACH PARTITION mx_p3;
ALTER TABLE mx_i3 NO INHERIT mx_i;
COMMIT;
SELECT tbl, lease FROM tenure.fenced WHERE tbl::text IN ('mx_p', 'mx_p3', 'mx_i', 'mx_i3') ORDER BY tbl::text;
INSERT INTO mx_p3 VALUES (350, 'new');
\set VERBOSITY default
SELECT tenure.unfence_table('mx_p3');
SELECT tenure.unfence_table('mx_i3');
INSERT INTO mx_p3 VALUES (350, 'unfenced now');
DROP TABLE mx_p3, mx_i3;

--
-- 6. Foreign tables: writes to them are made by another server, where no
-- fence can check them.  A foreign partition or child of a fenced table is
-- refused, and a tree holding one cannot be fenced.
--
CREATE FOREIGN DATA WRAPPER mx_dummy;
CREATE SERVER mx_server FOREIGN DATA WRAPPER mx_dummy;
-- (mx_p has a primary key, which foreign partitions cannot have: a tree
-- without one)
CREATE TABLE mx_fp (k int, v text) PARTITION BY LIST (k);
CREATE TABLE mx_fp1 PARTITION OF mx_fp FOR VALUES IN (1);
SELECT tenure.fence_table('mx_fp', 'fence_matrix');
SELECT pg_temp.err($$CREATE FOREIGN TABLE mx_pf PARTITION OF mx_fp FOR VALUES IN (7) SERVER mx_server$$);
SELECT pg_temp.err($$CREATE FOREIGN TABLE mx_if () INHERITS (mx_i) SERVER mx_server$$);
CREATE FOREIGN TABLE mx_f (k int, v text) SERVER mx_server;
SELECT pg_temp.err($$ALTER TABLE mx_fp ATTACH PARTITION mx_f FOR VALUES IN (7)$$, :'t_right');
CREATE FOREIGN TABLE mx_fi (k int NOT NULL, v text NOT NULL) SERVER mx_server;
SELECT pg_temp.err($$ALTER FOREIGN TABLE mx_fi INHERIT mx_i$$);
SELECT count(*) AS foreign_attached FROM pg_inherits
 WHERE inhrelid IN ('mx_f'::regclass, 'mx_fi'::regclass);
SELECT count(*) AS foreign_tables FROM pg_class WHERE relname IN ('mx_pf', 'mx_if');
-- an unfenced tree with a foreign partition cannot be fenced
ALTER TABLE mx_q ATTACH PARTITION mx_f FOR VALUES IN (7);
SELECT pg_temp.err($$SELECT tenure.fence_table('mx_q', 'fence_matrix')$$);
SELECT count(*) AS fenced_q FROM tenure.fenced WHERE tbl::text LIKE 'mx_q%';
ALTER TABLE mx_q DETACH PARTITION mx_f;
DROP FOREIGN TABLE mx_f, mx_fi;
SELECT tenure.unfence_table('mx_fp');

--
-- 7. Multiple inheritance: a tree is fenced whole, so a table of the tree
-- cannot also inherit from a table outside it unless that table is fenced
-- by the same lease.
--
CREATE TABLE mx_other (k int NOT NULL, v text NOT NULL);
SELECT pg_temp.err($$CREATE TABLE mx_mi () INHERITS (mx_i, mx_other)$$);
SELECT pg_temp.err($$CREATE TABLE mx_mi () INHERITS (mx_other, mx_i)$$);
CREATE TABLE mx_mi (k int NOT NULL, v text NOT NULL);
ALTER TABLE mx_mi INHERIT mx_other;
SELECT pg_temp.err($$ALTER TABLE mx_mi INHERIT mx_i$$, :'t_right');
-- fence_table refuses a tree with a table that has a parent outside it
CREATE TABLE mx_other2 (k int NOT NULL, v text NOT NULL);
ALTER TABLE mx_mi INHERIT mx_other2;
SELECT pg_temp.err($$SELECT tenure.fence_table('mx_other', 'fence_matrix')$$);
SELECT count(*) AS fenced_other FROM tenure.fenced WHERE tbl::text IN ('mx_other', 'mx_other2', 'mx_mi');
DROP TABLE mx_mi, mx_other2;
-- with a second parent fenced by the same lease, the child joins both
SELECT tenure.fence_table('mx_other', 'fence_matrix');
CREATE TABLE mx_mi () INHERITS (mx_i, mx_other);
SELECT tbl, lease FROM tenure.fenced WHERE tbl::text IN ('mx_other', 'mx_mi') ORDER BY tbl::text;
-- and neither tree can be unfenced while they share it
SELECT pg_temp.err($$SELECT tenure.unfence_table('mx_other')$$);
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
DROP TABLE mx_mi;
COMMIT;
SELECT tenure.unfence_table('mx_other');

--
-- 8. The fence triggers themselves.  Disabling one (as pg_restore
-- --disable-triggers and bulk loaders do), enabling it for another
-- replication role, replacing or renaming it would leave a table fenced in
-- name and unchecked in fact: refused, for the table's owner and for
-- superusers.  A trigger created again (as a restore does) is enabled as
-- it must be.  Dropping one unfences a table fenced on its own, as
-- unfence_table would, and says so; in a tree it is refused.
--
CREATE ROLE mx_owner;
CREATE TABLE mx_t (k int, v text);
ALTER TABLE mx_t OWNER TO mx_owner;
SELECT tenure.fence_table('mx_t', 'fence_matrix');
SET ROLE mx_owner;
SELECT s AS "as the table's owner", pg_temp.err(s) AS outcome
  FROM unnest(ARRAY[
	$$ALTER TABLE mx_t DISABLE TRIGGER tenure_fence$$,
	$$ALTER TABLE mx_t DISABLE TRIGGER ALL$$,
	$$ALTER TABLE mx_t DISABLE TRIGGER USER$$,
	$$ALTER TABLE mx_t ENABLE TRIGGER ALL$$,
	$$ALTER TABLE mx_t ENABLE REPLICA TRIGGER tenure_fence$$,
	$$ALTER TABLE mx_t ENABLE ALWAYS TRIGGER tenure_fence_apply$$,
	$$ALTER TABLE mx_t DISABLE TRIGGER tenure_fence_apply$$,
	$$ALTER TRIGGER tenure_fence ON mx_t RENAME TO mx_gone$$,
	$$CREATE OR REPLACE TRIGGER tenure_fence BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON mx_t
	  FOR EACH STATEMENT EXECUTE FUNCTION tenure.fence_trigger('fence_matrix_other')$$,
	$$CREATE OR REPLACE TRIGGER tenure_fence BEFORE UPDATE OF v ON mx_t
	  FOR EACH STATEMENT EXECUTE FUNCTION tenure.fence_trigger('fence_matrix')$$,
	$$CREATE OR REPLACE TRIGGER tenure_fence BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON mx_t
	  FOR EACH STATEMENT WHEN (false) EXECUTE FUNCTION tenure.fence_trigger('fence_matrix')$$
  ]) AS s;
-- replaced by the same triggers, they are enabled as before, not ORIGIN
CREATE OR REPLACE TRIGGER tenure_fence BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON mx_t
  FOR EACH STATEMENT EXECUTE FUNCTION tenure.fence_trigger('fence_matrix');
CREATE OR REPLACE TRIGGER tenure_fence_apply AFTER INSERT OR UPDATE OR DELETE ON mx_t
  FOR EACH ROW EXECUTE FUNCTION tenure.fence_apply_trigger('fence_matrix');
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'mx_t'::regclass ORDER BY tgname;
RESET ROLE;
-- nor for a superuser, on the root or a partition of a tree; and a fence
-- trigger of a tree is not dropped table by table
SELECT s AS "as a superuser", pg_temp.err(s) AS outcome
  FROM unnest(ARRAY[
	$$ALTER TABLE mx_p DISABLE TRIGGER ALL$$,
	$$ALTER TABLE mx_p1 DISABLE TRIGGER tenure_fence$$,
	$$DROP TRIGGER tenure_fence ON mx_p1$$,
	$$DROP TRIGGER tenure_fence_apply ON mx_p1$$,
	$$DROP TRIGGER tenure_fence ON mx_p$$
  ]) AS s;
-- whatever standard_conforming_strings says
SET standard_conforming_strings = off;
CREATE TABLE mx_scs (k int);
SELECT pg_temp.err($$ALTER TABLE mx_t DISABLE TRIGGER ALL$$) ~ '^0A000' AS refused;
DROP TABLE mx_scs;
RESET standard_conforming_strings;
SET ROLE mx_owner;
\set VERBOSITY sqlstate
-- a refusal inside a savepoint cannot be kept either
BEGIN;
SAVEPOINT a;
ALTER TABLE mx_t DISABLE TRIGGER ALL;
ROLLBACK;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'mx_t'::regclass ORDER BY tgname;
-- so every write still needs the token
INSERT INTO mx_t VALUES (1, 'no token');
-- other DDL on the table goes on (DDL that changes its rows is a write:
-- see 9.)
ALTER TABLE mx_t ALTER COLUMN v SET DEFAULT 'default';
ALTER TABLE mx_t ADD CONSTRAINT mx_t_k CHECK (k > 0);
-- dropping a fence trigger unfences the table; its other fence trigger
-- refuses every write (39P01: it no longer fences the table) until it is
-- dropped too, as pg_restore --clean does
\set VERBOSITY default
DROP TRIGGER tenure_fence_apply ON mx_t;
\set VERBOSITY sqlstate
RESET ROLE;
SELECT (SELECT count(*) FROM tenure.fenced WHERE tbl = 'mx_t'::regclass) AS mx_t_fenced,
	   (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'mx_t'::regclass) AS mx_t_triggers;
INSERT INTO mx_t VALUES (1, 'no token');
-- fencing it again replaces the trigger left behind
SELECT tenure.fence_table('mx_t', 'fence_matrix');
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'mx_t'::regclass ORDER BY tgname;
-- the two drops of pg_restore --clean, without IF EXISTS
DROP TRIGGER tenure_fence ON mx_t;
DROP TRIGGER tenure_fence_apply ON mx_t;
SELECT (SELECT count(*) FROM tenure.fenced WHERE tbl = 'mx_t'::regclass) AS mx_t_fenced,
	   (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'mx_t'::regclass) AS mx_t_triggers;
-- a row trigger named like the apply trigger on a fenced partitioned
-- table would be cloned into its partitions: refused
SELECT pg_temp.err($$CREATE OR REPLACE TRIGGER tenure_fence_apply AFTER INSERT OR UPDATE OR DELETE ON mx_p
  FOR EACH ROW EXECUTE FUNCTION tenure.fence_apply_trigger('fence_matrix')$$) ~ '^0A000' AS refused;
-- what a restore in one transaction (psql -1, pg_restore -1) does: the
-- row of tenure.fenced, then each trigger, created and enabled as it was
BEGIN;
INSERT INTO tenure.fenced VALUES ('mx_t', 'fence_matrix');
CREATE TRIGGER tenure_fence BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON mx_t
  FOR EACH STATEMENT EXECUTE FUNCTION tenure.fence_trigger('fence_matrix');
ALTER TABLE mx_t ENABLE ALWAYS TRIGGER tenure_fence;
CREATE TRIGGER tenure_fence_apply AFTER INSERT OR UPDATE OR DELETE ON mx_t
  FOR EACH ROW EXECUTE FUNCTION tenure.fence_apply_trigger('fence_matrix');
ALTER TABLE mx_t ENABLE REPLICA TRIGGER tenure_fence_apply;
COMMIT;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'mx_t'::regclass ORDER BY tgname;
INSERT INTO mx_t VALUES (1, 'no token');
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
DROP TABLE mx_t;
COMMIT;
DROP ROLE mx_owner;
\set VERBOSITY default

--
-- 9. DDL that changes the rows a fenced tree holds is a write to it,
-- checked like any other, at the statement and at COMMIT: adding,
-- dropping or retyping a column (whatever the default or USING
-- expression), attaching or inheriting a table (its rows join the tree),
-- detaching or disinheriting one (its rows leave it), dropping a fenced
-- table on its own or by a cascade, and a rewrite by ALTER TYPE of a
-- typed table.  DDL that changes no row (defaults for new rows, indexes,
-- constraints) needs no token.
--
-- The roots' columns, the trees' tables, the columns of all of them and
-- how many rows the trees hold.
CREATE FUNCTION pg_temp.shape() RETURNS text
LANGUAGE sql AS $$
SELECT format('%s | p(%s) %s tables, i(%s) %s tables, %s columns, rows %s',
	pg_temp.rows(),
	(SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
	   FROM pg_attribute WHERE attrelid = 'mx_p'::regclass AND attnum > 0 AND NOT attisdropped),
	(SELECT count(*) FROM pg_partition_tree('mx_p')),
	(SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
	   FROM pg_attribute WHERE attrelid = 'mx_i'::regclass AND attnum > 0 AND NOT attisdropped),
	(SELECT count(*) FROM pg_inherits WHERE inhparent = 'mx_i'::regclass) + 1,
	(SELECT count(*) FROM pg_attribute WHERE attnum > 0 AND NOT attisdropped
	   AND attrelid IN (SELECT relid FROM pg_partition_tree('mx_p')
						UNION ALL SELECT 'mx_i'::regclass
						UNION ALL SELECT inhrelid FROM pg_inherits
								   WHERE inhparent = 'mx_i'::regclass)),
	(SELECT count(*) FROM mx_p) + (SELECT count(*) FROM mx_i))
$$;
-- Like pg_temp.matrix(), but shows the shape too, and undoes a DDL
-- statement that passed before the next run.
CREATE FUNCTION pg_temp.ddl_matrix(stmt text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	t record;
	outcome text;
	shape text;
BEGIN
	FOR t IN SELECT * FROM tokens ORDER BY array_position(ARRAY['none', 'stale', 'right'], name) LOOP
		PERFORM pg_temp.reseed();
		PERFORM set_config('tenure.tokens', t.token, true);
		BEGIN
			EXECUTE stmt;
			outcome := 'ok';
			shape := pg_temp.shape();
			RAISE SQLSTATE 'MXUND';
		EXCEPTION
			WHEN SQLSTATE 'MXUND' THEN
				NULL;
			WHEN OTHERS THEN
				outcome := SQLSTATE;
				shape := pg_temp.shape();
		END;
		RETURN NEXT format('%-5s %-5s %s', t.name, outcome, shape);
	END LOOP;
END
$$;
SELECT pg_temp.reseed();
SELECT pg_temp.shape() AS "before";
-- a table with a row, to join the trees
CREATE TABLE mx_new (k int PRIMARY KEY, v text NOT NULL, ref int);
INSERT INTO mx_new VALUES (250, 'joined');
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_p ADD COLUMN w int$$) AS "ADD COLUMN";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_p ADD COLUMN w int DEFAULT 7$$) AS "ADD COLUMN ... DEFAULT";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_p ADD COLUMN w float8 DEFAULT random()$$) AS "ADD COLUMN with a volatile DEFAULT";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_i1 ADD COLUMN w int DEFAULT 7$$) AS "ADD COLUMN to the child";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_p DROP COLUMN ref$$) AS "DROP COLUMN";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_p ALTER COLUMN ref TYPE bigint$$) AS "ALTER COLUMN ... TYPE";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_i ALTER COLUMN v TYPE varchar(20) USING v || '!'$$) AS "ALTER COLUMN ... TYPE ... USING";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_p ATTACH PARTITION mx_new FOR VALUES FROM (200) TO (300)$$) AS "ATTACH PARTITION";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_p DETACH PARTITION mx_p2$$) AS "DETACH PARTITION";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_new INHERIT mx_i$$) AS "INHERIT";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_i1 NO INHERIT mx_i$$) AS "NO INHERIT";
SELECT pg_temp.ddl_matrix($$DROP TABLE mx_p2$$) AS "DROP TABLE a partition";
SELECT pg_temp.ddl_matrix($$DROP TABLE mx_i1$$) AS "DROP TABLE the child";
SET client_min_messages = warning;  -- (the cascade's notices)
SELECT pg_temp.ddl_matrix($$DROP SCHEMA mx_s CASCADE$$) AS "DROP SCHEMA ... CASCADE of tables of the trees";
RESET client_min_messages;
-- no row changes: no token needed
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_p ALTER COLUMN v SET DEFAULT 'default'$$) AS "ALTER COLUMN ... SET DEFAULT";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_i ADD CONSTRAINT mx_i_v CHECK (v <> '')$$) AS "ADD CONSTRAINT";
SELECT pg_temp.ddl_matrix($$CREATE INDEX ON mx_p (v)$$) AS "CREATE INDEX";
SELECT pg_temp.ddl_matrix($$ALTER TABLE mx_p RENAME COLUMN ref TO ref2$$) AS "RENAME COLUMN";
-- a failed check inside a savepoint leaves the DDL undone
SELECT pg_temp.reseed();
BEGIN;
SAVEPOINT s;
\set VERBOSITY sqlstate
ALTER TABLE mx_p DROP COLUMN ref;
\set VERBOSITY default
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT pg_temp.shape() AS "DROP COLUMN rolled back";
-- the message, with its context
\set SHOW_CONTEXT errors
ALTER TABLE mx_p DROP COLUMN ref;
DROP TABLE mx_i1;
\set SHOW_CONTEXT never
-- DETACH ... CONCURRENTLY runs outside a transaction block, where no
-- token can be presented: detach in a transaction instead
\set VERBOSITY sqlstate
ALTER TABLE mx_p DETACH PARTITION mx_p2 CONCURRENTLY;
\set VERBOSITY default
SELECT pg_temp.shape() AS "after DETACH CONCURRENTLY";

-- the root of a tree, and a table fenced alone
CREATE TABLE mx_d (k int) PARTITION BY LIST (k);
CREATE TABLE mx_d1 PARTITION OF mx_d FOR VALUES IN (1);
CREATE TABLE mx_e (k int);
SELECT tenure.fence_table('mx_d', 'fence_matrix');
SELECT tenure.fence_table('mx_e', 'fence_matrix');
SELECT s AS "DROP TABLE", pg_temp.outcome(s, '') AS no_token,
	   pg_temp.outcome(s, :'t_stale') AS stale_token
  FROM unnest(ARRAY['DROP TABLE mx_d', 'DROP TABLE mx_e', 'DROP TABLE mx_d, mx_e']) AS s;
SELECT count(*) AS "tables left" FROM pg_class WHERE relname IN ('mx_d', 'mx_d1', 'mx_e');
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
DROP TABLE mx_d, mx_e;
COMMIT;
SELECT (SELECT count(*) FROM pg_class WHERE relname IN ('mx_d', 'mx_d1', 'mx_e')) AS "tables left",
	   (SELECT count(*) FROM tenure.fenced WHERE tbl::text IN ('mx_d', 'mx_d1', 'mx_e')) AS fenced;

-- ALTER TYPE ... CASCADE changes the tables of the type
CREATE TYPE mx_ty AS (k int, v text);
CREATE TABLE mx_typed OF mx_ty;
INSERT INTO mx_typed VALUES (1, 'seed');
SELECT tenure.fence_table('mx_typed', 'fence_matrix');
SELECT s AS "ALTER TYPE", pg_temp.outcome(s, '') AS no_token,
	   pg_temp.outcome(s, :'t_stale') AS stale_token
  FROM unnest(ARRAY['ALTER TYPE mx_ty ALTER ATTRIBUTE k TYPE bigint CASCADE',
					'ALTER TYPE mx_ty ADD ATTRIBUTE w int CASCADE',
					'ALTER TYPE mx_ty DROP ATTRIBUTE v CASCADE']) AS s;
SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) AS mx_typed
  FROM pg_attribute WHERE attrelid = 'mx_typed'::regclass AND attnum > 0 AND NOT attisdropped;
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
ALTER TYPE mx_ty ALTER ATTRIBUTE k TYPE bigint CASCADE;
ALTER TYPE mx_ty DROP ATTRIBUTE v CASCADE;
COMMIT;
SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) AS mx_typed
  FROM pg_attribute WHERE attrelid = 'mx_typed'::regclass AND attnum > 0 AND NOT attisdropped;
SELECT tenure.unfence_table('mx_typed');
DROP TABLE mx_typed;
DROP TYPE mx_ty;

-- values change without a rewrite when a column's type changes under
-- it: a domain, collation or type dropped with CASCADE drops the fenced
-- column; an attribute added to or dropped from a composite type or a
-- table whose row type a fenced column has (directly, in an array or
-- through a domain) changes every value of that column
CREATE DOMAIN mx_dom AS int;
CREATE TYPE mx_comp AS (x int, secret text);
CREATE DOMAIN mx_cdom AS mx_comp;
CREATE TABLE mx_row (x int, secret text);
CREATE TABLE mx_cv (k int, d mx_dom, c mx_comp, ca mx_comp[], cd mx_cdom, r mx_row);
SELECT tenure.fence_table('mx_cv', 'fence_matrix');
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
INSERT INTO mx_cv VALUES (1, 1, (1, 's'), ARRAY[(2, 's')::mx_comp], (3, 's'), (4, 's'));
COMMIT;
SET client_min_messages = warning;  -- (the cascades' notices)
SELECT s AS "changes under a fenced column", pg_temp.outcome(s, '') AS no_token,
	   pg_temp.outcome(s, :'t_stale') AS stale_token
  FROM unnest(ARRAY['DROP DOMAIN mx_dom CASCADE',
					'ALTER TYPE mx_comp DROP ATTRIBUTE secret',
					'ALTER TYPE mx_comp ADD ATTRIBUTE z int',
					'ALTER TABLE mx_row DROP COLUMN secret',
					'ALTER TABLE mx_row ADD COLUMN z int',
					'DROP TABLE mx_row CASCADE']) AS s;
RESET client_min_messages;
SELECT * FROM mx_cv;
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
ALTER TYPE mx_comp DROP ATTRIBUTE secret;
DROP DOMAIN mx_dom CASCADE;
COMMIT;
SELECT * FROM mx_cv;
SELECT tenure.unfence_table('mx_cv');
DROP TABLE mx_cv, mx_row;
DROP DOMAIN mx_cdom;
DROP TYPE mx_comp;

-- SET UNLOGGED leaves every row to be lost at the next crash (and on
-- standbys): a write; SET LOGGED is not
CREATE TABLE mx_ul (k int);
SELECT tenure.fence_table('mx_ul', 'fence_matrix');
SELECT s AS "persistence", pg_temp.outcome(s, '') AS no_token,
	   pg_temp.outcome(s, :'t_stale') AS stale_token
  FROM unnest(ARRAY['ALTER TABLE mx_ul SET UNLOGGED']) AS s;
SELECT relpersistence FROM pg_class WHERE oid = 'mx_ul'::regclass;
BEGIN;
SELECT set_config('tenure.tokens', :'t_right', true) IS NOT NULL AS current_token;
ALTER TABLE mx_ul SET UNLOGGED;
COMMIT;
ALTER TABLE mx_ul SET LOGGED;
SELECT relpersistence FROM pg_class WHERE oid = 'mx_ul'::regclass;
SELECT tenure.unfence_table('mx_ul');
DROP TABLE mx_ul;

-- temporary tables are dropped at the end of their session (or by
-- DISCARD), where nothing can check them: they cannot be fenced, nor join
-- a fenced tree
-- (the temporary schema's number masked)
CREATE TEMP TABLE mx_tmp (k int NOT NULL, v text NOT NULL);
SELECT regexp_replace(pg_temp.err($$SELECT tenure.fence_table('mx_tmp', 'fence_matrix')$$),
					  'pg_temp_\d+', 'pg_temp_N', 'g') AS err;
SELECT regexp_replace(pg_temp.err($$CREATE TEMP TABLE mx_tmp_child () INHERITS (mx_i)$$),
					  'pg_temp_\d+', 'pg_temp_N', 'g') AS err;
SELECT regexp_replace(pg_temp.err($$ALTER TABLE mx_tmp INHERIT mx_i$$, :'t_right'),
					  'pg_temp_\d+', 'pg_temp_N', 'g') AS err;
SELECT count(*) AS temp_fenced FROM tenure.fenced WHERE tbl::text LIKE '%mx_tmp%';
DROP TABLE mx_tmp;

-- rewrites that recompute values are checked when the table is rewritten
-- too, whichever command rewrites it (the check above, on ALTER TABLE,
-- turned off here by a superuser, shows it)
ALTER EVENT TRIGGER tenure_fence_alter DISABLE;
SELECT s AS "rewrite", pg_temp.outcome(s, '') AS no_token,
	   pg_temp.outcome(s, :'t_stale') AS stale_token
  FROM unnest(ARRAY['ALTER TABLE mx_p ALTER COLUMN ref TYPE bigint',
					'ALTER TABLE mx_p ADD COLUMN w float8 DEFAULT random()',
					'ALTER TABLE mx_i ALTER COLUMN v TYPE varchar(20) USING v || ''!''']) AS s;
ALTER EVENT TRIGGER tenure_fence_alter ENABLE ALWAYS;
SELECT pg_temp.shape() AS "after the rewrites";

-- unfenced, a table's DDL needs no token
SELECT tenure.unfence_table('mx_p');
ALTER TABLE mx_p ADD COLUMN w int;
ALTER TABLE mx_p DROP COLUMN w;
SELECT tenure.fence_table('mx_p', 'fence_matrix');
DROP TABLE mx_new;

--
-- Unfencing the roots unfences the trees; dropping forgets them.
--
SELECT tenure.unfence_table('mx_p');
SELECT tenure.unfence_table('mx_i');
SELECT count(*) AS fenced, (SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'tenure_fence%') AS triggers
  FROM tenure.fenced WHERE lease LIKE 'fence_matrix%';
DROP SCHEMA mx_s CASCADE;
DROP TABLE mx_p, mx_i, mx_q, mx_qx, mx_j, mx_x, mx_ix, mx_fp, mx_src, mx_r, mx_other, mx_ref CASCADE;
DROP SERVER mx_server;
DROP FOREIGN DATA WRAPPER mx_dummy;
SELECT tenure.drop_lease('fence_matrix');
SELECT tenure.drop_lease('fence_matrix_other');
