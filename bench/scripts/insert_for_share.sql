BEGIN;
SELECT 1 FROM bench_epoch WHERE name = 'bench-writer' AND epoch = :epoch FOR SHARE;
INSERT INTO bench_share (client, note) VALUES (:client_id, 'x');
COMMIT;
