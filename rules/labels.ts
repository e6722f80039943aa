/** Labels on the objects this project renders, owns and recognises. */

export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const PART_OF_LABEL = 'app.kubernetes.io/part-of';
export const PROJECT = 'fgentic-retrieval';
/** Marks objects the reconciler owns and prunes. */
export const RENDERED_LABEL = 'retrieval.fgentic.dev/rendered';
/** On a kagent Agent rendered from a RetrievalAgent. */
export const ROLE_LABEL = 'retrieval.fgentic.dev/role';
export const ROLE_VALUE = 'retrieval-agent';
export const AGENT_POD_LABEL = 'retrieval.fgentic.dev/agent';
export const MCP_KEY_LABEL = 'retrieval.fgentic.dev/api-key';

/** The labels every project object carries (CRDs, rendered objects). */
export const PROJECT_LABELS = {
  [MANAGED_BY_LABEL]: PROJECT,
  [PART_OF_LABEL]: PROJECT,
} as const;
