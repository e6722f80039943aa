-- A Matrix server name's host checked without a bounded regex repeat (the check is part of every
-- Matrix search's argument validation: search_matrix_v1 → is_valid_principal_array → is_full_mxid).
-- Same answers as the baseline's function (retrieval/db/mxid.test.ts, retrieval/db/validators.test.ts
-- compare it with the contract's grammar); only the cost changes.

CREATE OR REPLACE FUNCTION fgentic.is_matrix_server_name(value text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
  host text := value;
  port text;
  bracket_end integer := length(value) - coalesce(nullif(strpos(reverse(value), ']'), 0) - 1, length(value));
  colon_pos integer := length(value) - coalesce(nullif(strpos(reverse(value), ':'), 0) - 1, length(value));
  label text;
BEGIN
  IF strpos(value, ':') > 0 AND colon_pos > bracket_end THEN
    port := substr(value, colon_pos + 1);
    IF port !~ '^[0-9]{1,5}$' OR port::integer < 1 OR port::integer > 65535 THEN
      RETURN false;
    END IF;
    host := substr(value, 1, colon_pos - 1);
  END IF;
  IF left(host, 1) = '[' THEN
    RETURN host ~ '^\[(?:(?:[0-9A-Fa-f]{1,4}:){6}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|::(?:[0-9A-Fa-f]{1,4}:){5}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:){4}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,1}[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:){3}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,2}[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:){2}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,3}[0-9A-Fa-f]{1,4})?::[0-9A-Fa-f]{1,4}:(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,4}[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,5}[0-9A-Fa-f]{1,4})?::[0-9A-Fa-f]{1,4}|(?:(?:[0-9A-Fa-f]{1,4}:){0,6}[0-9A-Fa-f]{1,4})?::)\]$';
  END IF;
  IF host ~ '^[0-9.]+$' THEN
    RETURN host ~ '^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$';
  END IF;
  -- The length apart from the pattern: a bounded repeat ({1,255}) makes PostgreSQL's regex
  -- compiler build a 255-step automaton, about 3 s of CPU at a backend's first search and 16 µs per
  -- match after, where the unbounded pattern costs under a microsecond.
  IF length(host) NOT BETWEEN 1 AND 255 OR host !~ '^[A-Za-z0-9.-]+$' THEN
    RETURN false;
  END IF;
  FOREACH label IN ARRAY string_to_array(host, '.') LOOP
    IF length(label) = 0 OR length(label) > 63 OR label ~ '^-' OR label ~ '-$' THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END
$$;
