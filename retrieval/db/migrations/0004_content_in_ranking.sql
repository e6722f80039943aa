-- The ranking core reads the content it answers with (docs/filtered-search.md, "How it works").
--
-- rank_v2 returns, with each row it answers with, the content, source and classification of its
-- origin row, read under the typed test by the statement that returns the row. On the exact path
-- that statement is the typed test of the ranking itself: it probes the ranked rows in rank order
-- and stops once depth have passed, so a search probes each answered row once and no more rows than
-- it needs (rank_v1 probed all depth + max(depth, 10) ranked rows, and the search functions probed
-- the answer a second time for its content). When fewer than depth pass, the fallback ranks, under
-- the typed test, only the rows after the last one step 1 ranked. The search functions keep their
-- signatures, grants and checks; they now take the content from rank_v2. The exact scan of a
-- Matrix audience starts from all of its own ids at once (the GIN index intersects them) rather than
-- from its rarest id alone, so it reads only rows the whole room may read. The differential tests
-- (retrieval/acl.test.ts, retrieval/acl-collision.test.ts, retrieval/tie-search.test.ts) pin the
-- answers.

CREATE FUNCTION fgentic.rank_v2(
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
RETURNS TABLE (plan text, chunk_id text, distance double precision, content text, metadata jsonb)
LANGUAGE plpgsql
VOLATILE
ROWS 20
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
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
  found_versions xid[];
  passed_ids text[];
  passed_distances double precision[];
  cutoff double precision;
  closer integer;
  seen_at_cutoff integer;
  tied_ids text[];
  last_distance double precision;
  mean_distance double precision;
  min_contrast double precision;
  ranked integer;
  returned integer;
  -- The audience's most selective id (the fallback scan starts from it), a Matrix audience's own
  -- ids (the exact scan intersects them), and the audience's subgraph, if any.
  key_ids integer[];
  member_ids integer[];
  sub_id integer;
  -- Beyond this many authorized rows at the cut-off distance the exact path answers.
  max_fetch constant integer := 5000;
BEGIN
  SELECT coalesce(s.row_count, 0) INTO table_rows FROM fgentic.search_stats s;
  bound := greatest(exact_threshold, ceil(coalesce(table_rows, 0) * 0.03)::integer);

  -- The bound on the authorized rows, and the ids a scan or a walk can start from.
  IF any_ids IS NULL THEN
    SELECT coalesce(min(coalesce(c.rows, 0)), 0)::integer,
      ARRAY[(array_agg(a.id ORDER BY coalesce(c.rows, 0), a.id))[1]]
    INTO authorized, key_ids
    FROM unnest(all_ids) AS a(id) LEFT JOIN fgentic.acl_counts c ON c.id = a.id;
    -- Every id but the level id, which every public row carries: the GIN index intersects their
    -- lists, so the exact scan reads the rows the whole audience may read, not all of its rarest
    -- member's. Should a member's id equal the level id, the rarest id stands in.
    member_ids := array_remove(all_ids, fgentic.level_id(allowed_classifications));
    IF cardinality(member_ids) = 0 THEN
      member_ids := key_ids;
    END IF;
  ELSE
    SELECT least(
        (SELECT coalesce(min(coalesce(c.rows, 0)), 0) FROM unnest(all_ids) AS a(id) LEFT JOIN fgentic.acl_counts c ON c.id = a.id),
        (SELECT coalesce(sum(c.rows), 0) FROM unnest(any_ids) AS a(id) JOIN fgentic.acl_counts c ON c.id = a.id))::integer
    INTO authorized;
    key_ids := any_ids;
  END IF;
  -- A subgraph bounds the audience when every authorized row carries its id: any of a Matrix
  -- audience's ids, a partner's only group. Only a registered graph whose index is valid and ready
  -- counts: a build in progress, a failed one or a dropped one is never chosen. Asked for above
  -- exact_threshold only: below it the exact path is cheaper than any walk.
  IF plan_hint = 'subgraph' OR (plan_hint = 'auto' AND authorized > exact_threshold) THEN
    SELECT g.id INTO sub_id
    FROM fgentic.subgraphs g
    JOIN fgentic.acl_counts c ON c.id = g.id
    JOIN pg_catalog.pg_class x ON x.relname = g.index_name AND x.relnamespace = 'fgentic'::regnamespace
    JOIN pg_catalog.pg_index i ON i.indexrelid = x.oid AND i.indisvalid AND i.indisready
      AND i.indrelid = 'fgentic.chunks'::regclass
    WHERE g.id = ANY (CASE WHEN any_ids IS NULL THEN all_ids
                           WHEN cardinality(any_ids) = 1 THEN any_ids || all_ids ELSE all_ids END)
    ORDER BY c.rows, g.id LIMIT 1;
  END IF;
  chosen := CASE
    WHEN plan_hint = 'subgraph' THEN CASE WHEN sub_id IS NULL THEN 'hnsw' ELSE 'subgraph' END
    WHEN plan_hint <> 'auto' THEN plan_hint
    WHEN authorized <= exact_threshold THEN 'exact'
    WHEN sub_id IS NOT NULL THEN 'subgraph'
    WHEN authorized <= bound THEN 'exact'
    ELSE 'hnsw'
  END;
  fetch_rows := depth + greatest(depth, 10);

  IF chosen IN ('hnsw', 'subgraph') THEN
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true),
      set_config('hnsw.iterative_scan', 'relaxed_order', true),
      set_config('hnsw.ef_search', ef_search::text, true),
      set_config('hnsw.max_scan_tuples', max_scan_tuples::text, true),
      -- Keep the planner on the HNSW index rather than a bitmap scan + sort (the re-sort is done
      -- inside array_agg, which needs no Sort node).
      set_config('enable_seqscan', 'off', true),
      set_config('enable_bitmapscan', 'off', true),
      set_config('enable_sort', 'off', true),
      set_config('enable_incremental_sort', 'off', true);
    IF chosen = 'subgraph' THEN
      -- The id is an integer written into the text, so the planner proves the partial index's
      -- predicate from it; everything else stays a parameter.
      PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
      EXECUTE format(
        $q$SELECT array_agg(r.chunk_id ORDER BY r.distance, r.chunk_id),
             array_agg(r.distance ORDER BY r.distance, r.chunk_id),
             array_agg(r.origin_xmin ORDER BY r.distance, r.chunk_id)
           FROM (
             SELECT d.chunk_id, d.embedding OPERATOR(public.<=>) $1 AS distance, d.origin_xmin
             FROM fgentic.chunks d
             WHERE d.acl @> %L::integer[] AND d.acl @> $2 AND ($3::integer[] IS NULL OR d.acl && $3)
             ORDER BY d.embedding OPERATOR(public.<=>) $1
             LIMIT $4
           ) r$q$, '{' || sub_id || '}')
      INTO found_ids, found_distances, found_versions
      USING query_embedding, all_ids, any_ids, fetch_rows;
    ELSE
      SELECT array_agg(r.chunk_id ORDER BY r.distance, r.chunk_id),
        array_agg(r.distance ORDER BY r.distance, r.chunk_id),
        array_agg(r.origin_xmin ORDER BY r.distance, r.chunk_id)
      INTO found_ids, found_distances, found_versions
      FROM (
        SELECT d.chunk_id, d.embedding OPERATOR(public.<=>) query_embedding AS distance, d.origin_xmin
        FROM fgentic.chunks d
        WHERE d.acl @> all_ids AND (any_ids IS NULL OR d.acl && any_ids)
        ORDER BY d.embedding OPERATOR(public.<=>) query_embedding
        LIMIT fetch_rows
      ) r;
    END IF;
    PERFORM set_config('enable_seqscan', 'on', true),
      set_config('enable_bitmapscan', 'on', true),
      set_config('enable_sort', 'on', true),
      set_config('enable_incremental_sort', 'on', true);

    -- The origin's typed test on what the walk found, in rank order: one primary-key probe per row
    -- (OFFSET 0 keeps each EXISTS a probe; as a semi-join it could become a scan of the table).
    SELECT coalesce(array_agg(f.id ORDER BY f.n), ARRAY[]::text[]),
      coalesce(array_agg(f.d ORDER BY f.n), ARRAY[]::double precision[])
    INTO passed_ids, passed_distances
    FROM unnest(coalesce(found_ids, ARRAY[]::text[]), coalesce(found_distances, ARRAY[]::double precision[]),
      coalesce(found_versions, ARRAY[]::xid[])) WITH ORDINALITY AS f(id, d, v, n)
    WHERE EXISTS (
      SELECT 1 FROM knowledge.chunks c
      WHERE c.chunk_id = f.id AND c.xmin = f.v
        AND (c.metadata->>'classification') = ANY (allowed_classifications)
        AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
        AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
      OFFSET 0);

    IF cardinality(passed_ids) < depth
       AND (cardinality(coalesce(found_ids, ARRAY[]::text[])) >= fetch_rows OR cardinality(passed_ids) < authorized) THEN
      -- Completeness: more authorized rows may exist than the walk delivered.
      chosen := 'exact';
    ELSIF cardinality(passed_ids) >= depth THEN
      cutoff := passed_distances[depth];
      SELECT count(*) FILTER (WHERE x < cutoff)::integer, count(*) FILTER (WHERE x = cutoff)::integer
      INTO closer, seen_at_cutoff
      FROM unnest(passed_distances) AS u(x);

      IF seen_at_cutoff > 1 AND plan_hint = 'auto' THEN
        -- The walk met a tie group at the cut-off, usually copies of one vector. Past the 10 rows
        -- pgvector keeps in one graph element, copies fill each other's neighbour lists (pgvector 0.8
        -- src/hnswutils.c, SelectNeighbors), and a walk that enters them can miss closer rows
        -- (retrieval/duplicate-search.test.ts). The exact path answers.
        chosen := 'exact';
      ELSIF seen_at_cutoff > 1 THEN
        -- The HNSW plan was asked for: take the tie group from an exact lookup.
        PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
        SELECT array_agg(t.chunk_id ORDER BY t.chunk_id) INTO tied_ids FROM (
          SELECT d.chunk_id FROM fgentic.chunks d
          JOIN knowledge.chunks c ON c.chunk_id = d.chunk_id AND c.xmin = d.origin_xmin
          WHERE d.acl @> all_ids AND (any_ids IS NULL OR d.acl && any_ids)
            AND (d.embedding OPERATOR(public.<=>) query_embedding) = cutoff
            AND (c.metadata->>'classification') = ANY (allowed_classifications)
            AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
            AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
          LIMIT max_fetch + 1
        ) t;
      ELSE
        -- One row at the cut-off as far as the walk saw: its bit-identical duplicates tie with it.
        SELECT array_agg(t.chunk_id ORDER BY t.chunk_id) INTO tied_ids FROM (
          SELECT d.chunk_id FROM fgentic.chunks d
          JOIN knowledge.chunks c ON c.chunk_id = d.chunk_id AND c.xmin = d.origin_xmin
          WHERE d.vector_key = (SELECT x.vector_key FROM fgentic.chunks x WHERE x.chunk_id = passed_ids[depth])
            AND d.acl @> all_ids AND (any_ids IS NULL OR d.acl && any_ids)
            AND (d.embedding OPERATOR(public.<=>) query_embedding) = cutoff
            AND (c.metadata->>'classification') = ANY (allowed_classifications)
            AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
            AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
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
        passed_ids := passed_ids[1:closer] || ARRAY(
          SELECT DISTINCT u.id FROM unnest(
            coalesce(tied_ids, ARRAY[]::text[]) || passed_ids[closer + 1:closer + seen_at_cutoff]) AS u(id)
          ORDER BY u.id);
        passed_distances := passed_distances[1:closer]
          || array_fill(cutoff, ARRAY[cardinality(passed_ids) - closer]);
      END IF;
    END IF;

    IF chosen IN ('hnsw', 'subgraph') AND plan_hint = 'auto' AND cardinality(passed_ids) > 0 THEN
      last_distance := passed_distances[least(depth, cardinality(passed_ids))];
      SELECT 1 - public.inner_product(public.l2_normalize(query_embedding), s.unit_sum) / s.row_count,
        s.min_contrast
      INTO mean_distance, min_contrast
      FROM fgentic.search_stats s WHERE s.row_count > 0 AND s.unit_sum IS NOT NULL;
      IF last_distance > 0 AND (mean_distance IS NULL OR mean_distance < min_contrast * last_distance) THEN
        chosen := 'exact';
      END IF;
    END IF;

    IF chosen IN ('hnsw', 'subgraph') THEN
      -- The answer with its content, read back under the typed test in this statement's snapshot.
      RETURN QUERY
        SELECT chosen, f.id, f.d, c.content, jsonb_build_object('source', c.metadata->'source', 'classification', c.metadata->'classification')
        FROM unnest(passed_ids[1:depth], passed_distances[1:depth]) WITH ORDINALITY AS f(id, d, n),
          LATERAL (SELECT c.content, c.metadata FROM knowledge.chunks c
            WHERE c.chunk_id = f.id
              AND (c.metadata->>'classification') = ANY (allowed_classifications)
              AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
              AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
            OFFSET 0) c
        ORDER BY f.n;
      RETURN;
    END IF;
  END IF;

  -- Exact, step 1: the integer-authorized rows ranked by (distance, chunk_id). The CTE keeps the
  -- ranking off the HNSW index (it has no ORDER BY of its own), and the scan is a bitmap of the ACL
  -- index: the exact path runs for at most the bound's rows, and neither a sequential scan nor a
  -- walk of the primary key (which a small table or the level id's estimate can make look cheaper)
  -- reads only those. With those two off the plan is the same whatever the call's values, so it is
  -- planned once per session.
  PERFORM set_config('plan_cache_mode', 'force_generic_plan', true),
    set_config('enable_seqscan', 'off', true),
    set_config('enable_indexscan', 'off', true);
  IF any_ids IS NULL THEN
    WITH authorized_rows AS MATERIALIZED (
      SELECT d.chunk_id, d.embedding OPERATOR(public.<=>) query_embedding AS distance, d.origin_xmin
      FROM fgentic.chunks d
      -- The index condition: the audience's own ids, never the level id; the whole integer test is
      -- the filter (IS TRUE keeps it out of the index condition).
      WHERE d.acl @> member_ids AND (d.acl @> all_ids) IS TRUE
    )
    SELECT array_agg(r.chunk_id ORDER BY r.distance, r.chunk_id),
      array_agg(r.distance ORDER BY r.distance, r.chunk_id),
      array_agg(r.origin_xmin ORDER BY r.distance, r.chunk_id), count(*)::integer
    INTO found_ids, found_distances, found_versions, ranked
    FROM (
      SELECT a.chunk_id, a.distance, a.origin_xmin FROM authorized_rows a
      ORDER BY a.distance, a.chunk_id
      LIMIT fetch_rows
    ) r;
  ELSE
    WITH authorized_rows AS MATERIALIZED (
      SELECT d.chunk_id, d.embedding OPERATOR(public.<=>) query_embedding AS distance, d.origin_xmin
      FROM fgentic.chunks d
      -- The index condition: a partner's groups (a row carries one of them), never the level id.
      WHERE d.acl && key_ids
        AND (d.acl @> all_ids AND d.acl && any_ids) IS TRUE
    )
    SELECT array_agg(r.chunk_id ORDER BY r.distance, r.chunk_id),
      array_agg(r.distance ORDER BY r.distance, r.chunk_id),
      array_agg(r.origin_xmin ORDER BY r.distance, r.chunk_id), count(*)::integer
    INTO found_ids, found_distances, found_versions, ranked
    FROM (
      SELECT a.chunk_id, a.distance, a.origin_xmin FROM authorized_rows a
      ORDER BY a.distance, a.chunk_id
      LIMIT fetch_rows
    ) r;
  END IF;

  -- Step 2: the origin's typed test on those rows in rank order, one primary-key probe each, and the
  -- content of those that pass, until depth of them have passed.
  PERFORM set_config('enable_seqscan', 'on', true),
    set_config('enable_indexscan', 'on', true);
  RETURN QUERY
    SELECT 'exact'::text, f.id, f.d, c.content, jsonb_build_object('source', c.metadata->'source', 'classification', c.metadata->'classification')
    FROM unnest(coalesce(found_ids, ARRAY[]::text[]), coalesce(found_distances, ARRAY[]::double precision[]),
      coalesce(found_versions, ARRAY[]::xid[])) WITH ORDINALITY AS f(id, d, v, n),
      LATERAL (SELECT c.content, c.metadata FROM knowledge.chunks c
        WHERE c.chunk_id = f.id AND c.xmin = f.v
          AND (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
          AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
        OFFSET 0) c
    ORDER BY f.n
    LIMIT depth;
  GET DIAGNOSTICS returned = ROW_COUNT;
  IF ranked < fetch_rows OR returned >= depth THEN
    -- Every integer-authorized row was ranked, or depth of the best ones passed the typed test.
    RETURN;
  END IF;

  -- Collisions or rows changed since their sync pushed rows the typed test refuses into the integer
  -- ranking: the rows ranked after the last one step 1 ranked, each under the typed test, for the
  -- places still open (step 2 returned every passing row before that point).
  PERFORM set_config('plan_cache_mode', 'force_custom_plan', true),
    set_config('enable_seqscan', 'off', true),
    set_config('enable_indexscan', 'off', true);
  RETURN QUERY
    WITH authorized_rows AS MATERIALIZED (
      SELECT d.chunk_id, d.embedding OPERATOR(public.<=>) query_embedding AS distance, c.content, c.metadata
      FROM fgentic.chunks d
      JOIN knowledge.chunks c ON c.chunk_id = d.chunk_id AND c.xmin = d.origin_xmin
      WHERE d.acl && key_ids
        AND (d.acl @> all_ids AND (any_ids IS NULL OR d.acl && any_ids)) IS TRUE
        AND (c.metadata->>'classification') = ANY (allowed_classifications)
        AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
        AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
    )
    SELECT 'exact'::text, a.chunk_id, a.distance, a.content,
      jsonb_build_object('source', a.metadata->'source', 'classification', a.metadata->'classification')
    FROM authorized_rows a
    WHERE (a.distance, a.chunk_id) > (found_distances[ranked], found_ids[ranked])
    ORDER BY a.distance, a.chunk_id
    LIMIT depth - returned;
  PERFORM set_config('enable_seqscan', 'on', true),
    set_config('enable_indexscan', 'on', true);
END;
$function$;
REVOKE ALL ON FUNCTION fgentic.rank_v2(
  public.vector, text[], jsonb, text[], integer[], integer[], integer, text, integer, integer, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION fgentic.search_matrix_v1(
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
    OR NOT fgentic.is_valid_principal_array(audience, 16)
    OR max_results IS NULL OR max_results NOT BETWEEN 1 AND 20
    OR (query_text IS NOT NULL AND char_length(query_text) NOT BETWEEN 1 AND 4096)
    OR plan_hint IS NULL OR plan_hint NOT IN ('auto', 'exact', 'hnsw', 'subgraph')
    OR exact_threshold IS NULL OR exact_threshold NOT BETWEEN 0 AND 1000000
    OR ef_search IS NULL OR ef_search NOT BETWEEN 1 AND 1000
    OR max_scan_tuples IS NULL OR max_scan_tuples NOT BETWEEN 1 AND 100000000
  THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fgentic search: invalid argument';
  END IF;

  -- Hybrid fuses two lists: each is taken deeper than the final k so fusion has candidates to
  -- reorder; the vector list's depth goes through the same planner, ties and guard as k does.
  depth := CASE WHEN query_text IS NULL THEN max_results ELSE greatest(max_results * 3, 30) END;
  all_ids := fgentic.audience_ids(audience, allowed_classifications);

  RETURN QUERY
    SELECT 'vector'::text, (row_number() OVER (ORDER BY r.distance, r.chunk_id))::integer, r.plan,
      r.chunk_id, r.content, r.metadata, r.distance
    FROM fgentic.rank_v2(query_embedding, allowed_classifications, audience, NULL, all_ids, NULL,
      depth, plan_hint, exact_threshold, ef_search, max_scan_tuples) r
    ORDER BY r.distance, r.chunk_id;

  IF query_text IS NOT NULL THEN
    -- The keyword list's plan depends on the query text (its tsquery's estimates): planned per call.
    PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
    RETURN QUERY
      SELECT 'keyword'::text, (row_number() OVER (ORDER BY r.rank DESC, r.chunk_id))::integer,
        'exact'::text, r.chunk_id, r.content, jsonb_build_object('source', r.metadata->'source', 'classification', r.metadata->'classification'), r.distance
      FROM (
        SELECT c.chunk_id, c.content, c.metadata,
          d.embedding OPERATOR(public.<=>) query_embedding AS distance,
          ts_rank_cd(d.tsv, q) AS rank
        FROM fgentic.chunks d
        JOIN knowledge.chunks c ON c.chunk_id = d.chunk_id AND c.xmin = d.origin_xmin,
          websearch_to_tsquery('simple', query_text) AS q
        WHERE d.acl @> all_ids
          AND d.tsv @@ q
          AND (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_principals') @> audience
        ORDER BY rank DESC, c.chunk_id
        LIMIT depth
      ) r
      ORDER BY r.rank DESC, r.chunk_id;
  END IF;
END;
$function$;

CREATE OR REPLACE FUNCTION fgentic.search_groups_v1(
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
    OR policy_id IS NULL OR NOT fgentic.is_dns1123_label(policy_id)
    OR groups IS NULL
    OR cardinality(groups) NOT BETWEEN 1 AND 16
    OR array_position(groups, NULL) IS NOT NULL
    OR NOT fgentic.is_valid_group_array(to_jsonb(groups), 16)
    -- ADR 0017: a partner's groups are namespaced by its own policy id.
    OR EXISTS (SELECT 1 FROM unnest(groups) AS g(v) WHERE NOT starts_with(g.v, 'partner/' || policy_id || '/'))
    OR max_results IS NULL OR max_results NOT BETWEEN 1 AND 20
    OR (query_text IS NOT NULL AND char_length(query_text) NOT BETWEEN 1 AND 4096)
    OR plan_hint IS NULL OR plan_hint NOT IN ('auto', 'exact', 'hnsw', 'subgraph')
    OR exact_threshold IS NULL OR exact_threshold NOT BETWEEN 0 AND 1000000
    OR ef_search IS NULL OR ef_search NOT BETWEEN 1 AND 1000
    OR max_scan_tuples IS NULL OR max_scan_tuples NOT BETWEEN 1 AND 100000000
  THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fgentic search: invalid argument';
  END IF;

  depth := CASE WHEN query_text IS NULL THEN max_results ELSE greatest(max_results * 3, 30) END;
  level_ids := ARRAY[fgentic.level_id(allowed_classifications)];
  group_ids := fgentic.group_ids(groups);

  RETURN QUERY
    SELECT 'vector'::text, (row_number() OVER (ORDER BY r.distance, r.chunk_id))::integer, r.plan,
      r.chunk_id, r.content, r.metadata, r.distance
    FROM fgentic.rank_v2(query_embedding, allowed_classifications, NULL, groups, level_ids,
      group_ids, depth, plan_hint, exact_threshold, ef_search, max_scan_tuples) r
    ORDER BY r.distance, r.chunk_id;

  IF query_text IS NOT NULL THEN
    -- The keyword list's plan depends on the query text (its tsquery's estimates): planned per call.
    PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
    RETURN QUERY
      SELECT 'keyword'::text, (row_number() OVER (ORDER BY r.rank DESC, r.chunk_id))::integer,
        'exact'::text, r.chunk_id, r.content, jsonb_build_object('source', r.metadata->'source', 'classification', r.metadata->'classification'), r.distance
      FROM (
        SELECT c.chunk_id, c.content, c.metadata,
          d.embedding OPERATOR(public.<=>) query_embedding AS distance,
          ts_rank_cd(d.tsv, q) AS rank
        FROM fgentic.chunks d
        JOIN knowledge.chunks c ON c.chunk_id = d.chunk_id AND c.xmin = d.origin_xmin,
          websearch_to_tsquery('simple', query_text) AS q
        WHERE d.acl @> level_ids AND d.acl && group_ids
          AND d.tsv @@ q
          AND (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_groups') ?| groups
        ORDER BY rank DESC, c.chunk_id
        LIMIT depth
      ) r
      ORDER BY r.rank DESC, r.chunk_id;
  END IF;
END;
$function$;

-- Nothing calls the previous ranking core any more.
DROP FUNCTION fgentic.rank_v1(
  public.vector, text[], jsonb, text[], integer[], integer[], integer, text, integer, integer, integer);
