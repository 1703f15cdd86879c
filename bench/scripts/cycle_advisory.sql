SELECT pg_try_advisory_lock(1000 + :client_id);
SELECT pg_advisory_unlock(1000 + :client_id);
