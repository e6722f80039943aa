-- Runs at the end of every `migrate`, after the versioned files. The projector's database role,
-- knowledge_projector, exists only where the capability ledger is used (the embedded database
-- creates it; a cluster creates it with its login before turning ledger mode on), so its grants
-- are given whenever it exists rather than once by migration 0008: turning the mode on is "create
-- the role, run migrate". It may record entries and purge expired ones, nothing else.
DO $ledger$
BEGIN
  IF to_regrole('knowledge_projector') IS NULL THEN
    RETURN;
  END IF;
  GRANT USAGE ON SCHEMA fgentic_ledger TO knowledge_projector;
  GRANT EXECUTE ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) TO knowledge_projector;
  GRANT EXECUTE ON FUNCTION fgentic_ledger.purge_v1() TO knowledge_projector;
END
$ledger$;
