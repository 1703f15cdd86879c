SELECT tenure.leader_is('bench-leader', 'h');
