/**
 * The projector behind the reconciler's rendered policy for `examples/`: the check requests are built
 * exactly as agentgateway v1.3.1 builds them from the rendered `extAuth.http` block
 * (docs/upstream.md#agentgateway-ext-auth-request): the credential is consumed by authentication first, then
 * the first value of each `allowedRequestHeaders` name is copied, then every `addRequestHeaders` CEL
 * (evaluated by the agentgateway CEL test double) overwrites its header or, on error, removes it; the
 * original method and path; no body. The real projector answers over HTTP; on 2xx each
 * `allowedResponseHeaders` name replaces all upstream values, then the rendered route authorization
 * (`Require`) runs on the upstream request.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeProjection } from '../contract/index.ts';
import { render } from '../controller/render/index.ts';
import { loadResources } from '../controller/render-command.ts';
import {
  authorize,
  checkRequestHeaders,
  firstFailing,
  type GatewayContext,
} from '../local/doubles/agentgateway-cel.ts';
import { EXAMPLES } from '../testkit/controller/fixtures.ts';
import { sendCheck } from '../testkit/projector/client.ts';
import { ALICE, encodeContext, fixedRandom, NOW, roomContext } from '../testkit/projector/fixtures.ts';
import { parseConfig } from './config.ts';
import { type RunningProjector, startProjector } from './index.ts';
import type { CheckRequest } from './request.ts';

interface ExtAuthHttp {
  allowedRequestHeaders: string[];
  addRequestHeaders: Record<string, string>;
  allowedResponseHeaders: string[];
}
interface RoutePolicy {
  path: string;
  http: ExtAuthHttp;
  authorization: string[];
}

const rendered = render(loadResources([EXAMPLES]));
const objects = rendered.objects as any[];

function routePolicy(route: 'local' | 'public'): RoutePolicy {
  for (const o of objects) {
    const http = o.kind === 'AgentgatewayPolicy' ? o.spec?.traffic?.extAuth?.http : undefined;
    if (!http || http.addRequestHeaders?.['x-fgentic-check-route'] !== JSON.stringify(route)) continue;
    const routeName = o.spec.targetRefs[0].name;
    const httpRoute = objects.find((r) => r.kind === 'HTTPRoute' && r.metadata.name === routeName);
    const path = httpRoute.spec.rules[0].matches[0].path.value;
    return { path, http, authorization: o.spec.traffic.authorization.policy.matchExpressions };
  }
  throw new Error(`no rendered ${route} ext-auth policy`);
}

interface ClientRequest {
  method: string;
  path: string;
  headers: [string, string][];
  body: string;
}

/** agentgateway's check request for a client request that already passed authentication. */
function checkRequestFor(
  policy: RoutePolicy,
  client: ClientRequest,
  auth: Omit<GatewayContext, 'request'>,
): CheckRequest {
  // Authentication removed the credential before ext-auth.
  const headers = client.headers.filter(([k]) => k.toLowerCase() !== 'authorization');
  const out: Record<string, string[]> = {};
  for (const name of policy.http.allowedRequestHeaders) {
    const first = headers.find(([k]) => k.toLowerCase() === name);
    if (first) out[name] = [first[1]];
  }
  const ctx: GatewayContext = {
    request: { method: client.method, path: client.path, headers, body: client.body },
    ...auth,
  };
  const added = checkRequestHeaders(policy.http.addRequestHeaders, ctx);
  for (const name of Object.keys(policy.http.addRequestHeaders)) {
    if (added[name] === undefined) delete out[name];
    else out[name] = [added[name]];
  }
  return { method: client.method, path: client.path, headers: out };
}

/** Apply a 2xx ext-auth response to the upstream request, then run the rendered authorization. */
function upstreamAfter(
  policy: RoutePolicy,
  client: ClientRequest,
  response: Record<string, string | string[] | undefined>,
  auth: Omit<GatewayContext, 'request'>,
) {
  let headers = client.headers.filter(([k]) => k.toLowerCase() !== 'authorization');
  for (const name of policy.http.allowedResponseHeaders) {
    const v = response[name];
    if (v === undefined) continue;
    headers = [...headers.filter(([k]) => k.toLowerCase() !== name), [name, Array.isArray(v) ? v[0]! : v]];
  }
  const ctx: GatewayContext = {
    request: { method: client.method, path: client.path, headers, body: client.body },
    ...auth,
  };
  return {
    headers,
    allowed: authorize('Require', policy.authorization, ctx),
    failing: firstFailing(policy.authorization, ctx),
  };
}

function sendMessage(): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'SendMessage',
    params: {
      message: { messageId: 'm1', role: 'ROLE_USER', parts: [{ text: 'What is our travel policy?' }] },
    },
  });
}

const BRIDGE = { apiKey: { workload: 'matrix-a2a-bridge' } };
const JWT = (exp: number, extra: Record<string, unknown> = {}) => ({
  jwt: { iss: 'https://issuer.example', aud: 'fgentic-a2a', azp: 'org-b-a2a', sub: 'svc', exp, ...extra },
});

let p: RunningProjector;
let local: RoutePolicy;
let pub: RoutePolicy;

describe('projector behind the rendered agentgateway policy for examples/', () => {
  before(async () => {
    assert.deepEqual(rendered.conflicts, []);
    const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'fgentic-projector-config');
    const parsed = parseConfig(cm.data['projector.json']);
    assert.ok(parsed.ok, parsed.ok ? '' : parsed.error);
    if (!parsed.ok) return;
    local = routePolicy('local');
    pub = routePolicy('public');
    p = await startProjector({ config: parsed.config, now: () => NOW, randomBytes: fixedRandom });
  });
  after(() => p?.close());

  const localClient = (extra: [string, string][] = [], userIds: string[] = [ALICE], contexts = 1): ClientRequest => ({
    method: 'POST',
    path: local.path,
    headers: [
      ['authorization', 'Bearer bridge-api-key'],
      ['content-type', 'application/json'],
      ['a2a-version', '1.0'],
      ['x-fgentic-data-classification', 'public'],
      ...userIds.map((u): [string, string] => ['x-user-id', u]),
      ...Array.from({ length: contexts }, (): [string, string] => [
        'x-fgentic-room-context',
        encodeContext(roomContext()),
      ]),
      ...extra,
    ],
    body: sendMessage(),
  });

  const publicClient = (extra: [string, string][] = []): ClientRequest => ({
    method: 'POST',
    path: pub.path,
    headers: [
      ['authorization', 'Bearer eyJhbGciOi.partner.token'],
      ['content-type', 'application/json'],
      ['a2a-version', '1.0'],
      ...extra,
    ],
    body: sendMessage(),
  });

  test('the rendered ext-auth config forwards no credential and allowlists only the raw identity inputs', () => {
    assert.deepEqual([...local.http.allowedRequestHeaders].sort(), ['x-fgentic-room-context', 'x-user-id']);
    assert.ok(!pub.http.allowedRequestHeaders.some((h) => ['authorization', 'cookie', 'x-user-id'].includes(h)));
    for (const r of [local, pub])
      assert.deepEqual([...r.http.allowedResponseHeaders].sort(), ['x-fgentic-identity', 'x-user-id']);
  });

  test('local SendMessage: projector allows, overwrites X-User-Id, rendered authorization passes', async () => {
    const client = localClient();
    const check = checkRequestFor(local, client, BRIDGE);
    assert.deepEqual(Object.keys(check.headers).sort(), [
      'x-fgentic-check-agent-name',
      'x-fgentic-check-agent-namespace',
      'x-fgentic-check-room-context-count',
      'x-fgentic-check-route',
      'x-fgentic-check-user-id-count',
      'x-fgentic-check-workload',
      'x-fgentic-room-context',
      'x-user-id',
    ]);
    const r = await sendCheck(p.url, check);
    assert.equal(r.status, 200);
    const up = upstreamAfter(local, client, r.headers, BRIDGE);
    assert.equal(up.allowed, true, up.failing);
    assert.deepEqual(
      up.headers.filter(([k]) => k === 'x-user-id'),
      [['x-user-id', ALICE]],
    );
    const id = up.headers.find(([k]) => k === 'x-fgentic-identity')![1];
    assert.ok(decodeProjection(id, { now: NOW, agents: [{ namespace: 'kagent', name: 'knowledge-agent' }] }).ok);
  });

  test('local: duplicate raw X-User-Id → count 2 → projector denies duplicate', async () => {
    const r = await sendCheck(
      p.url,
      checkRequestFor(local, localClient([], [ALICE, '@mallory:org-a.example']), BRIDGE),
    );
    assert.equal(r.body, '{"error":"denied","reason":"duplicate"}');
  });

  test('local: duplicate raw room context → projector denies duplicate', async () => {
    const r = await sendCheck(p.url, checkRequestFor(local, localClient([], [ALICE], 2), BRIDGE));
    assert.equal(r.body, '{"error":"denied","reason":"duplicate"}');
  });

  test('local: missing X-User-Id → count CEL errors, header removed → projector denies missing (401)', async () => {
    const r = await sendCheck(p.url, checkRequestFor(local, localClient([], []), BRIDGE));
    assert.equal(r.status, 401);
    assert.equal(r.body, '{"error":"denied","reason":"missing"}');
  });

  test('local: a client X-Fgentic-Identity → identity count rendered → projector denies', async () => {
    const r = await sendCheck(p.url, checkRequestFor(local, localClient([['x-fgentic-identity', 'e30']]), BRIDGE));
    assert.equal(r.body, '{"error":"denied","reason":"identity_present"}');
  });

  test('local: client-sent check headers are not forwarded; CEL values win', async () => {
    const client = localClient([
      ['x-fgentic-check-workload', 'someone-else'],
      ['x-fgentic-check-user-id-count', '1'],
    ]);
    const r = await sendCheck(p.url, checkRequestFor(local, client, BRIDGE));
    assert.equal(r.status, 200);
  });

  test('local: another API-key workload → projector denies workload', async () => {
    const r = await sendCheck(
      p.url,
      checkRequestFor(local, localClient(), { apiKey: { workload: 'kagent/knowledge-agent' } }),
    );
    assert.equal(r.body, '{"error":"denied","reason":"workload"}');
  });

  test('public SendMessage: identity from JWT metadata only; caller X-User-Id is overwritten', async () => {
    const client = publicClient([['x-user-id', ALICE]]);
    const auth = JWT(NOW + 3600);
    const check = checkRequestFor(pub, client, auth);
    assert.equal(check.headers['x-user-id'], undefined);
    const r = await sendCheck(p.url, check);
    assert.equal(r.status, 200);
    const up = upstreamAfter(pub, client, r.headers, auth);
    assert.equal(up.allowed, true, up.failing);
    const userIds = up.headers.filter(([k]) => k === 'x-user-id');
    assert.equal(userIds.length, 1);
    assert.match(userIds[0]![1], /^oidc:org-b:[0-9a-f]{64}$/);
  });

  test('public: near-expiry token at the boundary (timeout 30 + 30 s) denies, one second more allows', async () => {
    const deny = await sendCheck(p.url, checkRequestFor(pub, publicClient(), JWT(NOW + 60)));
    assert.equal(deny.body, '{"error":"denied","reason":"token_near_expiry"}');
    const allow = await sendCheck(p.url, checkRequestFor(pub, publicClient(), JWT(NOW + 61)));
    assert.equal(allow.status, 200);
  });

  test('public: a client x-fgentic-check-route is overwritten by the rendered literal', async () => {
    const check = checkRequestFor(pub, publicClient([['x-fgentic-check-route', 'local']]), JWT(NOW + 3600));
    assert.deepEqual(check.headers['x-fgentic-check-route'], ['public']);
    assert.equal((await sendCheck(p.url, check)).status, 200);
  });

  test('public: unknown azp denies (403), a token without azp denies (401)', async () => {
    const unknown = await sendCheck(p.url, checkRequestFor(pub, publicClient(), JWT(NOW + 3600, { azp: 'org-x' })));
    assert.equal(unknown.body, '{"error":"denied","reason":"partner_unknown"}');
    const missingAzp = await sendCheck(
      p.url,
      checkRequestFor(pub, publicClient(), JWT(NOW + 3600, { azp: undefined })),
    );
    assert.equal(missingAzp.status, 401);
  });
});
