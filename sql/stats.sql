-- tenure.lease_stats: counters per lease; tenure.stats_reset()
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;

SELECT tenure.create_lease('st1', ttl => '1 min', holdoff => '0');
SELECT tenure.create_lease('st2', ttl => '1 min');

-- a lease never used since the server started counts nothing
SELECT lease, tenures, released, expired, session_ended, revoked,
	   server_restart, claims, fenced_writes, fenced_writes_rejected,
	   fenced_commits, fenced_commits_rejected, waiters,
	   last_change IS NULL AS no_change, last_handover_gap IS NULL AS no_gap
  FROM tenure.lease_stats WHERE lease IN ('st1', 'st2') ORDER BY lease;

-- two tenures, a claim and a release
SELECT tenure.acquire('st1', 'a') > 0 AS acquired;
SELECT tenure.claim_epoch('st1', 'a') > 0 AS claimed;
SELECT tenure.release('st1', 'a');
SELECT tenure.acquire('st1', 'b') > 0 AS acquired;
SELECT tenures, released, claims, waiters,
	   last_change IS NOT NULL AS changed,
	   last_handover_gap >= interval '0' AS gap_known
  FROM tenure.lease_stats WHERE lease = 'st1';

-- fenced writes: accepted, and rejected at the statement
CREATE TABLE st_t (i int);
SELECT tenure.fence_table('st_t', 'st1');
BEGIN;
SELECT set_config('tenure.tokens', 'st1=' || tenure.current_epoch('st1'), true) IS NOT NULL AS presented;
INSERT INTO st_t VALUES (1);
INSERT INTO st_t VALUES (2);
COMMIT;
INSERT INTO st_t VALUES (3);
SELECT fenced_writes, fenced_writes_rejected, fenced_commits, fenced_commits_rejected
  FROM tenure.lease_stats WHERE lease = 'st1';

-- only roles granted EXECUTE reset the counters
CREATE ROLE st_reader;
GRANT USAGE ON SCHEMA tenure TO st_reader;
SET ROLE st_reader;
SELECT tenures > 0 AS readable FROM tenure.lease_stats WHERE lease = 'st1';
SELECT tenure.stats_reset('st1');
RESET ROLE;

-- a reset of one lease leaves the others; an unknown name resets nothing
SELECT tenure.acquire('st2', 'a') > 0 AS acquired;
SELECT tenure.stats_reset('st1');
SELECT tenure.stats_reset('no such lease');
SELECT lease, tenures, fenced_writes, last_change IS NULL AS no_change,
	   last_handover_gap IS NULL AS no_gap
  FROM tenure.lease_stats WHERE lease IN ('st1', 'st2') ORDER BY lease;
SELECT tenure.stats_reset();
SELECT lease, tenures FROM tenure.lease_stats WHERE lease IN ('st1', 'st2') ORDER BY lease;
-- bad input
SELECT tenure.stats_reset('a=b');

-- the counters go on counting after a reset
SELECT tenure.release('st1', 'b');
SELECT tenures, released FROM tenure.lease_stats WHERE lease = 'st1';

-- clean up
SELECT tenure.unfence_table('st_t');
DROP TABLE st_t;
SELECT tenure.drop_lease('st1');
SELECT tenure.drop_lease('st2');
REVOKE USAGE ON SCHEMA tenure FROM st_reader;
DROP ROLE st_reader;
