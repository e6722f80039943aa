-- The two text checks every search calls, as PL/pgSQL, where 0001 created them (retrieval/README.md,
-- migrations table): knowledge.is_full_mxid (each audience member) and knowledge.is_dns1123_label
-- (a partner's policy id, a bridged member's network). 0001 wrote them as SQL functions with their
-- own search_path, which PostgreSQL cannot inline: every call parsed and planned its SELECT again,
-- 6 % of the server's CPU in a broad Matrix search on PostgreSQL 15 (perf, docs/filtered-search.md,
-- "Around the ranking"). A PL/pgSQL function keeps its expression plans for the session. The
-- expressions, names, signatures, owner and grants stay, and so do the answers
-- (retrieval/db/validators.test.ts compares both with 0001's definitions; retrieval/db/mxid.test.ts
-- with the contract's grammar). The origin's own is_full_mxid is PL/pgSQL already, and on the
-- origin's database nothing here runs.
DO $migration$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM knowledge.fgentic_retrieval_migrations WHERE version = 1 AND outcome = 'applied') THEN
    RETURN;
  END IF;

  EXECUTE $sql$
CREATE OR REPLACE FUNCTION knowledge.is_dns1123_label(value text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $f$
BEGIN
  RETURN value ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$';
END
$f$
  $sql$;

  EXECUTE $sql$
CREATE OR REPLACE FUNCTION knowledge.is_full_mxid(value text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $f$
BEGIN
  RETURN octet_length(value) BETWEEN 4 AND 255
     AND value ~ '^@[a-z0-9._=/+-]+:.+$'
     AND knowledge.is_matrix_server_name(substr(value, strpos(value, ':') + 1));
END
$f$
  $sql$;
END
$migration$;
