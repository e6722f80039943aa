-- Filtered search, second design (docs/filtered-search.md): an integer encoding of each row's ACL as
-- the selective prefilter, a planner that picks exact or HNSW from a bounded integer count, ties
-- resolved by (distance, chunk_id) on both paths, and a recall guard that sends queries far from the
-- corpus to the exact path. The search functions keep their v1 signatures; their bodies are replaced.
--
-- Authorization itself does not change: every row that leaves a search function has passed the same
-- typed jsonb test as before (classification in the allowed set, allowed_principals @> audience, or
-- allowed_groups ?| groups). The integer ids are only a necessary condition that lets an index find
-- the candidates: an id collision can add a candidate, which the jsonb test then removes, and can
-- never remove one (the row's ids are computed from the same strings as the query's).

-- intarray is a trusted extension (PostgreSQL 13+): the database owner may create it. Its operators
-- live in public and are always written OPERATOR(public.…) below, since the functions resolve names
-- in pg_catalog only (where the generic anyarray operators would not match gin__int_ops).
CREATE EXTENSION IF NOT EXISTS intarray WITH SCHEMA public;

-- The id functions live in their own schema: the generated column below makes every writer of
-- knowledge.chunks execute them, and the origin's v1/v2 Jobs revoke every function privilege in
-- schema knowledge each time they run (from PUBLIC and from knowledge_ingestion), which would stop
-- the origin's own ingestion until the next migrate. Here they stay executable by every role; they
-- are pure functions of their arguments and read nothing.
CREATE SCHEMA IF NOT EXISTS fgentic_ids;
REVOKE ALL ON SCHEMA fgentic_ids FROM PUBLIC;
GRANT USAGE ON SCHEMA fgentic_ids TO PUBLIC;

-- A 32-bit id for an ACL string: the first four bytes of its SHA-256. Stable across PostgreSQL major
-- versions and platforms (hashtext is not), and independent of any dictionary table, so a row written
-- by the origin's own ingestion gets the same ids as one written here. The input is converted to
-- UTF-8 explicitly; the knowledge database is UTF-8.
CREATE OR REPLACE FUNCTION fgentic_ids.id_of(value text) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT ('x' || encode(substr(sha256(convert_to(value, 'UTF8')), 1, 4), 'hex'))::bit(32)::integer
$$;

-- The ids of one row's metadata:
--   'p' || [kind, network, principal]  for each allowed principal (the whole typed object, so a
--                                       bridged principal never shares an id with a Matrix one);
--   'g' || group                        for each allowed group;
--   'l' || level                        for each allowed_classifications set the row is readable
--                                       under: a public row under ['public'] and under
--                                       ['approved_non_public','public'], an approved_non_public row
--                                       under the second only, every other class under neither.
-- Total on any jsonb (a malformed row yields fewer ids; the CHECK constraint refuses it afterwards),
-- because a generated column is computed before the CHECKs run.
CREATE OR REPLACE FUNCTION fgentic_ids.row_ids(metadata jsonb) RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT coalesce(array_agg(DISTINCT x.id ORDER BY x.id), '{}'::integer[]) FROM (
    SELECT fgentic_ids.id_of('p' || jsonb_build_array(e->'kind', e->'network', e->'principal')::text) AS id
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(metadata->'allowed_principals') = 'array'
      THEN metadata->'allowed_principals' ELSE '[]'::jsonb END) AS e
    WHERE jsonb_typeof(e) = 'object' AND jsonb_typeof(e->'principal') = 'string'
    UNION ALL
    SELECT fgentic_ids.id_of('g' || (g #>> '{}'))
    FROM jsonb_array_elements(CASE WHEN jsonb_typeof(metadata->'allowed_groups') = 'array'
      THEN metadata->'allowed_groups' ELSE '[]'::jsonb END) AS g
    WHERE jsonb_typeof(g) = 'string'
    UNION ALL
    SELECT fgentic_ids.id_of('l' || l.level)
    FROM unnest(CASE metadata->>'classification'
      WHEN 'public' THEN ARRAY['public', 'approved_non_public']
      WHEN 'approved_non_public' THEN ARRAY['approved_non_public']
      ELSE ARRAY[]::text[] END) AS l(level)
  ) x
  WHERE x.id IS NOT NULL
$$;

-- The level id a search asks for: the wider of the two allowed sets is named by its top class.
CREATE OR REPLACE FUNCTION fgentic_ids.level_id(allowed_classifications text[]) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT fgentic_ids.id_of('l' || CASE WHEN 'approved_non_public' = ANY (allowed_classifications)
    THEN 'approved_non_public' ELSE 'public' END)
$$;

-- A generated column, so every writer (this project's ingestion, the origin's, a manual INSERT or
-- COPY) gets it without knowing it exists. The writer's role evaluates the expression.
ALTER TABLE knowledge.chunks
  ADD COLUMN IF NOT EXISTS fgentic_acl integer[] GENERATED ALWAYS AS (fgentic_ids.row_ids(metadata)) STORED;
-- fastupdate = off: no pending list, so a freshly loaded table is as fast to filter as a vacuumed
-- one (at the price of slower single-row inserts).
CREATE INDEX IF NOT EXISTS chunks_fgentic_acl_gin_idx
  ON knowledge.chunks USING gin (fgentic_acl public.gin__int_ops) WITH (fastupdate = off);

-- Statistics for the recall guard: the row count and the sum of the unit-normalized embeddings, kept
-- by statement-level triggers (so the origin's ingestion maintains them too). With them the mean
-- cosine distance from a query to all rows is one inner product: 1 - q̂·Σr̂ / n.
-- min_contrast is the guard's threshold (docs/filtered-search.md, "Recall guard"); the owner may
-- tune it per corpus.
CREATE TABLE IF NOT EXISTS knowledge.fgentic_search_stats (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  row_count bigint NOT NULL CHECK (row_count >= 0),
  unit_sum public.vector(1024),
  min_contrast double precision NOT NULL DEFAULT 3 CHECK (min_contrast >= 1)
);
REVOKE ALL ON knowledge.fgentic_search_stats FROM PUBLIC;

-- pgvector has no scalar product, so a removal is passed as its own sum and subtracted.
CREATE OR REPLACE FUNCTION knowledge.fgentic_search_stats_add(
  delta_count bigint, added public.vector, removed public.vector)
RETURNS void
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  INSERT INTO knowledge.fgentic_search_stats AS s (singleton, row_count, unit_sum)
  VALUES (true, greatest(delta_count, 0),
    CASE WHEN removed IS NULL THEN added ELSE coalesce(added, removed OPERATOR(public.-) removed)
      OPERATOR(public.-) removed END)
  ON CONFLICT (singleton) DO UPDATE SET
    row_count = greatest(s.row_count + delta_count, 0),
    unit_sum = CASE
      WHEN s.row_count + delta_count <= 0 THEN NULL
      ELSE coalesce(s.unit_sum, EXCLUDED.unit_sum OPERATOR(public.-) EXCLUDED.unit_sum)
        OPERATOR(public.+) EXCLUDED.unit_sum
    END
$$;

CREATE OR REPLACE FUNCTION knowledge.fgentic_search_stats_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM knowledge.fgentic_search_stats_add(count(*), public.sum(public.l2_normalize(n.embedding)), NULL)
  FROM fgentic_new_rows n HAVING count(*) > 0;
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION knowledge.fgentic_search_stats_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM knowledge.fgentic_search_stats_add(-count(*), NULL, public.sum(public.l2_normalize(o.embedding)))
  FROM fgentic_old_rows o HAVING count(*) > 0;
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION knowledge.fgentic_search_stats_updated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  PERFORM knowledge.fgentic_search_stats_add(0,
    (SELECT public.sum(public.l2_normalize(n.embedding)) FROM fgentic_new_rows n),
    (SELECT public.sum(public.l2_normalize(o.embedding)) FROM fgentic_old_rows o));
  RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION knowledge.fgentic_search_stats_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  DELETE FROM knowledge.fgentic_search_stats;
  RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION knowledge.fgentic_search_stats_add(bigint, public.vector, public.vector) FROM PUBLIC;
REVOKE ALL ON FUNCTION knowledge.fgentic_search_stats_inserted() FROM PUBLIC;
REVOKE ALL ON FUNCTION knowledge.fgentic_search_stats_deleted() FROM PUBLIC;
REVOKE ALL ON FUNCTION knowledge.fgentic_search_stats_updated() FROM PUBLIC;
REVOKE ALL ON FUNCTION knowledge.fgentic_search_stats_truncated() FROM PUBLIC;

DROP TRIGGER IF EXISTS fgentic_search_stats_insert ON knowledge.chunks;
DROP TRIGGER IF EXISTS fgentic_search_stats_delete ON knowledge.chunks;
DROP TRIGGER IF EXISTS fgentic_search_stats_update ON knowledge.chunks;
DROP TRIGGER IF EXISTS fgentic_search_stats_truncate ON knowledge.chunks;
CREATE TRIGGER fgentic_search_stats_insert AFTER INSERT ON knowledge.chunks
  REFERENCING NEW TABLE AS fgentic_new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION knowledge.fgentic_search_stats_inserted();
CREATE TRIGGER fgentic_search_stats_delete AFTER DELETE ON knowledge.chunks
  REFERENCING OLD TABLE AS fgentic_old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION knowledge.fgentic_search_stats_deleted();
CREATE TRIGGER fgentic_search_stats_update AFTER UPDATE ON knowledge.chunks
  REFERENCING OLD TABLE AS fgentic_old_rows NEW TABLE AS fgentic_new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION knowledge.fgentic_search_stats_updated();
CREATE TRIGGER fgentic_search_stats_truncate AFTER TRUNCATE ON knowledge.chunks
  FOR EACH STATEMENT EXECUTE FUNCTION knowledge.fgentic_search_stats_truncated();

-- Rows already present when this migration runs.
DELETE FROM knowledge.fgentic_search_stats;
INSERT INTO knowledge.fgentic_search_stats (singleton, row_count, unit_sum)
SELECT true, count(*), public.sum(public.l2_normalize(c.embedding)) FROM knowledge.chunks c;

-- The ranking core shared by both search functions. Not executable by the retrieval role: it
-- validates nothing and is reached only through the two SECURITY DEFINER functions below, which
-- validate their arguments first. Exactly one of audience (Matrix) and groups (OAuth) is non-null.
--
-- Plans:
--   exact: every row passing the integer prefilter and the jsonb test, ranked by (distance,
--          chunk_id). Distances only are materialized; content is read for the top rows alone.
--   hnsw:  the HNSW index under the same WHERE, iterative scan in relaxed order (the integer test
--          is cheap on every candidate), asked for more rows than needed and re-sorted by
--          (distance, chunk_id). When every extra row ties with the last one kept, the scan is
--          repeated with a larger limit, so a tie group at the cut-off is seen whole before the
--          chunk_id tie-break picks from it.
-- Choice (plan_hint 'auto'): a count of integer-prefiltered rows, bounded at
--   greatest(exact_threshold, 3 % of the table) + 1. At or below: exact (filtered HNSW loses recall
--   below a few percent selectivity). Above: hnsw, then two fallbacks to exact:
--   - completeness: the scan found fewer rows than it needed although more rows are authorized;
--   - recall guard: the relative contrast (mean distance to all rows ÷ distance of the last row
--     kept) is below knowledge.fgentic_search_stats.min_contrast. Far from the corpus every row is
--     about equally distant and a graph walk has nothing to follow; an approximate last distance
--     can only be too large, which lowers the contrast, so a bad walk errs towards the exact path.
-- A forced plan ('exact', 'hnsw') skips the choice and the guard but keeps the completeness check.
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
  last_distance double precision;
  mean_distance double precision;
  min_contrast double precision;
  -- Beyond this many rows in one tie group the exact path answers.
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
    LOOP
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
      found_ids := coalesce(found_ids, ARRAY[]::text[]);
      EXIT WHEN cardinality(found_ids) < fetch_rows
        OR cardinality(found_ids) <= depth
        OR found_distances[fetch_rows] > found_distances[depth];
      IF fetch_rows >= max_fetch THEN
        found_ids := NULL;
        EXIT;
      END IF;
      fetch_rows := least(fetch_rows * 4, max_fetch);
    END LOOP;

    IF found_ids IS NULL OR cardinality(found_ids) < least(depth, authorized) THEN
      chosen := 'exact';
    ELSIF plan_hint = 'auto' THEN
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
SET plan_cache_mode = force_custom_plan
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

-- Executable by every role, on purpose (see the schema's comment above).
GRANT EXECUTE ON FUNCTION fgentic_ids.id_of(text), fgentic_ids.row_ids(jsonb), fgentic_ids.level_id(text[])
  TO PUBLIC;
