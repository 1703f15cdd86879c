--
-- Privileges (pgTAP): who may create leases, who may act on a lease (its
-- owner role and that role's members, others get 42501), what PUBLIC may
-- read and write, and that no function trusts the caller's search_path.
--
-- Roles are cluster-wide: they are all named tenure_test_* and dropped at
-- the end, like everything else this file creates.
--
-- (quietly: whether an earlier file created it must not show)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set ECHO none
\set QUIET 1
\pset format unaligned
\pset tuples_only true
\pset pager off

SELECT NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'pgtap') AS own_pgtap \gset
\if :own_pgtap
CREATE EXTENSION pgtap;
\endif

-- a: creates and owns leases; b: may create leases too; c: member of a;
-- d: no grants at all, stands for PUBLIC
CREATE ROLE tenure_test_a NOLOGIN;
CREATE ROLE tenure_test_b NOLOGIN;
CREATE ROLE tenure_test_c NOLOGIN;
CREATE ROLE tenure_test_d NOLOGIN;
GRANT tenure_test_a TO tenure_test_c;
GRANT EXECUTE ON FUNCTION tenure.create_lease(text, interval, interval, bigint, text)
	TO tenure_test_a, tenure_test_b;

-- b's schema: operators and a function that shadow pg_catalog's for
-- anyone who puts the schema first in search_path, and log who ran them
CREATE SCHEMA tenure_test_evil AUTHORIZATION tenure_test_b;
SET ROLE tenure_test_b;
CREATE TABLE tenure_test_evil.calls (op text, caller name);
GRANT INSERT ON tenure_test_evil.calls TO PUBLIC;
CREATE FUNCTION tenure_test_evil.mul(numeric, integer) RETURNS numeric
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO tenure_test_evil.calls VALUES ('*', current_user);
	RETURN $1 OPERATOR(pg_catalog.*) $2;
END
$$;
CREATE OPERATOR tenure_test_evil.* (LEFTARG = numeric, RIGHTARG = integer,
									 FUNCTION = tenure_test_evil.mul);
CREATE FUNCTION tenure_test_evil.plus(bigint, integer) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO tenure_test_evil.calls VALUES ('+', current_user);
	RETURN $1 OPERATOR(pg_catalog.+) $2;
END
$$;
CREATE OPERATOR tenure_test_evil.+ (LEFTARG = bigint, RIGHTARG = integer,
									 FUNCTION = tenure_test_evil.plus);
CREATE FUNCTION tenure_test_evil.texteq(text, text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO tenure_test_evil.calls VALUES ('=', current_user);
	RETURN $1 OPERATOR(pg_catalog.=) $2;
END
$$;
CREATE OPERATOR tenure_test_evil.= (LEFTARG = text, RIGHTARG = text,
									 FUNCTION = tenure_test_evil.texteq);
CREATE FUNCTION tenure_test_evil.clock_timestamp() RETURNS timestamptz
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO tenure_test_evil.calls VALUES ('clock_timestamp', current_user);
	RETURN pg_catalog.clock_timestamp();
END
$$;
RESET ROLE;

-- Runs stmt as role r (with search_path set to path if given) and returns
-- its first column as text, 'NULL', or 'ERROR <SQLSTATE>: <message>'.
CREATE FUNCTION pg_temp.as_role(r name, stmt text, path text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	res text;
	old_path text := current_setting('search_path');
	st text;
	msg text;
BEGIN
	EXECUTE format('SET LOCAL ROLE %I', r);
	IF path IS NOT NULL THEN
		PERFORM set_config('search_path', path, true);
	END IF;
	IF stmt ~* '^\s*(select|values|with)\M' THEN
		EXECUTE stmt INTO res;
	ELSE
		EXECUTE stmt;
		res := 'done';
	END IF;
	PERFORM set_config('search_path', old_path, true);
	RESET ROLE;
	RETURN coalesce(res, 'NULL');
EXCEPTION WHEN OTHERS THEN
	-- the role and search_path are restored with the subtransaction
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	RETURN 'ERROR ' || st || ': ' || msg;
END
$$;

SELECT plan(52);

--
-- Creating leases needs EXECUTE on create_lease.
--
SELECT is(pg_temp.as_role('tenure_test_d', $$SELECT tenure.create_lease('priv_d')$$),
		  'ERROR 42501: permission denied for function create_lease',
		  'a role without the grant cannot create a lease');
SELECT is(pg_temp.as_role('tenure_test_a', $$SELECT tenure.create_lease('priv_a')$$),
		  '', 'a granted role creates a lease');
SELECT is(pg_temp.as_role('tenure_test_a', $$SELECT tenure.create_lease('priv_idle')$$),
		  '', 'and another one');
SELECT is(pg_temp.as_role('tenure_test_b', $$SELECT tenure.create_lease('priv_b')$$),
		  '', 'another granted role creates a lease');
SELECT is(pg_temp.as_role('tenure_test_d',
		  $$SELECT string_agg(lease || ':' || owner::text, ',' ORDER BY lease)
			  FROM tenure.leases WHERE lease LIKE 'priv\_%'$$),
		  'priv_a:tenure_test_a,priv_b:tenure_test_b,priv_idle:tenure_test_a',
		  'PUBLIC reads tenure.leases: each lease is owned by its creator');

--
-- The owner acquires; another role gets 42501 for everything that acts
-- on the lease, and changes nothing.
--
SELECT is(pg_temp.as_role('tenure_test_a', $$SELECT tenure.acquire('priv_a', 'a') > 0$$),
		  'true', 'the owner acquires its lease');
SELECT is(pg_temp.as_role('tenure_test_b', $$SELECT tenure.acquire('priv_a', 'b')$$),
		  'ERROR 42501: permission denied for lease "priv_a"',
		  'another role cannot acquire it');
SELECT is(pg_temp.as_role('tenure_test_b', $$SELECT tenure.acquire('priv_a', 'a')$$),
		  'ERROR 42501: permission denied for lease "priv_a"',
		  'not even under the holder''s name');
SELECT is(pg_temp.as_role('tenure_test_b', $$SELECT tenure.acquire_or_error('priv_a', 'b')$$),
		  'ERROR 42501: permission denied for lease "priv_a"',
		  'another role cannot acquire_or_error it');
SELECT is(pg_temp.as_role('tenure_test_b', $$SELECT tenure.renew('priv_a', 'a')$$),
		  'ERROR 42501: permission denied for lease "priv_a"',
		  'another role cannot renew it');
SELECT is(pg_temp.as_role('tenure_test_b', $$SELECT tenure.release('priv_a', 'a')$$),
		  'ERROR 42501: permission denied for lease "priv_a"',
		  'another role cannot release it');
SELECT is(pg_temp.as_role('tenure_test_b', $$SELECT tenure.claim_epoch('priv_a', 'a')$$),
		  'ERROR 42501: permission denied for lease "priv_a"',
		  'another role cannot claim an epoch');
SELECT is(pg_temp.as_role('tenure_test_b', $$SELECT tenure.drop_lease('priv_a')$$),
		  'ERROR 42501: permission denied for lease "priv_a"',
		  'another role cannot drop it');
SELECT is(pg_temp.as_role('tenure_test_d', $$SELECT tenure.acquire('priv_a', 'd')$$),
		  'ERROR 42501: permission denied for lease "priv_a"',
		  'PUBLIC cannot acquire it');
SELECT is(pg_temp.as_role('tenure_test_a', $$SELECT tenure.acquire('priv_b', 'a')$$),
		  'ERROR 42501: permission denied for lease "priv_b"',
		  'the owner of one lease cannot acquire another role''s lease');
SELECT is(pg_temp.as_role('tenure_test_d', $$SELECT tenure.leader_is('priv_a', 'a')$$),
		  'true', 'PUBLIC may ask leader_is: the owner still leads');
SELECT is(pg_temp.as_role('tenure_test_d',
		  $$SELECT tenure.current_epoch('priv_a') = epoch FROM tenure.leases WHERE lease = 'priv_a'$$),
		  'true', 'PUBLIC may read current_epoch');
SELECT is(pg_temp.as_role('tenure_test_d',
		  $$SELECT string_agg(holder || ':' || coalesce(end_reason, 'open'), ',')
			  FROM tenure.history WHERE lease = 'priv_a'$$),
		  'a:open', 'PUBLIC reads tenure.history: one open tenure, untouched');
SELECT is((SELECT holder || ':' || (epoch = tenure.current_epoch('priv_a'))::text
			 FROM tenure.leases WHERE lease = 'priv_a'),
		  'a:true', 'the lease is still held by the owner at its epoch');

--
-- A member of the owner role has the owner's rights.
--
SELECT is(pg_temp.as_role('tenure_test_c', $$SELECT tenure.renew('priv_a', 'a')$$),
		  'true', 'a member of the owner renews');
SELECT is(pg_temp.as_role('tenure_test_c', $$SELECT tenure.acquire('priv_a', 'c')$$),
		  'NULL', 'a member of the owner may try to acquire (held: NULL)');
SELECT is(pg_temp.as_role('tenure_test_c',
		  $$SELECT tenure.claim_epoch('priv_a', 'a') > e
			  FROM (SELECT epoch AS e FROM tenure.leases WHERE lease = 'priv_a') l$$),
		  'true', 'a member of the owner claims an epoch');
SELECT is(pg_temp.as_role('tenure_test_c', $$SELECT tenure.release('priv_a', 'a')$$),
		  'true', 'a member of the owner releases');
SELECT is(pg_temp.as_role('tenure_test_c', $$SELECT tenure.acquire('priv_a', 'c') > 0$$),
		  'true', 'a member of the owner acquires');
SELECT is(pg_temp.as_role('tenure_test_c', $$SELECT tenure.acquire_or_error('priv_a', 'c') > 0$$),
		  'true', 'a member of the owner renews with acquire_or_error');
SELECT is(pg_temp.as_role('tenure_test_d', $$SELECT tenure.leader_is('priv_a', 'c')$$),
		  'true', 'the member leads');
SELECT is(pg_temp.as_role('tenure_test_c', $$SELECT tenure.release('priv_a', 'c')$$),
		  'true', 'the member releases');
SELECT is(pg_temp.as_role('tenure_test_c', $$SELECT tenure.acquire('priv_b', 'c')$$),
		  'ERROR 42501: permission denied for lease "priv_b"',
		  'a member of the owner of one lease cannot acquire another role''s lease');

--
-- PUBLIC cannot write pg_tenure's tables directly; neither can an owner
-- of leases.
--
SELECT is(pg_temp.as_role('tenure_test_d',
		  $$INSERT INTO tenure.lease (name, owner, ttl) VALUES ('priv_forged', 'tenure_test_d', '1 s')$$),
		  'ERROR 42501: permission denied for table lease', 'PUBLIC cannot insert into tenure.lease');
SELECT is(pg_temp.as_role('tenure_test_d', $$UPDATE tenure.lease SET epoch = 0$$),
		  'ERROR 42501: permission denied for table lease', 'PUBLIC cannot update tenure.lease');
SELECT is(pg_temp.as_role('tenure_test_d', $$DELETE FROM tenure.lease$$),
		  'ERROR 42501: permission denied for table lease', 'PUBLIC cannot delete from tenure.lease');
SELECT is(pg_temp.as_role('tenure_test_d',
		  $$INSERT INTO tenure.history (lease, epoch, holder, started, boot_id) VALUES ('priv_a', 1, 'd', now(), 0)$$),
		  'ERROR 42501: permission denied for table history', 'PUBLIC cannot insert into tenure.history');
SELECT is(pg_temp.as_role('tenure_test_d', $$UPDATE tenure.history SET end_reason = 'released'$$),
		  'ERROR 42501: permission denied for table history', 'PUBLIC cannot update tenure.history');
SELECT is(pg_temp.as_role('tenure_test_d', $$DELETE FROM tenure.history$$),
		  'ERROR 42501: permission denied for table history', 'PUBLIC cannot delete from tenure.history');
SELECT is(pg_temp.as_role('tenure_test_d', $$TRUNCATE tenure.history$$),
		  'ERROR 42501: permission denied for table history', 'PUBLIC cannot truncate tenure.history');
SELECT is(pg_temp.as_role('tenure_test_a', $$UPDATE tenure.lease SET epoch = 0 WHERE name = 'priv_a'$$),
		  'ERROR 42501: permission denied for table lease', 'a lease''s owner cannot update tenure.lease');
SELECT is(pg_temp.as_role('tenure_test_a', $$DELETE FROM tenure.history WHERE lease = 'priv_a'$$),
		  'ERROR 42501: permission denied for table history', 'a lease''s owner cannot delete its history');

--
-- Nothing trusts the caller's search_path: with b's schema first, b's
-- operators and functions never run inside pg_tenure (they would run as
-- the owner of pg_tenure's tables), and results do not change.
--
SELECT is(pg_temp.as_role('tenure_test_b', $$SELECT 2.5 * 2$$, 'tenure_test_evil, pg_catalog'),
		  '5.0', 'the shadowing operator is used by ordinary queries under that search_path');
SELECT is((SELECT string_agg(op || ' as ' || caller, ',') FROM tenure_test_evil.calls),
		  '* as tenure_test_b', 'and logs its calls');
TRUNCATE tenure_test_evil.calls;
SELECT is(pg_temp.as_role('tenure_test_b', $$SELECT tenure.renew('priv_idle', 'a')$$,
						  'tenure_test_evil, pg_catalog'),
		  'ERROR 42501: permission denied for lease "priv_idle"',
		  'shadowed search_path: another role cannot renew a lease never held');
SELECT is(pg_temp.as_role('tenure_test_a', $$SELECT tenure.renew('priv_idle', 'a')$$,
						  'tenure_test_evil, pg_catalog'),
		  'false', 'shadowed search_path: renew of a lease never held');
SELECT is(pg_temp.as_role('tenure_test_a', $$SELECT tenure.current_epoch('priv_idle')$$,
						  'tenure_test_evil, pg_catalog'),
		  '0', 'shadowed search_path: current_epoch');
SELECT is(pg_temp.as_role('tenure_test_a',
		  $$SELECT tenure.acquire('priv_idle', 'a') > 0$$,
		  'tenure_test_evil, pg_catalog'),
		  'true', 'shadowed search_path: acquire');
SELECT is(pg_temp.as_role('tenure_test_a',
		  $$SELECT tenure.claim_epoch('priv_idle', 'a') > e
			  FROM (SELECT epoch AS e FROM tenure.leases
					 WHERE lease OPERATOR(pg_catalog.=) 'priv_idle') l$$,
		  'tenure_test_evil, pg_catalog'),
		  'true', 'shadowed search_path: claim_epoch');
SELECT is(pg_temp.as_role('tenure_test_a',
		  $$SELECT tenure.renew('priv_idle', 'a') AND tenure.leader_is('priv_idle', 'a')$$,
		  'tenure_test_evil, pg_catalog'),
		  'true', 'shadowed search_path: renew and leader_is');
SELECT is(pg_temp.as_role('tenure_test_a', $$SELECT tenure.release('priv_idle', 'a')$$,
						  'tenure_test_evil, pg_catalog'),
		  'true', 'shadowed search_path: release');
SELECT is(pg_temp.as_role('tenure_test_a', $$SELECT tenure.create_lease('priv_made', '1 min', '1 s', 4711)$$,
						  'tenure_test_evil, pg_catalog'),
		  '', 'shadowed search_path: create_lease');
SELECT is(pg_temp.as_role('tenure_test_a', $$SELECT tenure.drop_lease('priv_made')$$,
						  'tenure_test_evil, pg_catalog'),
		  '', 'shadowed search_path: drop_lease');
SELECT is((SELECT string_agg(DISTINCT op || ' as ' || caller, ', ') FROM tenure_test_evil.calls),
		  NULL, 'no shadowing operator or function ran inside pg_tenure');
SELECT is((SELECT string_agg(lease || ':' || epoch::text || ':' || coalesce(end_reason, 'open'), ',' ORDER BY epoch)
			 FROM (SELECT lease, rank() OVER (ORDER BY epoch) AS epoch, end_reason
					 FROM tenure.history WHERE lease = 'priv_idle') h),
		  'priv_idle:1:claimed,priv_idle:2:released', 'and the history is as usual');

--
-- Owners (and their members) drop their leases.
--
SELECT is(pg_temp.as_role('tenure_test_c', $$SELECT tenure.drop_lease('priv_idle')$$),
		  '', 'a member of the owner drops a lease');
SELECT is(pg_temp.as_role('tenure_test_a', $$SELECT tenure.drop_lease('priv_a')$$),
		  '', 'the owner drops its lease');

SELECT * FROM finish();

-- clean up, whatever failed above
DO $$
DECLARE
	l text;
BEGIN
	FOR l IN SELECT lease FROM tenure.leases WHERE lease LIKE 'priv\_%' LOOP
		PERFORM tenure.drop_lease(l);
	END LOOP;
END
$$;
DROP OWNED BY tenure_test_a, tenure_test_b, tenure_test_c, tenure_test_d;
DROP ROLE tenure_test_a, tenure_test_b, tenure_test_c, tenure_test_d;
\if :own_pgtap
DROP EXTENSION pgtap;
\endif
