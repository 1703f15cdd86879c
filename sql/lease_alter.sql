--
-- alter_lease: changing settings without a drop, its bad input and
-- privileges, when each change applies to a tenure that lasts; and the
-- hold-off bound of a dropped lease, which a lease created again under its
-- name inherits.
--
-- (quietly: whether an earlier file created it must not show)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;

-- pg_temp.err(stmt[, tokens]) shows the error a statement raises and
-- pg_temp.outcome(stmt[, tokens]) its SQLSTATE (sql/include/err.psql)
\i sql/include/err.psql

-- The advisory locks the keeper holds in this database under a lock_key.
CREATE FUNCTION pg_temp.key_locked(k bigint) RETURNS boolean
LANGUAGE sql AS $$
	SELECT EXISTS (SELECT FROM pg_locks
	 WHERE locktype = 'advisory' AND granted AND objsubid = 1
	   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
	   AND classid::bigint = (k >> 32) AND objid::bigint = (k & 4294967295))
$$;

--
-- Settings given change; settings not given stay; reset restores
-- create_lease's defaults.
--
SELECT tenure.create_lease('alt_a', ttl => '30 s');
SELECT tenure.alter_lease('alt_a', ttl => '1 min');
SELECT lease, ttl, holdoff, lock_key, preferred FROM tenure.leases WHERE lease = 'alt_a';
SELECT tenure.alter_lease('alt_a', holdoff => '0', lock_key => 4242, preferred => 'p1');
SELECT lease, ttl, holdoff, lock_key, preferred FROM tenure.leases WHERE lease = 'alt_a';
-- nothing given: nothing changes
SELECT tenure.alter_lease('alt_a');
SELECT lease, ttl, holdoff, lock_key, preferred FROM tenure.leases WHERE lease = 'alt_a';
-- by position, the largest accepted values
SELECT tenure.alter_lease('alt_a', '1 day', '24 hours', -4242, 'p2');
SELECT lease, ttl, holdoff, lock_key, preferred FROM tenure.leases WHERE lease = 'alt_a';
SELECT tenure.alter_lease('alt_a', reset => '{holdoff,lock_key,preferred,ttl}');
SELECT lease, ttl, holdoff, lock_key, preferred FROM tenure.leases WHERE lease = 'alt_a';
-- its epochs and id are the lease's own: an alter is no drop
SELECT count(*) AS history_rows FROM tenure.history WHERE lease = 'alt_a';

--
-- Bad input.  Nothing of a rejected call may remain.
--
SELECT tenure.create_lease('alt_b', lock_key => 4343);
SELECT tenure.alter_lease('alt_a', ttl => '20 s', lock_key => 4242);
CREATE TEMP TABLE lease_before AS SELECT * FROM tenure.lease;
SELECT n, call, pg_temp.err('SELECT ' || call) AS outcome
  FROM (VALUES
	(1, $$tenure.alter_lease(NULL)$$),
	(2, $$tenure.alter_lease('')$$),
	(3, $$tenure.alter_lease(repeat('n', 64))$$),
	(4, $$tenure.alter_lease('alt_nope', ttl => '1 s')$$),
	(5, $$tenure.alter_lease('alt,comma')$$),
	(6, $$tenure.alter_lease('alt_a', ttl => '0')$$),
	(7, $$tenure.alter_lease('alt_a', ttl => '-1 s')$$),
	(8, $$tenure.alter_lease('alt_a', ttl => '1 day 1 s')$$),
	(9, $$tenure.alter_lease('alt_a', ttl => '1 mon')$$),
	(10, $$tenure.alter_lease('alt_a', holdoff => '-1 s')$$),
	(11, $$tenure.alter_lease('alt_a', holdoff => '2 days')$$),
	(12, $$tenure.alter_lease('alt_a', preferred => '')$$),
	(13, $$tenure.alter_lease('alt_a', preferred => repeat('p', 128))$$),
	(14, $$tenure.alter_lease('alt_a', lock_key => 4343)$$),
	(15, $$tenure.alter_lease('alt_a', reset => NULL)$$),
	(16, $$tenure.alter_lease('alt_a', reset => '{ttl,NULL}')$$),
	(17, $$tenure.alter_lease('alt_a', reset => '{epoch}')$$),
	(18, $$tenure.alter_lease('alt_a', reset => '{TTL}')$$),
	(19, $$tenure.alter_lease('alt_a', ttl => '1 s', reset => '{ttl}')$$),
	(20, $$tenure.alter_lease('alt_a', lock_key => 1, reset => '{lock_key}')$$),
	(21, $$tenure.alter_lease('alt_a', holdoff => '1 s', reset => '{holdoff}')$$),
	(22, $$tenure.alter_lease('alt_a', preferred => 'p', reset => '{preferred}')$$),
	-- checked before any change: the bad ttl leaves the good lock_key out
	(23, $$tenure.alter_lease('alt_a', ttl => '0', lock_key => 99)$$)
  ) AS t(n, call)
 ORDER BY n;
SELECT count(*) AS changed_rows FROM (
	(TABLE tenure.lease EXCEPT TABLE lease_before) UNION ALL
	(TABLE lease_before EXCEPT TABLE tenure.lease)) c;
-- a lease's own lock_key again is no conflict
SELECT tenure.alter_lease('alt_b', lock_key => 4343);

--
-- Privileges: as for drop_lease, only roles with the privileges of the
-- lease's owner may alter it.
--
CREATE ROLE tenure_alter_owner NOLOGIN;
CREATE ROLE tenure_alter_member NOLOGIN IN ROLE tenure_alter_owner;
CREATE ROLE tenure_alter_other NOLOGIN;
GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text)
	TO tenure_alter_owner;
SET ROLE tenure_alter_owner;
SELECT tenure.create_lease('alt_owned', ttl => '10 s');
SET ROLE tenure_alter_other;
SELECT pg_temp.err($$SELECT tenure.alter_lease('alt_owned', ttl => '1 min')$$);
SELECT pg_temp.err($$SELECT tenure.alter_lease('alt_owned', reset => '{ttl}')$$);
SET ROLE tenure_alter_member;
SELECT tenure.alter_lease('alt_owned', ttl => '20 s');
RESET ROLE;
SELECT lease, ttl, owner FROM tenure.leases WHERE lease = 'alt_owned';

--
-- A tenure that lasts.  A longer ttl applies to it at once; a shorter ttl
-- and a new lock_key only while nobody holds the lease; a hold-off applies
-- to the tenures that start afterwards.
--
SELECT tenure.create_lease('alt_live', ttl => '30 s', lock_key => 5151);
SELECT tenure.acquire('alt_live', 'h1') IS NOT NULL AS acquired;
SELECT tenure.leader_is('alt_live', 'h1'), pg_temp.key_locked(5151) AS key_locked;
SELECT expires - last_renewed AS granted FROM tenure.leases WHERE lease = 'alt_live';
SELECT active_from AS active_before FROM tenure.leases WHERE lease = 'alt_live' \gset
SELECT tenure.alter_lease('alt_live', ttl => '1 min');
SELECT ttl, expires - last_renewed AS granted, holder FROM tenure.leases WHERE lease = 'alt_live';
SELECT tenure.leader_is('alt_live', 'h1');
-- refused while held, and nothing changes
SELECT pg_temp.err($$SELECT tenure.alter_lease('alt_live', ttl => '10 s')$$);
SELECT pg_temp.err($$SELECT tenure.alter_lease('alt_live', lock_key => 5252)$$);
SELECT pg_temp.err($$SELECT tenure.alter_lease('alt_live', reset => '{lock_key}')$$);
SELECT pg_temp.err($$SELECT tenure.alter_lease('alt_live', ttl => '10 s', lock_key => 5151)$$);
SELECT ttl, lock_key, expires - last_renewed AS granted, holder
  FROM tenure.leases WHERE lease = 'alt_live';
SELECT pg_temp.key_locked(5151) AS old_key_locked, pg_temp.key_locked(5252) AS new_key_locked;
-- a hold-off for the next tenures: this one stays active
SELECT tenure.alter_lease('alt_live', holdoff => '1 day');
SELECT holdoff, active_from < :'active_before'::timestamptz + interval '1 s' AS same_active_from
  FROM tenure.leases WHERE lease = 'alt_live';
SELECT tenure.leader_is('alt_live', 'h1');
-- the same lock_key, given again, is no change
SELECT tenure.alter_lease('alt_live', lock_key => 5151);

-- once released: the shorter ttl and the new lock_key apply, and the next
-- tenure waits out the new hold-off
SELECT tenure.release('alt_live', 'h1');
SELECT tenure.alter_lease('alt_live', ttl => '10 s', lock_key => 5252);
SELECT ttl, lock_key FROM tenure.leases WHERE lease = 'alt_live';
SELECT tenure.acquire('alt_live', 'h2') IS NOT NULL AS acquired;
SELECT pg_temp.key_locked(5151) AS old_key_locked, pg_temp.key_locked(5252) AS new_key_locked;
SELECT expires - last_renewed AS granted, active_from > acquired + interval '23 hours' AS held_off
  FROM tenure.leases WHERE lease = 'alt_live';
SELECT tenure.leader_is('alt_live', 'h2');
SELECT tenure.release('alt_live', 'h2');

--
-- Transactions.  An alter takes effect when it commits; one rolled back
-- (or its savepoint) changes nothing and leaves nothing pinned; a lease
-- whose lock_key the transaction changes cannot be acquired in it; an
-- alter cannot be prepared.
--
BEGIN;
SELECT tenure.alter_lease('alt_live', lock_key => 5353, ttl => '5 s');
SELECT pg_temp.err($$SELECT tenure.acquire('alt_live', 'h3')$$);
ROLLBACK;
SELECT ttl, lock_key FROM tenure.leases WHERE lease = 'alt_live';
BEGIN;
SAVEPOINT s;
SELECT tenure.alter_lease('alt_live', lock_key => 5353);
ROLLBACK TO s;
SELECT tenure.acquire('alt_live', 'h3') IS NOT NULL AS acquired;
COMMIT;
SELECT holder, lock_key, pg_temp.key_locked(5252) AS key_locked FROM tenure.leases WHERE lease = 'alt_live';
SELECT tenure.release('alt_live', 'h3');
BEGIN;
SELECT tenure.alter_lease('alt_live', ttl => '20 s');
PREPARE TRANSACTION 'alt_prepared';
SELECT ttl FROM tenure.leases WHERE lease = 'alt_live';

--
-- The hold-off bound outlives drop_lease.  A holder whose lease is dropped
-- did not release it: it may believe in its tenure until its last renewal
-- plus its ttl, and the first tenure of a lease created again under the
-- name (with a shorter ttl, here) is not active before then.
--
SELECT tenure.create_lease('alt_drop', ttl => '1 min');
SELECT tenure.acquire('alt_drop', 'h1') IS NOT NULL AS acquired;
SELECT expires AS old_expires FROM tenure.leases WHERE lease = 'alt_drop' \gset
SELECT tenure.drop_lease('alt_drop');
SELECT tenure.create_lease('alt_drop', ttl => '1 s');
SELECT tenure.acquire('alt_drop', 'h2') IS NOT NULL AS acquired;
-- (times shown are converted from the monotonic clock at different
-- moments: a margin of 10 ms allows for that)
SELECT tenure.leader_is('alt_drop', 'h2')
	   AND clock_timestamp() < :'old_expires'::timestamptz - interval '10 ms' AS early;
SELECT active_from > :'old_expires'::timestamptz - interval '10 ms' AS waits_out_old_tenure
  FROM tenure.leases WHERE lease = 'alt_drop';
SELECT holder, end_reason, ttl FROM tenure.history WHERE lease = 'alt_drop' ORDER BY epoch;
SELECT tenure.release('alt_drop', 'h2');

-- ... and the lease after that: h1 may still believe
SELECT tenure.drop_lease('alt_drop');
SELECT tenure.create_lease('alt_drop', ttl => '1 s');
SELECT tenure.acquire('alt_drop', 'h3') IS NOT NULL AS acquired;
SELECT active_from > :'old_expires'::timestamptz - interval '10 ms' AS waits_out_old_tenure
  FROM tenure.leases WHERE lease = 'alt_drop';

-- a tenure released before the drop leaves no bound: the next lease's
-- holder leads at once
SELECT tenure.create_lease('alt_released', ttl => '1 min');
SELECT tenure.acquire('alt_released', 'h1') IS NOT NULL AS acquired;
SELECT tenure.release('alt_released', 'h1');
SELECT tenure.drop_lease('alt_released');
SELECT tenure.create_lease('alt_released');
SELECT tenure.acquire('alt_released', 'h2') IS NOT NULL AS acquired;
SELECT tenure.leader_is('alt_released', 'h2');

-- clean up
SELECT tenure.drop_lease(lease) FROM tenure.leases
 WHERE lease LIKE 'alt\_%' ORDER BY lease;
REVOKE EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text)
	FROM tenure_alter_owner;
DROP ROLE tenure_alter_owner, tenure_alter_member, tenure_alter_other;
