-- The only read path of the retrieval role: two versioned search functions, one per projection kind,
-- that validate their arguments, apply the ACL prefilter (ADR 0017 decision 2) and choose the ranking
-- plan inside the database, so the fast path is also the enforced path. knowledge_retrieval may execute
-- them and has no privilege on knowledge.chunks itself.
--
-- SECURITY DEFINER, owned by knowledge_owner (who owns the table). The search_path is pinned to
-- pg_catalog with pg_temp last, and every object outside pg_catalog is schema-qualified (the table,
-- the helpers, pgvector's type, functions and the <=> operator in public), so no object a caller can
-- create is ever resolved. All SQL is static; arguments are typed values, never text spliced into SQL.
-- plan_cache_mode = force_custom_plan plans each statement for the actual arguments, as the unprepared
-- queries did before: the GIN and HNSW choices depend on them.
--
-- Plans (DESIGN.md decision 8):
--   exact: materialize the authorized rows (GIN-assisted), cosine-sort, tie-break chunk_id.
--   hnsw:  the HNSW index under the same WHERE with hnsw.iterative_scan = strict_order and the
--          planner kept on the index, all set transaction-locally; if the iterative scan stops with
--          fewer rows than exist, the exact plan answers instead.
-- The choice counts authorized rows only, at most exact_threshold + 1 of them, and the count never
-- leaves the function. Rows of the approximate scan are re-read by id under the same predicate, since
-- each statement sees its own snapshot.
--
-- Result: list 'vector' (ranked by distance) and, when query_text is given, list 'keyword' (ranked by
-- full-text rank) with ord = position in its list; plan = the plan used. Invalid arguments raise
-- SQLSTATE 22023 with a fixed message and no argument in it.

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
SET plan_cache_mode = force_custom_plan
AS $function$
#variable_conflict use_column
DECLARE
  principals text[];
  depth integer;
  authorized integer;
  chosen text;
  ids text[];
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

  -- Only lets the planner start from the principal-strings index (migration 0005); the typed @> below
  -- is the authorization test.
  principals := ARRAY(SELECT DISTINCT e->>'principal' FROM jsonb_array_elements(audience) AS a(e));
  depth := CASE WHEN query_text IS NULL THEN max_results ELSE greatest(max_results * 3, 30) END;

  SELECT count(*)::integer INTO authorized FROM (
    SELECT 1 FROM knowledge.chunks c
    WHERE (c.metadata->>'classification') = ANY (allowed_classifications)
      AND (c.metadata->'allowed_principals') @> audience
      AND jsonb_path_query_array(c.metadata->'allowed_principals', '$[*].principal') ?& principals
    LIMIT exact_threshold + 1
  ) s;
  chosen := CASE
    WHEN plan_hint <> 'auto' THEN plan_hint
    WHEN authorized <= exact_threshold THEN 'exact'
    ELSE 'hnsw'
  END;

  IF chosen = 'hnsw' THEN
    PERFORM set_config('hnsw.iterative_scan', 'strict_order', true),
      set_config('hnsw.ef_search', ef_search::text, true),
      set_config('hnsw.max_scan_tuples', max_scan_tuples::text, true),
      -- jsonb containment estimates are crude: keep the planner on the HNSW index rather than a
      -- bitmap scan + full sort (broad audiences) or a btree scan + sort (small tables).
      set_config('enable_seqscan', 'off', true),
      set_config('enable_bitmapscan', 'off', true),
      set_config('enable_sort', 'off', true),
      set_config('enable_incremental_sort', 'off', true);
    ids := ARRAY(
      SELECT c.chunk_id FROM knowledge.chunks c
      WHERE (c.metadata->>'classification') = ANY (allowed_classifications)
        AND (c.metadata->'allowed_principals') @> audience
        AND jsonb_path_query_array(c.metadata->'allowed_principals', '$[*].principal') ?& principals
      ORDER BY c.embedding OPERATOR(public.<=>) query_embedding
      LIMIT depth
    );
  END IF;

  IF chosen = 'hnsw' AND cardinality(ids) >= least(depth, authorized) THEN
    RETURN QUERY
      SELECT 'vector'::text, (row_number() OVER (ORDER BY r.distance, r.chunk_id))::integer, chosen,
        r.chunk_id, r.content, r.metadata, r.distance
      FROM (
        SELECT c.chunk_id, c.content, c.metadata,
          c.embedding OPERATOR(public.<=>) query_embedding AS distance
        FROM knowledge.chunks c
        WHERE c.chunk_id = ANY (ids)
          AND (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_principals') @> audience
      ) r
      ORDER BY r.distance, r.chunk_id;
  ELSE
    RETURN QUERY
      WITH authorized_rows AS MATERIALIZED (
        SELECT c.chunk_id, c.content, c.metadata, c.embedding FROM knowledge.chunks c
        WHERE (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_principals') @> audience
          AND jsonb_path_query_array(c.metadata->'allowed_principals', '$[*].principal') ?& principals
      ), ranked AS (
        SELECT a.chunk_id, a.content, a.metadata,
          a.embedding OPERATOR(public.<=>) query_embedding AS distance
        FROM authorized_rows a
        ORDER BY a.embedding OPERATOR(public.<=>) query_embedding, a.chunk_id
        LIMIT depth
      )
      SELECT 'vector'::text, (row_number() OVER (ORDER BY r.distance, r.chunk_id))::integer, chosen,
        r.chunk_id, r.content, r.metadata, r.distance
      FROM ranked r
      ORDER BY r.distance, r.chunk_id;
  END IF;

  IF query_text IS NOT NULL THEN
    RETURN QUERY
      SELECT 'keyword'::text, (row_number() OVER (ORDER BY r.rank DESC, r.chunk_id))::integer, chosen,
        r.chunk_id, r.content, r.metadata, r.distance
      FROM (
        SELECT c.chunk_id, c.content, c.metadata,
          c.embedding OPERATOR(public.<=>) query_embedding AS distance,
          ts_rank_cd(to_tsvector('simple', c.content), q) AS rank
        FROM knowledge.chunks c, websearch_to_tsquery('simple', query_text) AS q
        WHERE (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_principals') @> audience
          AND jsonb_path_query_array(c.metadata->'allowed_principals', '$[*].principal') ?& principals
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
SET plan_cache_mode = force_custom_plan
AS $function$
#variable_conflict use_column
DECLARE
  depth integer;
  authorized integer;
  chosen text;
  ids text[];
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
    -- ADR 0017: a partner's groups are namespaced by its own policy id; the origin's functions do
    -- not check this, so it is checked here as well as in the contract.
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

  SELECT count(*)::integer INTO authorized FROM (
    SELECT 1 FROM knowledge.chunks c
    WHERE (c.metadata->>'classification') = ANY (allowed_classifications)
      AND (c.metadata->'allowed_groups') ?| groups
    LIMIT exact_threshold + 1
  ) s;
  chosen := CASE
    WHEN plan_hint <> 'auto' THEN plan_hint
    WHEN authorized <= exact_threshold THEN 'exact'
    ELSE 'hnsw'
  END;

  IF chosen = 'hnsw' THEN
    PERFORM set_config('hnsw.iterative_scan', 'strict_order', true),
      set_config('hnsw.ef_search', ef_search::text, true),
      set_config('hnsw.max_scan_tuples', max_scan_tuples::text, true),
      set_config('enable_seqscan', 'off', true),
      set_config('enable_bitmapscan', 'off', true),
      set_config('enable_sort', 'off', true),
      set_config('enable_incremental_sort', 'off', true);
    ids := ARRAY(
      SELECT c.chunk_id FROM knowledge.chunks c
      WHERE (c.metadata->>'classification') = ANY (allowed_classifications)
        AND (c.metadata->'allowed_groups') ?| groups
      ORDER BY c.embedding OPERATOR(public.<=>) query_embedding
      LIMIT depth
    );
  END IF;

  IF chosen = 'hnsw' AND cardinality(ids) >= least(depth, authorized) THEN
    RETURN QUERY
      SELECT 'vector'::text, (row_number() OVER (ORDER BY r.distance, r.chunk_id))::integer, chosen,
        r.chunk_id, r.content, r.metadata, r.distance
      FROM (
        SELECT c.chunk_id, c.content, c.metadata,
          c.embedding OPERATOR(public.<=>) query_embedding AS distance
        FROM knowledge.chunks c
        WHERE c.chunk_id = ANY (ids)
          AND (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_groups') ?| groups
      ) r
      ORDER BY r.distance, r.chunk_id;
  ELSE
    RETURN QUERY
      WITH authorized_rows AS MATERIALIZED (
        SELECT c.chunk_id, c.content, c.metadata, c.embedding FROM knowledge.chunks c
        WHERE (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_groups') ?| groups
      ), ranked AS (
        SELECT a.chunk_id, a.content, a.metadata,
          a.embedding OPERATOR(public.<=>) query_embedding AS distance
        FROM authorized_rows a
        ORDER BY a.embedding OPERATOR(public.<=>) query_embedding, a.chunk_id
        LIMIT depth
      )
      SELECT 'vector'::text, (row_number() OVER (ORDER BY r.distance, r.chunk_id))::integer, chosen,
        r.chunk_id, r.content, r.metadata, r.distance
      FROM ranked r
      ORDER BY r.distance, r.chunk_id;
  END IF;

  IF query_text IS NOT NULL THEN
    RETURN QUERY
      SELECT 'keyword'::text, (row_number() OVER (ORDER BY r.rank DESC, r.chunk_id))::integer, chosen,
        r.chunk_id, r.content, r.metadata, r.distance
      FROM (
        SELECT c.chunk_id, c.content, c.metadata,
          c.embedding OPERATOR(public.<=>) query_embedding AS distance,
          ts_rank_cd(to_tsvector('simple', c.content), q) AS rank
        FROM knowledge.chunks c, websearch_to_tsquery('simple', query_text) AS q
        WHERE (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_groups') ?| groups
          AND to_tsvector('simple', c.content) @@ q
        ORDER BY rank DESC, c.chunk_id
        LIMIT depth
      ) r
      ORDER BY r.rank DESC, r.chunk_id;
  END IF;
END;
$function$;

REVOKE ALL ON FUNCTION knowledge.fgentic_search_matrix_v1(
  public.vector, text[], jsonb, integer, text, text, integer, integer, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION knowledge.fgentic_search_groups_v1(
  public.vector, text[], text, text[], integer, text, text, integer, integer, integer) FROM PUBLIC;
-- The origin's v1 and migration 0001 already grant the schema; repeated for schemas created otherwise.
GRANT USAGE ON SCHEMA knowledge TO knowledge_retrieval;
GRANT EXECUTE ON FUNCTION knowledge.fgentic_search_matrix_v1(
  public.vector, text[], jsonb, integer, text, text, integer, integer, integer) TO knowledge_retrieval;
GRANT EXECUTE ON FUNCTION knowledge.fgentic_search_groups_v1(
  public.vector, text[], text, text[], integer, text, text, integer, integer, integer) TO knowledge_retrieval;

-- The origin grants the retrieval role plain SELECT on the table; the function path replaces it. The
-- origin's own search functions run with the caller's rights, so knowledge_retrieval can no longer
-- use them either: its only read path is the two functions above.
REVOKE ALL ON knowledge.chunks FROM knowledge_retrieval;
