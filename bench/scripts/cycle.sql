SELECT tenure.acquire('bench-cycle-' || :client_id, 'h');
SELECT tenure.release('bench-cycle-' || :client_id, 'h');
