/**
 * The normalised check request the pure decisions consume, and the header rules both routes share.
 * Pure: no I/O. Header names are lowercase; every header maps to the list of values received.
 */
import { IDENTITY_HEADER } from '../rules/index.ts';
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
  readonly [IDENTITY_HEADER]: string;
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

/**
 * Credentials must never reach the projector; their presence means the allowlist is wrong. Denied by
 * name alone (the value is never read): the fixed names, and any name that contains a fragment saying
 * it carries a secret (`x-forwarded-access-token`, `x-goog-iap-jwt-assertion`, `x-amzn-oidc-data`, …).
 */
const CREDENTIAL_HEADERS = new Set(['authorization', 'proxy-authorization', 'cookie', 'x-api-key']);
const CREDENTIAL_FRAGMENTS = [
  'token',
  'jwt',
  'assertion',
  'secret',
  'passw',
  'apikey',
  'api-key',
  'session',
  'credential',
  'cookie',
  'bearer',
  'oidc',
  'oauth',
  'saml',
];

/**
 * Identity assertions other authenticating proxies add (`x-forwarded-user`, `x-auth-request-email`,
 * `x-remote-group`, `x-ms-client-principal-name`, …). The decisions never read them, but a request
 * that carries one was authenticated by something other than the rendered policy, so it denies.
 */
const IDENTITY_WORDS = new Set([
  'user',
  'users',
  'username',
  'email',
  'group',
  'groups',
  'principal',
  'identity',
  'subject',
  'userinfo',
  'claims',
  'role',
  'roles',
  'consumer',
  'tenant',
]);

/**
 * Transport headers an HTTP/1.1 client stack adds to the check request. They carry no identity and
 * are ignored without being counted (content-length is only accepted as "0").
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
]);

/**
 * Headers a service mesh, proxy or tracing setup between the gateway and the projector adds (Istio
 * sidecar or ambient, Linkerd, Envoy, OpenTelemetry, Zipkin B3, Datadog, cloud load balancers). They
 * are ignored and counted: denying them would turn a mesh rollout into a total outage, and no
 * decision reads them. The metric label is the exact name for the names below, the family for the
 * prefixes, and `other` for anything else, so a header name cannot grow the metric without bound.
 */
const PLUMBING_NAMES = new Set([
  'traceparent',
  'tracestate',
  'baggage',
  'b3',
  'x-request-id',
  'x-correlation-id',
  'x-ot-span-context',
  'uber-trace-id',
  'grpc-trace-bin',
  'x-cloud-trace-context',
  'x-amzn-trace-id',
  'x-forwarded-client-cert',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-forwarded-prefix',
  'x-real-ip',
  'forwarded',
  'via',
]);
const PLUMBING_PREFIXES = ['x-b3-', 'x-envoy-', 'x-istio-', 'l5d-', 'x-linkerd-', 'x-datadog-', 'sw8'];

/** What the header rule does with one header name on one route. */
export type HeaderClass = 'expected' | 'transport' | 'body' | 'credential' | 'projected' | 'identity' | 'ignored';

function words(name: string): string[] {
  return name.split(/[-_.]/);
}

/**
 * The single header rule. Order matters: what the route's policy sends, then what carries a body,
 * a projection, an identity or a credential (all deny), and only then plumbing that is ignored.
 * Any `x-fgentic-*` name the route does not send and a caller-supplied `x-user-id` on the public
 * route are identity-bearing and deny.
 */
export function classifyHeader(name: string, route: RouteName): HeaderClass {
  if (ROUTE_HEADERS[route].has(name)) return 'expected';
  if (name === 'x-envoy-auth-partial-body' || name === 'transfer-encoding') return 'body';
  if (TRANSPORT_HEADERS.has(name)) return 'transport';
  if (name === IDENTITY_HEADER || name === CHECK.identityCount) return 'projected';
  if (name.startsWith('x-fgentic-') || name === RAW.userId) return 'identity';
  if (CREDENTIAL_HEADERS.has(name) || CREDENTIAL_FRAGMENTS.some((f) => name.includes(f))) return 'credential';
  if (words(name).some((x) => IDENTITY_WORDS.has(x))) return 'identity';
  return 'ignored';
}

/** Bounded metric label for an ignored header: its exact name when known, its family, or `other`. */
export function ignoredHeaderLabel(name: string): string {
  if (PLUMBING_NAMES.has(name)) return name;
  for (const p of PLUMBING_PREFIXES) if (name.startsWith(p)) return `${p}*`;
  return 'other';
}

export function fail(reason: DenyReason): Failure {
  return { ok: false, reason };
}

/**
 * Shared header hygiene for a route: no credential (only the header name is looked at), no body,
 * no client X-Fgentic-Identity, no identity-bearing header the route's policy does not send.
 * Plumbing headers are ignored here and counted by the HTTP adapter.
 */
export function checkHeaderSet(req: CheckRequest, route: RouteName): Failure | undefined {
  let unexpected = false;
  for (const name of Object.keys(req.headers)) {
    const values = req.headers[name];
    if (values === undefined) continue;
    switch (classifyHeader(name, route)) {
      case 'credential':
        return fail('credential_header');
      case 'body':
        return fail('body');
      case 'projected':
        return fail('identity_present');
      case 'transport':
        if (name === 'content-length' && (values.length !== 1 || values[0] !== '0')) return fail('body');
        break;
      case 'identity':
        unexpected = true;
        break;
      case 'expected':
      case 'ignored':
        break;
    }
  }
  return unexpected ? fail('unexpected_header') : undefined;
}

/** Exactly one non-empty value of a header. */
export function single(req: CheckRequest, name: string, missing: DenyReason, duplicate: DenyReason): Got<string> {
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

/**
 * The opening both decisions share: the route's header hygiene, the literal route header naming this
 * route, then the route's configured agent (routeAgent). One order, so both routes deny alike.
 */
export function openCheck(req: CheckRequest, config: ProjectorConfig, route: RouteName): Got<AgentRoute> {
  const hygiene = checkHeaderSet(req, route);
  if (hygiene) return hygiene;
  const named = single(req, CHECK.route, 'route', 'route');
  if (!named.ok || named.value !== route) return fail('route');
  return routeAgent(req, config, route);
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
