/**
 * List and length limits that the CRDs, the render's checks and the servers' loaders share, so a
 * resource the API server admits is never one a loader then refuses (which would deny every request).
 * Pure. The agent bound, derived from these and the ConfigMap limit, is in agent-bound.ts.
 */

/** A DNS-1123 label (namespace, name, bridged network, policy ID) is at most 63 characters. */
export const DNS1123_LABEL_MAX = 63;

/** Bridged networks of the RetrievalPlatform's bridge. */
export const MAX_BRIDGED_ORIGINS = 32;

/** Local group names of the RetrievalPlatform. */
export const MAX_LOCAL_GROUPS = 256;

/** RetrievalAgents one PartnerClient may call. */
export const MAX_PARTNER_AGENTS = 64;
