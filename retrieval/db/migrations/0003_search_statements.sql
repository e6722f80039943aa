-- Fewer statements per search (docs/filtered-search.md, "How it works"). Each statement a PL/pgSQL
-- function runs costs an executor start and end, a snapshot and, per call, its parameters; a search
-- ran eleven on the common walk path. The ranking core now reads the statistics, the bound on the
-- authorized rows, the key ids and the subgraph in one statement; runs the typed test inside the
-- walk's statement and inside the exact scan's; takes the rows closer than the cut-off and the size
-- of the tie group from the sorted distances with array functions; and computes the recall guard's
-- mean distance from the statistics it already read. Six statements remain on that path. Answers,
-- plans and guarantees are unchanged: every returned row passed the typed test, ties at the cut-off
-- are ordered by chunk_id, the guard sends far queries to the exact path.

CREATE OR REPLACE FUNCTION fgentic.rank_v1(
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
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $function$
#variable_conflict use_column
DECLARE
  table_rows double precision;
  stat_unit_sum public.vector;
  walked integer;
  bound integer;
  authorized integer;
  chosen text;
  fetch_rows integer;
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
  -- The audience's most selective id (the exact scan starts from it) and its subgraph, if any.
  key_ids integer[];
  sub_id integer;
  -- Beyond this many authorized rows at the cut-off distance the exact path answers.
  max_fetch constant integer := 5000;
BEGIN
  -- One statement reads what the plan and the guard depend on: the table's size and vector sum, the
  -- bound on the authorized rows (a room's rows carry every one of its ids: at most the smallest
  -- count; a partner's carry the level id and one of its groups: at most the smaller of the two),
  -- the ids a scan starts from, and the subgraph that bounds the audience, if one does.
  SELECT s.row_count, s.unit_sum, s.min_contrast, b.authorized, b.key_ids, b.sub_id
  INTO table_rows, stat_unit_sum, min_contrast, authorized, key_ids, sub_id
  FROM (
    SELECT k.authorized, k.key_ids,
      -- A subgraph bounds the audience when every authorized row carries its id: any of a Matrix
      -- audience's ids, a partner's only group. Only a registered graph whose index is valid and
      -- ready counts: a build in progress, a failed one or a dropped one is never chosen. Looked up
      -- above exact_threshold only: below it the exact path is cheaper than any walk.
      CASE WHEN plan_hint = 'subgraph' OR (plan_hint = 'auto' AND k.authorized > exact_threshold) THEN (
        SELECT g.id
        FROM fgentic.subgraphs g
        JOIN fgentic.acl_counts c ON c.id = g.id
        JOIN pg_catalog.pg_class x ON x.relname = g.index_name AND x.relnamespace = 'fgentic'::regnamespace
        JOIN pg_catalog.pg_index i ON i.indexrelid = x.oid AND i.indisvalid AND i.indisready
          AND i.indrelid = 'fgentic.chunks'::regclass
        WHERE g.id = ANY (CASE WHEN any_ids IS NULL THEN all_ids
                               WHEN cardinality(any_ids) = 1 THEN any_ids || all_ids ELSE all_ids END)
        ORDER BY c.rows, g.id LIMIT 1) END AS sub_id
    FROM (
      SELECT CASE WHEN any_ids IS NULL THEN a.smallest
               ELSE least(a.smallest, (SELECT coalesce(sum(c.rows), 0)
                                       FROM unnest(any_ids) AS u(id) JOIN fgentic.acl_counts c ON c.id = u.id)) END::integer
               AS authorized,
        CASE WHEN any_ids IS NULL THEN ARRAY[a.rarest] ELSE any_ids END AS key_ids
      FROM (
        SELECT coalesce(min(coalesce(c.rows, 0)), 0) AS smallest,
          (array_agg(u.id ORDER BY coalesce(c.rows, 0), u.id))[1] AS rarest
        FROM unnest(all_ids) AS u(id) LEFT JOIN fgentic.acl_counts c ON c.id = u.id
      ) a
    ) k
  ) b
  LEFT JOIN fgentic.search_stats s ON true;
  bound := greatest(exact_threshold, ceil(coalesce(table_rows, 0) * 0.03)::integer);
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
    -- The walk and the origin's typed test in one statement: the rows found, re-sorted by
    -- (distance, chunk_id), each with one primary-key probe of the origin row (OFFSET 0 keeps each
    -- EXISTS a probe; as a semi-join it could become a scan of the table); those that pass are kept
    -- in rank order, and the count of rows found tells a short walk from a complete one.
    IF chosen = 'subgraph' THEN
      -- The id is an integer written into the text, so the planner proves the partial index's
      -- predicate from it; everything else stays a parameter.
      EXECUTE format(
        $q$SELECT coalesce(array_agg(r.chunk_id ORDER BY r.distance, r.chunk_id) FILTER (WHERE r.passed), '{}'),
             coalesce(array_agg(r.distance ORDER BY r.distance, r.chunk_id) FILTER (WHERE r.passed), '{}'),
             count(*)::integer
           FROM (
             SELECT w.chunk_id, w.distance, EXISTS (
                 SELECT 1 FROM knowledge.chunks c
                 WHERE c.chunk_id = w.chunk_id AND c.xmin = w.origin_xmin
                   AND (c.metadata->>'classification') = ANY ($5)
                   AND ($6::jsonb IS NULL OR (c.metadata->'allowed_principals') @> $6)
                   AND ($7::text[] IS NULL OR (c.metadata->'allowed_groups') ?| $7)
                 OFFSET 0) AS passed
             FROM (
               SELECT d.chunk_id, d.embedding OPERATOR(public.<=>) $1 AS distance, d.origin_xmin
               FROM fgentic.chunks d
               WHERE d.acl @> %L::integer[] AND d.acl @> $2 AND ($3::integer[] IS NULL OR d.acl && $3)
               ORDER BY d.embedding OPERATOR(public.<=>) $1
               LIMIT $4
             ) w
           ) r$q$, '{' || sub_id || '}')
      INTO passed_ids, passed_distances, walked
      USING query_embedding, all_ids, any_ids, fetch_rows, allowed_classifications, audience, groups;
    ELSE
      SELECT coalesce(array_agg(r.chunk_id ORDER BY r.distance, r.chunk_id) FILTER (WHERE r.passed), '{}'),
        coalesce(array_agg(r.distance ORDER BY r.distance, r.chunk_id) FILTER (WHERE r.passed), '{}'),
        count(*)::integer
      INTO passed_ids, passed_distances, walked
      FROM (
        SELECT w.chunk_id, w.distance, EXISTS (
            SELECT 1 FROM knowledge.chunks c
            WHERE c.chunk_id = w.chunk_id AND c.xmin = w.origin_xmin
              AND (c.metadata->>'classification') = ANY (allowed_classifications)
              AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
              AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
            OFFSET 0) AS passed
        FROM (
          SELECT d.chunk_id, d.embedding OPERATOR(public.<=>) query_embedding AS distance, d.origin_xmin
          FROM fgentic.chunks d
          WHERE d.acl @> all_ids AND (any_ids IS NULL OR d.acl && any_ids)
          ORDER BY d.embedding OPERATOR(public.<=>) query_embedding
          LIMIT fetch_rows
        ) w
      ) r;
    END IF;
    PERFORM set_config('enable_seqscan', 'on', true),
      set_config('enable_bitmapscan', 'on', true),
      set_config('enable_sort', 'on', true),
      set_config('enable_incremental_sort', 'on', true);

    IF cardinality(passed_ids) < depth AND (walked >= fetch_rows OR cardinality(passed_ids) < authorized) THEN
      -- Completeness: more authorized rows may exist than the walk delivered.
      chosen := 'exact';
    ELSIF cardinality(passed_ids) >= depth THEN
      cutoff := passed_distances[depth];
      -- The distances are sorted: the rows before the first one at the cut-off are closer. Array
      -- functions on variables are expressions, not statements.
      closer := array_position(passed_distances, cutoff) - 1;
      seen_at_cutoff := cardinality(array_positions(passed_distances, cutoff));

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
      -- From the statistics read at the start.
      mean_distance := CASE WHEN table_rows > 0 AND stat_unit_sum IS NOT NULL
        THEN 1 - public.inner_product(public.l2_normalize(query_embedding), stat_unit_sum) / table_rows END;
      IF last_distance > 0 AND (mean_distance IS NULL OR mean_distance < min_contrast * last_distance) THEN
        chosen := 'exact';
      END IF;
    END IF;

    IF chosen IN ('hnsw', 'subgraph') THEN
      RETURN QUERY
        SELECT chosen, f.id, f.d
        FROM unnest(passed_ids[1:depth], passed_distances[1:depth]) WITH ORDINALITY AS f(id, d, n)
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
  -- Step 2, in the same statement: the origin's typed test on those rows, in rank order (one
  -- primary-key probe each; with index scans off a probe is a bitmap scan of the primary key).
  WITH authorized_rows AS MATERIALIZED (
    SELECT d.chunk_id, d.embedding OPERATOR(public.<=>) query_embedding AS distance, d.origin_xmin
    FROM fgentic.chunks d
    -- The index condition: the key ids only (a Matrix audience's rarest id, or a partner's groups),
    -- never the level id every public row carries; the whole integer test is the filter (IS TRUE
    -- keeps it out of the index condition).
    WHERE d.acl && key_ids
      AND (d.acl @> all_ids AND (any_ids IS NULL OR d.acl && any_ids)) IS TRUE
  )
  SELECT coalesce(array_agg(r.chunk_id ORDER BY r.distance, r.chunk_id) FILTER (WHERE r.passed), '{}'),
    coalesce(array_agg(r.distance ORDER BY r.distance, r.chunk_id) FILTER (WHERE r.passed), '{}'),
    count(*)::integer
  INTO passed_ids, passed_distances, ranked
  FROM (
    SELECT t.chunk_id, t.distance, EXISTS (
        SELECT 1 FROM knowledge.chunks c
        WHERE c.chunk_id = t.chunk_id AND c.xmin = t.origin_xmin
          AND (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
          AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
        OFFSET 0) AS passed
    FROM (
      SELECT a.chunk_id, a.distance, a.origin_xmin FROM authorized_rows a
      ORDER BY a.distance, a.chunk_id
      LIMIT fetch_rows
    ) t
  ) r;
  PERFORM set_config('enable_seqscan', 'on', true),
    set_config('enable_indexscan', 'on', true);

  IF ranked < fetch_rows OR cardinality(passed_ids) >= depth THEN
    -- Every integer-authorized row was ranked, or depth of the best ones passed the typed test.
    RETURN QUERY
      SELECT 'exact'::text, f.id, f.d
      FROM unnest(passed_ids[1:depth], passed_distances[1:depth]) WITH ORDINALITY AS f(id, d, n)
      ORDER BY f.n;
    RETURN;
  END IF;

  -- Collisions or rows changed since their sync pushed rows the typed test refuses into the integer
  -- ranking: the typed test on every integer-authorized row.
  PERFORM set_config('plan_cache_mode', 'force_custom_plan', true),
    set_config('enable_seqscan', 'off', true),
    set_config('enable_indexscan', 'off', true);
  RETURN QUERY
    WITH authorized_rows AS MATERIALIZED (
      SELECT d.chunk_id, d.embedding OPERATOR(public.<=>) query_embedding AS distance
      FROM fgentic.chunks d
      JOIN knowledge.chunks c ON c.chunk_id = d.chunk_id AND c.xmin = d.origin_xmin
      WHERE d.acl && key_ids
        AND (d.acl @> all_ids AND (any_ids IS NULL OR d.acl && any_ids)) IS TRUE
        AND (c.metadata->>'classification') = ANY (allowed_classifications)
        AND (audience IS NULL OR (c.metadata->'allowed_principals') @> audience)
        AND (groups IS NULL OR (c.metadata->'allowed_groups') ?| groups)
    )
    SELECT 'exact'::text, a.chunk_id, a.distance FROM authorized_rows a
    ORDER BY a.distance, a.chunk_id
    LIMIT depth;
  PERFORM set_config('enable_seqscan', 'on', true),
    set_config('enable_indexscan', 'on', true);
END;
$function$;
