UPDATE bench_lease_row SET expires = now() + interval '15 s' WHERE name = 'bench-renew-' || :client_id AND holder = 'h';
