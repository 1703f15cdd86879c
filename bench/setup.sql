-- Objects for bench/run.sh: pg_tenure's leases and the tables of the
-- approaches users build today.
CREATE EXTENSION IF NOT EXISTS pg_tenure;

-- is-leader and renew, today: a lease row with an expiry
CREATE TABLE bench_lease_row (name text PRIMARY KEY, holder text, expires timestamptz);
INSERT INTO bench_lease_row
SELECT 'bench-leader', 'h', now() + interval '1 day'
UNION ALL
SELECT 'bench-renew-' || i, 'h', now() + interval '15 s' FROM generate_series(0, 63) i;

SELECT tenure.create_lease('bench-leader', '1 day', holdoff => '0');
SELECT tenure.acquire('bench-leader', 'h');
SELECT tenure.create_lease('bench-renew-' || i, '1 day', holdoff => '0') FROM generate_series(0, 63) i;
SELECT tenure.acquire('bench-renew-' || i, 'h') FROM generate_series(0, 63) i;
SELECT tenure.create_lease('bench-cycle-' || i, '1 day', holdoff => '0') FROM generate_series(0, 63) i;

-- fenced INSERT: pg_tenure
SELECT tenure.create_lease('bench-writer', '1 day', holdoff => '0');
SELECT tenure.acquire('bench-writer', 'h');
CREATE TABLE bench_plain (id bigserial, client int, note text);
CREATE TABLE bench_fenced (id bigserial, client int, note text);
SELECT tenure.fence_table('bench_fenced', 'bench-writer');

-- fenced INSERT, today (1): a PL/pgSQL statement trigger comparing a
-- setting with an epoch row (not linearizable)
CREATE TABLE bench_epoch (name text PRIMARY KEY, epoch bigint NOT NULL);
INSERT INTO bench_epoch SELECT 'bench-writer', tenure.current_epoch('bench-writer');
CREATE TABLE bench_trigger (id bigserial, client int, note text);
CREATE FUNCTION bench_epoch_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF current_setting('app.epoch', true)::bigint IS DISTINCT FROM
	   (SELECT epoch FROM bench_epoch WHERE name = 'bench-writer') THEN
		RAISE EXCEPTION 'stale epoch';
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER bench_epoch_check BEFORE INSERT OR UPDATE OR DELETE ON bench_trigger
	FOR EACH STATEMENT EXECUTE FUNCTION bench_epoch_check();

-- fenced INSERT, today (2): the epoch row FOR SHARE inside the transaction
CREATE TABLE bench_share (id bigserial, client int, note text);

-- acquire + release, the rows alone: what pg_tenure writes per cycle, by
-- plain SQL (a lease row and a history table indexed as tenure.history)
CREATE TABLE bench_cycle_row (name text PRIMARY KEY, epoch bigint NOT NULL);
INSERT INTO bench_cycle_row SELECT 'bench-cycle-' || i, 0 FROM generate_series(0, 63) i;
-- (and failover first's plain-SQL floor)
INSERT INTO bench_cycle_row VALUES ('bench-cycle-first', 0);
CREATE TABLE bench_cycle_history (lease text NOT NULL, epoch bigint NOT NULL, holder text NOT NULL,
	started timestamptz NOT NULL, ended timestamptz, end_reason text, PRIMARY KEY (lease, epoch));
CREATE INDEX ON bench_cycle_history (lease) WHERE ended IS NULL;
