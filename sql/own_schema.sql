-- pg_tenure owns its schema: CREATE EXTENSION refuses a schema tenure that
-- a non-superuser owns, that holds objects or in which a non-superuser may
-- create objects, and every use of the extension fails closed (55000) once
-- its schema or objects are no longer what it installed.
\set VERBOSITY default
\set SHOW_CONTEXT never
CREATE ROLE own_schema_dbowner LOGIN;
CREATE ROLE own_schema_mallory LOGIN;
CREATE DATABASE own_schema_db OWNER own_schema_dbowner;
\c own_schema_db
SET search_path = public;

-- a database owner creates schema tenure before a superuser installs
SET ROLE own_schema_dbowner;
CREATE SCHEMA tenure;
RESET ROLE;
CREATE EXTENSION pg_tenure;
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS installed FROM pg_extension WHERE extname = 'pg_tenure';

-- a superuser owns it, but another role may create objects in it
ALTER SCHEMA tenure OWNER TO CURRENT_USER;
GRANT CREATE ON SCHEMA tenure TO own_schema_mallory;
CREATE EXTENSION pg_tenure;
\echo :LAST_ERROR_SQLSTATE
GRANT CREATE ON SCHEMA tenure TO PUBLIC;
REVOKE CREATE ON SCHEMA tenure FROM own_schema_mallory;
CREATE EXTENSION pg_tenure;
\echo :LAST_ERROR_SQLSTATE
REVOKE CREATE ON SCHEMA tenure FROM PUBLIC;

-- a superuser's schema that holds objects already: look-alikes
CREATE TABLE tenure.lease (name text, owner regrole);
CREATE FUNCTION tenure.leader_is(text, text) RETURNS boolean
LANGUAGE sql AS 'SELECT true';
CREATE EXTENSION pg_tenure;
\echo :LAST_ERROR_SQLSTATE
DROP TABLE tenure.lease;
DROP FUNCTION tenure.leader_is(text, text);

-- an empty schema a superuser owns, as pg_dump writes it, is fine; USAGE
-- for everyone is granted by the extension
GRANT USAGE ON SCHEMA tenure TO own_schema_mallory;
CREATE EXTENSION pg_tenure;
SELECT extname, extnamespace::regnamespace FROM pg_extension WHERE extname = 'pg_tenure';
SELECT tenure.create_lease('own_schema', ttl => '5 min');
SELECT tenure.acquire('own_schema', 'h') IS NOT NULL AS acquired;
CREATE TABLE own_schema_t (a int);

-- at run time: the schema handed to a non-superuser
ALTER SCHEMA tenure OWNER TO own_schema_dbowner;
SELECT tenure.current_epoch('own_schema') IS NOT NULL AS answered;
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.create_lease('own_schema_2');
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.fence_table('own_schema_t', 'own_schema');
\echo :LAST_ERROR_SQLSTATE
-- DDL anywhere in the database is checked by the extension's event
-- triggers, which refuse too
CREATE TABLE own_schema_u (a int);
\echo :LAST_ERROR_SQLSTATE
-- its new owner could now drop the extension with the schema: that is a
-- superuser's mistake to make, and every use of pg_tenure refuses meanwhile
ALTER SCHEMA tenure OWNER TO CURRENT_USER;

-- CREATE granted to another role afterwards
GRANT CREATE ON SCHEMA tenure TO own_schema_mallory;
SELECT tenure.release('own_schema', 'h');
\echo :LAST_ERROR_SQLSTATE
REVOKE CREATE ON SCHEMA tenure FROM own_schema_mallory;

-- a table of the extension moved away and a look-alike put in its place
-- (only a superuser can): the look-alike is refused, and so is every use
ALTER TABLE tenure.fenced RENAME TO fenced_moved;
CREATE TABLE tenure.fenced (tbl regclass PRIMARY KEY, lease text NOT NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT tenure.fence_table('own_schema_t', 'own_schema');
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE tenure.fenced_moved RENAME TO fenced;

-- the fence lock views are out of other roles' reach: a query that is only
-- prepared takes its locks before its privileges are checked, so a role
-- that could name a fence lock view could lock it and stall every claim
SET ROLE own_schema_mallory;
PREPARE own_schema_lock AS SELECT * FROM tenure_lock.fence_lock_0 FOR UPDATE;
\echo :LAST_ERROR_SQLSTATE
SELECT fence_lock IS NOT NULL AS fence_lock_shown FROM tenure.leases WHERE lease = 'own_schema';
RESET ROLE;
-- USAGE on it granted to another role makes pg_tenure fail closed
GRANT USAGE ON SCHEMA tenure_lock TO own_schema_mallory;
SELECT tenure.current_epoch('own_schema') IS NOT NULL AS answered;
\echo :LAST_ERROR_SQLSTATE
REVOKE USAGE ON SCHEMA tenure_lock FROM own_schema_mallory;

-- everything works again
SELECT tenure.fence_table('own_schema_t', 'own_schema');
SELECT tenure.release('own_schema', 'h');
SELECT tenure.unfence_table('own_schema_t');
DROP TABLE own_schema_t;
SELECT tenure.drop_lease('own_schema');
DROP EXTENSION pg_tenure;

\c contrib_regression
DROP DATABASE own_schema_db;
DROP ROLE own_schema_dbowner;
DROP ROLE own_schema_mallory;
