-- The baseline: everything this project keeps in a knowledge database (retrieval/README.md,
-- "Database"). Applied by `migrate` as knowledge_owner in one transaction; later migrations only
-- append.
--
-- A guest in the origin's database. Nothing here changes an object of the origin (its tables, their
-- columns, storage, triggers, indexes and grants, its functions and schemas). The project's objects
-- live in two schemas of its own: `fgentic` (derived search data and the search functions) and
-- `fgentic_ledger` (the capability ledger). The origin's Jobs revoke every privilege in schema
-- `knowledge` each time they run; nothing of ours lives there, so they never touch it.
--
-- The one exception is a database the origin has never migrated: there `knowledge.chunks` (and the
-- ingestion lease) is created here, in the origin's v1/v2 shape, so the origin's Jobs can run later
-- (their CREATE ... IF NOT EXISTS leave it as it is).
--
-- The search reads the origin's rows through a derived copy, `fgentic.chunks`, keyed by chunk_id:
-- the row's ACL as integer ids, its vector (with the project's own HNSW index) and the xmin of the
-- origin row version it was derived from. `fgentic.sync_rows` (run by this project's ingestion in
-- its write transaction) and `fgentic.sync_batch` (the `sync` command, and `migrate` after this
-- file) keep it. Every row a search returns is re-checked against the origin's row: the same
-- version (xmin), and the origin's typed ACL test on its metadata. A derived row that is behind its
-- origin row can therefore only hide that row until the next sync, never show a row the origin no
-- longer allows.
--
-- Nothing is granted to PUBLIC. The roles: knowledge_ingestion (the origin's writer; here it may
-- sync and record the embedding profile), fgentic_retrieval (the serving role: EXECUTE on the search
-- functions and the profile reader, nothing on any table); knowledge_projector and the ledger's
-- check are granted by `migrate` in ledger mode only.

CREATE SCHEMA IF NOT EXISTS fgentic;
REVOKE ALL ON SCHEMA fgentic FROM PUBLIC;
GRANT USAGE ON SCHEMA fgentic TO knowledge_ingestion, fgentic_retrieval;

-- ---------------------------------------------------------------------------------------------
-- Validators. The same grammar as contract/identifiers.ts and contract/metadata.ts
-- (retrieval/db/validators.test.ts and retrieval/db/schema.test.ts compare them on generated input).
-- The vertical tab is written E'\x0B': before PostgreSQL 18, E'\v' is the letter v.
-- ---------------------------------------------------------------------------------------------

CREATE FUNCTION fgentic.is_bounded_clean_text(value text, max_bytes integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
BEGIN
  RETURN octet_length(value) BETWEEN 1 AND max_bytes
     AND value = btrim(value, E' \t\n\r\f\x0B')
     AND value !~ '[\u0001-\u001f\u007f-\u009f]';
END
$$;

CREATE FUNCTION fgentic.is_dns1123_label(value text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
BEGIN
  RETURN value ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$';
END
$$;

-- Matrix server name: DNS name, IPv4 literal or bracketed IPv6 literal (RFC 3986 IPv6address),
-- optional port 1–65535.
CREATE FUNCTION fgentic.is_matrix_server_name(value text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
  host text := value;
  port text;
  bracket_end integer := length(value) - coalesce(nullif(strpos(reverse(value), ']'), 0) - 1, length(value));
  colon_pos integer := length(value) - coalesce(nullif(strpos(reverse(value), ':'), 0) - 1, length(value));
  label text;
BEGIN
  IF strpos(value, ':') > 0 AND colon_pos > bracket_end THEN
    port := substr(value, colon_pos + 1);
    IF port !~ '^[0-9]{1,5}$' OR port::integer < 1 OR port::integer > 65535 THEN
      RETURN false;
    END IF;
    host := substr(value, 1, colon_pos - 1);
  END IF;
  IF left(host, 1) = '[' THEN
    RETURN host ~ '^\[(?:(?:[0-9A-Fa-f]{1,4}:){6}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|::(?:[0-9A-Fa-f]{1,4}:){5}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:){4}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,1}[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:){3}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,2}[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:){2}(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,3}[0-9A-Fa-f]{1,4})?::[0-9A-Fa-f]{1,4}:(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,4}[0-9A-Fa-f]{1,4})?::(?:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}|(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(?:\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})|(?:(?:[0-9A-Fa-f]{1,4}:){0,5}[0-9A-Fa-f]{1,4})?::[0-9A-Fa-f]{1,4}|(?:(?:[0-9A-Fa-f]{1,4}:){0,6}[0-9A-Fa-f]{1,4})?::)\]$';
  END IF;
  IF host ~ '^[0-9.]+$' THEN
    RETURN host ~ '^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$';
  END IF;
  IF host !~ '^[A-Za-z0-9.-]{1,255}$' THEN
    RETURN false;
  END IF;
  FOREACH label IN ARRAY string_to_array(host, '.') LOOP
    IF length(label) = 0 OR length(label) > 63 OR label ~ '^-' OR label ~ '-$' THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END
$$;

CREATE FUNCTION fgentic.is_full_mxid(value text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
BEGIN
  RETURN octet_length(value) BETWEEN 4 AND 255
     AND value ~ '^@[a-z0-9._=/+-]+:.+$'
     AND fgentic.is_matrix_server_name(substr(value, strpos(value, ':') + 1));
END
$$;

-- Exactly {"kind":"matrix","principal"} or {"kind":"bridged_matrix","network","principal"}; unique.
CREATE FUNCTION fgentic.is_valid_principal_array(value jsonb, max_items integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
  e jsonb;
  n integer;
BEGIN
  IF jsonb_typeof(value) IS DISTINCT FROM 'array' THEN
    RETURN false;
  END IF;
  n := jsonb_array_length(value);
  IF n > max_items THEN
    RETURN false;
  END IF;
  FOR i IN 0 .. n - 1 LOOP
    e := value->i;
    FOR j IN i + 1 .. n - 1 LOOP
      IF e = value->j THEN
        RETURN false;
      END IF;
    END LOOP;
    IF jsonb_typeof(e) IS DISTINCT FROM 'object'
       OR jsonb_typeof(e->'kind') IS DISTINCT FROM 'string'
       OR jsonb_typeof(e->'principal') IS DISTINCT FROM 'string'
       OR NOT fgentic.is_full_mxid(e->>'principal') THEN
      RETURN false;
    END IF;
    IF e->>'kind' = 'matrix' THEN
      IF (e - ARRAY['kind', 'principal']) <> '{}'::jsonb THEN
        RETURN false;
      END IF;
    ELSIF e->>'kind' = 'bridged_matrix' THEN
      IF (e - ARRAY['kind', 'principal', 'network']) <> '{}'::jsonb
         OR jsonb_typeof(e->'network') IS DISTINCT FROM 'string'
         OR NOT fgentic.is_dns1123_label(e->>'network') THEN
        RETURN false;
      END IF;
    ELSE
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END
$$;

-- partner/<org>/<name>, each a DNS-1123 label; unique.
CREATE FUNCTION fgentic.is_valid_group_array(value jsonb, max_items integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
  e jsonb;
  n integer;
BEGIN
  IF jsonb_typeof(value) IS DISTINCT FROM 'array' THEN
    RETURN false;
  END IF;
  n := jsonb_array_length(value);
  IF n > max_items THEN
    RETURN false;
  END IF;
  FOR i IN 0 .. n - 1 LOOP
    e := value->i;
    FOR j IN i + 1 .. n - 1 LOOP
      IF e = value->j THEN
        RETURN false;
      END IF;
    END LOOP;
    IF jsonb_typeof(e) IS DISTINCT FROM 'string'
       OR (e #>> '{}') !~ '^partner/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$' THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END
$$;

-- The origin's metadata contract: exactly the four keys; a source object with an id and only known
-- keys, each a bounded clean string; a known classification; at most 64 principals and 64 groups,
-- at least one of either. Never raises and never returns NULL for a non-NULL argument.
CREATE FUNCTION fgentic.metadata_valid(value jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
  src jsonb;
  k text;
BEGIN
  IF jsonb_typeof(value) <> 'object' OR octet_length(value::text) > 65536
     OR NOT (value ?& ARRAY['source', 'classification', 'allowed_principals', 'allowed_groups'])
     OR (value - ARRAY['source', 'classification', 'allowed_principals', 'allowed_groups']) <> '{}'::jsonb THEN
    RETURN false;
  END IF;
  src := value->'source';
  IF jsonb_typeof(src) <> 'object' OR NOT (src ? 'id')
     OR (src - ARRAY['id', 'title', 'locator', 'revision', 'location']) <> '{}'::jsonb THEN
    RETURN false;
  END IF;
  FOREACH k IN ARRAY ARRAY['id', 'title', 'locator', 'revision', 'location'] LOOP
    CONTINUE WHEN NOT (src ? k);
    IF jsonb_typeof(src->k) <> 'string' OR NOT fgentic.is_bounded_clean_text(src->>k,
         CASE k WHEN 'locator' THEN 2048 WHEN 'revision' THEN 255 ELSE 512 END) THEN
      RETURN false;
    END IF;
  END LOOP;
  IF jsonb_typeof(value->'classification') <> 'string' OR (value->>'classification') NOT IN
     ('public', 'approved_non_public', 'restricted', 'regulated', 'secret', 'authentication') THEN
    RETURN false;
  END IF;
  RETURN fgentic.is_valid_principal_array(value->'allowed_principals', 64)
     AND fgentic.is_valid_group_array(value->'allowed_groups', 64)
     AND jsonb_array_length(value->'allowed_principals') + jsonb_array_length(value->'allowed_groups') > 0;
END
$$;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA fgentic FROM PUBLIC;
-- The CHECKs of a knowledge.chunks created below run as the writing role.
GRANT EXECUTE ON FUNCTION fgentic.is_bounded_clean_text(text, integer), fgentic.metadata_valid(jsonb),
  fgentic.is_valid_principal_array(jsonb, integer), fgentic.is_valid_group_array(jsonb, integer),
  fgentic.is_full_mxid(text), fgentic.is_matrix_server_name(text), fgentic.is_dns1123_label(text)
  TO knowledge_ingestion;

-- ---------------------------------------------------------------------------------------------
-- The origin's table, only where the origin has not created it (its v1 and v2 shapes: the four
-- columns and their CHECKs, the source index its deletes use, the single-writer lease).
-- ---------------------------------------------------------------------------------------------
DO $origin_shape$
BEGIN
  IF to_regclass('knowledge.chunks') IS NULL THEN
    CREATE SCHEMA IF NOT EXISTS knowledge;
    REVOKE ALL ON SCHEMA knowledge FROM PUBLIC;
    GRANT USAGE ON SCHEMA knowledge TO knowledge_ingestion;
    CREATE TABLE knowledge.chunks (
      chunk_id text PRIMARY KEY,
      content text NOT NULL,
      embedding public.vector(1024) NOT NULL,
      metadata jsonb NOT NULL,
      CONSTRAINT chunks_chunk_id_valid CHECK (fgentic.is_bounded_clean_text(chunk_id, 512)),
      CONSTRAINT chunks_content_valid CHECK (octet_length(content) BETWEEN 1 AND 65536 AND content ~ '[^[:space:]]'),
      CONSTRAINT chunks_embedding_nonzero CHECK (public.vector_norm(embedding) > 0),
      CONSTRAINT chunks_metadata_valid CHECK (fgentic.metadata_valid(metadata))
    );
    CREATE INDEX chunks_source_id_idx ON knowledge.chunks ((metadata #>> '{source,id}'));
    REVOKE ALL ON knowledge.chunks FROM PUBLIC;
    GRANT SELECT, INSERT, UPDATE, DELETE ON knowledge.chunks TO knowledge_ingestion;
  END IF;
  IF to_regclass('knowledge.ingestion_leases') IS NULL THEN
    CREATE TABLE knowledge.ingestion_leases (
      name text PRIMARY KEY,
      holder uuid NOT NULL,
      expires_at timestamptz NOT NULL,
      CONSTRAINT ingestion_leases_single_writer CHECK (name = 'chunks-v1')
    );
    REVOKE ALL ON knowledge.ingestion_leases FROM PUBLIC;
    GRANT SELECT, INSERT, UPDATE, DELETE ON knowledge.ingestion_leases TO knowledge_ingestion;
  END IF;
END
$origin_shape$;

-- ---------------------------------------------------------------------------------------------
-- Integer ACL ids: the first four bytes of SHA-256 over a typed string, the same on every engine
-- and platform.
--   'p' || [kind, network, principal]   each allowed principal (a bridged one never shares an id
--                                        with a Matrix one);
--   'g' || group                         each allowed group;
--   'l' || level                         each allowed_classifications set the row is readable
--                                        under: public rows under ['public'] and under
--                                        ['approved_non_public','public'], approved_non_public rows
--                                        under the second only, other classes under neither.
-- The ids are a necessary condition that lets an index find candidates: a collision can add one,
-- which the typed test then removes, and can never remove one.
-- ---------------------------------------------------------------------------------------------

CREATE FUNCTION fgentic.id_of(value text) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
BEGIN
  RETURN ('x' || encode(substr(sha256(convert_to(value, 'UTF8')), 1, 4), 'hex'))::bit(32)::integer;
END
$$;

-- Ascending and distinct.
CREATE FUNCTION fgentic.sorted_ids(ids integer[]) RETURNS integer[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT coalesce(array_agg(DISTINCT i ORDER BY i), '{}'::integer[]) FROM unnest(ids) AS u(i) WHERE i IS NOT NULL
$$;

CREATE FUNCTION fgentic.row_ids(metadata jsonb) RETURNS integer[]
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
        ids := ids || fgentic.id_of('p' || jsonb_build_array(e->'kind', e->'network', e->'principal')::text);
      END IF;
    END LOOP;
  END IF;
  arr := metadata->'allowed_groups';
  IF jsonb_typeof(arr) = 'array' THEN
    FOR i IN 0 .. jsonb_array_length(arr) - 1 LOOP
      e := arr->i;
      IF jsonb_typeof(e) = 'string' THEN
        ids := ids || fgentic.id_of('g' || (e #>> '{}'));
      END IF;
    END LOOP;
  END IF;
  FOREACH level IN ARRAY CASE metadata->>'classification'
      WHEN 'public' THEN ARRAY['public', 'approved_non_public']
      WHEN 'approved_non_public' THEN ARRAY['approved_non_public']
      ELSE ARRAY[]::text[] END LOOP
    ids := ids || fgentic.id_of('l' || level);
  END LOOP;
  RETURN fgentic.sorted_ids(ids);
END
$$;

-- The level id a search asks for: the wider of the two allowed sets is named by its top class.
CREATE FUNCTION fgentic.level_id(allowed_classifications text[]) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
BEGIN
  RETURN fgentic.id_of('l' || CASE WHEN 'approved_non_public' = ANY (allowed_classifications)
    THEN 'approved_non_public' ELSE 'public' END);
END
$$;

-- A Matrix audience's ids and the level id.
CREATE FUNCTION fgentic.audience_ids(audience jsonb, allowed_classifications text[]) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
  ids integer[] := ARRAY[fgentic.level_id(allowed_classifications)];
  e jsonb;
BEGIN
  FOR i IN 0 .. jsonb_array_length(audience) - 1 LOOP
    e := audience->i;
    ids := ids || fgentic.id_of('p' || jsonb_build_array(e->'kind', e->'network', e->'principal')::text);
  END LOOP;
  RETURN fgentic.sorted_ids(ids);
END
$$;

-- A partner's group ids. A NULL group adds no id; the search functions refuse such an array first.
CREATE FUNCTION fgentic.group_ids(groups text[]) RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
DECLARE
  ids integer[] := '{}';
  g text;
BEGIN
  FOREACH g IN ARRAY groups LOOP
    IF g IS NOT NULL THEN
      ids := ids || fgentic.id_of('g' || g);
    END IF;
  END LOOP;
  RETURN fgentic.sorted_ids(ids);
END
$$;

-- A key of a vector's exact binary form: equal vectors have equal keys (the duplicate lookup of the
-- ranking core); a collision only adds a candidate, which distance equality removes.
CREATE FUNCTION fgentic.vector_key(embedding public.vector) RETURNS bigint
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
BEGIN
  RETURN ('x' || encode(substr(sha256(public.vector_send(embedding)), 1, 8), 'hex'))::bit(64)::bigint;
END
$$;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA fgentic FROM PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- Derived data. Only the SECURITY DEFINER functions below write it; no role but the owner holds a
-- privilege on these tables.
-- ---------------------------------------------------------------------------------------------

-- One row per origin row that has been synced. Vectors stay in the row (STORAGE MAIN, and a row is
-- moved out of line only when it no longer fits a page): the exact path reads every authorized
-- row's vector, and out-of-line vectors cost three TOAST page reads each.
CREATE TABLE fgentic.chunks (
  chunk_id text PRIMARY KEY,
  acl integer[] NOT NULL,
  embedding public.vector(1024) NOT NULL,
  vector_key bigint NOT NULL,
  -- Keyword search (hybrid mode) over the content, as to_tsvector('simple', content).
  tsv tsvector NOT NULL,
  -- The origin row version this row was derived from; a search serves the row only while the
  -- origin row is still that version.
  origin_xmin xid NOT NULL
) WITH (toast_tuple_target = 8160);
ALTER TABLE fgentic.chunks ALTER COLUMN embedding SET STORAGE MAIN;
-- fastupdate = off: no pending list, so a freshly loaded table filters as fast as a vacuumed one.
CREATE INDEX chunks_acl_gin_idx ON fgentic.chunks USING gin (acl) WITH (fastupdate = off);
CREATE INDEX chunks_vector_key_idx ON fgentic.chunks (vector_key);
CREATE INDEX chunks_tsv_gin_idx ON fgentic.chunks USING gin (tsv);
-- The HNSW index is built by `migrate` after the first sync (retrieval/db/migrate.ts): building a
-- graph over loaded rows is far cheaper than inserting them one at a time.

-- How many rows carry each ACL id, kept by the statement triggers below in the writing
-- transaction. The plan's choice reads a handful of these rows instead of counting authorized rows
-- (an audience holds at most min(its ids' counts) rows), and they decide which ids get a graph of
-- their own (fgentic.subgraphs).
CREATE TABLE fgentic.acl_counts (
  id integer PRIMARY KEY,
  rows bigint NOT NULL CHECK (rows >= 0)
);

-- Filtered subgraphs: a partial HNSW index over the rows that carry one ACL id
-- (`WHERE acl @> '{id}'`), for ids whose rows are too many for the exact path and few enough that
-- a walk of the whole graph under the filter visits many rows it then drops. A search whose audience
-- every row must carry that id walks that graph instead. Built and dropped CONCURRENTLY by
-- `sync`/`migrate` as the ids' shares change, under a storage budget (retrieval/db/subgraphs.ts);
-- a row here is written only once its index is valid, and removed before its index is dropped.
CREATE TABLE fgentic.subgraphs (
  id integer PRIMARY KEY,
  index_name text NOT NULL UNIQUE CHECK (index_name ~ '^chunks_sub_[0-9a-f]{8}$'),
  built_rows bigint NOT NULL,
  built_at timestamptz NOT NULL DEFAULT statement_timestamp()
);

-- The recall guard's corpus statistics: the row count and the sum of unit vectors, so the mean
-- cosine distance from a query to every row is 1 - q̂·Σr̂ / n. min_contrast is the guard's
-- threshold (docs/filtered-search.md); the owner may tune it per corpus.
CREATE TABLE fgentic.search_stats (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  row_count bigint NOT NULL CHECK (row_count >= 0),
  unit_sum public.vector(1024),
  min_contrast double precision NOT NULL DEFAULT 3 CHECK (min_contrast >= 1)
);

-- Vector index definitions a bulk load dropped and has not built yet (retrieval/ingest/store.ts).
CREATE TABLE fgentic.deferred_indexes (
  name text PRIMARY KEY,
  am text NOT NULL,
  def text NOT NULL CHECK (def LIKE 'CREATE INDEX %' AND def LIKE '% ON fgentic.chunks USING %'),
  comment text,
  deferred_at timestamptz NOT NULL DEFAULT statement_timestamp()
);

-- The embedding profile the stored vectors were computed with (docs/decisions.md, D7). One row; a
-- server whose embedder reports another profile refuses to serve.
CREATE TABLE fgentic.embedding_profile (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  profile text NOT NULL CHECK (fgentic.is_bounded_clean_text(profile, 128)),
  dimensions integer NOT NULL CHECK (dimensions = 1024),
  recorded_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON ALL TABLES IN SCHEMA fgentic FROM PUBLIC;

-- pgvector has no scalar product, so a removal is passed as its own sum and subtracted.
CREATE FUNCTION fgentic.search_stats_add(delta_count bigint, added public.vector, removed public.vector)
RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  INSERT INTO fgentic.search_stats AS s (singleton, row_count, unit_sum)
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

CREATE FUNCTION fgentic.chunks_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  INSERT INTO fgentic.acl_counts AS c (id, rows)
  SELECT u.id, count(*) FROM fgentic_new_rows n, unnest(n.acl) AS u(id) GROUP BY u.id ORDER BY u.id
  ON CONFLICT (id) DO UPDATE SET rows = c.rows + EXCLUDED.rows;
  PERFORM fgentic.search_stats_add(count(*), public.sum(public.l2_normalize(n.embedding)), NULL)
  FROM fgentic_new_rows n HAVING count(*) > 0;
  RETURN NULL;
END
$$;

CREATE FUNCTION fgentic.chunks_deleted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  -- Counter rows are locked in id order, so concurrent writers wait for each other instead of
  -- deadlocking.
  PERFORM 1 FROM fgentic.acl_counts c
  WHERE c.id IN (SELECT u.id FROM fgentic_old_rows o, unnest(o.acl) AS u(id))
  ORDER BY c.id FOR UPDATE;
  UPDATE fgentic.acl_counts c SET rows = greatest(c.rows - d.n, 0)
  FROM (SELECT u.id, count(*) AS n FROM fgentic_old_rows o, unnest(o.acl) AS u(id) GROUP BY u.id ORDER BY u.id) d
  WHERE c.id = d.id;
  PERFORM fgentic.search_stats_add(-count(*), NULL, public.sum(public.l2_normalize(o.embedding)))
  FROM fgentic_old_rows o HAVING count(*) > 0;
  RETURN NULL;
END
$$;

-- The counts move by the difference between the old and the new ACLs of the updated rows.
CREATE FUNCTION fgentic.chunks_updated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ids integer[];
  deltas bigint[];
BEGIN
  SELECT array_agg(d.id ORDER BY d.id), array_agg(d.n ORDER BY d.id) INTO ids, deltas FROM (
    SELECT x.id, sum(x.n)::bigint AS n FROM (
      SELECT u.id, 1 AS n FROM fgentic_new_rows r, unnest(r.acl) AS u(id)
      UNION ALL
      SELECT u.id, -1 FROM fgentic_old_rows r, unnest(r.acl) AS u(id)) x
    GROUP BY x.id HAVING sum(x.n) <> 0) d;
  IF ids IS NOT NULL THEN
    PERFORM 1 FROM fgentic.acl_counts c WHERE c.id = ANY (ids) ORDER BY c.id FOR UPDATE;
    UPDATE fgentic.acl_counts c SET rows = greatest(c.rows + u.n, 0)
    FROM unnest(ids, deltas) AS u(id, n) WHERE c.id = u.id;
    INSERT INTO fgentic.acl_counts AS c (id, rows)
    SELECT u.id, u.n FROM unnest(ids, deltas) AS u(id, n)
    WHERE u.n > 0 AND NOT EXISTS (SELECT 1 FROM fgentic.acl_counts x WHERE x.id = u.id)
    ORDER BY u.id
    ON CONFLICT (id) DO UPDATE SET rows = c.rows + EXCLUDED.rows;
  END IF;
  -- A statement that updated no row fires this trigger too (an upsert that inserted only, or
  -- matched nothing): it must leave the statistics alone.
  IF EXISTS (SELECT 1 FROM fgentic_new_rows) THEN
    PERFORM fgentic.search_stats_add(0,
      (SELECT public.sum(public.l2_normalize(n.embedding)) FROM fgentic_new_rows n),
      (SELECT public.sum(public.l2_normalize(o.embedding)) FROM fgentic_old_rows o));
  END IF;
  RETURN NULL;
END
$$;

CREATE FUNCTION fgentic.chunks_truncated() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  DELETE FROM fgentic.acl_counts;
  DELETE FROM fgentic.search_stats;
  RETURN NULL;
END
$$;

CREATE TRIGGER chunks_insert AFTER INSERT ON fgentic.chunks
  REFERENCING NEW TABLE AS fgentic_new_rows FOR EACH STATEMENT EXECUTE FUNCTION fgentic.chunks_inserted();
CREATE TRIGGER chunks_delete AFTER DELETE ON fgentic.chunks
  REFERENCING OLD TABLE AS fgentic_old_rows FOR EACH STATEMENT EXECUTE FUNCTION fgentic.chunks_deleted();
CREATE TRIGGER chunks_update AFTER UPDATE ON fgentic.chunks
  REFERENCING OLD TABLE AS fgentic_old_rows NEW TABLE AS fgentic_new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION fgentic.chunks_updated();
CREATE TRIGGER chunks_truncate AFTER TRUNCATE ON fgentic.chunks
  FOR EACH STATEMENT EXECUTE FUNCTION fgentic.chunks_truncated();

-- ---------------------------------------------------------------------------------------------
-- Sync: the derived rows of origin rows, computed from the origin rows themselves (a caller names
-- rows, never their derived values).
-- ---------------------------------------------------------------------------------------------

-- The rows `ids` names, as they are in this transaction's snapshot: present → (re)derived, absent →
-- removed. This project's ingestion calls it in its write transaction after each statement.
CREATE FUNCTION fgentic.sync_rows(ids text[]) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  changed integer;
  removed integer;
BEGIN
  IF ids IS NULL OR cardinality(ids) > 100000 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fgentic sync: invalid argument';
  END IF;
  INSERT INTO fgentic.chunks AS d (chunk_id, acl, embedding, vector_key, tsv, origin_xmin)
  SELECT c.chunk_id, fgentic.row_ids(c.metadata), c.embedding, fgentic.vector_key(c.embedding),
    to_tsvector('simple', c.content), c.xmin
  FROM knowledge.chunks c
  WHERE c.chunk_id = ANY (ids)
  -- Always rewritten: a row written twice in one transaction keeps its xmin.
  ON CONFLICT (chunk_id) DO UPDATE SET acl = EXCLUDED.acl, embedding = EXCLUDED.embedding,
    vector_key = EXCLUDED.vector_key, tsv = EXCLUDED.tsv, origin_xmin = EXCLUDED.origin_xmin;
  GET DIAGNOSTICS changed = ROW_COUNT;
  DELETE FROM fgentic.chunks d
  WHERE d.chunk_id = ANY (ids) AND NOT EXISTS (SELECT 1 FROM knowledge.chunks c WHERE c.chunk_id = d.chunk_id);
  GET DIAGNOSTICS removed = ROW_COUNT;
  RETURN changed + removed;
END
$$;

-- One step of a full sync, in chunk_id order from `after` (exclusive; NULL from the start): up to
-- `batch` origin rows whose derived row is missing or of another version are (re)derived, and
-- derived rows in that key range whose origin row is gone are removed. Returns the last chunk_id
-- it covered (NULL: done) and what it changed. Each call is one short statement, so a sync of a
-- large table never holds a long transaction; rows written behind the cursor meanwhile are taken
-- by the next full sync (or by sync_rows, for this project's own writes).
CREATE FUNCTION fgentic.sync_batch(after text, batch integer,
  OUT last_id text, OUT derived integer, OUT removed integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  ids text[];
BEGIN
  IF batch IS NULL OR batch NOT BETWEEN 1 AND 100000 THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fgentic sync: invalid argument';
  END IF;
  SELECT array_agg(c.chunk_id ORDER BY c.chunk_id) INTO ids FROM (
    SELECT c.chunk_id FROM knowledge.chunks c
    WHERE after IS NULL OR c.chunk_id > after
    ORDER BY c.chunk_id LIMIT batch) c;
  last_id := ids[cardinality(ids)];
  INSERT INTO fgentic.chunks AS d (chunk_id, acl, embedding, vector_key, tsv, origin_xmin)
  SELECT c.chunk_id, fgentic.row_ids(c.metadata), c.embedding, fgentic.vector_key(c.embedding),
    to_tsvector('simple', c.content), c.xmin
  FROM knowledge.chunks c
  WHERE c.chunk_id = ANY (ids)
    AND NOT EXISTS (SELECT 1 FROM fgentic.chunks x WHERE x.chunk_id = c.chunk_id AND x.origin_xmin = c.xmin)
  ON CONFLICT (chunk_id) DO UPDATE SET acl = EXCLUDED.acl, embedding = EXCLUDED.embedding,
    vector_key = EXCLUDED.vector_key, tsv = EXCLUDED.tsv, origin_xmin = EXCLUDED.origin_xmin;
  GET DIAGNOSTICS derived = ROW_COUNT;
  DELETE FROM fgentic.chunks d
  WHERE (after IS NULL OR d.chunk_id > after) AND (last_id IS NULL OR d.chunk_id <= last_id)
    AND NOT EXISTS (SELECT 1 FROM knowledge.chunks c WHERE c.chunk_id = d.chunk_id);
  GET DIAGNOSTICS removed = ROW_COUNT;
END
$$;

CREATE FUNCTION fgentic.embedding_profile_v1() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT profile FROM fgentic.embedding_profile WHERE singleton
$$;

-- Records the profile when none is recorded; the caller checks the result against its own.
CREATE FUNCTION fgentic.claim_embedding_profile_v1(profile text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF profile IS NULL OR NOT fgentic.is_bounded_clean_text(profile, 128) THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fgentic profile: invalid argument';
  END IF;
  INSERT INTO fgentic.embedding_profile (profile, dimensions) VALUES (claim_embedding_profile_v1.profile, 1024)
  ON CONFLICT (singleton) DO NOTHING;
  RETURN (SELECT p.profile FROM fgentic.embedding_profile p WHERE p.singleton);
END
$$;

-- Whether any origin row exists (the profile claim's rule needs it; the ingestion role may read
-- the table on the origin's database, but not necessarily on every database this runs on).
CREATE FUNCTION fgentic.origin_has_rows_v1() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT EXISTS (SELECT 1 FROM knowledge.chunks)
$$;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA fgentic FROM PUBLIC;

-- ---------------------------------------------------------------------------------------------
-- Search (docs/filtered-search.md). The ranking core finds candidates in fgentic.chunks by the
-- integer ACL ids and ranks them by (distance, chunk_id); a candidate is kept only when its origin
-- row is the version it was derived from and passes the origin's typed test (classification in the
-- allowed set, and allowed_principals @> audience or allowed_groups ?| groups).
--
-- Plans: the per-id counts give an upper bound of the integer-authorized rows (a Matrix audience's
-- rows carry every one of its ids: at most the smallest count; a partner's carry the level id and
-- one of its groups: at most the smaller of the level's count and the groups' sum). At or below
-- exact_threshold the exact path ranks them, starting from the ACL index on the audience's most
-- selective id. Above it, the walk takes the subgraph of one of the audience's ids when one is built
-- (the smallest); without one, the exact path answers up to 3 % of the table and the whole graph
-- beyond. A walk's answer goes to the exact path
-- when it is incomplete, when it met several rows tied at the cut-off, or when the query is far from
-- the corpus (the recall guard); bit-identical duplicates of the cut-off row are looked up by vector
-- key. Every statement whose plan cannot depend on the call's values is planned once per session;
-- the exact scans and the subgraph walk (its id is a literal, so the planner can match the partial
-- index) are planned per call. No count, total or score over unauthorized rows leaves the database.
-- ---------------------------------------------------------------------------------------------

CREATE FUNCTION fgentic.rank_v1(
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
  -- The audience's most selective id (the exact scan starts from it) and its subgraph, if any.
  key_ids integer[];
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
  -- reads only those.
  PERFORM set_config('plan_cache_mode', 'force_custom_plan', true),
    set_config('enable_seqscan', 'off', true),
    set_config('enable_indexscan', 'off', true);
  WITH authorized_rows AS MATERIALIZED (
    SELECT d.chunk_id, d.embedding OPERATOR(public.<=>) query_embedding AS distance, d.origin_xmin
    FROM fgentic.chunks d
    -- The index condition: the key ids only (a Matrix audience's rarest id, or a partner's groups),
    -- never the level id every public row carries; the whole integer test is the filter (IS TRUE
    -- keeps it out of the index condition).
    WHERE d.acl && key_ids
      AND (d.acl @> all_ids AND (any_ids IS NULL OR d.acl && any_ids)) IS TRUE
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

  -- Step 2: the origin's typed test on those rows, in rank order (primary-key probes).
  PERFORM set_config('plan_cache_mode', 'force_generic_plan', true),
    set_config('enable_seqscan', 'on', true),
    set_config('enable_indexscan', 'on', true);
  SELECT array_agg(f.id ORDER BY f.n), array_agg(f.d ORDER BY f.n)
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
REVOKE ALL ON FUNCTION fgentic.rank_v1(
  public.vector, text[], jsonb, text[], integer[], integer[], integer, text, integer, integer, integer) FROM PUBLIC;

-- The two search functions the serving role may call: arguments checked (an invalid one raises
-- 22023 with a fixed message naming none), the ids computed, the ranking core asked, and every row
-- it returns read back from the origin's table (content, source, classification) under the typed
-- test again, in this statement's own snapshot. Hybrid mode adds a keyword list over the same
-- integer-authorized rows with the same typed test, planned per call (its plan depends on the
-- query text). Of the metadata only the source and the classification leave the database.
CREATE FUNCTION fgentic.search_matrix_v1(
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
      c.chunk_id, c.content, jsonb_build_object('source', c.metadata->'source', 'classification', c.metadata->'classification'), r.distance
    FROM fgentic.rank_v1(query_embedding, allowed_classifications, audience, NULL, all_ids, NULL,
      depth, plan_hint, exact_threshold, ef_search, max_scan_tuples) r,
      -- One primary-key probe per row (OFFSET 0: never a join that scans the table). Each statement
      -- reads its own snapshot: the rows returned are re-checked as read here.
      LATERAL (SELECT c.chunk_id, c.content, c.metadata FROM knowledge.chunks c
        WHERE c.chunk_id = r.chunk_id
          AND (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_principals') @> audience
        OFFSET 0) c
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

CREATE FUNCTION fgentic.search_groups_v1(
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
      c.chunk_id, c.content, jsonb_build_object('source', c.metadata->'source', 'classification', c.metadata->'classification'), r.distance
    FROM fgentic.rank_v1(query_embedding, allowed_classifications, NULL, groups, level_ids,
      group_ids, depth, plan_hint, exact_threshold, ef_search, max_scan_tuples) r,
      LATERAL (SELECT c.chunk_id, c.content, c.metadata FROM knowledge.chunks c
        WHERE c.chunk_id = r.chunk_id
          AND (c.metadata->>'classification') = ANY (allowed_classifications)
          AND (c.metadata->'allowed_groups') ?| groups
        OFFSET 0) c
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
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA fgentic FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fgentic.search_matrix_v1(public.vector, text[], jsonb, integer, text, text, integer, integer, integer),
  fgentic.search_groups_v1(public.vector, text[], text, text[], integer, text, text, integer, integer, integer),
  fgentic.embedding_profile_v1() TO fgentic_retrieval;
GRANT EXECUTE ON FUNCTION fgentic.sync_rows(text[]), fgentic.sync_batch(text, integer), fgentic.embedding_profile_v1(),
  fgentic.claim_embedding_profile_v1(text), fgentic.origin_has_rows_v1() TO knowledge_ingestion;

-- ---------------------------------------------------------------------------------------------
-- The capability ledger (docs/ledger.md): the projector records the SHA-256 of every header value it
-- mints, with the value's agent and expiry; in ledger mode the retrieval server accepts a projection
-- only while its digest is recorded, unexpired and bound to the same agent. Nothing here is
-- reachable but through three SECURITY DEFINER functions:
--   record_v1  the projector (knowledge_projector): insert one entry; it cannot read, change or delete
--   check_v1   the retrieval server: one yes/no answer for one digest
--   purge_v1   the projector's schedule: delete entries expired by the database's own clock, never a
--              chosen row, so the purge right cannot be used to revoke live capabilities
-- `migrate` grants them in ledger mode only (retrieval/db/migrate.ts). Invalid arguments raise 22023
-- with a fixed message and no argument in it.
-- ---------------------------------------------------------------------------------------------
CREATE SCHEMA IF NOT EXISTS fgentic_ledger;
REVOKE ALL ON SCHEMA fgentic_ledger FROM PUBLIC;

CREATE TABLE fgentic_ledger.capabilities (
  digest bytea PRIMARY KEY CHECK (octet_length(digest) = 32),
  -- "namespace/name" of the agent the projection is bound to (two DNS-1123 labels).
  agent text NOT NULL CHECK (agent ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
  -- The projection's exp, Unix seconds.
  exp bigint NOT NULL
);
-- The purge deletes by expiry.
CREATE INDEX capabilities_exp ON fgentic_ledger.capabilities (exp);
REVOKE ALL ON TABLE fgentic_ledger.capabilities FROM PUBLIC;

-- An entry may live at most the contract's 600 s lifetime plus its 30 s clock skew and 30 s of
-- margin beyond the database's clock, so a projector cannot record a capability that outlives the
-- contract. A repeated digest is the same minted value (the digest covers agent and exp): no-op.
CREATE FUNCTION fgentic_ledger.record_v1(digest bytea, agent text, exp bigint)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
#variable_conflict use_column
BEGIN
  IF digest IS NULL OR octet_length(digest) <> 32
    OR agent IS NULL
    OR agent !~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'
    OR exp IS NULL
    OR exp > extract(epoch FROM statement_timestamp())::bigint + 660
  THEN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fgentic ledger: invalid argument';
  END IF;
  INSERT INTO fgentic_ledger.capabilities (digest, agent, exp)
  VALUES (record_v1.digest, record_v1.agent, record_v1.exp)
  ON CONFLICT ON CONSTRAINT capabilities_pkey DO NOTHING;
END
$function$;

-- `at` is the retrieval server's clock, the same one its contract check used, so both agree on
-- the instant of expiry (now >= exp denies).
CREATE FUNCTION fgentic_ledger.check_v1(digest bytea, agent text, at bigint)
RETURNS boolean
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
  SELECT EXISTS (
    SELECT 1 FROM fgentic_ledger.capabilities c
    WHERE c.digest = $1 AND c.agent = $2 AND c.exp > $3
  )
$function$;

-- Deletes entries whose exp lies more than the contract's 30 s clock skew in the database's past,
-- so a retrieval server whose clock runs up to 30 s behind still finds what it may accept.
CREATE FUNCTION fgentic_ledger.purge_v1()
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
  n integer;
BEGIN
  DELETE FROM fgentic_ledger.capabilities c
  WHERE c.exp <= extract(epoch FROM statement_timestamp())::bigint - 30;
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$function$;

REVOKE ALL ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION fgentic_ledger.check_v1(bytea, text, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION fgentic_ledger.purge_v1() FROM PUBLIC;
