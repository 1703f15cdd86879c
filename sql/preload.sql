-- The extension is loaded by shared_preload_libraries and its keeper runs.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
SELECT extversion FROM pg_extension WHERE extname = 'pg_tenure';
SHOW tenure.max_leases;
-- the keeper shows a clear backend_type (it starts asynchronously)
DO $$
BEGIN
	FOR i IN 1..300 LOOP
		EXIT WHEN EXISTS (SELECT FROM pg_stat_activity
						  WHERE backend_type = 'pg_tenure keeper');
		PERFORM pg_sleep(0.1);
	END LOOP;
END
$$;
SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_tenure keeper';
-- the setting is reserved: typos are caught
SET tenure.no_such_setting = 1;
