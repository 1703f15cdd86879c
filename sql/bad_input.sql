--
-- Bad input to every lease function: NULL, empty and over-long lease names
-- and holders, NULL or out-of-range wait and session_bound, unknown
-- leases.  Each call is shown with its SQLSTATE, message, detail and hint,
-- and a rejected call changes nothing.
--
-- (quietly: whether an earlier file created it must not show)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;

-- Runs a statement and shows the error it raises: SQLSTATE, message,
-- detail and hint (the statement's effects are kept if it succeeds).
CREATE FUNCTION pg_temp.err(stmt text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
	hnt text;
BEGIN
	EXECUTE stmt;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg
		|| CASE WHEN det <> '' THEN E'\nDETAIL: ' || det ELSE '' END
		|| CASE WHEN hnt <> '' THEN E'\nHINT: ' || hnt ELSE '' END;
END
$$;

-- a lease held by "h", and one nobody holds
SELECT tenure.create_lease('bad_held');
SELECT tenure.create_lease('bad_free');
SELECT tenure.acquire('bad_held', 'h') AS held_epoch \gset

-- the state every rejected call below must leave alone
CREATE TEMP TABLE before AS
SELECT lease, holder, epoch, session_bound, acquired, transitions
  FROM tenure.leases WHERE lease LIKE 'bad\_%';
CREATE TEMP TABLE history_before AS
SELECT * FROM tenure.history WHERE lease LIKE 'bad\_%';

-- acquire(lease, holder, wait, session_bound)
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.acquire(NULL, 'h')$$),
	(2, $$tenure.acquire('', 'h')$$),
	(3, $$tenure.acquire(repeat('x', 64), 'h')$$),
	(4, $$tenure.acquire('bad_free', NULL)$$),
	(5, $$tenure.acquire('bad_free', '')$$),
	(6, $$tenure.acquire('bad_free', repeat('h', 128))$$),
	(7, $$tenure.acquire('bad_free', 'h', NULL)$$),
	(8, $$tenure.acquire('bad_free', 'h', '-1 s')$$),
	(9, $$tenure.acquire('bad_free', 'h', '1 mon')$$),
	(10, $$tenure.acquire('bad_free', 'h', '2 days')$$),
	(11, $$tenure.acquire('bad_free', 'h', '0', NULL)$$),
	(12, $$tenure.acquire('bad_nope', 'h')$$),
	(13, $$tenure.acquire(repeat('x', 63), 'h')$$),
	(14, $$tenure.acquire('bad_held', 'other', NULL)$$),
	(15, $$tenure.acquire('bad_held', 'other', '0', NULL)$$)
  ) AS t(n, call)
 ORDER BY n;

-- acquire_or_error(lease, holder, session_bound)
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.acquire_or_error(NULL, 'h')$$),
	(2, $$tenure.acquire_or_error('', 'h')$$),
	(3, $$tenure.acquire_or_error(repeat('x', 64), 'h')$$),
	(4, $$tenure.acquire_or_error('bad_free', NULL)$$),
	(5, $$tenure.acquire_or_error('bad_free', '')$$),
	(6, $$tenure.acquire_or_error('bad_free', repeat('h', 128))$$),
	(7, $$tenure.acquire_or_error('bad_free', 'h', NULL)$$),
	(8, $$tenure.acquire_or_error('bad_nope', 'h')$$)
  ) AS t(n, call)
 ORDER BY n;

-- renew(lease, holder)
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.renew(NULL, 'h')$$),
	(2, $$tenure.renew('', 'h')$$),
	(3, $$tenure.renew(repeat('x', 64), 'h')$$),
	(4, $$tenure.renew('bad_held', NULL)$$),
	(5, $$tenure.renew('bad_held', '')$$),
	(6, $$tenure.renew('bad_held', repeat('h', 128))$$),
	(7, $$tenure.renew('bad_nope', 'h')$$)
  ) AS t(n, call)
 ORDER BY n;

-- release(lease, holder)
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.release(NULL, 'h')$$),
	(2, $$tenure.release('', 'h')$$),
	(3, $$tenure.release(repeat('x', 64), 'h')$$),
	(4, $$tenure.release('bad_held', NULL)$$),
	(5, $$tenure.release('bad_held', '')$$),
	(6, $$tenure.release('bad_held', repeat('h', 128))$$),
	(7, $$tenure.release('bad_nope', 'h')$$)
  ) AS t(n, call)
 ORDER BY n;

-- leader_is(lease, holder): an unknown lease is simply not led
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.leader_is(NULL, 'h')$$),
	(2, $$tenure.leader_is('', 'h')$$),
	(3, $$tenure.leader_is(repeat('x', 64), 'h')$$),
	(4, $$tenure.leader_is('bad_held', NULL)$$),
	(5, $$tenure.leader_is('bad_held', '')$$),
	(6, $$tenure.leader_is('bad_held', repeat('h', 128))$$)
  ) AS t(n, call)
 ORDER BY n;
SELECT tenure.leader_is('bad_nope', 'h') AS unknown_lease_led;

-- current_epoch(lease)
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.current_epoch(NULL)$$),
	(2, $$tenure.current_epoch('')$$),
	(3, $$tenure.current_epoch(repeat('x', 64))$$),
	(4, $$tenure.current_epoch('bad_nope')$$)
  ) AS t(n, call)
 ORDER BY n;

-- claim_epoch(lease, holder)
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.claim_epoch(NULL, 'h')$$),
	(2, $$tenure.claim_epoch('', 'h')$$),
	(3, $$tenure.claim_epoch(repeat('x', 64), 'h')$$),
	(4, $$tenure.claim_epoch('bad_held', NULL)$$),
	(5, $$tenure.claim_epoch('bad_held', '')$$),
	(6, $$tenure.claim_epoch('bad_held', repeat('h', 128))$$),
	(7, $$tenure.claim_epoch('bad_nope', 'h')$$)
  ) AS t(n, call)
 ORDER BY n;

-- nothing changed: same holder, epoch and tenure; same history; the
-- holder still leads and renews; the free lease is still free
SELECT lease, holder, epoch = :held_epoch AS same_epoch, transitions
  FROM tenure.leases WHERE lease LIKE 'bad\_%' ORDER BY lease;
CREATE TEMP VIEW after AS
SELECT lease, holder, epoch, session_bound, acquired, transitions
  FROM tenure.leases WHERE lease LIKE 'bad\_%';
CREATE TEMP VIEW history_after AS
SELECT * FROM tenure.history WHERE lease LIKE 'bad\_%';
SELECT count(*) AS changed_leases FROM (
	(TABLE after EXCEPT TABLE before) UNION ALL
	(TABLE before EXCEPT TABLE after)) c;
SELECT count(*) AS changed_history FROM (
	(TABLE history_after EXCEPT TABLE history_before) UNION ALL
	(TABLE history_before EXCEPT TABLE history_after)) c;
SELECT count(*) AS leases FROM tenure.leases WHERE lease LIKE 'bad\_%';
SELECT tenure.current_epoch('bad_held') = :held_epoch AS same_epoch,
	   tenure.current_epoch('bad_free') AS free_epoch,
	   tenure.leader_is('bad_held', 'h') AS h_leads,
	   tenure.renew('bad_held', 'h') AS h_renews;

-- the longest accepted holder: 127 bytes
SELECT tenure.acquire('bad_free', repeat('h', 127)) > 0 AS acquired;
SELECT tenure.leader_is('bad_free', repeat('h', 127)) AS leads,
	   tenure.renew('bad_free', repeat('h', 127)) AS renews;
SELECT tenure.claim_epoch('bad_free', repeat('h', 127)) > 0 AS claimed;
SELECT tenure.release('bad_free', repeat('h', 127)) AS released;
SELECT length(holder), end_reason FROM tenure.history
 WHERE lease = 'bad_free' ORDER BY epoch;

-- clean up
SELECT tenure.drop_lease(lease) FROM tenure.leases
 WHERE lease LIKE 'bad\_%' ORDER BY lease;
