-- The audience and group validators the search functions call, as PL/pgSQL, where 0001 created them
-- (retrieval/README.md, migrations table). 0001 wrote knowledge.is_valid_principal_array and
-- knowledge.is_valid_group_array as SQL functions with their own search_path: PostgreSQL 15 plans
-- their sub-selects again at every call (0.23 ms of a 2 ms search on PostgreSQL 15,
-- docs/filtered-search.md), where a PL/pgSQL function keeps its plans for the session. The origin's
-- own v1 functions are PL/pgSQL already, and on the origin's database nothing here runs.
--
-- One answer changes, towards the origin's: 0001's principal test was a bool_and over the elements,
-- which skips an element whose test is NULL, so an object without a string principal but with the
-- right number of keys ({"kind":"matrix","x":"y"}) passed. The origin refuses it, as 0011's metadata
-- CHECK already did; now the search functions refuse such an audience too (SQLSTATE 22023). Every
-- other answer is unchanged (retrieval/db/validators.test.ts compares both with 0001's definitions
-- on generated input). Names, signatures, owner and grants stay.
DO $migration$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM knowledge.fgentic_retrieval_migrations WHERE version = 1 AND outcome = 'applied') THEN
    RETURN;
  END IF;

  EXECUTE $sql$
CREATE OR REPLACE FUNCTION knowledge.is_valid_principal_array(value jsonb, max_items integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $f$
DECLARE
  e jsonb;
  n integer;
BEGIN
  IF jsonb_typeof(value) IS DISTINCT FROM 'array' THEN
    RETURN false;
  END IF;
  n := jsonb_array_length(value);
  IF n > max_items THEN
    RETURN false;
  END IF;
  FOR i IN 0 .. n - 1 LOOP
    e := value->i;
    FOR j IN i + 1 .. n - 1 LOOP
      IF e = value->j THEN
        RETURN false;
      END IF;
    END LOOP;
    IF jsonb_typeof(e) IS DISTINCT FROM 'object'
       OR jsonb_typeof(e->'kind') IS DISTINCT FROM 'string'
       OR jsonb_typeof(e->'principal') IS DISTINCT FROM 'string'
       OR NOT knowledge.is_full_mxid(e->>'principal') THEN
      RETURN false;
    END IF;
    -- Exactly {"kind":"matrix","principal"} or {"kind":"bridged_matrix","network","principal"}.
    IF e->>'kind' = 'matrix' THEN
      IF (e - ARRAY['kind', 'principal']) <> '{}'::jsonb THEN
        RETURN false;
      END IF;
    ELSIF e->>'kind' = 'bridged_matrix' THEN
      IF (e - ARRAY['kind', 'principal', 'network']) <> '{}'::jsonb
         OR jsonb_typeof(e->'network') IS DISTINCT FROM 'string'
         OR NOT knowledge.is_dns1123_label(e->>'network') THEN
        RETURN false;
      END IF;
    ELSE
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END
$f$
  $sql$;

  EXECUTE $sql$
CREATE OR REPLACE FUNCTION knowledge.is_valid_group_array(value jsonb, max_items integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $f$
DECLARE
  e jsonb;
  n integer;
BEGIN
  IF jsonb_typeof(value) IS DISTINCT FROM 'array' THEN
    RETURN false;
  END IF;
  n := jsonb_array_length(value);
  IF n > max_items THEN
    RETURN false;
  END IF;
  FOR i IN 0 .. n - 1 LOOP
    e := value->i;
    FOR j IN i + 1 .. n - 1 LOOP
      IF e = value->j THEN
        RETURN false;
      END IF;
    END LOOP;
    IF jsonb_typeof(e) IS DISTINCT FROM 'string'
       OR (e #>> '{}') !~ '^partner/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$' THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END
$f$
  $sql$;
END
$migration$;
