-- The embedding profile the stored vectors were computed with (DESIGN.md decision 7). One row; a
-- server whose embedder reports another profile refuses to serve.
CREATE TABLE IF NOT EXISTS knowledge.embedding_profile (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  profile text NOT NULL CHECK (knowledge.is_bounded_clean_text(profile, 128)),
  dimensions integer NOT NULL CHECK (dimensions = 1024),
  recorded_at timestamptz NOT NULL DEFAULT now()
);
REVOKE ALL ON knowledge.embedding_profile FROM PUBLIC;
-- Ingestion records the profile with its first write; retrieval only reads it, through a function.
GRANT SELECT, INSERT ON knowledge.embedding_profile TO knowledge_ingestion;

CREATE OR REPLACE FUNCTION knowledge.fgentic_embedding_profile_v1()
RETURNS text
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
  SELECT profile FROM knowledge.embedding_profile WHERE singleton
$$;
REVOKE ALL ON FUNCTION knowledge.fgentic_embedding_profile_v1() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION knowledge.fgentic_embedding_profile_v1()
  TO knowledge_retrieval, knowledge_ingestion;
