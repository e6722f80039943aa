/**
 * Names on the wire that several components must spell the same way: the identity header, the
 * headers beside it, and the retrieval tool and server. HTTP header names are case-insensitive;
 * `*_HEADER` is the lowercase form Node and agentgateway's CEL use, `*_HEADER_NAME` the display
 * form kagent's `allowedHeaders` and documentation use.
 */

// The identity header belongs to the identity contract, which imports nothing of ours.
export { IDENTITY_HEADER, IDENTITY_HEADER_NAME } from '../contract/carrier.ts';
/** The API group and version of our four resources (the CRDs, the render and the webhook). */
export const GROUP = 'retrieval.fgentic.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const ROOM_CONTEXT_HEADER = 'x-fgentic-room-context';
export const USER_ID_HEADER = 'x-user-id';
/**
 * The agent the gateway authenticated on the MCP route (its API key's workload, `<ns>/<name>`). The
 * rendered route policy sets it after authorization, overwriting anything the client sent (and its
 * authorization refuses a client-sent one); the retrieval server denies a projection minted for
 * another agent than this one.
 */
export const CALLER_AGENT_HEADER = 'x-fgentic-agent';
export const RETRIEVAL_TOOL = 'search_knowledge';
export const RETRIEVAL_SERVER = 'knowledge-retrieval';
