-- The capability ledger (docs/ledger.md): verifier state for projections when
-- RetrievalPlatform.spec.capability is `ledger`. The projector records the SHA-256 of every header
-- value it mints, with the value's agent and expiry; the retrieval server accepts a projection only
-- while its digest is recorded, unexpired and bound to the same agent. Created in every database
-- (a plain-mode server never calls it), so switching modes needs no schema step.
--
-- A schema of its own, apart from `knowledge`: no role that reads or writes chunks gains anything
-- here by accident, and nothing here is reachable except through three SECURITY DEFINER functions
-- owned by knowledge_owner, with the search_path pinned as in migration 0006:
--   record_v1  the projector (knowledge_projector): insert one entry; it cannot read, change or delete
--   check_v1   the retrieval server (knowledge_retrieval): one yes/no answer for one digest
--   purge_v1   the projector's schedule: delete entries expired by the database's own clock, never
--              a chosen row, so the purge right cannot be used to revoke live capabilities
-- No role but the owner holds any privilege on the table. Grants to knowledge_projector are given
-- by always_ledger_privileges.sql, since that role may be created after this migration ran.
-- Invalid arguments raise SQLSTATE 22023 with a fixed message and no argument in it.

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
GRANT USAGE ON SCHEMA fgentic_ledger TO knowledge_retrieval;
GRANT EXECUTE ON FUNCTION fgentic_ledger.check_v1(bytea, text, bigint) TO knowledge_retrieval;
