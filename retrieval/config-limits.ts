/**
 * How many agents retrieval.json may list. The file travels in the ConfigMap
 * `fgentic-retrieval-config`, whose data (keys and values) the API server limits to 1 MiB; that is
 * the real limit. The bound is the largest agent list that fits in it even when every entry is as
 * long as it can be (two 63-character DNS-1123 labels) and the rest of the file takes the room kept
 * for it, so a file within the bound always fits the ConfigMap. The controller refuses to render
 * more (`TooManyAgents` on the RetrievalPlatform) and the parser refuses to read more. Pure.
 */

/** kube-apiserver's limit on a ConfigMap's data, keys and values together (1 MiB). */
export const CONFIG_DATA_LIMIT = 1_048_576;

/** The longest agent entry, `{"namespace":"<63>","name":"<63>"}`, plus the comma between entries. */
export const MAX_AGENT_ENTRY_BYTES =
  JSON.stringify({ namespace: 'x'.repeat(63), name: 'x'.repeat(63) }).length + 1;

/**
 * Room kept for everything but the agent list: the key, version, embeddings (URL and token file up to
 * 2,048 bytes each, model 255, profile 64) and up to 64 allowed origins of 512 bytes (~38 KiB at most).
 */
export const RESERVED_BYTES = 64 * 1024;

/** 6,425 agents. */
export const MAX_AGENTS = Math.floor((CONFIG_DATA_LIMIT - RESERVED_BYTES) / MAX_AGENT_ENTRY_BYTES);
