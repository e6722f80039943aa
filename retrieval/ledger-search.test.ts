/**
 * The retrieval server in ledger mode (docs/ledger.md): the ledger check runs in the search's own
 * read-only transaction; a value nobody recorded is denied `unminted`; the ledger failing at search
 * time denies as a database fault and turns readiness off; a purge racing calls never lets a call
 * through without a live entry and never turns into a fault.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import {
  AGENT,
  matrixHeader,
  meta,
  NOW,
  P,
  seedTestCorpus,
  servingUrl,
  startTestDatabase,
  type TestDatabase,
} from '../testkit/retrieval.ts';
import { asRole, PROJECTOR_ROLE, RETRIEVAL_ROLE } from './db/roles.ts';
import { type RetrievalServer, startRetrievalServer } from './index.ts';
import { capabilityDigest, PURGE_SQL, RECORD_SQL } from './ledger.ts';

let t: TestDatabase;
let server: RetrievalServer;
const AGENT_KEY = `${AGENT.namespace}/${AGENT.name}`;

before(async () => {
  t = await startTestDatabase();
  await seedTestCorpus(t, [
    { content: 'alpha handbook for alice', metadata: meta({ source: 'docs/a.md', principals: [P.alice] }) },
    { content: 'alpha notes for alice', metadata: meta({ source: 'docs/b.md', principals: [P.alice] }) },
  ]);
  server = await startRetrievalServer({
    agents: [AGENT],
    databaseUrl: servingUrl(t),
    pool: { max: 3 },
    port: 0,
    now: () => NOW,
    capability: 'ledger',
  });
});
after(async () => {
  await server?.close();
  await t?.close();
});

let serial = 0;
/** A fresh, schema-valid value (distinct iat per call, so each digest is new). */
const value = () => matrixHeader({ caller: P.alice, audience: [P.alice], iat: NOW - 1 - (serial++ % 500) });
const record = (v: string) =>
  asRole(t.pool, PROJECTOR_ROLE).query(RECORD_SQL, [capabilityDigest(v), AGENT_KEY, NOW + 600]);

function post(body: unknown, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(server.mcpUrl);
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST' }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (data += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
    });
    req.on('error', reject);
    req.setHeader('content-type', 'application/json');
    req.setHeader('accept', 'application/json, text/event-stream');
    req.setHeader('mcp-protocol-version', '2025-11-25');
    for (const [k, v] of Object.entries(headers)) req.setHeader(k, v);
    req.end(JSON.stringify(body));
  });
}

/** One tools/call; the outcome as `ok:<n results>` or `<error>:<reason>`. */
async function search(carrier: string): Promise<string> {
  const r = await post(
    {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'search_knowledge', arguments: { query: 'alpha' } },
    },
    // The agent the gateway's MCP route authenticated (retrieval/mcp/caller.ts).
    { 'x-fgentic-identity': carrier, 'x-fgentic-agent': 'kagent/knowledge-agent' },
  );
  assert.equal(r.status, 200);
  const result = JSON.parse(r.body).result;
  if (result.isError) {
    const e = JSON.parse(result.content[0].text);
    assert.doesNotMatch(r.body, /handbook|notes/, 'a refusal carries no content');
    return `${e.error}:${e.reason}`;
  }
  return `ok:${result.structuredContent.results.length}`;
}

async function readyz(): Promise<number> {
  return (await fetch(`${server.url}/readyz`)).status;
}

describe('ledger mode at search', () => {
  test('a value nobody recorded is denied unminted; once recorded it is served, repeatedly', async () => {
    const v = value();
    assert.equal(await search(v), 'denied:unminted');
    await record(v);
    assert.equal(await search(v), 'ok:2');
    assert.equal(await search(v), 'ok:2');
    assert.equal(await readyz(), 200);
  });

  test('ledger down at search (check not executable): denied as a database fault, not ready', async () => {
    const v = value();
    await record(v);
    await t.pool.query(
      'REVOKE EXECUTE ON FUNCTION fgentic_ledger.check_v1(bytea, text, bigint) FROM fgentic_retrieval',
    );
    try {
      assert.equal(await search(v), 'unavailable:database_unavailable');
      assert.equal(await readyz(), 503);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(metrics, /fgentic_retrieval_ready 0/);
    } finally {
      await t.pool.query('GRANT EXECUTE ON FUNCTION fgentic_ledger.check_v1(bytea, text, bigint) TO fgentic_retrieval');
    }
    assert.equal(await readyz(), 200);
    assert.equal(await search(v), 'ok:2');
  });

  test('ledger down at search (schema gone): denied as a database fault, not ready', async () => {
    const v = value();
    await record(v);
    await t.pool.query('ALTER SCHEMA fgentic_ledger RENAME TO fgentic_ledger_away');
    try {
      assert.equal(await search(v), 'unavailable:database_unavailable');
      assert.equal(await readyz(), 503);
    } finally {
      await t.pool.query('ALTER SCHEMA fgentic_ledger_away RENAME TO fgentic_ledger');
    }
    assert.equal(await search(v), 'ok:2');
  });

  test('ledger table gone (function and grant still there): every search fails, so not ready', async () => {
    const v = value();
    await record(v);
    await t.pool.query('ALTER TABLE fgentic_ledger.capabilities RENAME TO capabilities_away');
    try {
      assert.equal(await search(v), 'unavailable:database_unavailable');
      assert.equal(await readyz(), 503);
    } finally {
      await t.pool.query('ALTER TABLE fgentic_ledger.capabilities_away RENAME TO capabilities');
    }
    assert.equal(await readyz(), 200);
    assert.equal(await search(v), 'ok:2');
  });

  test('a search function no longer executable by the serving role: not ready', async () => {
    const fn = 'fgentic.search_matrix_v1(public.vector, text[], jsonb, integer, text, text, integer, integer, integer)';
    await t.pool.query(`REVOKE EXECUTE ON FUNCTION ${fn} FROM ${RETRIEVAL_ROLE}`);
    try {
      assert.equal(await readyz(), 503);
    } finally {
      await t.pool.query(`GRANT EXECUTE ON FUNCTION ${fn} TO ${RETRIEVAL_ROLE}`);
    }
    assert.equal(await readyz(), 200);
  });

  test('a purge racing calls: each call is served or denied unminted, never a fault; after it, denied', async () => {
    // The fixtures' clock lies in the database's past, so the purge deletes these entries while the
    // server's clock still sees them as live: only the ledger decides.
    const values = Array.from({ length: 6 }, value);
    for (const v of values) await record(v);
    const calls = values.flatMap((v) => [search(v), search(v)]);
    const purge = asRole(t.pool, PROJECTOR_ROLE).query(PURGE_SQL);
    const outcomes = await Promise.all(calls);
    assert.ok(Number((await purge).rows[0].purged) >= values.length);
    for (const o of outcomes) assert.ok(o === 'ok:2' || o === 'denied:unminted', o);
    for (const v of values) assert.equal(await search(v), 'denied:unminted');
  });
});
