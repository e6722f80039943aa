-- A GIN index over the principal strings of allowed_principals. Every ACL object carries
-- "kind":"matrix", so the jsonb_path_ops index must walk a posting list as long as the table for
-- each audience lookup; the strings index finds the few candidate rows directly (measured ~6x
-- faster at 20k rows). The predicate keeps the exact typed `@>` test; this is only a necessary
-- condition that lets the planner start from the selective index.
CREATE INDEX IF NOT EXISTS chunks_principal_strings_gin_idx
  ON knowledge.chunks USING gin (jsonb_path_query_array(metadata->'allowed_principals', '$[*].principal'));
