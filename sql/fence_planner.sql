-- The event trigger's statements run with the planner's methods enabled
-- and JIT off, whatever the session set: a session that turns sequential
-- and bitmap scans off (costing catalog scans near 1e10) and JIT on for
-- every plan gets the same outcomes, and keeps its own settings after.
-- (bench/ddl.sh measures what those settings used to cost.)
SET client_min_messages = warning;  -- the extension may exist already
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY terse
SET search_path = public;

SELECT tenure.create_lease('fence_planner', ttl => '5 min');
SELECT tenure.acquire('fence_planner', 'writer') AS epoch \gset
CREATE TABLE fp_p (k int, v text) PARTITION BY RANGE (k);
CREATE TABLE fp_p0 PARTITION OF fp_p FOR VALUES FROM (0) TO (10);
SELECT tenure.fence_table('fp_p', 'fence_planner');

SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_nestloop = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET jit = on;
SET jit_above_cost = 0;

-- DDL the fence lets through: a new partition is fenced
CREATE TABLE fp_p1 PARTITION OF fp_p FOR VALUES FROM (10) TO (20);
CREATE TABLE fp_other (k int);
ALTER TABLE fp_other ADD COLUMN v text;
DROP TABLE fp_other;
-- and DDL it checks: refused without the token, accepted with it
ALTER TABLE fp_p ADD COLUMN w int;
DROP TABLE fp_p1;
ALTER TABLE fp_p1 DISABLE TRIGGER ALL;
BEGIN;
SELECT tenure.present('fence_planner', :epoch, true);
ALTER TABLE fp_p ADD COLUMN w int;
DROP TABLE fp_p1;
COMMIT;
SELECT tbl, lease FROM tenure.fenced WHERE tbl::text LIKE 'fp\_%' ORDER BY tbl::text;

-- the session's settings are its own again
SELECT current_setting('enable_seqscan') AS seqscan,
	   current_setting('enable_nestloop') AS nestloop,
	   current_setting('jit') AS jit,
	   current_setting('jit_above_cost') AS jit_above_cost;
RESET ALL;

SELECT tenure.unfence_table('fp_p');
DROP TABLE fp_p;
SELECT tenure.drop_lease('fence_planner');
