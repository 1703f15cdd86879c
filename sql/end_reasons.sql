-- The end reasons of tenure.history: the C table that names them
-- (tenure_end_reason_text(), history.h) against the CHECK constraint of
-- the end_reason column, both ways.  The C table is read through a C
-- function that the extension does not create: this session binds it.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS pg_tenure;

CREATE FUNCTION pg_temp.end_reasons() RETURNS text[]
	LANGUAGE c AS '$libdir/pg_tenure', 'pg_tenure_end_reasons';

-- the names the CHECK constraint allows, in its order
CREATE TEMP VIEW check_reasons AS
SELECT m.ord, m.r[1] AS reason
  FROM pg_constraint c,
	   regexp_matches(pg_get_constraintdef(c.oid), '''([^'']*)''', 'g')
		 WITH ORDINALITY AS m(r, ord)
 WHERE c.conrelid = 'tenure.history'::regclass AND c.contype = 'c'
   AND pg_get_constraintdef(c.oid) LIKE '%end_reason%';

-- side by side: a name only one of them has shows beside a NULL
SELECT c.reason AS in_check, t.reason AS in_c_table
  FROM check_reasons c
  FULL JOIN unnest(pg_temp.end_reasons()) WITH ORDINALITY AS t(reason, ord)
	ON t.reason = c.reason
 ORDER BY coalesce(c.ord, 100 + t.ord);

-- each name once
SELECT count(*) AS names, count(DISTINCT reason) AS distinct_names
  FROM unnest(pg_temp.end_reasons()) AS t(reason);
