/**
 * A database connection reset mid-transaction must fail the search in flight, never the process:
 * the retrieval server runs as a child process behind a fault proxy that resets every connection
 * while hybrid searches (several statements per transaction) are in flight; the process must still
 * be running afterwards and serve again once the database is reachable.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type EmbeddedDatabase, startEmbeddedDatabase } from '../../retrieval/db/embedded.ts';
import { LOCAL_PROFILE } from '../../retrieval/embeddings/local.ts';
import { startRetrievalServer } from '../../retrieval/index.ts';
import { AGENT, matrixHeader } from '../../retrieval/testing.ts';
import { demoRecords } from '../demo-corpus.ts';
import { ALICE } from '../helpers.ts';
import { ChildServer, freePort } from './child-server.ts';
import { prepareDatabase } from './database.ts';
import { FaultProxy } from './fault-proxy.ts';

let db: EmbeddedDatabase;
let proxy: FaultProxy;
let dir: string;
before(async () => {
  db = await startEmbeddedDatabase({ maxConnections: 24 });
  await prepareDatabase(db.url);
  const seeder = await startRetrievalServer({
    agents: [AGENT],
    databaseUrl: db.url,
    pool: { max: 2 },
    port: 0,
  });
  await seeder.seed(demoRecords());
  await seeder.close();
  proxy = new FaultProxy('127.0.0.1', Number(new URL(db.url).port));
  await proxy.up();
  dir = mkdtempSync(join(tmpdir(), 'fgentic-db-reset-'));
});
after(async () => {
  await proxy?.down();
  await db?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function search(url: string): Promise<string> {
  const header = matrixHeader({ caller: ALICE, audience: [ALICE], iat: Math.floor(Date.now() / 1000) - 1 });
  try {
    const r = await fetch(`${url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
        'x-fgentic-identity': header,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'search_knowledge', arguments: { query: 'travel policy', mode: 'hybrid' } },
      }),
      signal: AbortSignal.timeout(20_000),
    });
    const text = await r.text();
    if (r.status !== 200) return `http ${r.status}`;
    return text.includes('"isError":true') ? (/\\"reason\\":\\"(\w+)/.exec(text)?.[1] ?? 'error') : 'ok';
  } catch {
    return 'no connection';
  }
}

test('connection resets during transactions fail the searches, not the retrieval process', {
  timeout: 300_000,
}, async () => {
  const config = join(dir, 'retrieval.json');
  writeFileSync(
    config,
    JSON.stringify({ version: 1, agents: [AGENT], embeddings: { profile: LOCAL_PROFILE } }),
  );
  const server = new ChildServer(
    'retrieval',
    await freePort(),
    (p) => [
      'serve',
      'retrieval',
      '--config',
      config,
      '--port',
      String(p),
      '--host',
      '127.0.0.1',
      '--no-migrate',
    ],
    { DATABASE_URL: `postgres://postgres@${proxy.url}/postgres?sslmode=disable` },
  );
  assert.ok(await server.start(), 'retrieval never became ready');
  try {
    assert.equal(await search(server.url), 'ok');
    const outcomes = new Set<string>();
    for (let round = 0; round < 5; round++) {
      const inflight = Array.from({ length: 8 }, (_, i) =>
        new Promise((r) => setTimeout(r, i * 7)).then(() => search(server.url)),
      );
      await new Promise((r) => setTimeout(r, 20 + round * 5));
      await proxy.down();
      for (const o of await Promise.all(inflight)) outcomes.add(o);
      await proxy.up();
      assert.equal(server.exits.length, 0, `the retrieval process exited (${server.exits.join(',')})`);
    }
    // Every failure was reported as what it was; nothing was cut at the HTTP level.
    for (const o of outcomes)
      assert.ok(o === 'ok' || o === 'database_unavailable', `unexpected outcome ${o}`);
    let back = '';
    for (let i = 0; i < 50 && back !== 'ok'; i++) {
      back = await search(server.url);
      if (back !== 'ok') await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(back, 'ok', 'did not serve again after the database came back');
    assert.equal(server.exits.length, 0);
  } finally {
    await server.kill();
  }
});
