INSERT INTO bench_fenced (client, note) VALUES (:client_id, 'x');
