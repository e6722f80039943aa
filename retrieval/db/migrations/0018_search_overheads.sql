-- The per-call work of a search around its ranking, smaller, with the same rows ranked the same way
-- (docs/filtered-search.md, "Around the ranking"):
--
-- 1. The ids a search asks for are computed by PL/pgSQL loops instead of a query over SQL functions.
--    0015 built a Matrix audience's ids as a UNION over jsonb_array_elements calling fgentic_ids.id_of
--    and fgentic_ids.level_id, SQL functions with their own search_path, which PostgreSQL cannot
--    inline and plans again at every call: 75 microseconds per search on PostgreSQL 15, under 10 as
--    PL/pgSQL. The hash is 0007's (retrieval/db/search-ids.test.ts compares the new definitions with
--    0007's on generated input), so every stored fgentic_acl value stays valid.
-- 2. A search returns of each row's metadata only what the server uses (retrieval/search.ts,
--    SearchHit; retrieval/mcp/tool.ts, renderResult): the source and the classification. The rest is
--    the row's ACL, the lists of every other principal and group that may read it; it stays in the
--    database, and sending and parsing it took 0.2 ms of a broad search.
-- Signatures, owners and grants of the search functions stay.

-- 0007's hash, as PL/pgSQL (same answers; retrieval/db/search-ids.test.ts). The search side's ids
-- all go through it, so a test build that replaces it reaches every search (retrieval/acl-collision.test.ts).
CREATE OR REPLACE FUNCTION fgentic_ids.id_of(value text) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
BEGIN
  RETURN ('x' || encode(substr(sha256(convert_to(value, 'UTF8')), 1, 4), 'hex'))::bit(32)::integer;
END
$$;

-- Same answers as 0007's (a set without 'approved_non_public', NULL elements included, asks for 'public').
CREATE OR REPLACE FUNCTION fgentic_ids.level_id(allowed_classifications text[]) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
BEGIN
  RETURN fgentic_ids.id_of('l' || CASE WHEN 'approved_non_public' = ANY (allowed_classifications)
    THEN 'approved_non_public' ELSE 'public' END);
END
$$;

-- A Matrix audience's ids and the level id, ascending and distinct: the set 0015's wrapper built.
CREATE OR REPLACE FUNCTION fgentic_ids.audience_ids(audience jsonb, allowed_classifications text[])
RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
  ids integer[] := ARRAY[fgentic_ids.level_id(allowed_classifications)];
  e jsonb;
BEGIN
  FOR i IN 0 .. jsonb_array_length(audience) - 1 LOOP
    e := audience->i;
    ids := ids || fgentic_ids.id_of('p' || jsonb_build_array(e->'kind', e->'network', e->'principal')::text);
  END LOOP;
  RETURN public.uniq(public.sort(ids));
END
$$;

-- A partner's group ids, ascending and distinct. A NULL group adds no id (0015's wrapper added a
-- NULL, which no row matches); the search functions refuse such an array before asking.
CREATE OR REPLACE FUNCTION fgentic_ids.group_ids(groups text[]) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
  ids integer[] := '{}';
  g text;
BEGIN
  FOREACH g IN ARRAY groups LOOP
    IF g IS NOT NULL THEN
      ids := ids || fgentic_ids.id_of('g' || g);
    END IF;
  END LOOP;
  RETURN public.uniq(public.sort(ids));
END
$$;
-- Only the search functions (SECURITY DEFINER, run as the owner) need these two.
REVOKE ALL ON FUNCTION fgentic_ids.audience_ids(jsonb, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION fgentic_ids.group_ids(text[]) FROM PUBLIC;

-- The search functions of migration 0015, but for the two changes above.
CREATE OR REPLACE FUNCTION knowledge.fgentic_search_matrix_v1(
  query_embedding public.vector,
  allowed_classifications text[],
  audience jsonb,
  max_results integer,
  query_text text,
  plan_hint text,
  exact_threshold integer,
  ef_search integer,
  max_scan_tuples integer
)
RETURNS TABLE (
  list text,
  ord integer,
  plan text,
  chunk_id text,
  content text,
  metadata jsonb,
  distance double precision
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $function$
#variable_conflict use_column
DECLARE
  depth integer;
  all_ids integer[];
BEGIN
  IF query_embedding IS NULL
    OR public.vector_dims(query_embedding) <> 1024
    OR NOT public.vector_norm(query_embedding) > 0
    OR allowed_classifications IS NULL
    OR NOT (allowed_classifications = ARRAY['public']::text[]
      OR allowed_classifications = ARRAY['approved_non_public', 'public']::text[])
    OR audience IS NULL
    OR jsonb_typeof(audience) IS DISTINCT FROM 'array'
    OR jsonb_array_length(audience) NOT BETWEEN 1 AND 16
    OR NOT knowledge.is_valid_principal_array(audience, 16)
    OR max_results IS NULL OR max_results NOT BETWEEN 1 AND 20
    OR (query_text IS NOT NULL AND char_length(query_text) NOT BETWEEN 1 AND 4096)
    OR plan_hint IS NULL OR plan_hint NOT IN ('auto', 'exact', 'hnsw')
    OR exact_threshold IS NULL OR exact_threshold NOT BETWEEN 0 AND 1000000
    OR ef_search IS NULL OR ef_search NOT BETWEEN 1 AND 1000
    OR max_scan_tuples IS NULL OR max_scan_tuples NOT BETWEEN 1 AND 100000000
  THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fgentic search: invalid argument';
  END IF;

  -- Hybrid fuses two lists: each is taken deeper than the final k so fusion has candidates to
  -- reorder; the vector list's depth goes through the same planner, ties and guard as k does.
  depth := CASE WHEN query_text IS NULL THEN max_results ELSE greatest(max_results * 3, 30) END;
  all_ids := fgentic_ids.audience_ids(audience, allowed_classifications);

  RETURN QUERY
    SELECT 'vector'::text, (row_number() OVER (ORDER BY r.distance, r.chunk_id))::integer, r.plan,
      c.chunk_id, c.content, jsonb_build_object('source', c.metadata->'source', 'classification', c.metadata->'classification'), r.distance
    FROM knowledge.fgentic_rank_v1(query_embedding, allowed_classifications, audience, NULL, all_ids, NULL,
      depth, plan_hint, exact_threshold, ef_search, max_scan_tuples) r
    JOIN knowledge.chunks c ON c.chunk_id = r.chunk_id
    -- Each statement reads its own snapshot: the rows returned are re-checked as read here.
    WHERE (c.metadata->>'classification') = ANY (allowed_classifications)
      AND (c.metadata->'allowed_principals') @> audience
    ORDER BY r.distance, r.chunk_id;

  IF query_text IS NOT NULL THEN
    -- The keyword list's plan depends on the query text (its tsquery's estimates): planned per call.
    PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
    RETURN QUERY
      SELECT 'keyword'::text, (row_number() OVER (ORDER BY r.rank DESC, r.chunk_id))::integer,
        'exact'::text, r.chunk_id, r.content, jsonb_build_object('source', r.metadata->'source', 'classification', r.metadata->'classification'), r.distance
      FROM (
        SELECT c.chunk_id, c.content, c.metadata,
          c.embedding OPERATOR(public.<=>) query_embedding AS distance,
          ts_rank_cd(to_tsvector('simple', c.content), q) AS rank
        FROM knowledge.chunks c, websearch_to_tsquery('simple', query_text) AS q
        WHERE c.fgentic_acl OPERATOR(public.@>) all_ids
          AND (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_principals') @> audience
          AND to_tsvector('simple', c.content) @@ q
        ORDER BY rank DESC, c.chunk_id
        LIMIT depth
      ) r
      ORDER BY r.rank DESC, r.chunk_id;
  END IF;
END;
$function$;

CREATE OR REPLACE FUNCTION knowledge.fgentic_search_groups_v1(
  query_embedding public.vector,
  allowed_classifications text[],
  policy_id text,
  groups text[],
  max_results integer,
  query_text text,
  plan_hint text,
  exact_threshold integer,
  ef_search integer,
  max_scan_tuples integer
)
RETURNS TABLE (
  list text,
  ord integer,
  plan text,
  chunk_id text,
  content text,
  metadata jsonb,
  distance double precision
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $function$
#variable_conflict use_column
DECLARE
  depth integer;
  level_ids integer[];
  group_ids integer[];
BEGIN
  IF query_embedding IS NULL
    OR public.vector_dims(query_embedding) <> 1024
    OR NOT public.vector_norm(query_embedding) > 0
    OR allowed_classifications IS NULL
    OR NOT (allowed_classifications = ARRAY['public']::text[]
      OR allowed_classifications = ARRAY['approved_non_public', 'public']::text[])
    OR policy_id IS NULL OR NOT knowledge.is_dns1123_label(policy_id)
    OR groups IS NULL
    OR cardinality(groups) NOT BETWEEN 1 AND 16
    OR array_position(groups, NULL) IS NOT NULL
    OR NOT knowledge.is_valid_group_array(to_jsonb(groups), 16)
    -- ADR 0017: a partner's groups are namespaced by its own policy id.
    OR EXISTS (SELECT 1 FROM unnest(groups) AS g(v) WHERE NOT starts_with(g.v, 'partner/' || policy_id || '/'))
    OR max_results IS NULL OR max_results NOT BETWEEN 1 AND 20
    OR (query_text IS NOT NULL AND char_length(query_text) NOT BETWEEN 1 AND 4096)
    OR plan_hint IS NULL OR plan_hint NOT IN ('auto', 'exact', 'hnsw')
    OR exact_threshold IS NULL OR exact_threshold NOT BETWEEN 0 AND 1000000
    OR ef_search IS NULL OR ef_search NOT BETWEEN 1 AND 1000
    OR max_scan_tuples IS NULL OR max_scan_tuples NOT BETWEEN 1 AND 100000000
  THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fgentic search: invalid argument';
  END IF;

  depth := CASE WHEN query_text IS NULL THEN max_results ELSE greatest(max_results * 3, 30) END;
  level_ids := ARRAY[fgentic_ids.level_id(allowed_classifications)];
  group_ids := fgentic_ids.group_ids(groups);

  RETURN QUERY
    SELECT 'vector'::text, (row_number() OVER (ORDER BY r.distance, r.chunk_id))::integer, r.plan,
      c.chunk_id, c.content, jsonb_build_object('source', c.metadata->'source', 'classification', c.metadata->'classification'), r.distance
    FROM knowledge.fgentic_rank_v1(query_embedding, allowed_classifications, NULL, groups, level_ids,
      group_ids, depth, plan_hint, exact_threshold, ef_search, max_scan_tuples) r
    JOIN knowledge.chunks c ON c.chunk_id = r.chunk_id
    WHERE (c.metadata->>'classification') = ANY (allowed_classifications)
      AND (c.metadata->'allowed_groups') ?| groups
    ORDER BY r.distance, r.chunk_id;

  IF query_text IS NOT NULL THEN
    -- The keyword list's plan depends on the query text (its tsquery's estimates): planned per call.
    PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
    RETURN QUERY
      SELECT 'keyword'::text, (row_number() OVER (ORDER BY r.rank DESC, r.chunk_id))::integer,
        'exact'::text, r.chunk_id, r.content, jsonb_build_object('source', r.metadata->'source', 'classification', r.metadata->'classification'), r.distance
      FROM (
        SELECT c.chunk_id, c.content, c.metadata,
          c.embedding OPERATOR(public.<=>) query_embedding AS distance,
          ts_rank_cd(to_tsvector('simple', c.content), q) AS rank
        FROM knowledge.chunks c, websearch_to_tsquery('simple', query_text) AS q
        WHERE c.fgentic_acl OPERATOR(public.&&) group_ids
          AND (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_groups') ?| groups
          AND to_tsvector('simple', c.content) @@ q
        ORDER BY rank DESC, c.chunk_id
        LIMIT depth
      ) r
      ORDER BY r.rank DESC, r.chunk_id;
  END IF;
END;
$function$;
