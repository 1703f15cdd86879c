BEGIN;
SELECT pg_catalog.set_config('tenure.tokens', 'bench-writer=' || :epoch, true);
INSERT INTO bench_fenced (client, note) VALUES (:client_id, 'x');
COMMIT;
