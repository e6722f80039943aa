/**
 * The MCP hop end to end: the official MCP SDK client (playing kagent's MCP toolset) through the
 * gateway double's rendered MCP route (Agent API key, one carrier on tools/call, one-tool allowlist)
 * to the real retrieval server; and the 8,192-byte carrier through both gateway hops.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { parseAllDocuments, stringify } from 'yaml';
import { encodeCarrier, encodeProjection, type MatrixPrincipal, type Projection } from '../contract/index.ts';
import { bridgeSend } from '../local/doubles/bridge.ts';
import { ALICE, GENERAL_ROOM, roomSnapshot } from '../local/helpers.ts';
import { EXAMPLES_DIR, type LocalStack, startLocalStack } from '../local/stack.ts';

// The largest projections need the widest identifiers the contract allows: a bridged network of 63
// bytes and a registered room ID of 255 bytes. They are added to a copy of examples/ and go through
// render like any operator change.
const WIDE_NETWORK = `w${'x'.repeat(61)}w`;
const WIDE_ROOM = `!${'r'.repeat(240)}:org-a.example`;
let stack: LocalStack;
let examples: string;
const T0 = Math.floor(Date.now() / 1000);
before(async () => {
  examples = mkdtempSync(join(tmpdir(), 'fgentic-examples-'));
  cpSync(EXAMPLES_DIR, examples, { recursive: true });
  const platformFile = join(examples, 'platform.yaml');
  const platform = parseAllDocuments(readFileSync(platformFile, 'utf8'))[0]!.toJS();
  platform.spec.bridge.bridgedOrigins.push({
    network: WIDE_NETWORK,
    userIdRegex: '^@wide-[a-z0-9]+:org-a\\.example$',
  });
  writeFileSync(platformFile, stringify(platform));
  writeFileSync(
    join(examples, 'wide-room.yaml'),
    stringify({
      apiVersion: 'retrieval.fgentic.dev/v1alpha1',
      kind: 'RetrievalRoom',
      metadata: { name: 'wide-room' },
      spec: { roomId: WIDE_ROOM, allowedClassifications: ['public'] },
    }),
  );
  stack = await startLocalStack({ now: () => T0, examplesDir: examples });
});
after(async () => {
  await stack?.close();
  rmSync(examples, { recursive: true, force: true });
});

function projection(overrides: Partial<Record<string, unknown>> = {}): Projection {
  return {
    agent: { name: 'knowledge-agent', namespace: 'kagent' },
    allowed_classifications: ['public'],
    audience: [ALICE],
    delegation_id: 'cd'.repeat(32),
    exp: T0 + 600,
    groups: [],
    iat: T0,
    kind: 'matrix',
    principal: ALICE.principal,
    room: {
      event_id: '$event',
      history_visibility: 'joined',
      id: GENERAL_ROOM,
      join_rule: 'invite',
      state_sha256: 'ef'.repeat(32),
    },
    v: 1,
    ...overrides,
  } as unknown as Projection;
}

function carrier(overrides: Partial<Record<string, unknown>> = {}): string {
  const enc = encodeProjection(projection(overrides));
  assert.ok(enc.ok);
  return enc.value;
}

function agentHeaders(extra: Record<string, string> = {}, on: LocalStack = stack): Record<string, string> {
  return {
    authorization: `Bearer ${on.agentMcpKey}`,
    'x-retrieval-agent': 'kagent/knowledge-agent',
    ...extra,
  };
}

async function mcp(headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'kagent-toolset', version: '0.9.11' });
  await client.connect(new StreamableHTTPClientTransport(new URL(stack.mcpRouteUrl), { requestInit: { headers } }));
  return client;
}

async function rpc(
  headers: Record<string, string>,
  body: unknown,
  version: string | null = '2025-11-25',
  on: LocalStack = stack,
) {
  const res = await fetch(on.mcpRouteUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(version ? { 'mcp-protocol-version': version } : {}),
      ...headers,
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

describe('MCP route: negotiation and version header', () => {
  test('the SDK client negotiates exactly 2025-11-25 through the gateway', async () => {
    const r = await rpc(
      agentHeaders(),
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      },
      null,
    );
    assert.equal(r.status, 200);
    assert.match(r.text, /"protocolVersion":"2025-11-25"/);
    const client = await mcp(agentHeaders());
    const tools = await client.listTools();
    assert.deepEqual(
      tools.tools.map((t) => t.name),
      ['search_knowledge'],
    );
    await client.close();
  });

  test('initialize offering an older revision never negotiates it', async () => {
    const r = await rpc(
      agentHeaders(),
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
      },
      null,
    );
    assert.doesNotMatch(r.text, /"protocolVersion":"2025-06-18"/);
  });

  for (const [name, version] of [
    ['missing', null],
    ['older', '2025-06-18'],
    ['invalid', 'banana'],
  ] as const) {
    test(`${name} MCP-Protocol-Version on a later request is 400`, async () => {
      const r = await rpc(agentHeaders(), { jsonrpc: '2.0', id: 2, method: 'tools/list' }, version);
      assert.equal(r.status, 400);
    });
  }
});

describe('MCP route: carrier and tool', () => {
  test('one valid carrier returns content', async () => {
    const client = await mcp(agentHeaders({ 'x-fgentic-identity': carrier() }));
    const r = await client.callTool({
      name: 'search_knowledge',
      arguments: { query: 'handbook', max_results: 5 },
    });
    assert.notEqual(r.isError, true);
    assert.ok(((r.structuredContent as { results: unknown[] }).results ?? []).length > 0);
    await client.close();
  });

  test('tools/call without a carrier is refused at the gateway, no content', async () => {
    const r = await rpc(agentHeaders(), {
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { name: 'search_knowledge', arguments: { query: 'x' } },
    });
    assert.equal(r.status, 403);
    assert.doesNotMatch(r.text, /Onboarding|Travel/);
  });

  test('expired and foreign-agent carriers return a content-free error', async () => {
    for (const [c, reason] of [
      [carrier({ iat: T0 - 700, exp: T0 - 100 }), 'expired'],
      [carrier({ agent: { name: 'other-agent', namespace: 'kagent' } }), 'agent_mismatch'],
    ] as const) {
      const client = await mcp(agentHeaders({ 'x-fgentic-identity': c }));
      const r = await client.callTool({ name: 'search_knowledge', arguments: { query: 'handbook' } });
      assert.equal(r.isError, true);
      assert.match(JSON.stringify(r.content), new RegExp(reason));
      assert.doesNotMatch(JSON.stringify(r), /Onboarding/);
      await client.close();
    }
  });

  test('a tool outside the allowlist is unknown at the gateway', async () => {
    const r = await rpc(agentHeaders({ 'x-fgentic-identity': carrier() }), {
      jsonrpc: '2.0',
      id: 4,
      method: 'tools/call',
      params: { name: 'drop_tables', arguments: {} },
    });
    assert.equal(r.status, 403);
  });

  test('wrong key (the bridge key) on the MCP route is 401', async () => {
    const r = await rpc(
      { ...agentHeaders(), authorization: `Bearer ${stack.bridgeApiKey}` },
      { jsonrpc: '2.0', id: 5, method: 'tools/list' },
    );
    assert.equal(r.status, 401);
  });

  test('JSON-RPC batches are rejected', async () => {
    const r = await rpc(agentHeaders({ 'x-fgentic-identity': carrier() }), [
      { jsonrpc: '2.0', id: 6, method: 'tools/list' },
    ]);
    assert.ok(r.status >= 400);
  });
});

describe('header boundary: 8,192 bytes through both hops, 8,193 rejected by the application', () => {
  const server = ':org-a.example';
  const EVENT = `$${'e'.repeat(254)}`;
  function readers(localLength: number, lastLocalLength: number): MatrixPrincipal[] {
    const out: MatrixPrincipal[] = [ALICE];
    for (let k = 0; k < 15; k++) {
      const len = k === 14 ? lastLocalLength : localLength;
      const principal = `@wide-${String(k).padStart(2, '0')}${'x'.repeat(len - 8)}${server}`;
      out.push({ kind: 'bridged_matrix', network: WIDE_NETWORK, principal });
    }
    return out;
  }
  /** Length of the projection the projector mints for this room: same fields, same clock, same widths. */
  function projectedLength(rs: MatrixPrincipal[]): number {
    const key = (p: MatrixPrincipal) => `${p.kind}\u0000${'network' in p ? p.network : ''}\u0000${p.principal}`;
    const audience = [...rs].sort((x, y) => Buffer.compare(Buffer.from(key(x)), Buffer.from(key(y))));
    const room = {
      event_id: EVENT,
      history_visibility: 'joined',
      id: WIDE_ROOM,
      join_rule: 'invite',
      state_sha256: 'ef'.repeat(32),
    };
    return encodeCarrier(projection({ audience, room })).length;
  }

  test('an 8,192-byte projection passes the A2A hop, kagent and the MCP hop and is accepted', async () => {
    // Pick the widest uniform readers that stay at or above the limit, then trim the last reader
    // until the projection is exactly 8,192 characters (6,144 decoded bytes).
    let base = 240;
    while (base > 9 && projectedLength(readers(base - 1, base - 1)) >= 8192) base--;
    let last = base;
    while (last > 9 && projectedLength(readers(base, last)) > 8192) last--;
    const wide = readers(base, last);
    assert.equal(projectedLength(wide), 8192, 'fixture arithmetic');
    const calls = stack.runtime.toolCalls.length;
    await bridgeSend({
      routeUrl: stack.localRouteUrl,
      card: stack.card,
      apiKey: stack.bridgeApiKey,
      snapshot: roomSnapshot(WIDE_ROOM, wide),
      caller: ALICE,
      text: 'handbook',
      eventId: EVENT,
    });
    const call = stack.runtime.toolCalls[calls];
    assert.ok(call, `the delegation reached the agent ${JSON.stringify(stack.gateway.events.slice(-4))}`);
    assert.equal(call.sentHeaders['x-fgentic-identity']?.length, 8192);
    assert.equal(call.ok, true, 'retrieval accepted the 8,192-byte carrier');
  });

  test('an 8,193-byte carrier crosses the MCP gateway hop and is rejected by the retrieval server', async () => {
    const oversized = `${carrier()}${'A'.repeat(8193 - carrier().length)}`;
    assert.equal(oversized.length, 8193);
    const client = await mcp(agentHeaders({ 'x-fgentic-identity': oversized }));
    const r = await client.callTool({ name: 'search_knowledge', arguments: { query: 'handbook' } });
    assert.equal(r.isError, true);
    assert.match(JSON.stringify(r.content), /oversized/);
    await client.close();
  });
});

describe('MCP route: per-agent rate limit', () => {
  // A stack of its own with a small rendered limit and the gateway's rate-limit clock held, so the
  // bucket (full at load, refilled per whole minute: docs/upstream.md#agentgateway-timeouts-rate-limits)
  // is counted exactly, whatever the machine's load.
  const RPM = 5;
  let limited: LocalStack;
  let dir: string;
  let clock = 1_000_000;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fgentic-examples-rpm-'));
    cpSync(EXAMPLES_DIR, dir, { recursive: true });
    const agentFile = join(dir, 'agent.yaml');
    const agent = parseAllDocuments(readFileSync(agentFile, 'utf8'))[0]!.toJS();
    agent.spec.rateLimit = { requestsPerMinute: RPM };
    writeFileSync(agentFile, stringify(agent));
    limited = await startLocalStack({
      now: () => T0,
      examplesDir: dir,
      seed: false,
      gatewayNow: () => clock,
    });
  });
  after(async () => {
    await limited?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** `n` concurrent tools/list requests; their statuses. */
  const burst = async (n: number) =>
    (
      await Promise.all(
        Array.from({ length: n }, (_, k) =>
          rpc(agentHeaders({}, limited), { jsonrpc: '2.0', id: k, method: 'tools/list' }, '2025-11-25', limited),
        ),
      )
    ).map((r) => r.status);
  const refusals = () => limited.gateway.events.filter((e) => e.phase === 'rateLimit' && e.status === 429).length;

  test('a burst past the rendered requestsPerMinute: exactly the excess is answered 429 by the gateway', async () => {
    const statuses = await burst(RPM + 3);
    assert.equal(statuses.filter((s) => s !== 429).length, RPM, statuses.join(','));
    assert.equal(statuses.filter((s) => s === 429).length, 3);
    assert.equal(refusals(), 3, 'the 429s come from the gateway rate limit');
  });

  test('the bucket refills only per whole minute, up to the limit', async () => {
    clock += 59_999;
    assert.equal((await burst(1))[0], 429, 'refilled before the minute was over');
    clock += 1;
    const statuses = await burst(RPM + 1);
    assert.equal(statuses.filter((s) => s !== 429).length, RPM, statuses.join(','));
    assert.equal(refusals(), 3 + 1 + 1);
  });
});
