-- Vectors stored in the row (docs/filtered-search.md, "Storage"). pgvector declares its types with
-- STORAGE external, so a 1024-d vector (4,104 bytes) never stays in a row above the default TOAST
-- threshold (~2 KB): every row kept it out of line, about three TOAST pages away, and the exact path
-- spent most of its time fetching and reassembling those pages for each authorized row.
--   - MAIN keeps the vector in the row and moves it out of line only as a last resort, after the
--     other wide columns (content, metadata) have been compressed or moved out; unlike
--     PLAIN it never makes a row too large to store, whatever the dimension.
--   - toast_tuple_target at its maximum (8160): a row is toasted only when it no longer fits a page,
--     so short content stays in the row next to its vector.
-- Neither statement rewrites the table: rows written before this migration keep their out-of-line
-- vectors until the owner rewrites them (VACUUM FULL knowledge.chunks, or a re-ingest of the
-- corpus; docs/filtered-search.md, "Storage"). Column types, values and the origin's SQL are unchanged.
ALTER TABLE knowledge.chunks SET (toast_tuple_target = 8160);
ALTER TABLE knowledge.chunks ALTER COLUMN embedding SET STORAGE MAIN;

-- The search functions' ranking core as migration 0009 defined it, with one change in the bounded
-- count that chooses the plan: when the statistics say at least a quarter of the rows pass the
-- integer prefilter, the count first reads the table's first pages (capped) instead of building a
-- GIN bitmap of every authorized row, and falls back to the index count when that finds too few.
-- The count still stops at bound + 1 and counts only rows that pass the prefilter, so the plan chosen
-- is the one migration 0009 chose; only its cost changes.
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
  stat_elems integer[];
  stat_freqs real[];
  share double precision;
  -- Beyond this many authorized rows at the cut-off distance the exact path answers.
  max_fetch constant integer := 5000;
BEGIN
  SELECT greatest(c.reltuples, 0) INTO table_rows FROM pg_catalog.pg_class c
  WHERE c.oid = 'knowledge.chunks'::regclass;
  bound := greatest(exact_threshold, ceil(coalesce(table_rows, 0) * 0.03)::integer);

  -- The share of rows the integer prefilter admits, from ANALYZE's most-common-element statistics
  -- of fgentic_acl: the smallest frequency among the required ids, and at most the sum over the
  -- alternatives. An id below the statistics' cut-off counts as 0; no statistics, no share.
  SELECT s.most_common_elems::text::integer[], s.most_common_elem_freqs INTO stat_elems, stat_freqs
  FROM pg_catalog.pg_stats s
  WHERE s.schemaname = 'knowledge' AND s.tablename = 'chunks' AND s.attname = 'fgentic_acl';
  IF stat_elems IS NOT NULL THEN
    SELECT min(coalesce(stat_freqs[array_position(stat_elems, u.i)], 0)) INTO share FROM unnest(all_ids) AS u(i);
    IF any_ids IS NOT NULL THEN
      share := least(share, (SELECT sum(coalesce(stat_freqs[array_position(stat_elems, u.i)], 0))
        FROM unnest(any_ids) AS u(i)));
    END IF;
  END IF;
  IF share >= 0.25 THEN
    -- Many rows qualify: reading the first pages of the table finds bound + 1 of them sooner than a
    -- GIN bitmap of every authorized row (with vectors in the row a page holds about one row, so
    -- the planner would otherwise choose that bitmap; docs/filtered-search.md, "Storage"). The scan
    -- is capped at twice the pages the share predicts; finding fewer than bound + 1 rows there
    -- proves nothing, and the index count below decides.
    PERFORM set_config('enable_bitmapscan', 'off', true), set_config('enable_indexscan', 'off', true);
    SELECT count(*)::integer INTO authorized FROM (
      SELECT 1 FROM knowledge.chunks c
      WHERE c.ctid < pg_catalog.format('(%s,0)', ceil(2 * (bound + 1) / share)::bigint)::tid
        AND c.fgentic_acl OPERATOR(public.@>) all_ids
        AND (any_ids IS NULL OR c.fgentic_acl OPERATOR(public.&&) any_ids)
      LIMIT bound + 1
    ) s;
    PERFORM set_config('enable_bitmapscan', 'on', true), set_config('enable_indexscan', 'on', true);
  END IF;
  IF authorized IS NULL OR authorized <= bound THEN
    SELECT count(*)::integer INTO authorized FROM (
      SELECT 1 FROM knowledge.chunks c
      WHERE c.fgentic_acl OPERATOR(public.@>) all_ids
        AND (any_ids IS NULL OR c.fgentic_acl OPERATOR(public.&&) any_ids)
      LIMIT bound + 1
    ) s;
  END IF;
  chosen := CASE
    WHEN plan_hint <> 'auto' THEN plan_hint
    WHEN authorized <= bound THEN 'exact'
    ELSE 'hnsw'
  END;

  IF chosen = 'hnsw' THEN
    PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true),
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

      IF seen_at_cutoff > 1 THEN
        -- The walk met a tie group at the cut-off: take all of it from an exact lookup.
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

      IF cardinality(tied_ids) > max_fetch THEN
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
