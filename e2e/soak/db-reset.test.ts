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
import { demoRecords } from '../../local/demo-corpus.ts';
import { ALICE } from '../../local/helpers.ts';
import { type EmbeddedDatabase, startEmbeddedDatabase } from '../../retrieval/db/embedded.ts';
import { LOCAL_PROFILE } from '../../retrieval/embeddings/local.ts';
import { startRetrievalServer } from '../../retrieval/index.ts';
import { assertNoLiveIo, waitFor, within } from '../../testkit/common/index.ts';
import { AGENT, matrixHeader } from '../../testkit/retrieval.ts';
import { ChildServer, freePort } from './child-server.ts';
import { prepareDatabase } from './database.ts';
import { FaultProxy } from './fault-proxy.ts';

let db: EmbeddedDatabase | undefined;
let proxy: FaultProxy | undefined;
let dir: string | undefined;
let server: ChildServer | undefined;
/** Bound on each teardown step; a loaded machine closes PGlite in seconds, never in minutes. */
const TEARDOWN_STEP_MS = 60_000;
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
// Every step runs whatever happened before it (a failed start included) and none waits for ever: the
// child, the proxy's sockets and the database's sockets are what could otherwise keep this file alive.
after(async () => {
  const steps: [string, () => Promise<unknown> | undefined][] = [
    ['the retrieval child', () => server?.kill()],
    ['the fault proxy', () => proxy?.down()],
    ['the embedded database', () => db?.close()],
  ];
  const failures: string[] = [];
  for (const [what, step] of steps) {
    try {
      await within(what, Promise.resolve().then(step), TEARDOWN_STEP_MS);
    } catch (err) {
      failures.push(err instanceof Error ? err.message : String(err));
    }
  }
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  assert.deepEqual(failures, []);
  await assertNoLiveIo();
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
        'x-fgentic-agent': `${AGENT.namespace}/${AGENT.name}`,
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
  assert.ok(dir && proxy, 'setup did not finish');
  const faults = proxy;
  const config = join(dir, 'retrieval.json');
  writeFileSync(config, JSON.stringify({ version: 1, agents: [AGENT], embeddings: { profile: LOCAL_PROFILE } }));
  server = new ChildServer(
    'retrieval',
    await freePort(),
    (p) => ['serve', 'retrieval', '--config', config, '--port', String(p), '--host', '127.0.0.1', '--no-migrate'],
    { DATABASE_URL: `postgres://postgres@${faults.url}/postgres?sslmode=disable` },
  );
  const child = server;
  try {
    assert.ok(await child.start(), `retrieval never became ready: ${child.startFailure}`);
    assert.equal(await search(child.url), 'ok');
    const outcomes = new Set<string>();
    for (let round = 0; round < 5; round++) {
      const inflight = Array.from({ length: 8 }, (_, i) =>
        new Promise((r) => setTimeout(r, i * 7)).then(() => search(child.url)),
      );
      await new Promise((r) => setTimeout(r, 20 + round * 5));
      await faults.down();
      for (const o of await Promise.all(inflight)) outcomes.add(o);
      await faults.up();
      assert.equal(child.exits.length, 0, `the retrieval process exited (${child.exits.join(',')})`);
    }
    // Every failure was reported as what it was; nothing was cut at the HTTP level.
    for (const o of outcomes) assert.ok(o === 'ok' || o === 'database_unavailable', `unexpected outcome ${o}`);
    await waitFor(
      'a search to succeed again after the database came back',
      async () => (await search(child.url)) === 'ok',
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    assert.equal(child.exits.length, 0);
  } finally {
    await child.kill();
  }
});
