/**
 * The normalised check request the pure decisions consume, and the header rules both routes share.
 * Pure: no I/O. Header names are lowercase; every header maps to the list of values received.
 */
import type { AgentRoute, ProjectorConfig } from './config.ts';
import type { DenyReason } from './reasons.ts';

export interface CheckRequest {
  readonly method: string;
  /** Request-target as received (path plus any query). */
  readonly path: string;
  readonly headers: Readonly<Record<string, readonly string[] | undefined>>;
}

export type RouteName = 'local' | 'public';

export interface IdentityHeaders {
  readonly 'x-fgentic-identity': string;
  readonly 'x-user-id': string;
}

export type Failure = { readonly ok: false; readonly reason: DenyReason };
export type Got<T> = { readonly ok: true; readonly value: T } | Failure;

export const CHECK = {
  route: 'x-fgentic-check-route',
  agentNamespace: 'x-fgentic-check-agent-namespace',
  agentName: 'x-fgentic-check-agent-name',
  workload: 'x-fgentic-check-workload',
  userIdCount: 'x-fgentic-check-user-id-count',
  roomContextCount: 'x-fgentic-check-room-context-count',
  identityCount: 'x-fgentic-check-identity-count',
  jwtIssuer: 'x-fgentic-check-jwt-issuer',
  jwtAudience: 'x-fgentic-check-jwt-audience',
  jwtAzp: 'x-fgentic-check-jwt-azp',
  jwtExp: 'x-fgentic-check-jwt-exp',
} as const;

export const RAW = { userId: 'x-user-id', roomContext: 'x-fgentic-room-context' } as const;

/** Headers each route's rendered policy sends (CEL-derived check headers plus allowlisted raw inputs). */
export const ROUTE_HEADERS: Readonly<Record<RouteName, ReadonlySet<string>>> = {
  local: new Set([
    CHECK.route,
    CHECK.agentNamespace,
    CHECK.agentName,
    CHECK.workload,
    CHECK.userIdCount,
    CHECK.roomContextCount,
    RAW.userId,
    RAW.roomContext,
  ]),
  public: new Set([
    CHECK.route,
    CHECK.agentNamespace,
    CHECK.agentName,
    CHECK.jwtIssuer,
    CHECK.jwtAudience,
    CHECK.jwtAzp,
    CHECK.jwtExp,
  ]),
};

/** Credentials must never reach the projector; their presence means the allowlist is wrong. */
const CREDENTIAL_HEADERS = new Set(['authorization', 'proxy-authorization', 'cookie', 'x-api-key']);

/**
 * Transport headers an HTTP/1.1 client stack may add to the check request. They carry no identity and
 * are ignored (content-length is only accepted as "0"). Anything else is unexpected and denies.
 */
const TRANSPORT_HEADERS = new Set([
  'host',
  'connection',
  'keep-alive',
  'content-length',
  'content-type',
  'user-agent',
  'accept',
  'accept-encoding',
  'te',
  'traceparent',
  'tracestate',
]);

export function fail(reason: DenyReason): Failure {
  return { ok: false, reason };
}

/**
 * Shared header hygiene for a route: no credential (only the header name is looked at), no body,
 * no client X-Fgentic-Identity, nothing the rendered policy for this route does not send.
 */
export function checkHeaderSet(req: CheckRequest, route: RouteName): Failure | undefined {
  const expected = ROUTE_HEADERS[route];
  let unexpected = false;
  for (const name of Object.keys(req.headers)) {
    const values = req.headers[name];
    if (values === undefined) continue;
    if (CREDENTIAL_HEADERS.has(name)) return fail('credential_header');
    if (name === 'x-envoy-auth-partial-body' || name === 'transfer-encoding') return fail('body');
    if (name === 'content-length') {
      if (values.length !== 1 || values[0] !== '0') return fail('body');
      continue;
    }
    if (name === 'x-fgentic-identity' || name === CHECK.identityCount) return fail('identity_present');
    if (expected.has(name) || TRANSPORT_HEADERS.has(name)) continue;
    unexpected = true;
  }
  return unexpected ? fail('unexpected_header') : undefined;
}

/** Exactly one non-empty value of a header. */
export function single(
  req: CheckRequest,
  name: string,
  missing: DenyReason,
  duplicate: DenyReason,
): Got<string> {
  const values = req.headers[name];
  if (values === undefined || values.length === 0) return fail(missing);
  if (values.length > 1) return fail(duplicate);
  const v = values[0];
  if (typeof v !== 'string' || v.length === 0) return fail(missing);
  return { ok: true, value: v };
}

/**
 * A raw-value count header rendered as `string(size(request.headers.raw()[name]))`: the raw header
 * must have been present exactly once. Absent or "0" ⇒ missing; > 1 ⇒ duplicate; anything else ⇒ count.
 */
export function checkCount(req: CheckRequest, name: string): Failure | undefined {
  const v = single(req, name, 'missing', 'count');
  if (!v.ok) return v;
  if (!/^[0-9]{1,4}$/.test(v.value)) return fail('count');
  const n = Number(v.value);
  if (n === 1 && v.value === '1') return undefined;
  if (n === 0) return fail('missing');
  if (n > 1) return fail('duplicate');
  return fail('count'); // e.g. "01"
}

/** The route's agent from the literal check headers, bound to the configured path and POST. */
export function routeAgent(req: CheckRequest, config: ProjectorConfig, route: RouteName): Got<AgentRoute> {
  const ns = single(req, CHECK.agentNamespace, 'agent', 'agent');
  if (!ns.ok) return ns;
  const name = single(req, CHECK.agentName, 'agent', 'agent');
  if (!name.ok) return name;
  const agent = config.agents.find((a) => a.namespace === ns.value && a.name === name.value);
  if (agent === undefined) return fail('agent');
  const path = route === 'local' ? agent.localPath : agent.publicPath;
  if (path === undefined) return fail('agent');
  if (req.path !== path) return fail('path');
  if (req.method !== 'POST') return fail('method');
  return { ok: true, value: agent };
}
