--
-- A trigger, rule, row security, constraint or column that a superuser put
-- on tenure.history or tenure.lease: acquire, renew, claim_epoch and
-- release work as before, and the writes of the rows apply them (pg_tenure
-- then writes by SQL statements instead of direct access, catalog.c).
-- Without them, the rows are written by direct access again, and nothing
-- of the user's fires.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;

\set SHOW_CONTEXT never
-- the test role may be named like the extension's schema ("$user" in
-- search_path): keep this file's objects in public
SET search_path = public;

\i sql/include/err.psql

SELECT tenure.create_lease('huo_job', holdoff => '0');

-- pg_temp.prepared(stmt): whether this backend has prepared a statement
-- of pg_tenure's that starts so (sql/include/prepared.psql)
\i sql/include/prepared.psql

-- by direct access: no statement of the hot path prepared
SELECT tenure.acquire('huo_job', 'z') IS NOT NULL AS acquired;
SELECT tenure.release('huo_job', 'z') AS released;
SELECT pg_temp.prepared('INSERT INTO tenure.history') AS insert_prepared,
	   pg_temp.prepared('UPDATE tenure.lease SET epoch') AS issue_prepared,
	   pg_temp.prepared('UPDATE tenure.history SET ended') AS close_prepared;

-- an audit of every row written, as an administrator would keep one; the
-- trigger runs as pg_tenure's statements do, with search_path pg_catalog
CREATE TABLE huo_audit (n serial, tbl text, op text, lease text, epoch bigint,
						holder text, end_reason text);
CREATE FUNCTION huo_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_TABLE_NAME = 'history' THEN
		INSERT INTO public.huo_audit (tbl, op, lease, epoch, holder, end_reason)
			VALUES (TG_TABLE_NAME, TG_OP, NEW.lease, NEW.epoch, NEW.holder,
					NEW.end_reason);
	ELSE
		INSERT INTO public.huo_audit (tbl, op, lease, epoch)
			VALUES (TG_TABLE_NAME, TG_OP, NEW.name, NEW.epoch);
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER huo_history AFTER INSERT OR UPDATE ON tenure.history
	FOR EACH ROW EXECUTE FUNCTION huo_note();
CREATE TRIGGER huo_lease AFTER UPDATE OF epoch ON tenure.lease
	FOR EACH ROW EXECUTE FUNCTION huo_note();

-- a tenure, its renewals, a claimed epoch and the release
SELECT tenure.acquire('huo_job', 'a') AS e1 \gset
SELECT tenure.acquire('huo_job', 'a') = :e1 AS renewal_same_epoch;
SELECT tenure.renew('huo_job', 'a') AS renewed;
SELECT tenure.claim_epoch('huo_job', 'a') AS e2 \gset
SELECT :e2 > :e1 AS claimed_greater;
SELECT tenure.release('huo_job', 'a') AS released;
-- the rows were written by the SQL statements
SELECT pg_temp.prepared('INSERT INTO tenure.history') AS insert_prepared,
	   pg_temp.prepared('UPDATE tenure.lease SET epoch') AS issue_prepared,
	   pg_temp.prepared('UPDATE tenure.history SET ended') AS close_prepared;
-- every write fired the triggers, in order: the epoch issued to the
-- lease's row, then the history's row; the claim ends the first row
SELECT tbl, op, lease, holder, end_reason,
	   CASE epoch WHEN :e1 THEN 'e1' WHEN :e2 THEN 'e2' END AS which
  FROM huo_audit ORDER BY n;
-- and the history is what the triggers saw last
SELECT h.holder, h.end_reason, h.ended IS NOT NULL AS ended,
	   (SELECT a.end_reason FROM huo_audit a
		 WHERE a.tbl = 'history' AND a.epoch = h.epoch
		 ORDER BY a.n DESC LIMIT 1) IS NOT DISTINCT FROM h.end_reason AS audited
  FROM tenure.history h
 WHERE h.lease = 'huo_job' AND h.epoch IN (:e1, :e2) ORDER BY h.epoch;

-- a trigger that changes the row it is given applies too (a BEFORE
-- trigger on the history's inserts)
CREATE FUNCTION huo_shout() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.holder := pg_catalog.upper(NEW.holder);
	RETURN NEW;
END
$$;
CREATE TRIGGER huo_shout BEFORE INSERT ON tenure.history
	FOR EACH ROW EXECUTE FUNCTION huo_shout();
SELECT tenure.acquire('huo_job', 'b') AS e3 \gset
SELECT holder FROM tenure.history WHERE lease = 'huo_job' AND epoch = :e3;
SELECT tenure.release('huo_job', 'b') AS released;
DROP TRIGGER huo_shout ON tenure.history;

-- without the triggers nothing fires, and the rows are as before, by
-- direct access again (seen from a new session, which has prepared none)
DROP TRIGGER huo_history ON tenure.history;
DROP TRIGGER huo_lease ON tenure.lease;
SELECT count(*) AS audited_before FROM huo_audit \gset
\c
SET search_path = public;
\i sql/include/err.psql
\i sql/include/prepared.psql
SELECT tenure.acquire('huo_job', 'c') AS e4 \gset
SELECT tenure.renew('huo_job', 'c') AS renewed;
SELECT tenure.release('huo_job', 'c') AS released;
SELECT count(*) - :audited_before AS audited_since FROM huo_audit;
SELECT pg_temp.prepared('INSERT INTO tenure.history') AS insert_prepared,
	   pg_temp.prepared('UPDATE tenure.lease SET epoch') AS issue_prepared,
	   pg_temp.prepared('UPDATE tenure.history SET ended') AS close_prepared;
SELECT holder, end_reason FROM tenure.history
 WHERE lease = 'huo_job' AND epoch = :e4;

-- a rule on the history's inserts
CREATE RULE huo_rule AS ON INSERT TO tenure.history
	DO ALSO INSERT INTO public.huo_audit (tbl, op, holder)
		VALUES ('rule', 'INSERT', NEW.holder);
SELECT tenure.acquire('huo_job', 'd') IS NOT NULL AS acquired;
SELECT tenure.release('huo_job', 'd') AS released;
SELECT tbl, op, holder FROM huo_audit WHERE tbl = 'rule';
DROP RULE huo_rule ON tenure.history;

-- a constraint of the user's own: an insert that breaks it fails, and so
-- does the acquire that makes it (nothing of it stays)
ALTER TABLE tenure.history ADD CONSTRAINT huo_no_mallory
	CHECK (holder <> 'mallory');
SELECT pg_temp.outcome($$SELECT tenure.acquire('huo_job', 'mallory')$$);
SELECT holder FROM tenure.leases WHERE lease = 'huo_job';
SELECT tenure.acquire('huo_job', 'e') IS NOT NULL AS acquired;
SELECT tenure.release('huo_job', 'e') AS released;
ALTER TABLE tenure.history DROP CONSTRAINT huo_no_mallory;

-- a column of the user's own, with a default: new rows get it
ALTER TABLE tenure.history ADD COLUMN huo_site text DEFAULT 'site 1';
SELECT tenure.acquire('huo_job', 'f') AS e5 \gset
SELECT tenure.release('huo_job', 'f') AS released;
SELECT holder, huo_site FROM tenure.history
 WHERE lease = 'huo_job' AND epoch = :e5;
ALTER TABLE tenure.history DROP COLUMN huo_site;

-- row security on both tables (their owner is not subject to it)
ALTER TABLE tenure.history ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenure.lease ENABLE ROW LEVEL SECURITY;
SELECT tenure.acquire('huo_job', 'g') AS e6 \gset
SELECT tenure.renew('huo_job', 'g') AS renewed;
SELECT tenure.release('huo_job', 'g') AS released;
SELECT holder, end_reason FROM tenure.history
 WHERE lease = 'huo_job' AND epoch = :e6;
ALTER TABLE tenure.history DISABLE ROW LEVEL SECURITY;
ALTER TABLE tenure.lease DISABLE ROW LEVEL SECURITY;

-- every epoch rose, each tenure was recorded once
SELECT count(*) AS tenures, count(DISTINCT epoch) AS distinct_epochs,
	   bool_and(ended IS NOT NULL) AS all_ended
  FROM tenure.history WHERE lease = 'huo_job';

SELECT tenure.drop_lease('huo_job');
DROP TABLE huo_audit;
DROP FUNCTION huo_note();
DROP FUNCTION huo_shout();
