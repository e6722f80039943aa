-- Filtered search: ties at the cut-off of the approximate path are taken from an exact lookup
-- (docs/filtered-search.md, "Ties"). The ranking is (distance, chunk_id) on every path; an HNSW walk
-- may skip a row whose distance equals the k-th one, so the rows at that distance are not taken from
-- the walk but looked up exactly, under the same predicate, and ordered by chunk_id.
--
-- Two lookups, both bounded:
--   - bit-identical duplicates of the cut-off row (the common source of ties: one text ingested under
--     several sources) through a btree on a 64-bit key of the vector's binary form, on every HNSW
--     answer: one index probe;
--   - when the walk itself shows more than one row at the cut-off distance, every authorized row at
--     that distance, by distance equality over the integer-prefiltered rows (at most max_fetch rows
--     kept; beyond that the exact path answers).
-- The search functions keep their signatures; only the ranking core is replaced.

-- A key of a vector's exact binary form (dimensions and float4 values). Equal vectors have equal
-- keys; a key collision only adds a candidate, which the distance equality then removes.
CREATE OR REPLACE FUNCTION fgentic_ids.vector_key(embedding public.vector) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT ('x' || encode(substr(sha256(public.vector_send(embedding)), 1, 8), 'hex'))::bit(64)::bigint
$$;
GRANT EXECUTE ON FUNCTION fgentic_ids.vector_key(public.vector) TO PUBLIC;

-- An expression index: writers (the origin's ingestion included) need not know it exists.
CREATE INDEX IF NOT EXISTS chunks_fgentic_vector_key_idx
  ON knowledge.chunks USING btree (fgentic_ids.vector_key(embedding));

-- Plans as in migration 0007, with these differences on the HNSW path:
--   - one fetch of depth + max(depth, 10) rows, re-sorted by (distance, chunk_id); the rows at the
--     depth-th distance (the cut-off) are then replaced by the exact tie group described above;
--   - the planner settings that keep the fetch on the HNSW index are restored right after it, so the
--     tie lookup and an exact fallback are planned normally;
--   - the function declares ROWS 20 (it returns at most max(3 × 20, 30) rows, usually k): with the
--     default estimate of 1,000 rows the callers' join back to knowledge.chunks for content was
--     planned as a merge join over the whole primary key index (~60 ms of a ~100 ms search on 20,000
--     rows on PostgreSQL 15), instead of k index probes.
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
  -- Beyond this many authorized rows at the cut-off distance the exact path answers.
  max_fetch constant integer := 5000;
BEGIN
  SELECT greatest(c.reltuples, 0) INTO table_rows FROM pg_catalog.pg_class c
  WHERE c.oid = 'knowledge.chunks'::regclass;
  bound := greatest(exact_threshold, ceil(coalesce(table_rows, 0) * 0.03)::integer);

  SELECT count(*)::integer INTO authorized FROM (
    SELECT 1 FROM knowledge.chunks c
    WHERE c.fgentic_acl OPERATOR(public.@>) all_ids
      AND (any_ids IS NULL OR c.fgentic_acl OPERATOR(public.&&) any_ids)
    LIMIT bound + 1
  ) s;
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
