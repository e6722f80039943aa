/**
 * Names on the wire that several components must spell the same way: the identity header, the
 * headers beside it, and the retrieval tool and server. HTTP header names are case-insensitive;
 * `*_HEADER` is the lowercase form Node and agentgateway's CEL use, `*_HEADER_NAME` the display
 * form kagent's `allowedHeaders` and documentation use.
 */

// The identity header belongs to the identity contract, which imports nothing of ours.
export { IDENTITY_HEADER, IDENTITY_HEADER_NAME } from '../contract/carrier.ts';
export const ROOM_CONTEXT_HEADER = 'x-fgentic-room-context';
export const USER_ID_HEADER = 'x-user-id';
export const RETRIEVAL_TOOL = 'search_knowledge';
export const RETRIEVAL_SERVER = 'knowledge-retrieval';
