-- A faster metadata CHECK for the table migration 0001 created (retrieval/README.md, "Large writes").
-- 0001's chunks_metadata_valid calls a tree of SQL functions, each with its own search_path setting,
-- so none is inlined: a row with one principal runs about a dozen function calls, each saving and
-- restoring the setting, plus several sub-selects over jsonb_object_keys and jsonb_array_elements.
-- fgentic_checks.metadata_valid gives the same answer in one PL/pgSQL call (tested against 0001's
-- functions on generated metadata: retrieval/db/metadata-check.test.ts).
--
-- Only where 0001 created knowledge.chunks (recorded as applied, not skipped) is the constraint
-- replaced, and only while it is still 0001's: on the origin's own database the table, its
-- constraint and its helper functions stay exactly as the origin's Jobs made them. 0001's functions
-- are kept (the origin's Jobs and their checks name them).
--
-- Its own schema, as for fgentic_ids (0007): the origin's Jobs revoke every function privilege in
-- schema knowledge when they run, which would stop every writer at this CHECK. The function is pure.
CREATE SCHEMA IF NOT EXISTS fgentic_checks;
REVOKE ALL ON SCHEMA fgentic_checks FROM PUBLIC;
GRANT USAGE ON SCHEMA fgentic_checks TO PUBLIC;

-- Never raises and never returns NULL for a non-NULL argument: true exactly when 0001's
-- knowledge.is_valid_metadata lets the row in.
CREATE OR REPLACE FUNCTION fgentic_checks.metadata_valid(value jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  src jsonb;
  arr jsonb;
  e jsonb;
  k text;
  s text;
  n integer;
  total integer := 0;
  host text;
  port text;
  label text;
  colon_pos integer;
  bracket_end integer;
BEGIN
  IF jsonb_typeof(value) <> 'object' OR octet_length(value::text) > 65536 THEN
    RETURN false;
  END IF;
  -- Exactly the four keys.
  IF NOT (value ?& ARRAY['source', 'classification', 'allowed_principals', 'allowed_groups'])
     OR (value - ARRAY['source', 'classification', 'allowed_principals', 'allowed_groups']) <> '{}'::jsonb THEN
    RETURN false;
  END IF;

  -- source: an object with id and only known keys, each a bounded clean string.
  src := value->'source';
  IF jsonb_typeof(src) <> 'object' OR NOT (src ? 'id')
     OR (src - ARRAY['id', 'title', 'locator', 'revision', 'location']) <> '{}'::jsonb THEN
    RETURN false;
  END IF;
  FOREACH k IN ARRAY ARRAY['id', 'title', 'locator', 'revision', 'location'] LOOP
    CONTINUE WHEN NOT (src ? k);
    IF jsonb_typeof(src->k) <> 'string' THEN
      RETURN false;
    END IF;
    s := src->>k;
    IF octet_length(s) < 1
       OR octet_length(s) > (CASE k WHEN 'locator' THEN 2048 WHEN 'revision' THEN 255 ELSE 512 END)
       OR s <> btrim(s, E' \t\n\r\f\v')
       OR s ~ '[\u0001-\u001f\u007f-\u009f]' THEN
      RETURN false;
    END IF;
  END LOOP;

  IF jsonb_typeof(value->'classification') <> 'string' OR (value->>'classification') NOT IN
     ('public', 'approved_non_public', 'restricted', 'regulated', 'secret', 'authentication') THEN
    RETURN false;
  END IF;

  -- allowed_principals: at most 64 distinct typed principals.
  arr := value->'allowed_principals';
  IF jsonb_typeof(arr) <> 'array' THEN
    RETURN false;
  END IF;
  n := jsonb_array_length(arr);
  IF n > 64 THEN
    RETURN false;
  END IF;
  total := n;
  FOR i IN 0 .. n - 1 LOOP
    e := arr->i;
    FOR j IN i + 1 .. n - 1 LOOP
      IF e = arr->j THEN
        RETURN false;
      END IF;
    END LOOP;
    IF jsonb_typeof(e) <> 'object' OR jsonb_typeof(e->'principal') IS DISTINCT FROM 'string'
       OR jsonb_typeof(e->'kind') IS DISTINCT FROM 'string' THEN
      RETURN false;
    END IF;
    IF e->>'kind' = 'matrix' THEN
      IF (e - ARRAY['kind', 'principal']) <> '{}'::jsonb THEN
        RETURN false;
      END IF;
    ELSIF e->>'kind' = 'bridged_matrix' THEN
      IF (e - ARRAY['kind', 'principal', 'network']) <> '{}'::jsonb
         OR jsonb_typeof(e->'network') IS DISTINCT FROM 'string'
         OR (e->>'network') !~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$' THEN
        RETURN false;
      END IF;
    ELSE
      RETURN false;
    END IF;
    -- A full MXID: @localpart:server_name, the server name as 0001's is_matrix_server_name reads it.
    s := e->>'principal';
    IF octet_length(s) < 4 OR octet_length(s) > 255 OR s !~ '^@[a-z0-9._=/+-]+:.+$' THEN
      RETURN false;
    END IF;
    host := substr(s, strpos(s, ':') + 1);
    bracket_end := length(host) - coalesce(nullif(strpos(reverse(host), ']'), 0) - 1, length(host));
    colon_pos := length(host) - coalesce(nullif(strpos(reverse(host), ':'), 0) - 1, length(host));
    IF strpos(host, ':') > 0 AND colon_pos > bracket_end THEN
      port := substr(host, colon_pos + 1);
      IF port !~ '^[0-9]{1,5}$' OR port::integer < 1 OR port::integer > 65535 THEN
        RETURN false;
      END IF;
      host := substr(host, 1, colon_pos - 1);
    END IF;
    IF left(host, 1) = '[' THEN
      IF host !~ '^\[(?:(?:[0-9A-Fa-f]{1,4}:){6}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|::(?:[0-9A-Fa-f]{1,4}:){5}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:){4}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,1}[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:){3}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,2}[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:){2}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,3}[0-9A-Fa-f]{1,4})?::[0-9A-Fa-f]{1,4}:(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,4}[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,5}[0-9A-Fa-f]{1,4})?::[0-9A-Fa-f]{1,4}|(?:(?:[0-9A-Fa-f]{1,4}:){0,6}[0-9A-Fa-f]{1,4})?::)\]$' THEN
        RETURN false;
      END IF;
    ELSIF host ~ '^[0-9.]+$' THEN
      IF host !~ '^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$' THEN
        RETURN false;
      END IF;
    ELSE
      IF host !~ '^[A-Za-z0-9.-]{1,255}$' THEN
        RETURN false;
      END IF;
      FOREACH label IN ARRAY string_to_array(host, '.') LOOP
        IF length(label) = 0 OR length(label) > 63 OR label ~ '^-' OR label ~ '-$' THEN
          RETURN false;
        END IF;
      END LOOP;
    END IF;
  END LOOP;

  -- allowed_groups: at most 64 distinct partner/<org>/<name> strings.
  arr := value->'allowed_groups';
  IF jsonb_typeof(arr) <> 'array' THEN
    RETURN false;
  END IF;
  n := jsonb_array_length(arr);
  IF n > 64 THEN
    RETURN false;
  END IF;
  total := total + n;
  FOR i IN 0 .. n - 1 LOOP
    e := arr->i;
    FOR j IN i + 1 .. n - 1 LOOP
      IF e = arr->j THEN
        RETURN false;
      END IF;
    END LOOP;
    IF jsonb_typeof(e) <> 'string'
       OR (e #>> '{}') !~ '^partner/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$' THEN
      RETURN false;
    END IF;
  END LOOP;

  RETURN total > 0;
END
$$;

REVOKE ALL ON FUNCTION fgentic_checks.metadata_valid(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fgentic_checks.metadata_valid(jsonb) TO PUBLIC;

DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM knowledge.fgentic_retrieval_migrations WHERE version = 1 AND outcome = 'applied')
     AND EXISTS (
       SELECT 1 FROM pg_catalog.pg_constraint
        WHERE conrelid = 'knowledge.chunks'::regclass AND conname = 'chunks_metadata_valid'
          AND pg_catalog.pg_get_constraintdef(oid) = 'CHECK (knowledge.is_valid_metadata(metadata))')
  THEN
    -- Same name, so every error a writer sees is unchanged; existing rows are checked again.
    ALTER TABLE knowledge.chunks
      DROP CONSTRAINT chunks_metadata_valid,
      ADD CONSTRAINT chunks_metadata_valid CHECK (fgentic_checks.metadata_valid(metadata));
  END IF;
END
$$;
