-- Partitions and inheritance children of fenced tables: attached ones are
-- fenced with the parent, a child cannot be unfenced on its own, unrelated
-- DDL leaves other tables alone, and dropping a fenced table forgets it.
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

-- a table attached later is fenced with the parent's lease
CREATE TABLE fence_ch_loose (k int, v text);
ALTER TABLE fence_ch_p ATTACH PARTITION fence_ch_loose FOR VALUES FROM (10) TO (20);
-- and so is a sub-partition created under a new partition
CREATE TABLE fence_ch_p3 PARTITION OF fence_ch_p FOR VALUES FROM (20) TO (30) PARTITION BY RANGE (k);
CREATE TABLE fence_ch_p3a PARTITION OF fence_ch_p3 FOR VALUES FROM (20) TO (25);
-- an inheritance child too
CREATE TABLE fence_ch_i (k int);
SELECT tenure.fence_table('fence_ch_i', 'fence_children');
CREATE TABLE fence_ch_i1 () INHERITS (fence_ch_i);
SELECT tbl, lease FROM tenure.fenced WHERE lease = 'fence_children' ORDER BY tbl::text;
SELECT tgrelid::regclass AS tbl, tgenabled FROM pg_trigger
 WHERE tgname = 'tenure_fence' AND tgrelid::regclass::text LIKE 'fence_ch%' ORDER BY tgrelid::regclass::text;
INSERT INTO fence_ch_p3a VALUES (21, 'x');
INSERT INTO fence_ch_i1 VALUES (1);

-- a partition of a fenced table cannot be unfenced on its own
SELECT tenure.unfence_table('fence_ch_p1');
SELECT count(*) AS still_fenced FROM tenure.fenced WHERE tbl = 'fence_ch_p1'::regclass;

-- DDL on unrelated tables does not touch fences
CREATE TABLE fence_ch_other (k int);
ALTER TABLE fence_ch_other ADD COLUMN v text;
SELECT count(*) AS other_fenced FROM tenure.fenced WHERE tbl = 'fence_ch_other'::regclass;

-- a dropped fenced table is forgotten, and the lease can be dropped once
-- nothing it fences is left
DROP TABLE fence_ch_loose;
DROP TABLE fence_ch_i CASCADE;
SELECT tbl FROM tenure.fenced WHERE lease = 'fence_children' ORDER BY tbl::text;
SELECT tenure.unfence_table('fence_ch_p');
SELECT count(*) AS fenced_after_unfence FROM tenure.fenced WHERE lease = 'fence_children';
SELECT count(*) AS triggers_after_unfence FROM pg_trigger
 WHERE tgname = 'tenure_fence' AND tgrelid::regclass::text LIKE 'fence_ch%';
SELECT tenure.drop_lease('fence_children');
DROP TABLE fence_ch_p, fence_ch_other;
