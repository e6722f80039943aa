/**
 * The MCP surface with the official SDK client (1.32.2) and raw HTTP where the SDK cannot misbehave
 * on purpose: revision pinning, header gate, batches, Origin, identity carrier rules and boundaries,
 * fail-closed errors without content.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import fc from 'fast-check';
import { jcsBytes, MAX_DECODED_BYTES, type MatrixPrincipal } from '../../contract/index.ts';
import {
  AGENT,
  matrixHeader,
  matrixObject,
  meta,
  NOW,
  oauthHeader,
  P,
  seedTestCorpus,
  servingUrl,
  startTestDatabase,
  type TestDatabase,
} from '../../testkit/retrieval.ts';
import { createLocalEmbedder } from '../embeddings/local.ts';
import type { Embedder } from '../embeddings/types.ts';
import { type RetrievalServer, startRetrievalServer } from '../index.ts';

let t: TestDatabase;
let server: RetrievalServer;
let failEmbedding = false;
const local = createLocalEmbedder();
const embedder: Embedder = {
  profile: local.profile,
  embed: async (texts) => {
    if (failEmbedding) throw new Error('model down');
    return local.embed(texts);
  },
};

// The largest valid projections: 16 bridged audience members with 63-byte networks and MXIDs near
// 255 bytes exceed the 6,144-byte decoded limit, so localparts are trimmed one byte at a time until
// the JCS is exactly 6,144 bytes — which encodes to exactly 8,192 base64url characters.
function boundaryHeader(): { header: string; audience: MatrixPrincipal[] } {
  const lengths = Array.from({ length: 16 }, () => 238);
  const build = () =>
    lengths.map((n, i) => ({
      kind: 'bridged_matrix' as const,
      network: `${String.fromCharCode(97 + i)}${'n'.repeat(62)}`,
      principal: `@${String.fromCharCode(97 + i)}${'x'.repeat(n)}:org-a.example`,
    }));
  for (let step = 0; step < 16 * 238; step++) {
    const audience = build();
    const decoded = jcsBytes(matrixObject({ caller: audience[0] as MatrixPrincipal, audience })).length;
    if (decoded === MAX_DECODED_BYTES)
      return { header: matrixHeader({ caller: audience[0] as MatrixPrincipal, audience }), audience };
    if (decoded < MAX_DECODED_BYTES) break;
    lengths[step % 16] = (lengths[step % 16] ?? 0) - 1;
  }
  throw new Error('could not build a boundary projection');
}

before(async () => {
  t = await startTestDatabase();
  const { audience } = boundaryHeader();
  await seedTestCorpus(
    t,
    [
      {
        content: 'alpha release notes for the platform',
        metadata: meta({ source: 'docs/alpha.md', principals: [P.alice] }),
      },
      { content: 'beta secret roadmap', metadata: meta({ source: 'docs/beta.md', principals: [P.bob] }) },
      {
        content: 'partner alpha guide',
        metadata: meta({ source: 'docs/partner.md', groups: ['partner/org-b/docs'] }),
      },
      {
        content: 'alpha boundary document',
        metadata: meta({ source: 'docs/boundary.md', principals: audience }),
      },
    ],
    embedder,
  );
  server = await startRetrievalServer({
    agents: [AGENT],
    embedder,
    databaseUrl: servingUrl(t),
    pool: { max: 3 },
    port: 0,
    now: () => NOW,
  });
});
after(async () => {
  await server?.close();
  await t?.close();
});

/** What the gateway's MCP route adds: the agent it authenticated (retrieval/mcp/caller.ts). */
const CALLER = { 'x-fgentic-agent': `${AGENT.namespace}/${AGENT.name}` };

async function connect(headers: Record<string, string> = {}) {
  const client = new Client({ name: 'test', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), {
    requestInit: { headers: { ...CALLER, ...headers } },
  });
  await client.connect(transport);
  return { client, transport };
}

interface RawResponse {
  status: number;
  body: string;
}

function raw(body: unknown, headers: Record<string, string | string[]> = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const url = new URL(server.mcpUrl);
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST' }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => {
        data += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
    });
    req.on('error', reject);
    req.setHeader('content-type', 'application/json');
    req.setHeader('accept', 'application/json, text/event-stream');
    for (const [k, v] of Object.entries(headers)) req.setHeader(k, v);
    req.end(typeof body === 'string' ? body : JSON.stringify(body));
  });
}

const init = (version: string) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});
const call = (args: unknown = { query: 'alpha' }) => ({
  jsonrpc: '2.0',
  id: 2,
  method: 'tools/call',
  params: { name: 'search_knowledge', arguments: args },
});
const V = { 'mcp-protocol-version': '2025-11-25', ...CALLER };

function toolError(r: RawResponse): { error: string; reason: string } {
  assert.equal(r.status, 200);
  const msg = JSON.parse(r.body);
  assert.equal(msg.result.isError, true);
  assert.equal(msg.result.structuredContent, undefined);
  assert.equal(msg.result.content.length, 1);
  return JSON.parse(msg.result.content[0].text);
}

describe('protocol revision', () => {
  test('the SDK client negotiates exactly 2025-11-25 and discovery needs no projection', async () => {
    const { client, transport } = await connect();
    assert.equal(transport.protocolVersion, '2025-11-25');
    const tools = await client.listTools();
    assert.deepEqual(
      tools.tools.map((x) => x.name),
      ['search_knowledge'],
    );
    const tool = tools.tools[0];
    assert.equal(tool?.inputSchema['$schema'], 'https://json-schema.org/draft/2020-12/schema');
    assert.ok(tool?.outputSchema);
    await client.ping();
    await client.close();
  });
  test('initialize offering any other revision is refused', async () => {
    for (const v of ['2025-06-18', '2025-03-26', '2024-11-05', '2026-01-01', 'garbage']) {
      const r = await raw(init(v));
      assert.equal(r.status, 400, v);
      assert.equal(JSON.parse(r.body).result, undefined);
    }
    const ok = await raw(init('2025-11-25'));
    assert.equal(ok.status, 200);
    assert.equal(JSON.parse(ok.body).result.protocolVersion, '2025-11-25');
  });
  test('missing, different or invalid MCP-Protocol-Version on later requests → 400', async () => {
    const list = { jsonrpc: '2.0', id: 3, method: 'tools/list' };
    assert.equal((await raw(list)).status, 400);
    assert.equal((await raw(list, { 'mcp-protocol-version': '2025-06-18' })).status, 400);
    assert.equal((await raw(list, { 'mcp-protocol-version': 'nonsense' })).status, 400);
    assert.equal((await raw(list, { 'mcp-protocol-version': ['2025-11-25', '2025-11-25'] })).status, 400);
    assert.equal((await raw(call(), { 'x-fgentic-identity': validMatrix() })).status, 400);
    assert.equal((await raw(list, V)).status, 200);
  });
  test('JSON-RPC batches are rejected', async () => {
    const r = await raw([{ jsonrpc: '2.0', id: 1, method: 'tools/list' }], V);
    assert.equal(r.status, 400);
  });
  test('a foreign Origin is refused; loopback and absent are accepted', async () => {
    const list = { jsonrpc: '2.0', id: 3, method: 'tools/list' };
    assert.equal((await raw(list, { ...V, origin: 'https://evil.example' })).status, 403);
    assert.equal((await raw(list, { ...V, origin: 'http://localhost:3000' })).status, 200);
  });
});

const validMatrix = () => matrixHeader({ caller: P.alice, audience: [P.alice] });

describe('the projection is bound to the agent the gateway authenticated', () => {
  const protocol = { 'mcp-protocol-version': '2025-11-25' };
  test('a value minted for this agent, called by another agent, is denied caller_mismatch', async () => {
    const h = validMatrix();
    assert.deepEqual(
      toolError(await raw(call(), { ...protocol, 'x-fgentic-identity': h, 'x-fgentic-agent': 'kagent/other-agent' })),
      {
        error: 'denied',
        reason: 'caller_mismatch',
      },
    );
    const ok = JSON.parse((await raw(call(), { ...V, 'x-fgentic-identity': h })).body);
    assert.notEqual(ok.result.isError, true);
  });
  test('no authenticated caller (absent or repeated x-fgentic-agent) is denied caller_unbound', async () => {
    const h = validMatrix();
    assert.deepEqual(toolError(await raw(call(), { ...protocol, 'x-fgentic-identity': h })), {
      error: 'denied',
      reason: 'caller_unbound',
    });
    const twice = [CALLER['x-fgentic-agent'], CALLER['x-fgentic-agent']];
    assert.deepEqual(toolError(await raw(call(), { ...protocol, 'x-fgentic-identity': h, 'x-fgentic-agent': twice })), {
      error: 'denied',
      reason: 'caller_unbound',
    });
  });
});

describe('tools/call identity', () => {
  test('a valid Matrix projection returns only authorized chunks, structured and as text', async () => {
    const { client } = await connect({ 'x-fgentic-identity': validMatrix() });
    const r = await client.callTool({
      name: 'search_knowledge',
      arguments: { query: 'alpha', max_results: 10 },
    });
    assert.notEqual(r.isError, true);
    const results = (
      r.structuredContent as {
        results: { chunk_id: string; source: { id: string }; classification: string }[];
      }
    ).results;
    assert.deepEqual(
      results.map((x) => x.source.id),
      ['docs/alpha.md'],
    );
    assert.equal(results[0]?.classification, 'public');
    assert.match(results[0]?.chunk_id ?? '', /^sha256:[0-9a-f]{64}$/);
    const text = (r.content as { type: string; text: string }[])[0]?.text ?? '';
    assert.match(text, /alpha release notes/);
    await client.close();
  });
  test('an OAuth projection sees only its group rows; hybrid mode keeps the same predicate', async () => {
    const h = oauthHeader({ policy: 'org-b', groups: ['partner/org-b/docs'] });
    const { client } = await connect({ 'x-fgentic-identity': h });
    for (const mode of ['vector', 'hybrid']) {
      const r = await client.callTool({ name: 'search_knowledge', arguments: { query: 'alpha', mode } });
      const ids = (r.structuredContent as { results: { source: { id: string } }[] }).results.map((x) => x.source.id);
      assert.deepEqual(ids, ['docs/partner.md'], mode);
    }
    await client.close();
  });
  test('hybrid keyword matches on unauthorized rows are never returned', async () => {
    const { client } = await connect({ 'x-fgentic-identity': validMatrix() });
    const r = await client.callTool({
      name: 'search_knowledge',
      arguments: { query: 'beta secret roadmap', mode: 'hybrid', max_results: 20 },
    });
    const ids = (r.structuredContent as { results: { source: { id: string } }[] }).results.map((x) => x.source.id);
    assert.deepEqual(ids, ['docs/alpha.md']);
    await client.close();
  });
  test('concurrent calls with different identities each get their own authorized rows', async () => {
    const alice = validMatrix();
    const bob = matrixHeader({ caller: P.bob, audience: [P.bob] });
    const partner = oauthHeader({ policy: 'org-b', groups: ['partner/org-b/docs'] });
    const expected: [string, string][] = [
      [alice, 'docs/alpha.md'],
      [bob, 'docs/beta.md'],
      [partner, 'docs/partner.md'],
    ];
    const calls = Array.from({ length: 12 }, (_, i) => expected[i % 3] as [string, string]);
    const results = await Promise.all(
      calls.map(([h]) => raw(call({ query: 'alpha beta', max_results: 20 }), { ...V, 'x-fgentic-identity': h })),
    );
    results.forEach((r, i) => {
      const msg = JSON.parse(r.body);
      assert.deepEqual(
        msg.result.structuredContent.results.map((x: { source: { id: string } }) => x.source.id),
        [calls[i]?.[1]],
      );
    });
  });
  test('missing projection → error without content, counted as a lost carrier', async () => {
    const before = (await server.metrics.missingCarrier.get()).values[0]?.value ?? 0;
    const { client } = await connect();
    const r = await client.callTool({ name: 'search_knowledge', arguments: { query: 'alpha' } });
    assert.equal(r.isError, true);
    assert.deepEqual(JSON.parse((r.content as { text: string }[])[0]?.text ?? ''), {
      error: 'denied',
      reason: 'missing',
    });
    const afterCount = (await server.metrics.missingCarrier.get()).values[0]?.value ?? 0;
    assert.equal(afterCount, before + 1);
    await client.close();
  });
  test('duplicate projection headers → denied', async () => {
    const h = validMatrix();
    assert.deepEqual(toolError(await raw(call(), { ...V, 'x-fgentic-identity': [h, h] })), {
      error: 'denied',
      reason: 'duplicate',
    });
  });
  test('expired, future, foreign-agent projections → denied', async () => {
    const cases: [string, string][] = [
      [matrixHeader({ caller: P.alice, audience: [P.alice], iat: NOW - 600, exp: NOW }), 'expired'],
      [matrixHeader({ caller: P.alice, audience: [P.alice], iat: NOW + 31, exp: NOW + 600 }), 'not_yet_valid'],
      [
        matrixHeader({
          caller: P.alice,
          audience: [P.alice],
          agent: { namespace: 'kagent', name: 'other-agent' },
        }),
        'agent_mismatch',
      ],
      ['not-base64!', 'encoding'],
    ];
    for (const [h, reason] of cases) {
      assert.deepEqual(toolError(await raw(call(), { ...V, 'x-fgentic-identity': h })), {
        error: 'denied',
        reason,
      });
    }
  });
  test('an 8,192-byte valid projection is accepted; 8,193 bytes is refused', async () => {
    const { header } = boundaryHeader();
    assert.equal(header.length, 8192);
    assert.equal(Buffer.from(header, 'base64url').length, MAX_DECODED_BYTES);
    const ok = await raw(call({ query: 'alpha', max_results: 20 }), { ...V, 'x-fgentic-identity': header });
    const msg = JSON.parse(ok.body);
    assert.notEqual(msg.result.isError, true);
    assert.deepEqual(
      msg.result.structuredContent.results.map((x: { source: { id: string } }) => x.source.id),
      ['docs/boundary.md'],
    );
    assert.deepEqual(toolError(await raw(call(), { ...V, 'x-fgentic-identity': `${header}A` })), {
      error: 'denied',
      reason: 'oversized',
    });
  });
  test('invalid arguments → a tool error naming the argument and the rule, never the value', async () => {
    const h = validMatrix();
    for (const [args, argument, rule] of [
      [{ query: '' }, 'query', 'must contain a non-whitespace character'],
      [{ query: 'a', max_results: 21 }, 'max_results', 'must be an integer from 1 to 20'],
      [{ query: 'a', mode: 'sql' }, 'mode', 'must be "vector" or "hybrid"'],
      [{ q: 'a' }, 'arguments', 'only query, max_results and mode are accepted'],
    ] as const) {
      const r = await raw(call(args), { ...V, 'x-fgentic-identity': h });
      assert.deepEqual(toolError(r), {
        error: 'invalid_arguments',
        reason: 'invalid_arguments',
        argument,
        rule,
      });
    }
  });
  test('U+0000 in the query is refused as an invalid argument in both modes, never a database outage', async () => {
    const h = validMatrix();
    for (const mode of ['vector', 'hybrid']) {
      const r = await raw(call({ query: 'alpha\u0000notes', mode }), { ...V, 'x-fgentic-identity': h });
      assert.deepEqual(toolError(r), {
        error: 'invalid_arguments',
        reason: 'invalid_arguments',
        argument: 'query',
        rule: 'must not contain U+0000 (NUL)',
      });
      assert.doesNotMatch(r.body, /alpha|notes/);
    }
  });
  test('property: any string query in either mode is served or refused as invalid, never database_unavailable', async () => {
    const h = validMatrix();
    // Arbitrary code points plus a dense mix of what websearch_to_tsquery parses specially.
    const special = fc.constantFrom(
      '\u0000',
      '!',
      '&',
      '|',
      ':',
      '*',
      '(',
      ')',
      '"',
      "'",
      '-',
      '\\',
      ' ',
      'or',
      'a',
      '\ud800',
      '\u00e9',
    );
    const query = fc.oneof(
      fc.string({ unit: 'binary', minLength: 1, maxLength: 64 }),
      fc.string({ unit: special, minLength: 1, maxLength: 40 }),
    );
    await fc.assert(
      fc.asyncProperty(query, fc.constantFrom('vector', 'hybrid'), async (q, mode) => {
        const r = await raw(call({ query: q, mode }), { ...V, 'x-fgentic-identity': h });
        assert.equal(r.status, 200);
        const msg = JSON.parse(r.body);
        if (msg.result.isError !== true) return;
        const e = JSON.parse(msg.result.content[0].text);
        assert.equal(e.error, 'invalid_arguments', `${mode}: ${e.reason}`);
      }),
      { numRuns: 150 },
    );
  });
  test('an unknown tool is a JSON-RPC -32602 error that does not echo the name', async () => {
    const r = await raw(
      { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'drop_tables', arguments: {} } },
      { ...V, 'x-fgentic-identity': validMatrix() },
    );
    assert.equal(r.status, 200);
    const msg = JSON.parse(r.body);
    assert.equal(msg.id, 3);
    assert.equal(msg.result, undefined);
    assert.equal(msg.error.code, -32602);
    assert.doesNotMatch(r.body, /drop_tables/);
    // The SDK client surfaces it as a protocol error, not a tool result.
    const { client } = await connect({ 'x-fgentic-identity': validMatrix() });
    await assert.rejects(client.callTool({ name: 'drop_tables', arguments: {} }), /-32602/);
    await client.close();
  });
});

describe('fail closed', () => {
  test('embedding failure → unavailable, no content', async () => {
    failEmbedding = true;
    try {
      assert.deepEqual(toolError(await raw(call(), { ...V, 'x-fgentic-identity': validMatrix() })), {
        error: 'unavailable',
        reason: 'embedding_unavailable',
      });
    } finally {
      failEmbedding = false;
    }
  });
  test('any SQL error → unavailable, no content, no fallback', async () => {
    await t.pool.query('ALTER TABLE knowledge.chunks RENAME TO chunks_gone');
    try {
      assert.deepEqual(toolError(await raw(call(), { ...V, 'x-fgentic-identity': validMatrix() })), {
        error: 'unavailable',
        reason: 'database_unavailable',
      });
    } finally {
      await t.pool.query('ALTER TABLE knowledge.chunks_gone RENAME TO chunks');
    }
  });
  test('embedding profile mismatch → /readyz 503 and tool calls refused', async () => {
    const other = await startRetrievalServer({
      agents: [AGENT],
      embedder: { profile: 'bge-m3-1024-v1', embed: async (x) => local.embed(x) },
      databaseUrl: t.db.url,
      pool: { max: 2 },
      port: 0,
      now: () => NOW,
    });
    try {
      assert.equal(other.profileOk, false);
      assert.equal((await fetch(`${other.url}/readyz`)).status, 503);
      assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
      const r = await fetch(other.mcpUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...V,
          'x-fgentic-identity': validMatrix(),
        },
        body: JSON.stringify(call()),
      });
      const msg = (await r.json()) as { result: { content: { text: string }[] } };
      assert.deepEqual(JSON.parse(msg.result.content[0]?.text ?? ''), {
        error: 'unavailable',
        reason: 'profile_mismatch',
      });
    } finally {
      await other.close();
    }
  });
  test('/healthz and /metrics answer; metrics carry reason codes only', async () => {
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    const text = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(text, /fgentic_retrieval_denials_total\{reason="missing"\}/);
    assert.match(text, /fgentic_retrieval_tool_calls_without_carrier_total/);
    assert.doesNotMatch(text, /alpha|@alice/);
  });
});
