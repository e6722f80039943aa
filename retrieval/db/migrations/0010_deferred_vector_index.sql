-- Definitions of indexes on knowledge.chunks that a bulk load dropped and chose not to re-create yet
-- (retrieval/ingest/store.ts, retrieval/README.md "Large writes"): the HNSW index of a table too small
-- for any default search to use it. The next write that leaves the table above the threshold, as a
-- session that may act as the owner, re-creates each index from the text recorded here and removes
-- the row. A search on a table without the HNSW index ranks by an exact scan (recall 1.0).
-- Only the owner reads or writes this table; the ingestion role never sees it.
CREATE TABLE IF NOT EXISTS knowledge.fgentic_deferred_indexes (
  -- regclass text of the index as it was (schema-qualified, quoted as needed).
  name text PRIMARY KEY,
  -- Access method of the index (pg_am.amname).
  am text NOT NULL,
  -- pg_get_indexdef text, read under search_path = pg_catalog, pg_temp.
  def text NOT NULL CHECK (def LIKE 'CREATE INDEX %' AND def LIKE '% ON knowledge.chunks USING %'),
  -- A ready-made COMMENT ON INDEX statement, when the index had a comment.
  comment text,
  deferred_at timestamptz NOT NULL DEFAULT statement_timestamp()
);
REVOKE ALL ON knowledge.fgentic_deferred_indexes FROM PUBLIC;
