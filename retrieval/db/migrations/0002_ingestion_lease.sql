-- The origin's single-writer ingestion lease (its v2 shape: one row named 'chunks-v1', a holder and
-- an expiry), created here when the origin's v2 has not been applied, so `ingest` can respect it on
-- any database. Writers take the lease before writing knowledge.chunks (retrieval/ingest/lease.ts).
-- The ingestion role gets the table rights the origin's v2 gives it; UPDATE is needed for the
-- SELECT ... FOR UPDATE that pins the lease inside each write transaction.
CREATE TABLE IF NOT EXISTS knowledge.ingestion_leases (
  name text PRIMARY KEY,
  holder uuid NOT NULL,
  expires_at timestamptz NOT NULL,
  CONSTRAINT ingestion_leases_single_writer CHECK (name = 'chunks-v1')
);
REVOKE ALL ON knowledge.ingestion_leases FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON knowledge.ingestion_leases TO knowledge_ingestion;
-- An origin database with only v1 applied has no ingestion grants yet; these match its v2.
GRANT USAGE ON SCHEMA knowledge TO knowledge_ingestion;
GRANT SELECT, INSERT, UPDATE, DELETE ON knowledge.chunks TO knowledge_ingestion;
GRANT EXECUTE ON FUNCTION
  knowledge.is_dns1123_label(text),
  knowledge.is_bounded_clean_text(text, integer),
  knowledge.is_full_mxid(text),
  knowledge.is_valid_principal_array(jsonb, integer),
  knowledge.is_valid_group_array(jsonb, integer),
  knowledge.is_valid_metadata(jsonb)
TO knowledge_ingestion;
