--
-- acquire, renew, release, leader_is, current_epoch, claim_epoch and
-- acquire_or_error in one session: epochs, hold-off, expiry, and what
-- commit, rollback and PREPARE TRANSACTION do to them.
--
-- (quietly: whether an earlier file created it must not show)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;

-- pg_temp.err(stmt[, tokens]) shows the error a statement raises and
-- pg_temp.outcome(stmt[, tokens]) its SQLSTATE (sql/include/err.psql)
\i sql/include/err.psql

-- Calls acquire_or_error and shows its error with the holder's epoch and
-- acquisition time masked, after checking that they are the ones
-- tenure.leases shows.
CREATE FUNCTION pg_temp.held_error(l text, h text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st text;
	msg text;
	det text;
	since text;
	cur record;
BEGIN
	PERFORM tenure.acquire_or_error(l, h);
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL;
	SELECT epoch, acquired INTO cur FROM tenure.leases WHERE lease = l;
	det := replace(det, ' epoch ' || cur.epoch || ' ', ' epoch <current epoch> ');
	since := substring(det FROM ' since (.*)\.$');
	IF since::timestamptz = cur.acquired THEN
		det := replace(det, since, '<acquired>');
	END IF;
	RETURN st || ': ' || msg || E'\nDETAIL: ' || det;
END
$$;

--
-- A new tenure, its renewal, and other holders.
--
SELECT tenure.create_lease('acq_job');
SELECT tenure.acquire('acq_job', 'a') AS e1 \gset
-- epochs follow the cluster clock (timeline << 50 | WAL position >> 3): the
-- first one lies in timeline 1's range and before the WAL position after it
SELECT :e1 > (1::bigint << 50) AND :e1 < (2::bigint << 50) AS first_epoch_in_timeline_1,
	   :e1 < (1::bigint << 50) + (pg_current_wal_insert_lsn() - '0/0') / 8 AS below_clock_now;
SELECT tenure.current_epoch('acq_job') = :e1 AS current_epoch_is_e1;
SELECT holder, epoch = :e1 AS epoch_is_e1, session_bound,
	   expires - last_renewed = ttl AS expires_after_ttl,
	   active_from <= clock_timestamp() AS active, lock_held, transitions
  FROM tenure.leases WHERE lease = 'acq_job';
SELECT holder, epoch = :e1 AS epoch_is_e1, session_bound, ended, end_reason
  FROM tenure.history WHERE lease = 'acq_job';
-- the same holder renews: same epoch, no new tenure
SELECT tenure.acquire('acq_job', 'a') = :e1 AS renewal_same_epoch;
SELECT transitions FROM tenure.leases WHERE lease = 'acq_job';
SELECT count(*) AS tenures FROM tenure.history WHERE lease = 'acq_job';
-- another holder does not get it, at once or after a bounded wait
SELECT tenure.acquire('acq_job', 'b') IS NULL AS b_not_acquired;
SELECT tenure.acquire('acq_job', 'b', wait => '100 ms') IS NULL AS b_not_acquired_after_wait;
SELECT tenure.leader_is('acq_job', 'a') AS a_leads,
	   tenure.leader_is('acq_job', 'b') AS b_leads,
	   tenure.leader_is('acq_job', 'A') AS "A_leads",
	   tenure.leader_is('acq_no_such_lease', 'a') AS unknown_lease;
SELECT tenure.renew('acq_job', 'a') AS a_renews,
	   tenure.renew('acq_job', 'b') AS b_renews;
-- a release by a non-holder answers false and changes nothing
SELECT tenure.release('acq_job', 'b') AS b_releases;
SELECT holder, epoch = :e1 AS epoch_is_e1 FROM tenure.leases WHERE lease = 'acq_job';
SELECT tenure.leader_is('acq_job', 'a') AS a_leads;

--
-- Release: the tenure ends at commit and the successor leads at once.
--
SELECT tenure.release('acq_job', 'a') AS a_releases;
SELECT tenure.leader_is('acq_job', 'a') AS a_leads;
SELECT holder FROM tenure.leases WHERE lease = 'acq_job';
SELECT tenure.renew('acq_job', 'a') AS a_renews,
	   tenure.release('acq_job', 'a') AS a_releases_again;
SELECT tenure.acquire('acq_job', 'b') AS e2 \gset
SELECT :e2 > :e1 AS e2_greater;
SELECT tenure.leader_is('acq_job', 'b') AS b_leads_at_once;
SELECT holder, epoch = :e2 AS epoch_is_e2,
	   active_from <= clock_timestamp() AS no_holdoff
  FROM tenure.leases WHERE lease = 'acq_job';

--
-- claim_epoch: the holder starts a new epoch within its tenure.
--
SELECT tenure.claim_epoch('acq_job', 'b') AS e3 \gset
SELECT :e3 > :e2 AS e3_greater;
SELECT tenure.current_epoch('acq_job') = :e3 AS current_epoch_is_e3;
SELECT tenure.leader_is('acq_job', 'b') AS b_leads;
SELECT tenure.acquire('acq_job', 'b') = :e3 AS renewal_returns_e3;
SELECT holder, epoch = :e3 AS epoch_is_e3, transitions
  FROM tenure.leases WHERE lease = 'acq_job';
-- a non-holder cannot claim, and nothing changes
SELECT pg_temp.err($$SELECT tenure.claim_epoch('acq_job', 'a')$$);
SELECT tenure.current_epoch('acq_job') = :e3 AS current_epoch_is_e3;
-- the history: a released, b's first epoch claimed, b's new epoch open
SELECT holder, epoch = :e1 AS e1, epoch = :e2 AS e2, epoch = :e3 AS e3,
	   ended IS NOT NULL AS ended, ended >= started AS ordered, end_reason
  FROM tenure.history WHERE lease = 'acq_job' ORDER BY epoch;

--
-- acquire_or_error: the holder renews, anyone else gets TN001 naming the
-- holder, its epoch and since when; a free lease is acquired.
--
SELECT tenure.acquire_or_error('acq_job', 'b') = :e3 AS b_renews;
SELECT pg_temp.held_error('acq_job', 'a');
SELECT holder, epoch = :e3 AS epoch_is_e3 FROM tenure.leases WHERE lease = 'acq_job';
SELECT tenure.release('acq_job', 'b') AS b_releases;
SELECT tenure.acquire_or_error('acq_job', 'a') AS e4 \gset
SELECT :e4 > :e3 AS e4_greater;
SELECT tenure.leader_is('acq_job', 'a') AS a_leads;
SELECT tenure.release('acq_job', 'a') AS a_releases;

--
-- A session-bound tenure is shown as such, with the acquiring backend,
-- and keeps the flag across a claim.
--
SELECT tenure.create_lease('acq_session');
SELECT tenure.acquire('acq_session', 'a', session_bound => true) > 0 AS acquired;
SELECT holder, session_bound, holder_pid = pg_backend_pid() AS my_backend
  FROM tenure.leases WHERE lease = 'acq_session';
SELECT tenure.claim_epoch('acq_session', 'a') > 0 AS claimed;
SELECT holder, session_bound FROM tenure.leases WHERE lease = 'acq_session';
SELECT holder, session_bound, end_reason
  FROM tenure.history WHERE lease = 'acq_session' ORDER BY epoch;
SELECT tenure.release('acq_session', 'a') AS a_releases;

--
-- renew of a lease that is not held answers false; the lease never held
-- since server start too.
--
SELECT tenure.create_lease('acq_idle');
SELECT tenure.renew('acq_idle', 'a') AS renews_idle,
	   tenure.renew('acq_job', 'a') AS renews_released,
	   tenure.leader_is('acq_idle', 'a') AS leads_idle;

--
-- A fixed hold-off applies after every acquisition: the holder holds the
-- lease (tenure.leases shows it) but does not lead yet.
--
SELECT tenure.create_lease('acq_holdoff', holdoff => '1 h');
SELECT tenure.acquire('acq_holdoff', 'a') IS NOT NULL AS acquired;
SELECT tenure.leader_is('acq_holdoff', 'a') AS a_leads;
SELECT holder, active_from > clock_timestamp() + interval '59 min' AS active_in_an_hour
  FROM tenure.leases WHERE lease = 'acq_holdoff';
SELECT tenure.acquire('acq_holdoff', 'b') IS NULL AS b_not_acquired,
	   tenure.renew('acq_holdoff', 'a') AS a_renews;
SELECT tenure.release('acq_holdoff', 'a') AS a_releases;
SELECT tenure.acquire('acq_holdoff', 'b') IS NOT NULL AS b_acquired;
SELECT tenure.leader_is('acq_holdoff', 'b') AS b_leads;
SELECT holder, active_from > clock_timestamp() + interval '59 min' AS active_in_an_hour
  FROM tenure.leases WHERE lease = 'acq_holdoff';
SELECT tenure.release('acq_holdoff', 'b') AS b_releases;

-- a short fixed hold-off ends: the holder then leads
SELECT tenure.create_lease('acq_holdoff_short', holdoff => '200 ms');
SELECT tenure.acquire('acq_holdoff_short', 'a') IS NOT NULL AS acquired;
DO $$
BEGIN
	FOR i IN 1..100 LOOP
		EXIT WHEN tenure.leader_is('acq_holdoff_short', 'a');
		PERFORM pg_sleep(0.1);
	END LOOP;
	IF NOT tenure.leader_is('acq_holdoff_short', 'a') THEN
		RAISE EXCEPTION 'the hold-off of acq_holdoff_short did not end within 10 s';
	END IF;
END
$$;
SELECT holder, active_from <= clock_timestamp() AS active
  FROM tenure.leases WHERE lease = 'acq_holdoff_short';
SELECT tenure.release('acq_holdoff_short', 'a') AS a_releases;

--
-- Expiry: a tenure not renewed within its ttl ends; the holder is told
-- false, not an error; the next holder gets a greater epoch and the
-- history says 'expired'.
--
SELECT tenure.create_lease('acq_short', ttl => '200 ms');
SELECT tenure.acquire('acq_short', 'a') AS s1 \gset
DO $$
BEGIN
	FOR i IN 1..100 LOOP
		EXIT WHEN NOT tenure.leader_is('acq_short', 'a');
		PERFORM pg_sleep(0.1);
	END LOOP;
	IF tenure.leader_is('acq_short', 'a') THEN
		RAISE EXCEPTION 'the tenure of acq_short did not expire within 10 s';
	END IF;
END
$$;
SELECT holder FROM tenure.leases WHERE lease = 'acq_short';
SELECT tenure.renew('acq_short', 'a') AS a_renews;
SELECT tenure.acquire('acq_short', 'b') AS s2 \gset
SELECT :s2 > :s1 AS s2_greater;
SELECT holder, epoch = :s1 AS s1, epoch = :s2 AS s2,
	   ended IS NOT NULL AS ended, end_reason
  FROM tenure.history WHERE lease = 'acq_short' ORDER BY epoch;

--
-- Transactions: acquisitions and claims are published at COMMIT; a
-- rollback or a rolled-back savepoint grants and publishes nothing.
--
SELECT tenure.create_lease('acq_tx');
BEGIN;
SELECT tenure.acquire('acq_tx', 'a') > 0 AS got_epoch;
-- not published before commit
SELECT tenure.leader_is('acq_tx', 'a') AS a_leads_before_commit;
ROLLBACK;
SELECT tenure.leader_is('acq_tx', 'a') AS a_leads,
	   tenure.renew('acq_tx', 'a') AS a_renews,
	   tenure.current_epoch('acq_tx') AS current_epoch;
SELECT holder, epoch, transitions FROM tenure.leases WHERE lease = 'acq_tx';
SELECT count(*) AS tenures FROM tenure.history WHERE lease = 'acq_tx';

BEGIN;
SAVEPOINT s;
SELECT tenure.acquire('acq_tx', 'a') > 0 AS got_epoch;
ROLLBACK TO SAVEPOINT s;
-- the reservation was given back with the savepoint
SELECT tenure.leader_is('acq_tx', 'a') AS a_leads;
COMMIT;
SELECT tenure.leader_is('acq_tx', 'a') AS a_leads,
	   tenure.renew('acq_tx', 'a') AS a_renews,
	   tenure.current_epoch('acq_tx') AS current_epoch;
SELECT holder, epoch, transitions FROM tenure.leases WHERE lease = 'acq_tx';
SELECT count(*) AS tenures FROM tenure.history WHERE lease = 'acq_tx';

-- an acquisition in a released savepoint is published at commit
BEGIN;
SAVEPOINT s;
SELECT tenure.acquire('acq_tx', 'a') AS t1 \gset
RELEASE SAVEPOINT s;
COMMIT;
SELECT :t1 > 0 AS got_epoch;
SELECT tenure.leader_is('acq_tx', 'a') AS a_leads,
	   tenure.current_epoch('acq_tx') = :t1 AS current_epoch_is_t1;

-- a rolled-back claim: the epoch stays t1 in the table and in shared memory
BEGIN;
SELECT tenure.claim_epoch('acq_tx', 'a') > :t1 AS claimed;
SELECT tenure.current_epoch('acq_tx') > :t1 AS claim_visible_inside;
ROLLBACK;
SELECT tenure.current_epoch('acq_tx') = :t1 AS current_epoch_is_t1,
	   tenure.acquire('acq_tx', 'a') = :t1 AS renewal_returns_t1,
	   tenure.leader_is('acq_tx', 'a') AS a_leads;
SELECT holder, epoch = :t1 AS epoch_is_t1 FROM tenure.leases WHERE lease = 'acq_tx';
SELECT epoch = :t1 AS epoch_is_t1, ended, end_reason
  FROM tenure.history WHERE lease = 'acq_tx' ORDER BY epoch;

BEGIN;
SAVEPOINT s;
SELECT tenure.claim_epoch('acq_tx', 'a') > :t1 AS claimed;
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT tenure.current_epoch('acq_tx') = :t1 AS current_epoch_is_t1,
	   tenure.acquire('acq_tx', 'a') = :t1 AS renewal_returns_t1;
SELECT holder, epoch = :t1 AS epoch_is_t1 FROM tenure.leases WHERE lease = 'acq_tx';
SELECT epoch = :t1 AS epoch_is_t1, ended, end_reason
  FROM tenure.history WHERE lease = 'acq_tx' ORDER BY epoch;

-- a claim in a released savepoint is published at commit
BEGIN;
SAVEPOINT s;
SELECT tenure.claim_epoch('acq_tx', 'a') AS t2 \gset
RELEASE SAVEPOINT s;
COMMIT;
SELECT :t2 > :t1 AS t2_greater,
	   tenure.current_epoch('acq_tx') = :t2 AS current_epoch_is_t2,
	   tenure.acquire('acq_tx', 'a') = :t2 AS renewal_returns_t2;

-- a rolled-back release: the holder still leads
BEGIN;
SELECT tenure.release('acq_tx', 'a') AS a_releases;
ROLLBACK;
SELECT tenure.leader_is('acq_tx', 'a') AS a_leads;
SELECT epoch = :t1 AS t1, epoch = :t2 AS t2, ended IS NOT NULL AS ended, end_reason
  FROM tenure.history WHERE lease = 'acq_tx' ORDER BY epoch;
SELECT tenure.release('acq_tx', 'a') AS a_releases;

--
-- PREPARE TRANSACTION is refused after an acquisition or a claim (0A000);
-- the transaction rolls back and grants nothing.
--
SELECT tenure.create_lease('acq_prep');
BEGIN;
SELECT tenure.acquire('acq_prep', 'a') > 0 AS got_epoch;
PREPARE TRANSACTION 'acq_prep_1';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'acq_prep_1';
SELECT tenure.leader_is('acq_prep', 'a') AS a_leads,
	   tenure.current_epoch('acq_prep') AS current_epoch;
SELECT holder FROM tenure.leases WHERE lease = 'acq_prep';
SELECT count(*) AS tenures FROM tenure.history WHERE lease = 'acq_prep';
SELECT tenure.acquire('acq_prep', 'b') AS p1 \gset
SELECT :p1 > 0 AS b_acquired;
BEGIN;
SELECT tenure.claim_epoch('acq_prep', 'b') > :p1 AS claimed;
PREPARE TRANSACTION 'acq_prep_2';
\echo SQLSTATE :LAST_ERROR_SQLSTATE
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid = 'acq_prep_2';
SELECT tenure.current_epoch('acq_prep') = :p1 AS current_epoch_is_p1,
	   tenure.acquire('acq_prep', 'b') = :p1 AS renewal_returns_p1;

--
-- tenure.history_per_lease: a lease keeps its N most recent history rows
-- and at most 63 more.  Rows beyond N are deleted at the first new row
-- after the lease's entry is loaded and then at every 64th.
--
SET tenure.history_per_lease = 3;
SELECT tenure.create_lease('acq_hist');
SELECT tenure.acquire('acq_hist', 'a') > 0 AS acquired;
DO $$BEGIN FOR i IN 1 .. 63 LOOP PERFORM tenure.claim_epoch('acq_hist', 'a'); END LOOP; END$$;
-- 64 rows: the 64th is not due to trim
SELECT count(*) AS rows_after_64 FROM tenure.history WHERE lease = 'acq_hist';
SELECT tenure.claim_epoch('acq_hist', 'a') > 0 AS claimed_65th;
-- the 65th row trims to the 3 most recent
SELECT count(*) AS rows_after_65,
	   max(epoch) = tenure.current_epoch('acq_hist') AS newest_kept
  FROM tenure.history WHERE lease = 'acq_hist';
DO $$BEGIN FOR i IN 1 .. 5 LOOP PERFORM tenure.claim_epoch('acq_hist', 'a'); END LOOP; END$$;
SELECT count(*) AS rows_after_70 FROM tenure.history WHERE lease = 'acq_hist';
RESET tenure.history_per_lease;

-- clean up
SELECT tenure.drop_lease(lease) FROM tenure.leases
 WHERE lease LIKE 'acq\_%' ORDER BY lease;
