-- Which partitions join a fenced tree without a token.  Creating a
-- partition, or attaching a table that holds no row (in it or in any of
-- its partitions, as read once the attach holds its lock, this
-- transaction's own writes included), changes no row of the tree: no
-- token, and the new table is fenced with the tree (pg_partman's
-- maintenance adds partitions so).  Every other way in or out still
-- needs the token: attaching a table with rows, INHERIT, DETACH, NO
-- INHERIT; a foreign table is refused whatever it holds.
-- (test/t/187_partman.pl runs pg_partman itself.)
SET client_min_messages = warning;  -- the extension may exist already
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY terse
SET search_path = public;

SELECT tenure.create_lease('fence_attach', ttl => '5 min');
SELECT tenure.acquire('fence_attach', 'writer') AS epoch \gset
CREATE TABLE fa_p (k int, v text) PARTITION BY RANGE (k);
CREATE TABLE fa_p0 PARTITION OF fa_p FOR VALUES FROM (0) TO (10);
CREATE TABLE fa_i (k int, v text);
SELECT tenure.fence_table('fa_p', 'fence_attach');
SELECT tenure.fence_table('fa_i', 'fence_attach');

-- no token: a new partition, and an empty table attached, with its own
-- (empty) partitions
CREATE TABLE fa_p1 PARTITION OF fa_p FOR VALUES FROM (10) TO (20);
CREATE TABLE fa_empty (k int, v text);
ALTER TABLE fa_p ATTACH PARTITION fa_empty FOR VALUES FROM (20) TO (30);
CREATE TABLE fa_sub (k int, v text) PARTITION BY RANGE (k);
CREATE TABLE fa_sub0 PARTITION OF fa_sub FOR VALUES FROM (30) TO (35);
ALTER TABLE fa_p ATTACH PARTITION fa_sub FOR VALUES FROM (30) TO (40);
SELECT tbl, lease FROM tenure.fenced WHERE tbl::text LIKE 'fa\_%' ORDER BY tbl::text;
-- and they take no write without the token
INSERT INTO fa_empty VALUES (21, 'no token');
-- (a new partition is found where it was created, not as its name is
-- looked up: here a temporary table of its name comes first)
CREATE TEMP TABLE fa_shadow (k int);
CREATE TABLE fa_shadow PARTITION OF fa_p FOR VALUES FROM (80) TO (90);
SELECT tbl, lease FROM tenure.fenced WHERE tbl = 'public.fa_shadow'::regclass;
DROP TABLE pg_temp.fa_shadow;

-- a table with a row needs the token, also when the row is in one of its
-- partitions, or was written by this same transaction
CREATE TABLE fa_full (k int, v text);
INSERT INTO fa_full VALUES (45, 'row');
ALTER TABLE fa_p ATTACH PARTITION fa_full FOR VALUES FROM (40) TO (50);
CREATE TABLE fa_deep (k int, v text) PARTITION BY RANGE (k);
CREATE TABLE fa_deep0 PARTITION OF fa_deep FOR VALUES FROM (50) TO (55);
INSERT INTO fa_deep VALUES (51, 'row');
ALTER TABLE fa_p ATTACH PARTITION fa_deep FOR VALUES FROM (50) TO (60);
BEGIN;
CREATE TABLE fa_mine (k int, v text);
INSERT INTO fa_mine VALUES (61, 'mine');
ALTER TABLE fa_p ATTACH PARTITION fa_mine FOR VALUES FROM (60) TO (70);
ROLLBACK;
BEGIN;
SELECT tenure.present('fence_attach', :epoch, true);
ALTER TABLE fa_p ATTACH PARTITION fa_full FOR VALUES FROM (40) TO (50);
COMMIT;

-- INHERIT, DETACH and NO INHERIT need the token, empty table or not
CREATE TABLE fa_i_child (k int, v text);
ALTER TABLE fa_i_child INHERIT fa_i;
ALTER TABLE fa_p DETACH PARTITION fa_empty;
BEGIN;
SELECT tenure.present('fence_attach', :epoch, true);
ALTER TABLE fa_i_child INHERIT fa_i;
COMMIT;
ALTER TABLE fa_i_child NO INHERIT fa_i;

-- a foreign table cannot be read here: it needs the token, and is then
-- refused (sql/fence_matrix.sql, section 6)
CREATE FOREIGN DATA WRAPPER fa_fdw;
CREATE SERVER fa_server FOREIGN DATA WRAPPER fa_fdw;
CREATE FOREIGN TABLE fa_f (k int, v text) SERVER fa_server;
ALTER TABLE fa_p ATTACH PARTITION fa_f FOR VALUES FROM (70) TO (80);
BEGIN;
SELECT tenure.present('fence_attach', :epoch, true);
ALTER TABLE fa_p ATTACH PARTITION fa_f FOR VALUES FROM (70) TO (80);
ROLLBACK;

SELECT tbl, lease FROM tenure.fenced WHERE tbl::text LIKE 'fa\_%' ORDER BY tbl::text;
SELECT tenure.unfence_table('fa_p');
SELECT tenure.unfence_table('fa_i');
DROP TABLE fa_p, fa_i, fa_i_child, fa_deep, fa_empty;
DROP FOREIGN TABLE fa_f;
DROP SERVER fa_server;
DROP FOREIGN DATA WRAPPER fa_fdw;
SELECT tenure.drop_lease('fence_attach');
