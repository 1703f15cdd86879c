--
-- Epochs of leases restored from another cluster's dump: the first epoch
-- imports the row (base := its epoch, issued_sysid := ours), later ones
-- continue above it, a lease dropped and created again keeps its base,
-- epochs that cannot be represented fail with SQLSTATE 54000, and an
-- epoch clock that went back below an epoch issued here with 55000.
-- (Epochs between 2^50 and 2^60 show as E<rank>: see test/mask_epochs.)
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;
RESET client_min_messages;
\set VERBOSITY default
\set SHOW_CONTEXT never

SELECT system_identifier AS sysid FROM pg_control_system() \gset

-- a lease of this cluster: base 0, issued here on timeline 1
SELECT tenure.create_lease('imp_own');
SELECT tenure.acquire('imp_own', 'a') AS own1 \gset
SELECT base, issued_sysid = :sysid AS issued_here, issued_tli
  FROM tenure.lease WHERE name = 'imp_own';
SELECT base, issued_sysid = :sysid AS issued_here, issued_tli
  FROM tenure.history WHERE lease = 'imp_own';

-- a row as restored from another cluster's dump: its epoch is far above
-- our clock, and its system identifier is not ours
SELECT tenure.create_lease('imp_foreign');
UPDATE tenure.lease SET epoch = 3000000000000000000, issued_sysid = 42, issued_tli = 7
 WHERE name = 'imp_foreign';
SELECT tenure.acquire('imp_foreign', 'a') AS f1 \gset
SELECT base = 3000000000000000000 AS base_is_the_restored_epoch,
	   issued_sysid = :sysid AS issued_here, issued_tli,
	   :f1 > 3000000000000000000 + (1::bigint << 50) AS above_base_plus_clock,
	   :f1 < 3000000000000000000 + (2::bigint << 50) AS clock_of_timeline_1
  FROM tenure.lease WHERE name = 'imp_foreign';
SELECT tenure.claim_epoch('imp_foreign', 'a') AS f2 \gset
SELECT :f2 > :f1 AS claim_greater, :f2 - :f1 < (1::bigint << 50) AS no_jump,
	   (SELECT base FROM tenure.lease WHERE name = 'imp_foreign') AS base;

-- dropped and created again: the lease continues from its newest history
-- row, base included: greater, but neither restarted nor inflated
SELECT tenure.release('imp_foreign', 'a');
SELECT tenure.drop_lease('imp_foreign');
SELECT tenure.create_lease('imp_foreign');
SELECT epoch = :f2 AS continues_from_latest, base, issued_sysid = :sysid AS issued_here
  FROM tenure.lease WHERE name = 'imp_foreign';
SELECT tenure.acquire('imp_foreign', 'b') AS f3 \gset
SELECT :f3 > :f2 AS greater, :f3 - :f2 < (1::bigint << 50) AS no_jump,
	   (SELECT base FROM tenure.lease WHERE name = 'imp_foreign') AS base;
SELECT tenure.release('imp_foreign', 'b');

-- a row without issued_sysid but with an epoch is imported as well
SELECT tenure.create_lease('imp_nosysid');
UPDATE tenure.lease SET epoch = 2000000000000000000, issued_sysid = NULL, issued_tli = NULL
 WHERE name = 'imp_nosysid';
SELECT tenure.acquire('imp_nosysid', 'a') > 2000000000000000000 + (1::bigint << 50) AS above;
SELECT base, issued_sysid = :sysid AS issued_here FROM tenure.lease WHERE name = 'imp_nosysid';
SELECT tenure.release('imp_nosysid', 'a');

-- a manually raised base survives the import
SELECT tenure.create_lease('imp_raised');
UPDATE tenure.lease SET epoch = 5, base = 4000000000000000000, issued_sysid = 42
 WHERE name = 'imp_raised';
SELECT tenure.acquire('imp_raised', 'a') > 4000000000000000000 AS above_raised_base;
SELECT base FROM tenure.lease WHERE name = 'imp_raised';
SELECT tenure.release('imp_raised', 'a');

-- epochs beyond bigint: refused, nothing changes, the lease stays free
SELECT tenure.create_lease('imp_max');
UPDATE tenure.lease SET epoch = 9223372036854775000, issued_sysid = 42
 WHERE name = 'imp_max';
SELECT tenure.acquire('imp_max', 'a');
\echo :LAST_ERROR_SQLSTATE
-- the same row, but issued here: this cluster never issues an epoch above
-- base + its clock, so its clock went back (pg_resetwal after WAL was lost,
-- an older copy of the data directory started by crash recovery), and no
-- epoch is issued until the base is raised (55000)
UPDATE tenure.lease SET issued_sysid = :sysid, issued_tli = 1 WHERE name = 'imp_max';
SELECT tenure.acquire('imp_max', 'a');
\echo :LAST_ERROR_SQLSTATE
SELECT epoch, base FROM tenure.lease WHERE name = 'imp_max';
SELECT holder FROM tenure.leases WHERE lease = 'imp_max';
SELECT epoch, holder FROM tenure.history WHERE lease = 'imp_max';

-- an epoch of our own that the clock no longer covers, as pg_resetwal
-- leaves it: refused; with the base raised to it as the hint says, the
-- next epoch is above it
SELECT tenure.create_lease('imp_back');
UPDATE tenure.lease SET epoch = (1::bigint << 60) + 5, issued_sysid = :sysid, issued_tli = 1
 WHERE name = 'imp_back';
SELECT tenure.acquire('imp_back', 'a');
\echo :LAST_ERROR_SQLSTATE
UPDATE tenure.lease SET base = GREATEST(base, epoch) WHERE name = 'imp_back';
SELECT tenure.acquire('imp_back', 'a') > (1::bigint << 60) + 5 AS above;
SELECT tenure.release('imp_back', 'a');

-- base must not be negative
\set VERBOSITY terse
UPDATE tenure.lease SET base = -1 WHERE name = 'imp_own';
\set VERBOSITY default

SELECT tenure.release('imp_own', 'a');
SELECT tenure.drop_lease(name) FROM tenure.lease
 WHERE name IN ('imp_own', 'imp_foreign', 'imp_nosysid', 'imp_raised', 'imp_max')
 ORDER BY name;
