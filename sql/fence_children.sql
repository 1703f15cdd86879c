-- Partitions and inheritance children of fenced tables: a fence covers a
-- whole tree, by one lease.  Attached or created children are fenced with
-- the parent, a child can be neither fenced nor unfenced on its own,
-- unrelated DDL leaves other tables alone, and dropping a fenced table
-- forgets it.  (sql/fence_matrix.sql covers every write path and the
-- refused set-ups.)
SET client_min_messages = warning;  -- the extension may exist already
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never
SET search_path = public;

SELECT tenure.create_lease('fence_children', ttl => '5 min');
CREATE TABLE fence_ch_p (k int, v text) PARTITION BY RANGE (k);
CREATE TABLE fence_ch_p1 PARTITION OF fence_ch_p FOR VALUES FROM (0) TO (10);
SELECT tenure.fence_table('fence_ch_p', 'fence_children');

-- a table attached later (a write to the tree, with the current epoch) is
-- fenced with the parent's lease
SELECT tenure.acquire('fence_children', 'writer') AS epoch \gset
CREATE TABLE fence_ch_loose (k int, v text);
BEGIN;
SELECT tenure.present('fence_children', :epoch, true);
ALTER TABLE fence_ch_p ATTACH PARTITION fence_ch_loose FOR VALUES FROM (10) TO (20);
COMMIT;
-- and so is a sub-partition created under a new partition
CREATE TABLE fence_ch_p3 PARTITION OF fence_ch_p FOR VALUES FROM (20) TO (30) PARTITION BY RANGE (k);
CREATE TABLE fence_ch_p3a PARTITION OF fence_ch_p3 FOR VALUES FROM (20) TO (25);
-- an inheritance child too
CREATE TABLE fence_ch_i (k int);
SELECT tenure.fence_table('fence_ch_i', 'fence_children');
CREATE TABLE fence_ch_i1 () INHERITS (fence_ch_i);
SELECT tbl, lease FROM tenure.fenced WHERE lease = 'fence_children' ORDER BY tbl::text;
-- the statement trigger on every table, enabled ALWAYS; the apply row
-- trigger, enabled REPLICA, on the tables that hold rows
SELECT tgrelid::regclass AS tbl, tgname, tgenabled FROM pg_trigger
 WHERE tgname LIKE 'tenure_fence%' AND tgrelid::regclass::text LIKE 'fence_ch%'
 ORDER BY tgrelid::regclass::text, tgname;
INSERT INTO fence_ch_p3a VALUES (21, 'x');
INSERT INTO fence_ch_i1 VALUES (1);

-- a partition of a fenced table cannot be unfenced on its own
SELECT tenure.unfence_table('fence_ch_p1');
SELECT count(*) AS still_fenced FROM tenure.fenced WHERE tbl = 'fence_ch_p1'::regclass;

-- a partition or child cannot be fenced on its own, fenced parent or not:
-- writes through the parent fire only the parent's triggers
CREATE TABLE fence_ch_q (k int) PARTITION BY LIST (k);
CREATE TABLE fence_ch_q1 PARTITION OF fence_ch_q FOR VALUES IN (1);
SELECT tenure.fence_table('fence_ch_q1', 'fence_children');
SELECT tenure.fence_table('fence_ch_p1', 'fence_children');
SELECT count(*) AS q_fenced FROM tenure.fenced WHERE tbl::text LIKE 'fence_ch_q%';
-- fencing the root fences the whole tree
SELECT tenure.fence_table('fence_ch_q', 'fence_children');
SELECT tbl FROM tenure.fenced WHERE tbl::text LIKE 'fence_ch_q%' ORDER BY tbl::text;
SELECT tenure.unfence_table('fence_ch_q');
DROP TABLE fence_ch_q;

-- DDL on unrelated tables does not touch fences
CREATE TABLE fence_ch_other (k int);
ALTER TABLE fence_ch_other ADD COLUMN v text;
SELECT count(*) AS other_fenced FROM tenure.fenced WHERE tbl = 'fence_ch_other'::regclass;

-- a dropped fenced table is forgotten, and the lease can be dropped once
-- nothing it fences is left (dropping is a write to the table)
BEGIN;
SELECT tenure.present('fence_children', :epoch, true);
DROP TABLE fence_ch_loose;
DROP TABLE fence_ch_i CASCADE;
COMMIT;
SELECT tbl FROM tenure.fenced WHERE lease = 'fence_children' ORDER BY tbl::text;
SELECT tenure.unfence_table('fence_ch_p');
SELECT count(*) AS fenced_after_unfence FROM tenure.fenced WHERE lease = 'fence_children';
SELECT count(*) AS triggers_after_unfence FROM pg_trigger
 WHERE tgname LIKE 'tenure_fence%' AND tgrelid::regclass::text LIKE 'fence_ch%';
SELECT tenure.drop_lease('fence_children');
DROP TABLE fence_ch_p, fence_ch_other;
