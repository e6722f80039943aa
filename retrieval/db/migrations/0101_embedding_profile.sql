-- The embedding profile the stored vectors were computed with (DESIGN.md decision 7). One row; a
-- server whose embedder reports another profile refuses to serve.
CREATE TABLE IF NOT EXISTS knowledge.embedding_profile (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  profile text NOT NULL CHECK (knowledge.is_bounded_clean_text(profile, 128)),
  dimensions integer NOT NULL CHECK (dimensions = 1024),
  recorded_at timestamptz NOT NULL DEFAULT now()
);
