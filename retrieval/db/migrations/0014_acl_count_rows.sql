-- The bounded count that chooses the plan reads a narrow copy of the integer ACL column
-- (docs/filtered-search.md, "Storage"). Since migration 0012 keeps vectors in the row, knowledge.chunks
-- holds about one row per 8 KB page, and counting the first bound + 1 authorized rows there meant
-- either a GIN bitmap of every authorized row followed by heap pages (the planner's choice at 50 %
-- selectivity) or a sequential scan over thousands of pages. knowledge.fgentic_acl_rows holds
-- (chunk_id, fgentic_acl) of every row, ~100 bytes each, kept in the writing statement's own
-- transaction by statement triggers (so every writer, the origin's ingestion included, maintains it
-- without knowing it exists). The count is the same number over the same snapshot; only the pages
-- it reads change. Plans, ranking and every other lookup stay as migration 0009 defined them.

CREATE TABLE IF NOT EXISTS knowledge.fgentic_acl_rows (
  chunk_id text PRIMARY KEY,
  fgentic_acl integer[]
);
REVOKE ALL ON knowledge.fgentic_acl_rows FROM PUBLIC;
CREATE INDEX IF NOT EXISTS fgentic_acl_rows_gin_idx ON knowledge.fgentic_acl_rows
  USING gin (fgentic_acl public.gin__int_ops) WITH (fastupdate = off);

-- An upsert, not a plain insert: a copy that drifted (rows written with triggers disabled) is
-- corrected by the next write of the row instead of failing it.
CREATE OR REPLACE FUNCTION knowledge.fgentic_acl_rows_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  INSERT INTO knowledge.fgentic_acl_rows AS a (chunk_id, fgentic_acl)
  SELECT n.chunk_id, n.fgentic_acl FROM fgentic_new_rows n
  ON CONFLICT (chunk_id) DO UPDATE SET fgentic_acl = EXCLUDED.fgentic_acl;
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION knowledge.fgentic_acl_rows_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  DELETE FROM knowledge.fgentic_acl_rows a USING fgentic_old_rows o WHERE a.chunk_id = o.chunk_id;
  RETURN NULL;
END
$$;

-- Only rows whose chunk_id or ACL changed are rewritten (content and embedding updates leave the
-- copy alone). Deletions first, so an update that swaps chunk_ids between rows ends consistent.
CREATE OR REPLACE FUNCTION knowledge.fgentic_acl_rows_updated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  DELETE FROM knowledge.fgentic_acl_rows a USING fgentic_old_rows o
  WHERE a.chunk_id = o.chunk_id AND NOT EXISTS (
    SELECT 1 FROM fgentic_new_rows n
    WHERE n.chunk_id = o.chunk_id AND n.fgentic_acl IS NOT DISTINCT FROM o.fgentic_acl);
  INSERT INTO knowledge.fgentic_acl_rows AS a (chunk_id, fgentic_acl)
  SELECT n.chunk_id, n.fgentic_acl FROM fgentic_new_rows n
  WHERE NOT EXISTS (
    SELECT 1 FROM fgentic_old_rows o
    WHERE o.chunk_id = n.chunk_id AND o.fgentic_acl IS NOT DISTINCT FROM n.fgentic_acl)
  ON CONFLICT (chunk_id) DO UPDATE SET fgentic_acl = EXCLUDED.fgentic_acl;
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION knowledge.fgentic_acl_rows_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  TRUNCATE knowledge.fgentic_acl_rows;
  RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION knowledge.fgentic_acl_rows_inserted() FROM PUBLIC;
REVOKE ALL ON FUNCTION knowledge.fgentic_acl_rows_deleted() FROM PUBLIC;
REVOKE ALL ON FUNCTION knowledge.fgentic_acl_rows_updated() FROM PUBLIC;
REVOKE ALL ON FUNCTION knowledge.fgentic_acl_rows_truncated() FROM PUBLIC;

DROP TRIGGER IF EXISTS fgentic_acl_rows_insert ON knowledge.chunks;
DROP TRIGGER IF EXISTS fgentic_acl_rows_delete ON knowledge.chunks;
DROP TRIGGER IF EXISTS fgentic_acl_rows_update ON knowledge.chunks;
DROP TRIGGER IF EXISTS fgentic_acl_rows_truncate ON knowledge.chunks;
CREATE TRIGGER fgentic_acl_rows_insert AFTER INSERT ON knowledge.chunks
  REFERENCING NEW TABLE AS fgentic_new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION knowledge.fgentic_acl_rows_inserted();
CREATE TRIGGER fgentic_acl_rows_delete AFTER DELETE ON knowledge.chunks
  REFERENCING OLD TABLE AS fgentic_old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION knowledge.fgentic_acl_rows_deleted();
CREATE TRIGGER fgentic_acl_rows_update AFTER UPDATE ON knowledge.chunks
  REFERENCING OLD TABLE AS fgentic_old_rows NEW TABLE AS fgentic_new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION knowledge.fgentic_acl_rows_updated();
CREATE TRIGGER fgentic_acl_rows_truncate AFTER TRUNCATE ON knowledge.chunks
  FOR EACH STATEMENT EXECUTE FUNCTION knowledge.fgentic_acl_rows_truncated();

-- Rows already present (writers wait: CREATE TRIGGER holds a lock that excludes them until commit).
DELETE FROM knowledge.fgentic_acl_rows;
INSERT INTO knowledge.fgentic_acl_rows (chunk_id, fgentic_acl)
SELECT c.chunk_id, c.fgentic_acl FROM knowledge.chunks c;
ANALYZE knowledge.fgentic_acl_rows;

-- The ranking core of migration 0009 with the count above, and without JIT compilation: on the
-- wide heap the HNSW fetch's estimated cost (heap fetches priced per page) passed jit_above_cost
-- (100,000 by default; 133,840 against 90,588 on the table stored as before, 20,000 rows, 10 %
-- selectivity, three-member audience), and PostgreSQL spent 8-9 ms compiling expressions for a
-- fetch that runs in about 1 ms. No statement here runs long enough to repay compilation.
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
