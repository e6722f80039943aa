-- fgentic:when-absent knowledge.chunks
-- The empty-database path: a knowledge store with the shape of the origin's v1
-- (research/origin-contract.md §1.2–1.3): knowledge.chunks with the metadata contract enforced by
-- CHECK constraints through IMMUTABLE helper functions of the same names and signatures. Skipped when
-- knowledge.chunks exists (an origin database keeps its own helpers). Claims no origin version: the
-- origin's knowledge.schema_migrations is not created here. Runs as knowledge_owner, which owns all of
-- it, so the origin's own v1–v3 Jobs can still be applied on top later. Needs the vector extension
-- and the roles (the cluster's job, or `migrate --bootstrap`).
REVOKE ALL ON SCHEMA knowledge FROM PUBLIC;
GRANT USAGE ON SCHEMA knowledge TO knowledge_retrieval, knowledge_ingestion;

CREATE OR REPLACE FUNCTION knowledge.is_dns1123_label(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT value ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'
$$;

CREATE OR REPLACE FUNCTION knowledge.is_bounded_clean_text(value text, max_bytes integer) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT octet_length(value) BETWEEN 1 AND max_bytes
     AND value = btrim(value, E' \t\n\r\f\v')
     AND value !~ '[\u0001-\u001f\u007f-\u009f]'
$$;

-- Matrix server name: DNS name, IPv4 literal or bracketed IPv6 literal, optional port 1–65535. The
-- same grammar as contract/identifiers.ts isServerName (a subset of what the origin's is_full_mxid
-- accepts); the IPv6 expression is RFC 3986 IPv6address, spelled out.
CREATE OR REPLACE FUNCTION knowledge.is_matrix_server_name(value text) RETURNS boolean
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

CREATE OR REPLACE FUNCTION knowledge.is_full_mxid(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT octet_length(value) BETWEEN 4 AND 255
     AND value ~ '^@[a-z0-9._=/+-]+:.+$'
     AND knowledge.is_matrix_server_name(substr(value, strpos(value, ':') + 1))
$$;

-- Exactly {"kind":"matrix","principal"} or {"kind":"bridged_matrix","network","principal"}; unique.
CREATE OR REPLACE FUNCTION knowledge.is_valid_principal_array(value jsonb, max_items integer) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT jsonb_typeof(value) = 'array'
     AND jsonb_array_length(value) <= max_items
     AND (SELECT count(DISTINCT e) = count(*) FROM jsonb_array_elements(value) AS e)
     AND coalesce((
       SELECT bool_and(
         jsonb_typeof(e) = 'object'
         AND jsonb_typeof(e->'principal') = 'string'
         AND knowledge.is_full_mxid(e->>'principal')
         AND CASE e->>'kind'
               WHEN 'matrix' THEN (SELECT count(*) FROM jsonb_object_keys(e)) = 2
               WHEN 'bridged_matrix' THEN (SELECT count(*) FROM jsonb_object_keys(e)) = 3
                 AND jsonb_typeof(e->'network') = 'string'
                 AND knowledge.is_dns1123_label(e->>'network')
               ELSE false
             END
         AND jsonb_typeof(e->'kind') = 'string')
       FROM jsonb_array_elements(value) AS e), true)
$$;

CREATE OR REPLACE FUNCTION knowledge.is_valid_group_array(value jsonb, max_items integer) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT jsonb_typeof(value) = 'array'
     AND jsonb_array_length(value) <= max_items
     AND (SELECT count(DISTINCT e) = count(*) FROM jsonb_array_elements(value) AS e)
     AND coalesce((
       SELECT bool_and(
         jsonb_typeof(e) = 'string'
         AND (e #>> '{}') ~ '^partner/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$')
       FROM jsonb_array_elements(value) AS e), true)
$$;

CREATE OR REPLACE FUNCTION knowledge.is_valid_source(value jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT jsonb_typeof(value) = 'object'
     AND value ? 'id'
     AND NOT EXISTS (
       SELECT 1 FROM jsonb_object_keys(value) AS k
       WHERE k NOT IN ('id', 'title', 'locator', 'revision', 'location'))
     AND coalesce((
       SELECT bool_and(
         jsonb_typeof(value->k) = 'string'
         AND knowledge.is_bounded_clean_text(value->>k,
           CASE k WHEN 'locator' THEN 2048 WHEN 'revision' THEN 255 ELSE 512 END))
       FROM jsonb_object_keys(value) AS k), false)
$$;

CREATE OR REPLACE FUNCTION knowledge.is_valid_metadata(value jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$
  SELECT jsonb_typeof(value) = 'object'
     AND octet_length(value::text) <= 65536
     AND (SELECT count(*) FROM jsonb_object_keys(value)) = 4
     AND value ?& ARRAY['source', 'classification', 'allowed_principals', 'allowed_groups']
     AND knowledge.is_valid_source(value->'source')
     AND jsonb_typeof(value->'classification') = 'string'
     AND (value->>'classification') IN
       ('public', 'approved_non_public', 'restricted', 'regulated', 'secret', 'authentication')
     AND knowledge.is_valid_principal_array(value->'allowed_principals', 64)
     AND knowledge.is_valid_group_array(value->'allowed_groups', 64)
     AND jsonb_array_length(value->'allowed_principals') + jsonb_array_length(value->'allowed_groups') > 0
$$;

CREATE TABLE IF NOT EXISTS knowledge.chunks (
  chunk_id text PRIMARY KEY,
  content text NOT NULL,
  embedding vector(1024) NOT NULL,
  metadata jsonb NOT NULL,
  CONSTRAINT chunks_chunk_id_valid CHECK (knowledge.is_bounded_clean_text(chunk_id, 512)),
  CONSTRAINT chunks_content_valid CHECK (octet_length(content) BETWEEN 1 AND 65536 AND content ~ '[^[:space:]]'),
  CONSTRAINT chunks_embedding_nonzero CHECK (vector_norm(embedding) > 0),
  CONSTRAINT chunks_metadata_valid CHECK (knowledge.is_valid_metadata(metadata))
);

CREATE INDEX IF NOT EXISTS chunks_classification_idx ON knowledge.chunks ((metadata->>'classification'));
CREATE INDEX IF NOT EXISTS chunks_principals_gin_idx
  ON knowledge.chunks USING gin ((metadata->'allowed_principals') jsonb_path_ops);
CREATE INDEX IF NOT EXISTS chunks_groups_gin_idx ON knowledge.chunks USING gin ((metadata->'allowed_groups'));
CREATE INDEX IF NOT EXISTS chunks_source_id_idx ON knowledge.chunks ((metadata #>> '{source,id}'));
CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw_idx
  ON knowledge.chunks USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);

-- Nothing here is for PUBLIC (functions are executable by PUBLIC unless revoked).
REVOKE ALL ON ALL TABLES IN SCHEMA knowledge FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA knowledge FROM PUBLIC;

-- Ingestion writes rows (the CHECK helpers run with the writer's rights); retrieval gets nothing on
-- the table (migration 0006 gives it the search functions).
GRANT SELECT, INSERT, UPDATE, DELETE ON knowledge.chunks TO knowledge_ingestion;
GRANT EXECUTE ON FUNCTION
  knowledge.is_dns1123_label(text),
  knowledge.is_bounded_clean_text(text, integer),
  knowledge.is_matrix_server_name(text),
  knowledge.is_full_mxid(text),
  knowledge.is_valid_principal_array(jsonb, integer),
  knowledge.is_valid_group_array(jsonb, integer),
  knowledge.is_valid_source(jsonb),
  knowledge.is_valid_metadata(jsonb)
TO knowledge_ingestion;
