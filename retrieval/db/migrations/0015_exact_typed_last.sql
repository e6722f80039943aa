-- The ranking core of migration 0014 and the wrappers of migration 0007, cheaper per call and with
-- the same answers (docs/filtered-search.md, "Per-call costs"):
--
-- 1. The exact path ranks the rows that pass the integer ACL test and applies the typed jsonb test
--    to the best of them only. Apart from id collisions (32-bit ids; retrieval/acl-collision.test.ts)
--    the integer test admits exactly the rows the typed test admits, so the first depth rows of the
--    integer ranking that pass the typed test are the exact answer whenever at least depth of the
--    first depth + max(depth, 10) pass (or the integer ranking has no more rows). Otherwise the
--    statement of migration 0014, the typed test on every row, answers. On PostgreSQL 15 the typed
--    test cost ~2 microseconds per authorized row (jsonb extraction and containment over a metadata
--    value of ~800 bytes): 2-3 ms of a 1,000-row exact answer.
-- 2. The statements whose plan cannot depend on the call's values are planned once per session
--    (plan_cache_mode = force_generic_plan, set around them; the function's own SET restores it on
--    exit): the HNSW fetch (pinned to its index by the planner settings around it), the duplicate
--    lookup (one probe of the vector-key index) and the typed test of the exact path's best rows
--    (primary-key probes). Planning the HNSW fetch and the duplicate lookup cost ~0.6 ms each per call on
--    PostgreSQL 15 (GIN cost estimation over four indexes), more than the fetch itself. The count
--    and the exact scans stay planned for their values: a generic plan cannot drop the Matrix
--    call's `any_ids IS NULL OR` branch, and for OAuth audiences it then scanned every row at the
--    classification level (34 ms at 20,000 rows), and the bounded count's custom plan stops early
--    at broad audiences where the generic bitmap plan reads every authorized row.
CREATE OR REPLACE FUNCTION knowledge.fgentic_rank_v1(
  query_embedding public.vector,
  allowed_classifications text[],
  audience jsonb,
  groups text[],
  all_ids integer[],
  any_ids integer[],
  depth integer,
  plan_hint text,
  exact_threshold integer,
  ef_search integer,
  max_scan_tuples integer
)
RETURNS TABLE (plan text, chunk_id text, distance double precision)
LANGUAGE plpgsql
VOLATILE
ROWS 20
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
SET jit = off
AS $function$
#variable_conflict use_column
DECLARE
  table_rows double precision;
  bound integer;
  authorized integer;
  chosen text;
  fetch_rows integer;
  found_ids text[];
  found_distances double precision[];
  cutoff double precision;
  closer integer;
  seen_at_cutoff integer;
  tied_ids text[];
  last_distance double precision;
  mean_distance double precision;
  min_contrast double precision;
  -- Beyond this many authorized rows at the cut-off distance the exact path answers.
  max_fetch constant integer := 5000;
  ranked integer;
  passed_ids text[];
  passed_distances double precision[];
BEGIN
  SELECT greatest(c.reltuples, 0) INTO table_rows FROM pg_catalog.pg_class c
  WHERE c.oid = 'knowledge.chunks'::regclass;
  bound := greatest(exact_threshold, ceil(coalesce(table_rows, 0) * 0.03)::integer);

  -- The same count as migration 0009's, over the narrow copy of fgentic_acl (see above).
  SELECT count(*)::integer INTO authorized FROM (
    SELECT 1 FROM knowledge.fgentic_acl_rows a
    WHERE a.fgentic_acl OPERATOR(public.@>) all_ids
      AND (any_ids IS NULL OR a.fgentic_acl OPERATOR(public.&&) any_ids)
    LIMIT bound + 1
  ) s;
  chosen := CASE
    WHEN plan_hint <> 'auto' THEN plan_hint
    WHEN authorized <= bound THEN 'exact'
    ELSE 'hnsw'
  END;

  IF chosen = 'hnsw' THEN
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true),
      set_config('hnsw.iterative_scan', 'relaxed_order', true),
      set_config('hnsw.ef_search', ef_search::text, true),
      set_config('hnsw.max_scan_tuples', max_scan_tuples::text, true),
      -- Row estimates for intarray containment are fixed guesses: keep the planner on the HNSW
      -- index rather than a bitmap scan + sort or a btree scan + sort (the re-sort below is done
      -- inside array_agg, which needs no Sort node).
      set_config('enable_seqscan', 'off', true),
      set_config('enable_bitmapscan', 'off', true),
      set_config('enable_sort', 'off', true),
      set_config('enable_incremental_sort', 'off', true);
    fetch_rows := depth + greatest(depth, 10);
    SELECT array_agg(r.chunk_id ORDER BY r.distance, r.chunk_id),
      array_agg(r.distance ORDER BY r.distance, r.chunk_id)
    INTO found_ids, found_distances
    FROM (
      SELECT c.chunk_id, c.embedding OPERATOR(public.<=>) query_embedding AS distance
      FROM knowledge.chunks c
      WHERE c.fgentic_acl OPERATOR(public.@>) all_ids
        AND (any_ids IS NULL OR c.fgentic_acl OPERATOR(public.&&) any_ids)
        AND (c.metadata->>'classification') = ANY (allowed_classifications)
        AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
        AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
      ORDER BY c.embedding OPERATOR(public.<=>) query_embedding
      LIMIT fetch_rows
    ) r;
    PERFORM set_config('enable_seqscan', 'on', true),
      set_config('enable_bitmapscan', 'on', true),
      set_config('enable_sort', 'on', true),
      set_config('enable_incremental_sort', 'on', true);
    found_ids := coalesce(found_ids, ARRAY[]::text[]);
    found_distances := coalesce(found_distances, ARRAY[]::double precision[]);

    IF cardinality(found_ids) < least(depth, authorized) THEN
      -- Completeness: the walk found fewer rows than are authorized and asked for.
      chosen := 'exact';
    ELSIF cardinality(found_ids) >= depth THEN
      cutoff := found_distances[depth];
      SELECT count(*) FILTER (WHERE d < cutoff)::integer, count(*) FILTER (WHERE d = cutoff)::integer
      INTO closer, seen_at_cutoff
      FROM unnest(found_distances) AS u(d);

      IF seen_at_cutoff > 1 AND plan_hint = 'auto' THEN
        -- The walk met a tie group at the cut-off. Looking the whole group up by distance equality
        -- reads the distance of every authorized row, which is what the exact path costs, and such a
        -- group is usually copies of one vector. Past the 10 rows pgvector keeps in one graph
        -- element, copies take several elements at distance 0 from each other; an element's
        -- neighbour list takes one of them by the selection heuristic and fills the rest in distance
        -- order (pgvector 0.8 src/hnswutils.c, SelectNeighbors), so with more such elements than a
        -- list holds (2 * m at layer 0) the lists hold only copies, and a walk that enters them can
        -- miss closer rows (retrieval/duplicate-search.test.ts). The exact path answers.
        chosen := 'exact';
      ELSIF seen_at_cutoff > 1 THEN
        -- The HNSW plan was asked for: take the tie group from an exact lookup.
        PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
        SELECT array_agg(t.chunk_id ORDER BY t.chunk_id) INTO tied_ids FROM (
          SELECT c.chunk_id FROM knowledge.chunks c
          WHERE c.fgentic_acl OPERATOR(public.@>) all_ids
            AND (any_ids IS NULL OR c.fgentic_acl OPERATOR(public.&&) any_ids)
            AND (c.metadata->>'classification') = ANY (allowed_classifications)
            AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
            AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
            AND (c.embedding OPERATOR(public.<=>) query_embedding) = cutoff
          LIMIT max_fetch + 1
        ) t;
      ELSE
        -- One row at the cut-off as far as the walk saw: its bit-identical duplicates tie with it.
        SELECT array_agg(t.chunk_id ORDER BY t.chunk_id) INTO tied_ids FROM (
          SELECT c.chunk_id FROM knowledge.chunks c
          WHERE fgentic_ids.vector_key(c.embedding) = (
              SELECT fgentic_ids.vector_key(x.embedding) FROM knowledge.chunks x
              WHERE x.chunk_id = found_ids[depth])
            AND c.fgentic_acl OPERATOR(public.@>) all_ids
            AND (any_ids IS NULL OR c.fgentic_acl OPERATOR(public.&&) any_ids)
            AND (c.metadata->>'classification') = ANY (allowed_classifications)
            AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
            AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
            AND (c.embedding OPERATOR(public.<=>) query_embedding) = cutoff
          LIMIT max_fetch + 1
        ) t;
      END IF;

      IF chosen = 'exact' THEN
        NULL;
      ELSIF cardinality(tied_ids) > max_fetch THEN
        chosen := 'exact';
      ELSE
        -- The rows strictly closer than the cut-off, as found, then the tie group by chunk_id. The
        -- rows the walk found at the cut-off stay in the group even if a concurrent write removed
        -- them from the lookup's snapshot (the callers re-check every row they return).
        found_ids := found_ids[1:closer] || ARRAY(
          SELECT DISTINCT u.id FROM unnest(
            coalesce(tied_ids, ARRAY[]::text[]) || found_ids[closer + 1:closer + seen_at_cutoff]) AS u(id)
          ORDER BY u.id);
        found_distances := found_distances[1:closer]
          || array_fill(cutoff, ARRAY[cardinality(found_ids) - closer]);
      END IF;
    END IF;

    IF chosen = 'hnsw' AND plan_hint = 'auto' THEN
      last_distance := found_distances[least(depth, cardinality(found_ids))];
      SELECT 1 - public.inner_product(public.l2_normalize(query_embedding), s.unit_sum) / s.row_count,
        s.min_contrast
      INTO mean_distance, min_contrast
      FROM knowledge.fgentic_search_stats s WHERE s.row_count > 0 AND s.unit_sum IS NOT NULL;
      IF last_distance > 0 AND (mean_distance IS NULL OR mean_distance < min_contrast * last_distance) THEN
        chosen := 'exact';
      END IF;
    END IF;

    IF chosen = 'hnsw' THEN
      RETURN QUERY
        SELECT 'hnsw'::text, f.id, f.d
        FROM unnest(found_ids[1:depth], found_distances[1:depth]) WITH ORDINALITY AS f(id, d, n)
        ORDER BY f.n;
      RETURN;
    END IF;
  END IF;

  -- Exact, step 1: the integer-authorized rows ranked by (distance, chunk_id). The CTE keeps the
  -- ranking off the HNSW index (it has no ORDER BY of its own).
  PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
  fetch_rows := depth + greatest(depth, 10);
  WITH authorized_rows AS MATERIALIZED (
    SELECT c.chunk_id, c.embedding OPERATOR(public.<=>) query_embedding AS distance
    FROM knowledge.chunks c
    WHERE c.fgentic_acl OPERATOR(public.@>) all_ids
      AND (any_ids IS NULL OR c.fgentic_acl OPERATOR(public.&&) any_ids)
  )
  SELECT array_agg(r.chunk_id ORDER BY r.distance, r.chunk_id),
    array_agg(r.distance ORDER BY r.distance, r.chunk_id), count(*)::integer
  INTO found_ids, found_distances, ranked
  FROM (
    SELECT a.chunk_id, a.distance FROM authorized_rows a
    ORDER BY a.distance, a.chunk_id
    LIMIT fetch_rows
  ) r;

  -- Step 2: the typed test on those rows, in rank order (primary-key probes: one plan serves all).
  PERFORM set_config('plan_cache_mode', 'force_generic_plan', true);
  SELECT array_agg(f.id ORDER BY f.n), array_agg(f.d ORDER BY f.n)
  INTO passed_ids, passed_distances
  FROM unnest(coalesce(found_ids, ARRAY[]::text[]), coalesce(found_distances, ARRAY[]::double precision[]))
    WITH ORDINALITY AS f(id, d, n)
  WHERE EXISTS (
    SELECT 1 FROM knowledge.chunks c
    WHERE c.chunk_id = f.id
      AND (c.metadata->>'classification') = ANY (allowed_classifications)
      AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
      AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups));

  IF ranked < fetch_rows OR cardinality(passed_ids) >= depth THEN
    -- Every integer-authorized row was ranked, or depth of the best ones passed the typed test.
    RETURN QUERY
      SELECT 'exact'::text, f.id, f.d
      FROM unnest(passed_ids[1:depth], passed_distances[1:depth]) WITH ORDINALITY AS f(id, d, n)
      ORDER BY f.n;
    RETURN;
  END IF;

  -- Collisions pushed typed-unauthorized rows into the integer ranking: the typed test on every row.
  PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
  RETURN QUERY
    WITH authorized_rows AS MATERIALIZED (
      SELECT c.chunk_id, c.embedding OPERATOR(public.<=>) query_embedding AS distance
      FROM knowledge.chunks c
      WHERE c.fgentic_acl OPERATOR(public.@>) all_ids
        AND (any_ids IS NULL OR c.fgentic_acl OPERATOR(public.&&) any_ids)
        AND (c.metadata->>'classification') = ANY (allowed_classifications)
        AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
        AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
    )
    SELECT 'exact'::text, a.chunk_id, a.distance FROM authorized_rows a
    ORDER BY a.distance, a.chunk_id
    LIMIT depth;
END;
$function$;
REVOKE ALL ON FUNCTION knowledge.fgentic_rank_v1(
  public.vector, text[], jsonb, text[], integer[], integer[], integer, text, integer, integer, integer) FROM PUBLIC;

-- The wrappers of migration 0007, unchanged but for their planning: every statement is planned once
-- per session except the keyword list of hybrid mode. Their join back to knowledge.chunks for content
-- (k primary-key probes) was planned at every call (~0.5 ms on PostgreSQL 15, more under load), and
-- their other statements read parameters, not estimates. The keyword list's plan depends on the
-- query text: with one generic plan, hybrid searches at broad audiences took ~1.7x as long.
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
  all_ids := ARRAY(
    SELECT fgentic_ids.id_of('p' || jsonb_build_array(e->'kind', e->'network', e->'principal')::text)
    FROM jsonb_array_elements(audience) AS a(e)
    UNION
    SELECT fgentic_ids.level_id(allowed_classifications)
  );

  RETURN QUERY
    SELECT 'vector'::text, (row_number() OVER (ORDER BY r.distance, r.chunk_id))::integer, r.plan,
      c.chunk_id, c.content, c.metadata, r.distance
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
        'exact'::text, r.chunk_id, r.content, r.metadata, r.distance
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
  group_ids := ARRAY(SELECT DISTINCT fgentic_ids.id_of('g' || g.v) FROM unnest(groups) AS g(v));

  RETURN QUERY
    SELECT 'vector'::text, (row_number() OVER (ORDER BY r.distance, r.chunk_id))::integer, r.plan,
      c.chunk_id, c.content, c.metadata, r.distance
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
        'exact'::text, r.chunk_id, r.content, r.metadata, r.distance
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
