/**
 * Every CEL expression the reconciler renders into agentgateway v1.3.1 policy is produced here; no
 * other module concatenates CEL. Semantics relied on (docs/upstream.md#agentgateway-authorization,
 * docs/upstream.md#agentgateway-cel): `request.headers` keys are lower-case; `.raw()` always yields a list,
 * so `size(...raw()[h]) == 1` detects duplicates; a CEL error in `authorization` is "not matched"
 * (a `Require` rule then denies); in `addRequestHeaders` an error removes the header; `request.body`
 * is bytes and `json()` parses it; `has(a.b.c)` errors when `a.b` is missing. No binding helpers
 * (`.with`, `default`, `coalesce`) are used (docs/decisions.md#d11-cel-subset).
 */
import { CALLER_AGENT_HEADER, IDENTITY_HEADER, ROOM_CONTEXT_HEADER, USER_ID_HEADER } from '../../rules/index.ts';

export type A2AProtocol = '1.0' | '0.3';

/** JSON-RPC method names of the A2A operations per protocol (A2A 1.0 via kagent's controller; 0.3 on the pod). */
export const A2A_METHODS: Record<A2AProtocol, { send: string; get: string; cancel: string }> = {
  '1.0': { send: 'SendMessage', get: 'GetTask', cancel: 'CancelTask' },
  '0.3': { send: 'message/send', get: 'tasks/get', cancel: 'tasks/cancel' },
};

export const HEADER = {
  identity: IDENTITY_HEADER,
  roomContext: ROOM_CONTEXT_HEADER,
  userId: USER_ID_HEADER,
  dataClassification: 'x-fgentic-data-classification',
  retrievalAgent: 'x-retrieval-agent',
  callerAgent: CALLER_AGENT_HEADER,
} as const;

/**
 * The MCP route's transformation value of `x-fgentic-agent`: the workload of the API key the
 * gateway authenticated (its authorization has already required it to be this route's agent).
 */
export function authenticatedWorkload(): string {
  return 'apiKey.workload';
}

/** A CEL string literal (JSON string syntax is a subset of CEL's). */
export function lit(s: string): string {
  return JSON.stringify(s);
}

export function listLit(xs: readonly string[]): string {
  return `[${xs.map(lit).join(', ')}]`;
}

const BODY = 'json(request.body)';
const MESSAGE = `${BODY}.params.message`;

export function rawCount(header: string): string {
  return `size(request.headers.raw()[${lit(header)}])`;
}

export function exactlyOne(header: string): string {
  return `${lit(header)} in request.headers && ${rawCount(header)} == 1`;
}

export function onlyKnownFgentic(allowed: readonly string[]): string {
  return `request.headers.all(h, !h.startsWith("x-fgentic-") || h in ${listLit([...allowed].sort())})`;
}

export function methodIs(method: string): string {
  return `request.method == ${lit(method)}`;
}

export function pathIs(path: string): string {
  return `request.path == ${lit(path)}`;
}

export interface LocalRouteCel {
  workload: string;
  path: string;
  protocol: A2AProtocol;
  agent: { namespace: string; name: string };
}

function noContinuation(send: string): string {
  return (
    `${BODY}.method != ${lit(send)} || (!has(${MESSAGE}.contextId) && ` +
    `!has(${MESSAGE}.taskId) && !has(${MESSAGE}.referenceTaskIds))`
  );
}

function jsonRpc2(): string {
  return `${BODY}.jsonrpc == "2.0"`;
}

/** Authorization (`action: Require`, one expression per rule) for the bridge's local A2A route. */
export function localAuthorization(r: LocalRouteCel): string[] {
  const m = A2A_METHODS[r.protocol];
  return [
    `apiKey.workload == ${lit(r.workload)}`,
    methodIs('POST'),
    pathIs(r.path),
    exactlyOne(HEADER.identity),
    exactlyOne(HEADER.userId),
    exactlyOne(HEADER.roomContext),
    onlyKnownFgentic([HEADER.identity, HEADER.roomContext, HEADER.dataClassification]),
    jsonRpc2(),
    `${BODY}.method in ${listLit([m.send, m.get, m.cancel])}`,
    noContinuation(m.send),
  ];
}

export function localCheckHeaders(r: LocalRouteCel): Record<string, string> {
  return {
    'x-fgentic-check-route': lit('local'),
    'x-fgentic-check-agent-namespace': lit(r.agent.namespace),
    'x-fgentic-check-agent-name': lit(r.agent.name),
    'x-fgentic-check-workload': 'apiKey.workload',
    'x-fgentic-check-user-id-count': `string(${rawCount(HEADER.userId)})`,
    'x-fgentic-check-room-context-count': `string(${rawCount(HEADER.roomContext)})`,
    'x-fgentic-check-identity-count': `string(${rawCount(HEADER.identity)})`,
  };
}

export interface PublicRouteCel {
  issuer: string;
  audiences: string[];
  azps: string[];
  path: string;
  protocol: A2AProtocol;
  agent: { namespace: string; name: string };
}

function synchronousOnly(protocol: A2AProtocol): string {
  const cfg = `${BODY}.params.configuration`;
  return protocol === '1.0'
    ? `!has(${cfg}) || !has(${cfg}.returnImmediately) || ${cfg}.returnImmediately == false`
    : `!has(${cfg}) || !has(${cfg}.blocking) || ${cfg}.blocking == true`;
}

/** Authorization for a partner's public A2A route: SendMessage only, synchronous, no continuation. */
export function publicAuthorization(r: PublicRouteCel): string[] {
  const m = A2A_METHODS[r.protocol];
  return [
    `jwt.iss == ${lit(r.issuer)}`,
    `jwt.azp in ${listLit(r.azps)}`,
    methodIs('POST'),
    pathIs(r.path),
    exactlyOne(HEADER.identity),
    exactlyOne(HEADER.userId),
    onlyKnownFgentic([HEADER.identity]),
    jsonRpc2(),
    `${BODY}.method == ${lit(m.send)}`,
    noContinuation(m.send),
    synchronousOnly(r.protocol),
  ];
}

/** The validated audience: the token's `aud` string, or the configured members of its `aud` list. */
export function matchedAudience(audiences: string[]): string {
  const l = listLit(audiences);
  return `jwt.aud in ${l} ? jwt.aud : jwt.aud.filter(a, a in ${l}).join(",")`;
}

export function publicCheckHeaders(r: PublicRouteCel): Record<string, string> {
  return {
    'x-fgentic-check-route': lit('public'),
    'x-fgentic-check-agent-namespace': lit(r.agent.namespace),
    'x-fgentic-check-agent-name': lit(r.agent.name),
    'x-fgentic-check-identity-count': `string(${rawCount(HEADER.identity)})`,
    'x-fgentic-check-jwt-issuer': 'jwt.iss',
    'x-fgentic-check-jwt-audience': matchedAudience(r.audiences),
    'x-fgentic-check-jwt-azp': 'jwt.azp',
    'x-fgentic-check-jwt-exp': 'string(jwt.exp)',
  };
}

export interface McpRouteCel {
  workload: string;
  path: string;
  tool: string;
}

/** Authorization for one retrieval Agent's MCP route: its API key, no batches, one carrier on tools/call. */
export function mcpAuthorization(r: McpRouteCel): string[] {
  return [
    `apiKey.workload == ${lit(r.workload)}`,
    pathIs(r.path),
    `request.method in ${listLit(['DELETE', 'GET', 'POST'])}`,
    exactlyOne(HEADER.retrievalAgent),
    `request.headers[${lit(HEADER.retrievalAgent)}] == ${lit(r.workload)}`,
    onlyKnownFgentic([HEADER.identity]),
    `request.method != "POST" || !string(request.body).trim().startsWith("[")`,
    `request.method != "POST" || ${BODY}.method != "tools/call" || ${exactlyOne(HEADER.identity)}`,
    `request.method != "POST" || ${BODY}.method != "tools/call" || ${BODY}.params.name == ${lit(r.tool)}`,
  ];
}

/** `backend.mcp.authorization` (action Allow): the one-tool allowlist, also filtering tools/list. */
export function mcpToolAllowlist(tool: string): string[] {
  return [`mcp.tool.name == ${lit(tool)}`];
}

/** PreRouting strip condition on a listener that also carries the MCP route: everything but that path. */
export function notMcpPath(mcpPath: string): string {
  return `request.path != ${lit(mcpPath)}`;
}

export const AGENT_CARD_SUFFIX = '/.well-known/agent-card.json';

/** The bridge may read the Agent's card (GET, exact path, its API key, no x-fgentic-* header at all). */
export function cardAuthorization(r: { workload: string; path: string }): string[] {
  return [`apiKey.workload == ${lit(r.workload)}`, methodIs('GET'), pathIs(r.path), onlyKnownFgentic([])];
}
