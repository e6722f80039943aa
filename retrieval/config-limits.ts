/**
 * How many agents retrieval.json may list: the one agent bound of rules/agent-bound.ts, which both
 * servers' loaders and the render share. Kept under these names for the modules that import them here.
 */
export {
  CONFIG_DATA_LIMIT,
  MAX_AGENTS,
  RETRIEVAL_AGENT_ENTRY_BYTES as MAX_AGENT_ENTRY_BYTES,
  RETRIEVAL_RESERVED_BYTES as RESERVED_BYTES,
} from '../rules/agent-bound.ts';
