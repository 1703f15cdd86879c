BEGIN;
SELECT pg_catalog.set_config('bench.unused', 'x', true);
INSERT INTO bench_plain (client, note) VALUES (:client_id, 'x');
COMMIT;
