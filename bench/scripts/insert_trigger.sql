INSERT INTO bench_trigger (client, note) VALUES (:client_id, 'x');
