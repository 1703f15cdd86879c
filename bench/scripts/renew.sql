SELECT tenure.renew('bench-renew-' || :client_id, 'h');
