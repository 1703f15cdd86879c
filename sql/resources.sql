--
-- What one transaction keeps does not grow with the number of calls:
-- 300,000 renewals of one tenure (acquire by its holder), 100,000
-- acquisitions of a lease held by someone else (NULL), renewals in
-- subtransactions, and repeated claims and releases keep a few kilobytes
-- of pg_tenure's transaction memory, not one action per call.  Measured
-- with pg_backend_memory_contexts: TopTransactionContext and the
-- contexts under it (their names, up to PostgreSQL 17; its own size on
-- 18), and the whole backend's growth over the calls.
--
-- (quietly: whether an earlier file created it must not show)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;

-- bytes of the current transaction's memory, and of the whole backend
CREATE FUNCTION pg_temp.txn_bytes() RETURNS bigint
LANGUAGE sql AS $$
SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts c
 WHERE name = 'TopTransactionContext'
	OR to_jsonb(c)->>'parent' = 'TopTransactionContext'
$$;
CREATE FUNCTION pg_temp.backend_bytes() RETURNS bigint
LANGUAGE sql AS $$
SELECT sum(total_bytes)::bigint FROM pg_backend_memory_contexts
$$;

SELECT tenure.create_lease('res_renewed', ttl => '5 min');
SELECT tenure.create_lease('res_busy', ttl => '5 min');
SELECT tenure.create_lease('res_claimed', ttl => '5 min');
SELECT tenure.acquire('res_busy', 'other') > 0 AS other_holds;
SELECT tenure.acquire('res_claimed', 'h') > 0 AS h_holds;

-- A tenure started in the transaction, then renewed 300,000 times (and
-- 100,000 calls that find the lease held by someone else); its start is
-- the one action that must stay, and commits.
BEGIN;
SELECT tenure.acquire('res_renewed', 'h') > 0 AS acquired;
SELECT pg_temp.backend_bytes() AS backend_before \gset
SELECT count(*) AS renewals FROM generate_series(1, 300000)
 WHERE tenure.acquire('res_renewed', 'h') > 0;
SELECT count(tenure.acquire('res_busy', 'h')) AS busy_epochs
  FROM generate_series(1, 100000);
SELECT pg_temp.txn_bytes() < 256 * 1024 AS txn_memory_small,
	   pg_temp.backend_bytes() - :backend_before < 2 * 1024 * 1024
	   AS backend_growth_small;
COMMIT;
SELECT lease, holder, transitions FROM tenure.leases
 WHERE lease LIKE 'res\_%' ORDER BY lease;

-- Renewals in subtransactions that commit (an exception block each)
BEGIN;
SELECT pg_temp.backend_bytes() AS backend_before \gset
DO $$
BEGIN
	FOR i IN 1 .. 20000 LOOP
		BEGIN
			PERFORM tenure.acquire('res_renewed', 'h');
		EXCEPTION WHEN OTHERS THEN
			RAISE;
		END;
	END LOOP;
END
$$;
SELECT pg_temp.txn_bytes() < 256 * 1024 AS txn_memory_small,
	   pg_temp.backend_bytes() - :backend_before < 2 * 1024 * 1024
	   AS backend_growth_small;
COMMIT;

-- 1,000 claims and 1,000 releases in one transaction: one claim action,
-- one release action, one notification of each (every claim still writes
-- its epoch's history row; PostgreSQL's own memory for the rows a
-- transaction rewrites, such as its combo command ids, is not counted: it
-- is not pg_tenure's)
BEGIN;
SELECT count(*) AS claims FROM generate_series(1, 1000)
 WHERE tenure.claim_epoch('res_claimed', 'h') > 0;
SELECT count(*) AS releases FROM generate_series(1, 1000)
 WHERE tenure.release('res_claimed', 'h');
SELECT sum(total_bytes) < 128 * 1024 AS txn_memory_small
  FROM pg_backend_memory_contexts WHERE name = 'TopTransactionContext';
COMMIT;
-- every claim counted, the tenure released
SELECT s.claims, l.holder
  FROM tenure.lease_stats s JOIN tenure.leases l USING (lease)
 WHERE lease = 'res_claimed';

-- clean up
SELECT tenure.drop_lease(lease) FROM tenure.leases
 WHERE lease LIKE 'res\_%' ORDER BY lease;
