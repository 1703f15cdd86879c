INSERT INTO bench_plain (client, note) VALUES (:client_id, 'x');
