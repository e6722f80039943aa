-- Keyword search over chunk content (hybrid mode). An expression index keeps the origin table shape.
CREATE INDEX IF NOT EXISTS chunks_content_fts_idx
  ON knowledge.chunks USING gin (to_tsvector('simple', content));
