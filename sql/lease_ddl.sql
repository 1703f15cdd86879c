--
-- create_lease and drop_lease: defaults, settings, bad input, and what a
-- drop does to a held lease and to the epochs of a name created again.
--
-- (quietly: whether an earlier file created it must not show)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;

-- pg_temp.err(stmt[, tokens]) shows the error a statement raises and
-- pg_temp.outcome(stmt[, tokens]) its SQLSTATE (sql/include/err.psql)
\i sql/include/err.psql

--
-- Defaults: ttl 15 s, automatic hold-off (NULL), no lock_key, epoch 0,
-- owned by the creating role, nobody holding it.
--
SELECT tenure.create_lease('ddl_defaults');
SELECT lease, holder, epoch, session_bound, ttl, holdoff, acquired,
	   last_renewed, expires, active_from, holder_pid, lock_key, lock_held,
	   transitions, owner = current_user::regrole AS owned_by_creator
  FROM tenure.leases WHERE lease = 'ddl_defaults';
SELECT tenure.current_epoch('ddl_defaults');

-- every setting given, by name and by position, including the largest
-- accepted values (1 day) and a zero hold-off
SELECT tenure.create_lease('ddl_named', holdoff => '0', lock_key => 4711,
						   ttl => '2 min');
SELECT tenure.create_lease('ddl_positional', '1 day', '24 hours', -4711);
SELECT tenure.create_lease('ddl_small', '1 ms', '0.5 days');
-- the longest accepted name: 63 bytes
SELECT tenure.create_lease(repeat('n', 63));
SELECT lease, ttl, holdoff, lock_key, epoch, holder
  FROM tenure.leases
 WHERE lease LIKE 'ddl\_%' OR lease = repeat('n', 63)
 ORDER BY lease;

--
-- Bad input.  Nothing of a rejected call may remain.
--
SELECT count(*) AS leases_before FROM tenure.lease \gset
SELECT count(*) AS history_before FROM tenure.history \gset
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.create_lease(NULL)$$),
	(2, $$tenure.create_lease('')$$),
	(3, $$tenure.create_lease(repeat('n', 64))$$),
	(4, $$tenure.create_lease('ddl_defaults')$$),
	(5, $$tenure.create_lease('ddl_other_key', lock_key => 4711)$$),
	(6, $$tenure.create_lease('ddl_bad', ttl => NULL)$$),
	(7, $$tenure.create_lease('ddl_bad', ttl => '0')$$),
	(8, $$tenure.create_lease('ddl_bad', ttl => '-1 s')$$),
	(9, $$tenure.create_lease('ddl_bad', ttl => '-1 day')$$),
	(10, $$tenure.create_lease('ddl_bad', ttl => '1 day 0.001 s')$$),
	(11, $$tenure.create_lease('ddl_bad', ttl => '25 hours')$$),
	(12, $$tenure.create_lease('ddl_bad', ttl => '2 days')$$),
	(13, $$tenure.create_lease('ddl_bad', ttl => '1 mon')$$),
	(14, $$tenure.create_lease('ddl_bad', ttl => '1 year')$$),
	(15, $$tenure.create_lease('ddl_bad', holdoff => '-1 s')$$),
	(16, $$tenure.create_lease('ddl_bad', holdoff => '-0.000001 s')$$),
	(17, $$tenure.create_lease('ddl_bad', holdoff => '1 day 1 s')$$),
	(18, $$tenure.create_lease('ddl_bad', holdoff => '1 mon')$$),
	(19, $$tenure.drop_lease(NULL)$$),
	(20, $$tenure.drop_lease('')$$),
	(21, $$tenure.drop_lease(repeat('n', 64))$$),
	(22, $$tenure.drop_lease('ddl_nope')$$),
	(23, $$tenure.create_lease('ddl,comma')$$),
	(24, $$tenure.create_lease('ddl=equals')$$),
	(25, $$tenure.create_lease(' ddl_blank')$$),
	(26, $$tenure.create_lease('ddl_blank ')$$),
	(27, $$tenure.create_lease(E'ddl_blank\n')$$),
	(28, $$tenure.acquire(' ddl_defaults', 'h')$$)
  ) AS t(n, call)
 ORDER BY n;
SELECT count(*) = :leases_before AS leases_unchanged FROM tenure.lease;
SELECT count(*) = :history_before AS history_unchanged FROM tenure.history;
SELECT count(*) AS bad_leases FROM tenure.leases WHERE lease IN ('ddl_bad', 'ddl_other_key');

--
-- Dropping a held lease ends its tenure ('dropped' in the history); the
-- lease is gone for every function.
--
SELECT tenure.create_lease('ddl_held');
SELECT tenure.acquire('ddl_held', 'h1') AS e1 \gset
SELECT tenure.leader_is('ddl_held', 'h1');
SELECT expires AS e1_expires FROM tenure.leases WHERE lease = 'ddl_held' \gset
-- a drop that rolls back changes nothing
BEGIN;
SELECT tenure.drop_lease('ddl_held');
SELECT count(*) FROM tenure.leases WHERE lease = 'ddl_held';
ROLLBACK;
SELECT holder, epoch = :e1 AS same_epoch FROM tenure.leases WHERE lease = 'ddl_held';
SELECT tenure.leader_is('ddl_held', 'h1');

SELECT tenure.drop_lease('ddl_held');
SELECT count(*) FROM tenure.leases WHERE lease = 'ddl_held';
SELECT tenure.leader_is('ddl_held', 'h1');
SELECT holder, epoch = :e1 AS same_epoch, ended IS NOT NULL AS ended, end_reason
  FROM tenure.history WHERE lease = 'ddl_held';
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.acquire('ddl_held', 'h1')$$),
	(2, $$tenure.current_epoch('ddl_held')$$),
	(3, $$tenure.drop_lease('ddl_held')$$)
  ) AS t(n, call)
 ORDER BY n;

--
-- Created again under the same name, the lease continues its epochs: the
-- old lease's tokens never become valid again.
--
SELECT tenure.create_lease('ddl_held');
SELECT tenure.current_epoch('ddl_held') = :e1 AS continues_at_old_epoch;
SELECT holder FROM tenure.leases WHERE lease = 'ddl_held';
SELECT tenure.acquire('ddl_held', 'h2') AS e2 \gset
SELECT :e2 > :e1 AS new_epoch_greater;
-- the dropped tenure's holder did not release it: the successor waits
-- out its hold-off, as after any other end but a release (the two times
-- are shown converted from the monotonic clock at different moments:
-- allow for that)
SELECT active_from > :'e1_expires'::timestamptz - interval '10 ms' AS waits_out_dropped_tenure
  FROM tenure.leases WHERE lease = 'ddl_held';
SELECT holder, epoch = :e1 AS old, epoch = :e2 AS new, ended IS NOT NULL AS ended, end_reason
  FROM tenure.history WHERE lease = 'ddl_held' ORDER BY epoch;

-- clean up
SELECT tenure.drop_lease(lease) FROM tenure.leases
 WHERE lease LIKE 'ddl\_%' OR lease = repeat('n', 63)
 ORDER BY lease;
SELECT count(*) FROM tenure.leases WHERE lease LIKE 'ddl\_%';
