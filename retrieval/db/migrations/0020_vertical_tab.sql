-- The clean-text checks trim the vertical tab as E'\x0B'. PostgreSQL before 18 reads E'\v' as the
-- letter v, so 0001's knowledge.is_bounded_clean_text and 0011's fgentic_checks.metadata_valid
-- refused every chunk id and source string that begins or ends with "v" on PostgreSQL 15, while
-- PGlite (PostgreSQL 18) accepted them. Same answers as the contract's clean-text rule on every
-- engine (retrieval/db/validators.test.ts). knowledge.is_bounded_clean_text is replaced only where
-- 0001 created it; on the origin's database it is the origin's function and stays as it is.
DO $migration$
BEGIN
  IF EXISTS (SELECT 1 FROM knowledge.fgentic_retrieval_migrations WHERE version = 1 AND outcome = 'applied') THEN
    EXECUTE $sql$
CREATE OR REPLACE FUNCTION knowledge.is_bounded_clean_text(value text, max_bytes integer) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $f$
  SELECT octet_length(value) BETWEEN 1 AND max_bytes
     AND value = btrim(value, E' \t\n\r\f\x0B')
     AND value !~ '[\u0001-\u001f\u007f-\u009f]'
$f$
    $sql$;
  END IF;
END
$migration$;

-- 0011's metadata check, with the vertical tab spelled so that PostgreSQL 15 reads it.
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
       OR s <> btrim(s, E' \t\n\r\f\x0B')
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
