SELECT holder = 'h' AND expires > now() FROM bench_lease_row WHERE name = 'bench-leader';
