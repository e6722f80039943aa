/**
 * One bound on the number of RetrievalAgents, for the webhook and the render (`agent-limit`,
 * `TooManyAgents`: rules/cross-object.ts), the projector's loader and the retrieval server's loader alike. Each server reads its agent list from one
 * ConfigMap (`projector.json`, `retrieval.json`), and kube-apiserver limits a ConfigMap's data, keys
 * and values together, to 1 MiB. The bound is the largest list that fits in *both* files even when
 * every entry is as long as the CRDs allow (two 63-character DNS-1123 labels, and in the projector's
 * file the two routes built from them) and the rest of each file takes the room kept for it. So a
 * list within the bound always fits, and both servers read it. A loader refuses a longer list (never
 * reads part of it); the webhook refuses the RetrievalAgent created past the bound, and the render
 * leaves out only the RetrievalAgents past it. Pure. docs/interfaces.md describes both files.
 */
import { DNS1123_LABEL_MAX } from './limits.ts';

/** kube-apiserver's limit on a ConfigMap's data, keys and values together (1 MiB). */
export const CONFIG_DATA_LIMIT = 1_048_576;

/** The A2A route of an agent on the local listener (rendered into projector.json and the HTTPRoute). */
export const agentLocalPath = (namespace: string, name: string): string => `/api/a2a/${namespace}/${name}`;
/** The A2A route of an agent on the public (partner) listener. */
export const agentPublicPath = (namespace: string, name: string): string => `/a2a/${namespace}/${name}`;

const LONGEST = { namespace: 'x'.repeat(DNS1123_LABEL_MAX), name: 'y'.repeat(DNS1123_LABEL_MAX) };

/** The longest retrieval.json agent entry, `{"namespace","name"}`, plus the comma between entries. */
export const RETRIEVAL_AGENT_ENTRY_BYTES = JSON.stringify(LONGEST).length + 1;

/** The longest projector.json agent entry (both routes present), plus the comma between entries. */
export const PROJECTOR_AGENT_ENTRY_BYTES =
  JSON.stringify({
    ...LONGEST,
    localPath: agentLocalPath(LONGEST.namespace, LONGEST.name),
    publicPath: agentPublicPath(LONGEST.namespace, LONGEST.name),
  }).length + 1;

/**
 * Room kept in retrieval.json for everything but the agents: the key, version, embeddings (URL and
 * token file up to 2,048 bytes each, model 255, profile 64) and up to 64 allowed origins of 512
 * bytes (about 38 KiB at most; retrieval/config-limits.test.ts builds that worst case).
 */
export const RETRIEVAL_RESERVED_BYTES = 64 * 1024;

/**
 * Room kept in projector.json for everything but the agents: the key, the bridge (32 bridged origins
 * and the service regex, each regex up to 1,024 characters that JSON may escape to 2,048 bytes), 256
 * local groups of 128, the live room check and a manifest of 256 registry shards (about 140 KiB at
 * most; projector/config-limits.test.ts builds that worst case). Rooms and partners are in the shards.
 */
export const PROJECTOR_RESERVED_BYTES = 192 * 1024;

const fits = (reserved: number, entry: number) => Math.floor((CONFIG_DATA_LIMIT - reserved) / entry);

/** The most agents a RetrievalPlatform may have: 1,884 (projector.json is the tighter file). */
export const MAX_AGENTS = Math.min(
  fits(RETRIEVAL_RESERVED_BYTES, RETRIEVAL_AGENT_ENTRY_BYTES),
  fits(PROJECTOR_RESERVED_BYTES, PROJECTOR_AGENT_ENTRY_BYTES),
);
