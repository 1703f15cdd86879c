BEGIN;
UPDATE bench_cycle_row SET epoch = epoch + 1 WHERE name = 'bench-cycle-' || :client_id RETURNING epoch AS e \gset
INSERT INTO bench_cycle_history (lease, epoch, holder, started) VALUES ('bench-cycle-' || :client_id, :e, 'h', clock_timestamp());
COMMIT;
UPDATE bench_cycle_history SET ended = clock_timestamp(), end_reason = 'released' WHERE lease = 'bench-cycle-' || :client_id AND ended IS NULL;
