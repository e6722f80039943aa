/**
 * Test double of agentgateway v1.3.1 that executes the *rendered* objects (HTTPRoutes,
 * AgentgatewayPolicies, AgentgatewayBackends) on real HTTP, in the proxy's phase order
 * (docs/upstream.md#agentgateway-phase-order, AG:crates/agentgateway/src/proxy/httpproxy.rs):
 *
 *   hop-by-hop/Host removal → PreRouting policies (transformation remove) → route selection →
 *   directResponse → JWT auth → API-key auth → HTTP ext-auth → authorization (CEL) → local rate
 *   limit → transformation (CEL `set`, `remove`) → request header modifier / URL rewrite → backend
 *   (A2A card rewrite, or MCP with the backend tool allowlist) under the route's request timeout.
 *
 * Behaviour reproduced, each from the research notes:
 * - API key / JWT: strict mode, `Authorization: Bearer`, 401 on missing or invalid, the credential
 *   removed after success; API-key metadata flattened onto `apiKey` (docs/upstream.md#agentgateway-credential-removal);
 * - ext-auth HTTP: same method, original path+query, only `allowedRequestHeaders` (first value) plus
 *   CEL `addRequestHeaders` (a failing expression drops the header), 200 ms default deadline unless a
 *   backend `http.requestTimeout` policy targets the auth Service; 2xx copies each
 *   `allowedResponseHeaders` name present in the response over all request values, absent names leave
 *   the client's value in place; any other status is returned to the client verbatim; transport error
 *   or timeout → 403 (FailClosed) (docs/upstream.md#agentgateway-ext-auth-failure);
 * - authorization: Require = every expression true; a CEL error is "not matched" (docs/upstream.md#agentgateway-authorization);
 * - header removal: exact name, case-insensitive, all values (docs/upstream.md#agentgateway-header-modifier);
 * - MCP backend: downstream headers copied upstream with the first value of each name; a denied
 *   `tools/call` → JSON-RPC error -32602 "Unknown tool" (docs/upstream.md#agentgateway-mcp-backend);
 * - A2A backend: only the card's top-level `url` is rewritten; a card without it → 503 (docs/upstream.md#agentgateway-a2a-backend).
 * - local rate limit: one bucket per policy, built when the policy loads: full (`requests + burst`),
 *   refilled by `requests` per whole elapsed `unit`, capped at full; only `local[0]` counts
 *   (docs/upstream.md#agentgateway-timeouts-rate-limits).
 * Not reproduced: MCP session multiplexing (requests are forwarded one to one), gRPC ext-auth,
 * global rate limits, TLS.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLocalJWKSet, type JSONWebKeySet, jwtVerify } from 'jose';
import {
  type Action,
  authorize,
  checkRequestHeaders,
  firstFailing,
  type GatewayContext,
  transformationRemovals,
  transformationSets,
} from './agentgateway-cel.ts';

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: any;
};

export interface ApiKeySecret {
  readonly name: string;
  readonly namespace: string;
  readonly labels?: Readonly<Record<string, string>>;
  /** Entries in agentgateway's JSON form: `{key, metadata}`. */
  readonly entries: readonly { key: string; metadata: Record<string, string> }[];
}

export interface GatewayDoubleOptions {
  readonly objects: readonly Obj[];
  /** Backend address map: `host:port` (as rendered) or `namespace/service:port` → base URL. */
  readonly upstreams: Readonly<Record<string, string>>;
  readonly apiKeySecrets: readonly ApiKeySecret[];
  /** JWKS per issuer, standing in for the controller-inlined remote JWKS (docs/upstream.md#agentgateway-credential-removal). */
  readonly jwks?: Readonly<Record<string, JSONWebKeySet>>;
  /** Listener section names to serve (default: every sectionName the routes use). */
  readonly listeners?: readonly string[];
  /** Fixed loopback ports per listener (default: any free port). */
  readonly ports?: Readonly<Record<string, number>>;
  /** Clock of the local rate limit, in ms (default Date.now); a test holds it to count tokens exactly. */
  readonly now?: () => number;
}

export interface GatewayEvent {
  readonly listener: string;
  readonly route?: string;
  readonly phase: string;
  readonly status: number;
  /** The first failing `Require` expression, for readable test failures. */
  readonly rule?: string;
}

export interface GatewayDouble {
  /** Base URL per listener section name. */
  readonly urls: Readonly<Record<string, string>>;
  readonly events: GatewayEvent[];
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'proxy-connection',
  'host',
]);

type Headers = [string, string][];

function headerList(req: http.IncomingMessage): Headers {
  const out: Headers = [];
  for (let k = 0; k < req.rawHeaders.length; k += 2) {
    const name = req.rawHeaders[k]!.toLowerCase();
    if (!HOP_BY_HOP.has(name)) out.push([name, req.rawHeaders[k + 1]!]);
  }
  return out;
}

const removeHeader = (h: Headers, name: string): Headers => h.filter(([k]) => k !== name.toLowerCase());
const firstValue = (h: Headers, name: string) => h.find(([k]) => k === name)?.[1];

function targets(policy: Obj, kind: string, name: string, sectionName?: string): boolean {
  return (policy.spec?.targetRefs ?? []).some(
    (t: { kind: string; name: string; sectionName?: string }) =>
      t.kind === kind && t.name === name && (sectionName === undefined || t.sectionName === sectionName),
  );
}

interface Match {
  route: Obj;
  rule: any;
  score: number;
}

function selectRoute(routes: Obj[], listener: string, path: string, headers: Headers): Match | undefined {
  let best: Match | undefined;
  for (const route of routes) {
    if (!(route.spec.parentRefs ?? []).some((p: { sectionName?: string }) => p.sectionName === listener)) continue;
    for (const rule of route.spec.rules ?? []) {
      for (const m of rule.matches ?? [{ path: { type: 'PathPrefix', value: '/' } }]) {
        const p = m.path ?? { type: 'PathPrefix', value: '/' };
        const pathOk =
          p.type === 'Exact'
            ? path === p.value
            : path === p.value || path.startsWith(p.value.endsWith('/') ? p.value : `${p.value}/`) || p.value === '/';
        if (!pathOk) continue;
        const headersOk = (m.headers ?? []).every(
          (hm: { name: string; value: string }) => firstValue(headers, hm.name.toLowerCase()) === hm.value,
        );
        if (!headersOk) continue;
        // Gateway API precedence: exact path, then longest prefix, then most header matches.
        const score = (p.type === 'Exact' ? 1e6 : 0) + p.value.length * 10 + (m.headers?.length ?? 0);
        if (!best || score > best.score) best = { route, rule, score };
      }
    }
  }
  return best;
}

async function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > limit) return undefined;
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}

function send(res: http.ServerResponse, status: number, body = '', headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'text/plain', ...headers });
  res.end(body);
}

interface CheckResponse {
  status: number;
  headers: Headers;
  body: string;
  contentType?: string;
}

/**
 * The check request exactly as agentgateway's HTTP client builds it: the listed headers, Host, and a
 * zero Content-Length for body-carrying methods; no Accept, User-Agent or other client defaults.
 */
function checkCall(
  target: string,
  method: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<CheckResponse> {
  return new Promise((resolve, reject) => {
    const u = new URL(target);
    const hasBody = !['GET', 'HEAD', 'DELETE', 'OPTIONS'].includes(method);
    const r = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: `${u.pathname}${u.search}`,
        method,
        headers: { ...headers, ...(hasBody ? { 'content-length': '0' } : {}) },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const list: Headers = [];
          for (let k = 0; k < res.rawHeaders.length; k += 2)
            list.push([res.rawHeaders[k]!.toLowerCase(), res.rawHeaders[k + 1]!]);
          resolve({
            status: res.statusCode ?? 500,
            headers: list,
            body: Buffer.concat(chunks).toString('utf8'),
            ...(res.headers['content-type'] ? { contentType: res.headers['content-type'] } : {}),
          });
        });
        res.on('error', reject);
      },
    );
    r.setTimeout(timeoutMs, () => r.destroy(new Error('timeout')));
    r.on('error', reject);
    r.end();
  });
}

function parseDuration(s: string | undefined): number | undefined {
  if (!s) return undefined;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(s);
  if (!m) return undefined;
  const n = Number(m[1]);
  return m[2] === 'ms' ? n : m[2] === 's' ? n * 1000 : n * 60000;
}

/** agentgateway's local rate-limit bucket (docs/upstream.md#agentgateway-timeouts-rate-limits). */
interface TokenBucket {
  readonly capacity: number;
  readonly perFill: number;
  readonly intervalMs: number;
  available: number;
  refillAt: number;
}

const UNIT_MS: Readonly<Record<string, number>> = { Seconds: 1_000, Minutes: 60_000, Hours: 3_600_000 };

/** Built full, with the first refill one interval after loading. */
function newBucket(rl: { requests: number; burst?: number; unit: string }, now: number): TokenBucket {
  const intervalMs = UNIT_MS[rl.unit];
  if (intervalMs === undefined) throw new Error(`rate limit unit ${rl.unit} is not one agentgateway accepts`);
  const capacity = rl.requests + (rl.burst ?? 0);
  return { capacity, perFill: rl.requests, intervalMs, available: capacity, refillAt: now + intervalMs };
}

/** Adds `perFill` for every whole interval elapsed (capped at capacity), then takes one token if any. */
export function takeToken(b: TokenBucket, now: number): boolean {
  if (now >= b.refillAt) {
    const intervals = Math.floor((now - b.refillAt) / b.intervalMs) + 1;
    b.refillAt += intervals * b.intervalMs;
    b.available = Math.min(b.capacity, b.available + intervals * b.perFill);
  }
  if (b.available < 1) return false;
  b.available -= 1;
  return true;
}

export async function startGatewayDouble(options: GatewayDoubleOptions): Promise<GatewayDouble> {
  const routes = options.objects.filter((o) => o.kind === 'HTTPRoute');
  const policies = options.objects.filter((o) => o.kind === 'AgentgatewayPolicy');
  const backends = options.objects.filter((o) => o.kind === 'AgentgatewayBackend');
  const events: GatewayEvent[] = [];
  const now = options.now ?? Date.now;
  const policyKey = (p: Obj) => `${p.metadata.namespace ?? ''}/${p.metadata.name}`;
  const buckets = new Map<string, TokenBucket>();
  for (const p of policies) {
    const first = p.spec.traffic?.rateLimit?.local?.[0];
    if (first) buckets.set(policyKey(p), newBucket(first, now()));
  }
  const listeners =
    options.listeners ??
    [
      ...new Set(routes.flatMap((r) => (r.spec.parentRefs ?? []).map((p: { sectionName?: string }) => p.sectionName))),
    ].filter((s): s is string => typeof s === 'string');

  const upstream = (key: string): string => {
    const url = options.upstreams[key];
    if (!url) throw new Error(`no upstream for ${key}`);
    return url;
  };

  const apiKeys = (policy: Obj): ApiKeySecret[] => {
    const auth = policy.spec.traffic.apiKeyAuthentication;
    if (auth.secretRef)
      return options.apiKeySecrets.filter(
        (s) =>
          s.name === auth.secretRef.name && s.namespace === (auth.secretRef.namespace ?? policy.metadata.namespace),
      );
    const want: Record<string, string> = auth.secretSelector?.matchLabels ?? {};
    return options.apiKeySecrets.filter(
      (s) => s.namespace === policy.metadata.namespace && Object.entries(want).every(([k, v]) => s.labels?.[k] === v),
    );
  };

  const handle = async (listener: string, req: http.IncomingMessage, res: http.ServerResponse) => {
    const record = (phase: string, status: number, route?: string, rule?: string) =>
      events.push({ listener, phase, status, ...(route ? { route } : {}), ...(rule ? { rule } : {}) });
    const url = new URL(req.url ?? '/', 'http://gateway.local');
    let headers = headerList(req);
    const body = await readBody(req, 4 << 20);
    if (!body) {
      record('body', 413);
      return send(res, 413);
    }

    // PreRouting policies on this listener.
    for (const p of policies) {
      if (p.spec.traffic?.phase !== 'PreRouting') continue;
      const gw = (p.spec.targetRefs ?? []).find(
        (t: { kind: string; sectionName?: string }) => t.kind === 'Gateway' && t.sectionName === listener,
      );
      if (!gw) continue;
      // transformation.request.remove, or the first matching `conditional` entry (docs/upstream.md#agentgateway-header-modifier).
      const removals = transformationRemovals(p.spec.traffic.transformation, {
        request: { method: req.method ?? 'GET', path: url.pathname, headers },
      });
      for (const name of removals) headers = removeHeader(headers, name);
    }

    const match = selectRoute(routes, listener, url.pathname, headers);
    if (!match) {
      record('route', 404);
      return send(res, 404, 'route not found');
    }
    const routeName = match.route.metadata.name;
    const routePolicies = policies.filter(
      (p) => targets(p, 'HTTPRoute', routeName) && p.metadata.namespace === match.route.metadata.namespace,
    );
    const traffic = Object.assign({}, ...routePolicies.map((p) => p.spec.traffic ?? {}));
    const backendPolicy = Object.assign({}, ...routePolicies.map((p) => p.spec.backend ?? {}));

    if (traffic.directResponse) {
      record('directResponse', traffic.directResponse.status, routeName);
      return send(res, traffic.directResponse.status, traffic.directResponse.body ?? '');
    }
    if (traffic.buffer?.request?.maxBytes) {
      const max = /^(\d+)(Ki|Mi)?$/.exec(traffic.buffer.request.maxBytes);
      const limit = max ? Number(max[1]) * (max[2] === 'Mi' ? 1 << 20 : max[2] === 'Ki' ? 1024 : 1) : 0;
      if (body.length > limit) {
        record('buffer', 413, routeName);
        return send(res, 413);
      }
    }
    const ctx: GatewayContext = {
      request: { method: req.method ?? 'GET', path: url.pathname, headers, body },
    };

    // JWT authentication (docs/upstream.md#agentgateway-credential-removal): kid required, issuer exact, audiences when configured, exp required.
    if (traffic.jwtAuthentication) {
      const auth = firstValue(headers, 'authorization');
      const token = auth && /^bearer /i.test(auth) ? auth.slice(7).trim() : undefined;
      let claims: Record<string, unknown> | undefined;
      for (const provider of traffic.jwtAuthentication.providers ?? []) {
        const jwks = options.jwks?.[provider.issuer];
        if (!token || !jwks) continue;
        try {
          const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(jwks), {
            issuer: provider.issuer,
            ...(provider.audiences ? { audience: provider.audiences } : {}),
            requiredClaims: ['exp'],
          });
          if (!protectedHeader.kid) continue;
          claims = payload as Record<string, unknown>;
          break;
        } catch {}
      }
      if (!claims) {
        record('jwt', 401, routeName);
        return send(res, 401, 'authentication failed');
      }
      headers = removeHeader(headers, 'authorization');
      ctx.jwt = claims;
      ctx.request.headers = headers;
    }

    // API-key authentication (docs/upstream.md#agentgateway-credential-removal): exact match; the entry name is not visible, metadata is flattened.
    if (traffic.apiKeyAuthentication) {
      const auth = firstValue(headers, 'authorization');
      const key = auth && /^bearer /i.test(auth) ? auth.slice(7) : undefined;
      const entry = key
        ? apiKeys(routePolicies.find((p) => p.spec.traffic?.apiKeyAuthentication)!)
            .flatMap((s) => s.entries)
            .find((e) => e.key === key)
        : undefined;
      if (!entry) {
        record('apiKey', 401, routeName);
        return send(res, 401, 'authentication failed');
      }
      headers = removeHeader(headers, 'authorization');
      ctx.apiKey = { ...entry.metadata };
      ctx.request.headers = headers;
    }

    // HTTP ext-auth (docs/upstream.md#agentgateway-ext-auth-request).
    if (traffic.extAuth) {
      const ea = traffic.extAuth;
      const check: Record<string, string> = {};
      for (const name of ea.http?.allowedRequestHeaders ?? ['authorization']) {
        const v = firstValue(headers, name.toLowerCase());
        if (v !== undefined) check[name.toLowerCase()] = v;
      }
      Object.assign(check, checkRequestHeaders(ea.http?.addRequestHeaders ?? {}, ctx));
      const svc = `${ea.backendRef.namespace ?? match.route.metadata.namespace}/${ea.backendRef.name}:${ea.backendRef.port}`;
      const timeoutPolicy = policies.find(
        (p) => targets(p, 'Service', ea.backendRef.name) && p.spec.backend?.http?.requestTimeout,
      );
      const timeoutMs = parseDuration(timeoutPolicy?.spec.backend.http.requestTimeout) ?? 200;
      let resp: CheckResponse;
      try {
        resp = await checkCall(`${upstream(svc)}${url.pathname}${url.search}`, req.method ?? 'GET', check, timeoutMs);
      } catch {
        record('extAuth', 403, routeName);
        return send(res, 403, 'external authorization failed');
      }
      if (resp.status < 200 || resp.status > 299) {
        record('extAuth', resp.status, routeName);
        return send(res, resp.status, resp.body, { 'content-type': resp.contentType ?? 'text/plain' });
      }
      for (const name of ea.http?.allowedResponseHeaders ?? []) {
        // The first value of the name in the auth response replaces every request value (docs/upstream.md#agentgateway-ext-auth-response).
        const v = resp.headers.find(([k]) => k === name.toLowerCase())?.[1];
        if (v !== undefined) headers = [...removeHeader(headers, name), [name.toLowerCase(), v]];
      }
      ctx.request.headers = headers;
    }

    // Authorization (docs/upstream.md#agentgateway-authorization).
    if (traffic.authorization) {
      const a = traffic.authorization;
      if (!authorize(a.action as Action, a.policy.matchExpressions, ctx)) {
        record(
          'authorization',
          403,
          routeName,
          a.action === 'Require' ? firstFailing(a.policy.matchExpressions, ctx) : undefined,
        );
        return send(res, 403, 'authorization failed');
      }
    }

    // Local rate limit: one token bucket per policy (docs/upstream.md#agentgateway-timeouts-rate-limits).
    for (const p of routePolicies) {
      const bucket = buckets.get(policyKey(p));
      if (bucket && !takeToken(bucket, now())) {
        record('rateLimit', 429, routeName);
        return send(res, 429);
      }
    }

    // Route transformation (after rate limits, before the header modifier): `request.set` overwrites
    // each named header with its CEL value (docs/upstream.md#agentgateway-header-modifier).
    if (traffic.transformation && !traffic.transformation.conditional) {
      for (const [name, value] of transformationSets(traffic.transformation, ctx))
        headers = [...removeHeader(headers, name), [name, value]];
      for (const name of traffic.transformation.request?.remove ?? []) headers = removeHeader(headers, name);
      ctx.request.headers = headers;
    }

    // Route filters: header modifier then URL rewrite (docs/upstream.md#agentgateway-phase-order).
    let path = `${url.pathname}${url.search}`;
    for (const f of match.rule.filters ?? []) {
      if (f.type === 'RequestHeaderModifier')
        for (const name of f.requestHeaderModifier.remove ?? []) headers = removeHeader(headers, name);
      if (f.type === 'URLRewrite' && f.urlRewrite.path?.type === 'ReplaceFullPath')
        path = f.urlRewrite.path.replaceFullPath;
    }

    const ref = match.rule.backendRefs?.[0];
    const backend = backends.find(
      (b) => b.metadata.name === ref?.name && b.metadata.namespace === match.route.metadata.namespace,
    );
    if (!backend) {
      record('backend', 500, routeName);
      return send(res, 500, 'no backend');
    }
    const timeoutMs = parseDuration(match.rule.timeouts?.request);
    const signal = timeoutMs ? AbortSignal.timeout(timeoutMs) : undefined;

    let target: string;
    if (backend.spec.mcp) {
      const t = backend.spec.mcp.targets[0].static;
      target = `${upstream(`${t.host}:${t.port}`)}${t.path ?? '/mcp'}`;
      // Backend MCP authorization: a tools/call outside the allowlist never reaches the server.
      const mcpAuthz = backendPolicy.mcp?.authorization;
      if (mcpAuthz && req.method === 'POST') {
        let rpc: { id?: unknown; method?: string; params?: { name?: string } } | undefined;
        try {
          rpc = JSON.parse(body.toString('utf8'));
        } catch {}
        if (rpc?.method === 'tools/call') {
          const allowed = authorize(mcpAuthz.action, mcpAuthz.policy.matchExpressions, {
            ...ctx,
            mcp: { tool: { name: String(rpc.params?.name ?? ''), target: backend.spec.mcp.targets[0].name } },
          });
          if (!allowed) {
            record('mcpAuthorization', 200, routeName);
            res.writeHead(200, { 'content-type': 'application/json' });
            return res.end(
              JSON.stringify({
                jsonrpc: '2.0',
                id: rpc.id ?? null,
                error: { code: -32602, message: `Unknown tool: ${rpc.params?.name}` },
              }),
            );
          }
        }
      }
      // First value of each downstream header (docs/upstream.md#agentgateway-mcp-backend).
      const seen = new Set<string>();
      headers = headers.filter(([k]) => {
        if (seen.has(k)) return false;
        seen.add(k);
        return true;
      });
    } else if (backend.spec.a2a) {
      target = `${upstream(`${backend.spec.a2a.host}:${backend.spec.a2a.port}`)}${path}`;
    } else {
      record('backend', 500, routeName);
      return send(res, 500, 'unsupported backend');
    }

    try {
      const upstreamRes = await fetch(target, {
        method: req.method ?? 'GET',
        headers,
        ...(body.length > 0 && req.method !== 'GET' ? { body } : {}),
        ...(signal ? { signal } : {}),
      });
      let payload = Buffer.from(await upstreamRes.arrayBuffer());
      if (backend.spec.a2a && req.method === 'GET' && /agent(-card)?\.json$/.test(url.pathname)) {
        const card = JSON.parse(payload.toString('utf8'));
        if (typeof card.url !== 'string') {
          record('a2aCard', 503, routeName);
          return send(res, 503, 'agent card missing URL');
        }
        card.url = `${`http://${req.headers.host}`}${url.pathname.replace(/\/\.well-known\/.*$/, '')}`;
        payload = Buffer.from(JSON.stringify(card));
      }
      record('backend', upstreamRes.status, routeName);
      const out: Record<string, string> = {};
      upstreamRes.headers.forEach((v, k) => {
        if (!['content-length', 'transfer-encoding', 'connection', 'content-encoding'].includes(k)) out[k] = v;
      });
      res.writeHead(upstreamRes.status, out);
      res.end(payload);
    } catch (e) {
      const timedOut = (e as Error).name === 'TimeoutError';
      record('backend', timedOut ? 504 : 503, routeName);
      send(res, timedOut ? 504 : 503, timedOut ? 'request timeout' : 'upstream unavailable');
    }
  };

  const servers: http.Server[] = [];
  const urls: Record<string, string> = {};
  for (const listener of listeners) {
    const server = http.createServer((req, res) => {
      handle(listener, req, res).catch(() => {
        if (!res.headersSent) send(res, 500, 'gateway error');
        else res.end();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.ports?.[listener] ?? 0, '127.0.0.1', () => resolve());
    });
    servers.push(server);
    urls[listener] = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  return {
    urls,
    events,
    close: async () => {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.closeAllConnections();
              s.close(() => resolve());
            }),
        ),
      );
    },
  };
}
