-- The same ACL ids and vector keys, computed faster for every writer (retrieval/README.md, "Large
-- writes"). Migration 0007's fgentic_ids.row_ids and 0009's fgentic_ids.vector_key are SQL functions
-- with their own search_path, so PostgreSQL never inlines them: each row written ran a generated
-- column that called row_ids, whose query ran id_of (another such function) once per principal,
-- group and level, then sorted and de-duplicated the ids in a further aggregate; and each row's
-- vector key ran a one-line query in a function executor of its own. On the embedded database they
-- were about a quarter of a fresh row's INSERT.
--
-- Both are replaced in place by PL/pgSQL functions that evaluate the same expressions as simple
-- expressions, id_of's hash written out inside row_ids. They return exactly what the previous
-- definitions return for every input (tested against 0007's and 0009's definitions on generated
-- input: retrieval/db/write-functions.test.ts), so stored generated values and the expression
-- index stay valid and nothing is rewritten. Signatures, volatility and grants are unchanged.

CREATE OR REPLACE FUNCTION fgentic_ids.row_ids(metadata jsonb) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
  ids integer[] := '{}';
  arr jsonb;
  e jsonb;
  level text;
BEGIN
  arr := metadata->'allowed_principals';
  IF jsonb_typeof(arr) = 'array' THEN
    FOR i IN 0 .. jsonb_array_length(arr) - 1 LOOP
      e := arr->i;
      IF jsonb_typeof(e) = 'object' AND jsonb_typeof(e->'principal') = 'string' THEN
        ids := ids || ('x' || encode(substr(sha256(convert_to(
          'p' || jsonb_build_array(e->'kind', e->'network', e->'principal')::text, 'UTF8')), 1, 4),
          'hex'))::bit(32)::integer;
      END IF;
    END LOOP;
  END IF;
  arr := metadata->'allowed_groups';
  IF jsonb_typeof(arr) = 'array' THEN
    FOR i IN 0 .. jsonb_array_length(arr) - 1 LOOP
      e := arr->i;
      IF jsonb_typeof(e) = 'string' THEN
        ids := ids || ('x' || encode(substr(sha256(convert_to('g' || (e #>> '{}'), 'UTF8')), 1, 4),
          'hex'))::bit(32)::integer;
      END IF;
    END LOOP;
  END IF;
  FOREACH level IN ARRAY CASE metadata->>'classification'
      WHEN 'public' THEN ARRAY['public', 'approved_non_public']
      WHEN 'approved_non_public' THEN ARRAY['approved_non_public']
      ELSE ARRAY[]::text[] END LOOP
    ids := ids || ('x' || encode(substr(sha256(convert_to('l' || level, 'UTF8')), 1, 4),
      'hex'))::bit(32)::integer;
  END LOOP;
  -- Ascending and distinct, as 0007's array_agg(DISTINCT … ORDER BY …); intarray (0007) is in public.
  RETURN public.uniq(public.sort(ids));
END
$$;

CREATE OR REPLACE FUNCTION fgentic_ids.vector_key(embedding public.vector) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
BEGIN
  RETURN ('x' || encode(substr(sha256(public.vector_send(embedding)), 1, 8), 'hex'))::bit(64)::bigint;
END
$$;
