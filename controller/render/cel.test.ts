/**
 * Every CEL expression the render emits (authorization and addRequestHeaders), taken from the rendered
 * policies and evaluated with @bufbuild/cel through the agentgateway CEL double: the legitimate bridge,
 * partner and Agent requests pass; each forbidden variant fails.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  authorize,
  callNames,
  checkRequestHeaders,
  firstFailing,
  type GatewayContext,
  KNOWN_FUNCTIONS,
} from '../../local/doubles/agentgateway-cel.ts';
import { examples } from '../../testkit/controller/fixtures.ts';
import type { K8sObject, Resources } from '../types.ts';
import { render } from './index.ts';

interface Rendered {
  require: string[];
  add: Record<string, string>;
  mcpAllow: string[];
}

function policies(input: Resources): Map<string, Rendered> {
  const out = new Map<string, Rendered>();
  for (const o of render(input).objects as (K8sObject & { spec: any })[]) {
    if (o.kind !== 'AgentgatewayPolicy' || !o.spec.traffic?.authorization) continue;
    assert.equal(o.spec.traffic.authorization.action, 'Require', o.metadata.name);
    out.set(o.metadata.name.split('.')[0] as string, {
      require: o.spec.traffic.authorization.policy.matchExpressions,
      add: o.spec.traffic.extAuth?.http?.addRequestHeaders ?? {},
      mcpAllow: o.spec.backend?.mcp?.authorization?.policy?.matchExpressions ?? [],
    });
  }
  return out;
}

const LOCAL_PATH = '/api/a2a/kagent/knowledge-agent';
const PUBLIC_PATH = '/a2a/kagent/knowledge-agent';
const IDENTITY = 'eyJ2IjoxfQ';

const rpc = (method: string, params: Record<string, unknown> = {}) =>
  JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
const send = (message: Record<string, unknown> = {}, extra: Record<string, unknown> = {}, method = 'SendMessage') =>
  rpc(method, {
    message: {
      messageId: 'm-1',
      role: 'ROLE_USER',
      parts: [{ text: 'What is our travel policy?' }],
      ...message,
    },
    ...extra,
  });

/** The local request as authorization sees it: after API-key auth (Authorization consumed) and ext-auth. */
function local(
  over: Partial<GatewayContext['request']> = {},
  apiKey = { workload: 'matrix-a2a-bridge' },
): GatewayContext {
  return {
    apiKey,
    request: {
      method: 'POST',
      path: LOCAL_PATH,
      headers: {
        'content-type': 'application/json',
        'a2a-version': '1.0',
        'x-user-id': '@alice:org-a.example',
        'x-fgentic-room-context': 'eyJyb29tIjp7fX0',
        'x-fgentic-identity': IDENTITY,
        'x-fgentic-data-classification': 'public',
      },
      body: send(),
      ...over,
    },
  };
}

function withHeaders(ctx: GatewayContext, patch: Record<string, string | string[] | undefined>): GatewayContext {
  const h = { ...(ctx.request.headers as Record<string, string | string[]>) };
  for (const [k, v] of Object.entries(patch)) {
    if (v === undefined) delete h[k];
    else h[k] = v;
  }
  return { ...ctx, request: { ...ctx.request, headers: h } };
}

const JWT = {
  iss: 'https://issuer.example',
  aud: 'fgentic-a2a',
  azp: 'org-b-a2a',
  exp: 1784117400,
  sub: 'svc',
};
function partner(over: Partial<GatewayContext['request']> = {}, jwt: Record<string, unknown> = JWT): GatewayContext {
  return {
    jwt,
    request: {
      method: 'POST',
      path: PUBLIC_PATH,
      headers: {
        'content-type': 'application/json',
        'a2a-version': '1.0',
        'x-user-id': 'oidc:org-b:0f3c',
        'x-fgentic-identity': IDENTITY,
      },
      body: send(),
      ...over,
    },
  };
}

function mcp(
  body: string,
  patch: Record<string, string | string[] | undefined> = {},
  workload = 'kagent/knowledge-agent',
): GatewayContext {
  return withHeaders(
    {
      apiKey: { workload },
      request: {
        method: 'POST',
        path: '/mcp/knowledge-retrieval',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-11-25',
          'x-retrieval-agent': 'kagent/knowledge-agent',
          'x-fgentic-identity': IDENTITY,
        },
        body,
      },
    },
    patch,
  );
}
const toolCall = (name = 'search_knowledge') => rpc('tools/call', { name, arguments: { query: 'travel policy' } });

const P = policies(examples());
const LOCAL = P.get('fgentic-a2a-local') as Rendered;
const PUBLIC = P.get('fgentic-a2a-public') as Rendered;
const MCP = P.get('fgentic-mcp') as Rendered;
const CARD = P.get('fgentic-a2a-card') as Rendered;

function passes(r: Rendered, ctx: GatewayContext) {
  assert.equal(firstFailing(r.require, ctx), undefined);
  assert.equal(authorize('Require', r.require, ctx), true);
}
function fails(r: Rendered, ctx: GatewayContext) {
  assert.equal(authorize('Require', r.require, ctx), false);
}

describe('rendered CEL is well-formed', () => {
  it('the render emits the local, public and MCP rule sets', () => {
    assert.ok(LOCAL && PUBLIC && MCP);
    assert.ok(LOCAL.require.length >= 8 && PUBLIC.require.length >= 8 && MCP.require.length >= 6);
  });
  it('every expression parses and uses only functions agentgateway has (and the double emulates)', () => {
    for (const r of [LOCAL, PUBLIC, MCP, CARD])
      for (const e of [...r.require, ...Object.values(r.add), ...r.mcpAllow])
        for (const f of callNames(e)) assert.ok(KNOWN_FUNCTIONS.has(f), `${f} in ${e}`);
  });
  it('no binding helpers (.with, default, coalesce)', () => {
    for (const r of [LOCAL, PUBLIC, MCP])
      for (const e of [...r.require, ...Object.values(r.add)])
        assert.doesNotMatch(e, /\.with\(|\bdefault\(|\bcoalesce\(/);
  });
});

describe('local A2A route (bridge, API key)', () => {
  it('a new-conversation SendMessage from the bridge passes', () => passes(LOCAL, local()));
  it('GetTask and CancelTask from the bridge pass', () => {
    passes(LOCAL, local({ body: rpc('GetTask', { id: 'task-1' }) }));
    passes(LOCAL, local({ body: rpc('CancelTask', { id: 'task-1' }) }));
  });
  it('duplicate or missing projected/raw headers fail', () => {
    for (const h of ['x-user-id', 'x-fgentic-identity', 'x-fgentic-room-context']) {
      fails(LOCAL, withHeaders(local(), { [h]: ['a', 'b'] }));
      fails(LOCAL, withHeaders(local(), { [h]: undefined }));
    }
  });
  it('unknown x-fgentic-* headers fail', () => {
    fails(LOCAL, withHeaders(local(), { 'x-fgentic-principal': 'x' }));
    fails(LOCAL, withHeaders(local(), { 'x-fgentic-check-workload': 'matrix-a2a-bridge' }));
  });
  it('contextId, taskId and referenceTaskIds fail, even empty', () => {
    for (const m of [
      { contextId: 'ctx-1' },
      { contextId: '' },
      { taskId: 'task-1' },
      { taskId: '' },
      { referenceTaskIds: ['task-1'] },
      { referenceTaskIds: [] },
    ])
      fails(LOCAL, local({ body: send(m) }));
  });
  it('wrong path, wrong method, wrong workload fail', () => {
    fails(LOCAL, local({ path: `${LOCAL_PATH}/` }));
    fails(LOCAL, local({ path: '/api/a2a/kagent/other-agent' }));
    fails(LOCAL, local({ path: PUBLIC_PATH }));
    fails(LOCAL, local({ method: 'GET', body: '' }));
    fails(LOCAL, local({}, { workload: 'kagent/knowledge-agent' }));
    fails(LOCAL, { ...local(), apiKey: undefined } as GatewayContext);
  });
  it('other JSON-RPC methods, batches and malformed bodies fail', () => {
    fails(LOCAL, local({ body: send({}, {}, 'SendStreamingMessage') }));
    fails(LOCAL, local({ body: rpc('ListTasks') }));
    fails(LOCAL, local({ body: `[${send()}]` }));
    fails(LOCAL, local({ body: send().replace('"2.0"', '"1.0"') }));
    fails(LOCAL, local({ body: '{' }));
    fails(LOCAL, local({ body: rpc('SendMessage', {}) }));
  });
  it('check-request headers carry workload, agent and raw counts', () => {
    const pre = withHeaders(local(), { 'x-fgentic-identity': undefined });
    assert.deepEqual(checkRequestHeaders(LOCAL.add, pre), {
      'x-fgentic-check-route': 'local',
      'x-fgentic-check-agent-namespace': 'kagent',
      'x-fgentic-check-agent-name': 'knowledge-agent',
      'x-fgentic-check-workload': 'matrix-a2a-bridge',
      'x-fgentic-check-user-id-count': '1',
      'x-fgentic-check-room-context-count': '1',
    });
    const dup = checkRequestHeaders(
      LOCAL.add,
      withHeaders(pre, { 'x-user-id': ['@a:x', '@b:x'], 'x-fgentic-identity': 'spoof' }),
    );
    assert.equal(dup['x-fgentic-check-user-id-count'], '2');
    assert.equal(dup['x-fgentic-check-identity-count'], '1');
    const missing = checkRequestHeaders(
      LOCAL.add,
      withHeaders(pre, { 'x-user-id': undefined, 'x-fgentic-room-context': undefined }),
    );
    assert.equal(missing['x-fgentic-check-user-id-count'], undefined);
    assert.equal(missing['x-fgentic-check-room-context-count'], undefined);
  });
});

describe('AgentCard read on the local listener (bridge only)', () => {
  const card = (over: Partial<GatewayContext['request']> = {}, workload = 'matrix-a2a-bridge'): GatewayContext => ({
    apiKey: { workload },
    request: {
      method: 'GET',
      path: `${LOCAL_PATH}/.well-known/agent-card.json`,
      headers: { accept: 'application/json' },
      ...over,
    },
  });
  it('the bridge may GET the card', () => passes(CARD, card()));
  it('other methods, paths, workloads and x-fgentic-* headers fail', () => {
    fails(CARD, card({ method: 'POST', body: send() }));
    fails(CARD, card({ path: `${LOCAL_PATH}/.well-known/agent.json` }));
    fails(CARD, card({}, 'kagent/knowledge-agent'));
    fails(CARD, card({ headers: { 'x-fgentic-identity': IDENTITY } }));
  });
});

describe('public A2A route (partner, JWT)', () => {
  it("a partner's synchronous SendMessage passes", () => {
    passes(PUBLIC, partner());
    passes(PUBLIC, partner({ body: send({}, { configuration: { returnImmediately: false } }) }));
    passes(PUBLIC, partner({ body: send({}, { configuration: { acceptedOutputModes: ['text/plain'] } }) }));
    passes(PUBLIC, partner({}, { ...JWT, azp: 'org-d-a2a' }));
  });
  it('GetTask and CancelTask fail on the public route', () => {
    fails(PUBLIC, partner({ body: rpc('GetTask', { id: 'task-1' }) }));
    fails(PUBLIC, partner({ body: rpc('CancelTask', { id: 'task-1' }) }));
  });
  it('returnImmediately true fails', () =>
    fails(PUBLIC, partner({ body: send({}, { configuration: { returnImmediately: true } }) })));
  it('contextId, taskId and referenceTaskIds fail, even empty', () => {
    for (const m of [{ contextId: '' }, { contextId: 'c' }, { taskId: 't' }, { referenceTaskIds: [] }])
      fails(PUBLIC, partner({ body: send(m) }));
  });
  it('room context or any unknown x-fgentic-* header fails', () => {
    fails(PUBLIC, withHeaders(partner(), { 'x-fgentic-room-context': 'x' }));
    fails(PUBLIC, withHeaders(partner(), { 'x-fgentic-data-classification': 'public' }));
  });
  it('duplicate or missing projected headers fail', () => {
    fails(PUBLIC, withHeaders(partner(), { 'x-fgentic-identity': [IDENTITY, IDENTITY] }));
    fails(PUBLIC, withHeaders(partner(), { 'x-user-id': undefined }));
  });
  it('wrong issuer, unregistered azp, wrong path fail', () => {
    fails(PUBLIC, partner({}, { ...JWT, iss: 'https://other.example' }));
    fails(PUBLIC, partner({}, { ...JWT, azp: 'untrusted-a2a' }));
    fails(PUBLIC, partner({ path: LOCAL_PATH }));
    fails(PUBLIC, partner({ path: `${PUBLIC_PATH}/x` }));
    fails(PUBLIC, { ...partner(), jwt: undefined } as GatewayContext);
  });
  it('check-request headers carry the validated JWT metadata', () => {
    const pre = withHeaders(partner(), { 'x-fgentic-identity': undefined, 'x-user-id': undefined });
    assert.deepEqual(checkRequestHeaders(PUBLIC.add, pre), {
      'x-fgentic-check-route': 'public',
      'x-fgentic-check-agent-namespace': 'kagent',
      'x-fgentic-check-agent-name': 'knowledge-agent',
      'x-fgentic-check-jwt-issuer': 'https://issuer.example',
      'x-fgentic-check-jwt-audience': 'fgentic-a2a',
      'x-fgentic-check-jwt-azp': 'org-b-a2a',
      'x-fgentic-check-jwt-exp': '1784117400',
    });
    const list = checkRequestHeaders(PUBLIC.add, partner({}, { ...JWT, aud: ['account', 'fgentic-a2a'] }));
    assert.equal(list['x-fgentic-check-jwt-audience'], 'fgentic-a2a');
    assert.equal(list['x-fgentic-check-identity-count'], '1');
    const wrong = checkRequestHeaders(PUBLIC.add, partner({}, { ...JWT, aud: 'other' }));
    assert.equal(wrong['x-fgentic-check-jwt-audience'], undefined);
  });
});

describe('MCP route (retrieval Agent, API key)', () => {
  it('tools/call with exactly one carrier passes; discovery passes without one', () => {
    passes(MCP, mcp(toolCall()));
    for (const m of ['initialize', 'tools/list', 'ping', 'notifications/initialized'])
      passes(MCP, mcp(rpc(m), { 'x-fgentic-identity': undefined }));
    passes(MCP, { ...mcp(''), request: { ...mcp('').request, method: 'GET' } });
    passes(MCP, { ...mcp(''), request: { ...mcp('').request, method: 'DELETE' } });
  });
  it('tools/call without or with two carriers fails', () => {
    fails(MCP, mcp(toolCall(), { 'x-fgentic-identity': undefined }));
    fails(MCP, mcp(toolCall(), { 'x-fgentic-identity': [IDENTITY, IDENTITY] }));
  });
  it('other x-fgentic-* headers fail', () => {
    fails(MCP, mcp(toolCall(), { 'x-fgentic-room-context': 'x' }));
    fails(MCP, mcp(rpc('tools/list'), { 'x-fgentic-projection': 'x' }));
  });
  it('batches, other tools, wrong workload, wrong path, wrong agent header fail', () => {
    fails(MCP, mcp(`[${toolCall()}]`));
    fails(MCP, mcp(toolCall('k8s_get_resources')));
    fails(MCP, mcp(toolCall(), {}, 'kagent/other-agent'));
    fails(MCP, mcp(toolCall(), {}, 'matrix-a2a-bridge'));
    fails(MCP, { ...mcp(toolCall()), request: { ...mcp(toolCall()).request, path: '/mcp' } });
    fails(MCP, mcp(toolCall(), { 'x-retrieval-agent': 'kagent/other-agent' }));
    fails(MCP, mcp(toolCall(), { 'x-retrieval-agent': ['kagent/knowledge-agent', 'kagent/knowledge-agent'] }));
    fails(MCP, { ...mcp(''), request: { ...mcp('').request, method: 'PUT' } });
  });
  it('the backend MCP allowlist admits search_knowledge only', () => {
    const ctx = (tool?: string): GatewayContext => ({
      ...mcp(''),
      ...(tool ? { mcp: { tool: { name: tool } } } : { mcp: {} }),
    });
    assert.equal(authorize('Allow', MCP.mcpAllow, ctx('search_knowledge')), true);
    assert.equal(authorize('Allow', MCP.mcpAllow, ctx('search_documents')), false);
    assert.equal(authorize('Allow', MCP.mcpAllow, ctx()), false);
  });
});

describe('agentService backend (A2A 0.3 on the Agent pod)', () => {
  const input = examples();
  (input.platforms[0] as any).spec.a2aBackend = 'agentService';
  const Q = policies(input);
  const L = Q.get('fgentic-a2a-local') as Rendered;
  const U = Q.get('fgentic-a2a-public') as Rendered;
  it('message/send passes; v1 names and continuations fail', () => {
    passes(L, local({ body: send({ kind: 'message' }, {}, 'message/send') }));
    passes(L, local({ body: rpc('tasks/get', { id: 't' }) }));
    fails(L, local({ body: send() }));
    fails(L, local({ body: send({ contextId: '' }, {}, 'message/send') }));
    passes(U, partner({ body: send({}, {}, 'message/send') }));
    fails(U, partner({ body: rpc('tasks/get', { id: 't' }) }));
    fails(U, partner({ body: send({}, { configuration: { blocking: false } }, 'message/send') }));
  });
});
