--
-- Bad input to every lease function: NULL, empty and over-long lease names
-- and holders, NULL or out-of-range wait and session_bound, unknown
-- leases, intervals whose days and time overflow a bigint of microseconds.
-- Each call is shown with its SQLSTATE, message, detail and hint, and a
-- rejected call changes nothing.  Last, a lease whose stored ttl or
-- hold-off is out of bounds can still be read and dropped.
--
-- (quietly: whether an earlier file created it must not show)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;

-- pg_temp.err(stmt[, tokens]) shows the error a statement raises and
-- pg_temp.outcome(stmt[, tokens]) its SQLSTATE (sql/include/err.psql)
\i sql/include/err.psql

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

-- Interval arguments: ttl 1 microsecond to 1 day, hold-off, wait and
-- timeouts 0 to 1 day, converted with checked arithmetic.  "wrap" is
-- make_interval(days => 2147483647) + '-01075146363703483840 microseconds'
-- (the leading zero keeps test/mask_epochs from taking the number for an
-- epoch): its days in microseconds overflow a bigint and, wrapped around,
-- add up with its time to one second, which create_lease once accepted as
-- a ttl.  Then: days alone beyond a bigint of microseconds, days and time
-- that overflow only when added, and the most negative days.
CREATE TEMP TABLE wrap AS
SELECT make_interval(days => 2147483647) + '-01075146363703483840 microseconds' AS v;
SELECT v AS wrap FROM wrap;
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.create_lease('bad_wrap', ttl => (TABLE wrap))$$),
	(2, $$tenure.create_lease('bad_wrap', holdoff => (TABLE wrap))$$),
	(3, $$tenure.create_lease('bad_wrap', ttl => make_interval(days => 106751992))$$),
	(4, $$tenure.create_lease('bad_wrap', ttl => make_interval(days => 106751991, hours => 24))$$),
	(5, $$tenure.create_lease('bad_wrap', holdoff => make_interval(days => 106751991, hours => 24))$$),
	(6, $$tenure.create_lease('bad_wrap', ttl => '-2147483648 days')$$),
	(7, $$tenure.create_lease('bad_wrap', ttl => '-2147483648 days 2562047788:00:54.775807')$$),
	(8, $$tenure.acquire('bad_free', 'h', (TABLE wrap))$$),
	(9, $$tenure.acquire('bad_free', 'h', make_interval(days => 106751992))$$),
	(10, $$tenure.await_change('bad_held', 0, NULL, (TABLE wrap))$$),
	(11, $$tenure.await_change('bad_held', 0, NULL, '-2147483648 days')$$),
	(12, $$tenure.await_active('bad_held', 'h', (TABLE wrap))$$),
	(13, $$tenure.await_active('bad_held', 'h', make_interval(days => 106751991, hours => 24))$$)
  ) AS t(n, call)
 ORDER BY n;
SELECT count(*) AS wrap_created FROM tenure.lease WHERE name = 'bad_wrap';
-- 'infinity' and '-infinity' (PostgreSQL 17 and later) are out of bounds
SELECT current_setting('server_version_num')::int < 170000 OR
	   pg_temp.err($$SELECT tenure.create_lease('bad_wrap', ttl => 'infinity')$$)
	   LIKE '22023: argument "ttl" must be greater than zero and at most 1 day%'
	   AS infinity_rejected,
	   current_setting('server_version_num')::int < 170000 OR
	   pg_temp.err($$SELECT tenure.acquire('bad_free', 'h', '-infinity')$$)
	   LIKE '22023: argument "wait" must be between 0 and 1 day%'
	   AS minus_infinity_rejected;

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

-- Days and time add up before the bounds apply: 2 days - 24 hours and
-- -1 day + 48 hours are 1 day; 1 day + 1 microsecond is not.
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.create_lease('bad_sum1', ttl => '2 days -24 hours', holdoff => '-1 day 48 hours')$$),
	(2, $$tenure.create_lease('bad_sum2', ttl => '-1 day 48:00:00.000001')$$),
	(3, $$tenure.create_lease('bad_sum2', ttl => '1 day', holdoff => '-1 day 48:00:00.000001')$$)
  ) AS t(n, call)
 ORDER BY n;
SELECT tenure.acquire('bad_sum1', 'h') > 0 AS acquired;
SELECT lease, holder, ttl, holdoff, expires - last_renewed AS expires_after,
	   active_from > acquired + interval '23:59:59' AS active_after_a_day
  FROM tenure.leases WHERE lease LIKE 'bad\_sum%';
SELECT tenure.release('bad_sum1', 'h') AS released;

-- A ttl or hold-off out of bounds that is already stored (restored from
-- the dump of a version that accepted it, or written by hand): acquiring
-- the lease fails with XX001, saying how to repair it, and changes
-- nothing; everything else that does not need the ttl works, drop_lease
-- included, and the lease created again under its name works.
SELECT tenure.create_lease('bad_stored_ttl');
SELECT tenure.create_lease('bad_stored_holdoff');
UPDATE tenure.lease SET ttl = (TABLE wrap) WHERE name = 'bad_stored_ttl';
UPDATE tenure.lease SET holdoff = '1 mon' WHERE name = 'bad_stored_holdoff';
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.acquire('bad_stored_ttl', 'h')$$),
	(2, $$tenure.acquire_or_error('bad_stored_ttl', 'h')$$),
	(3, $$tenure.acquire('bad_stored_holdoff', 'h', '1 s', true)$$),
	(4, $$tenure.current_epoch('bad_stored_ttl')$$),
	(5, $$tenure.leader_is('bad_stored_ttl', 'h')$$),
	(6, $$tenure.renew('bad_stored_ttl', 'h')$$),
	(7, $$tenure.release('bad_stored_ttl', 'h')$$),
	(8, $$tenure.await_change('bad_stored_ttl', 0, NULL, '0')$$),
	(9, $$tenure.await_active('bad_stored_ttl', 'h', '0')$$),
	(10, $$tenure.set_preferred('bad_stored_ttl', 'h')$$)
  ) AS t(n, call)
 ORDER BY n;
SELECT lease, holder, epoch, ttl, holdoff, transitions
  FROM tenure.leases WHERE lease LIKE 'bad\_stored%' ORDER BY lease;
SELECT count(*) AS stored_history FROM tenure.history
 WHERE lease LIKE 'bad\_stored%';
SELECT tenure.current_epoch('bad_stored_ttl') AS epoch,
	   tenure.leader_is('bad_stored_ttl', 'h') AS leads,
	   tenure.renew('bad_stored_ttl', 'h') AS renews;
SELECT tenure.drop_lease('bad_stored_ttl');
SELECT tenure.drop_lease('bad_stored_holdoff');
SELECT tenure.create_lease('bad_stored_ttl', ttl => '1 s');
SELECT tenure.acquire('bad_stored_ttl', 'h') > 0 AS acquired;
SELECT lease, holder, ttl FROM tenure.leases WHERE lease LIKE 'bad\_stored%';

-- clean up
SELECT tenure.drop_lease(lease) FROM tenure.leases
 WHERE lease LIKE 'bad\_%' ORDER BY lease;
