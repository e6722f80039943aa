/**
 * Searches past one database server, on real PostgreSQL: a streaming replica made with
 * `pg_basebackup -R` from the test cluster, and PgBouncer 1.18 in transaction mode in front of the
 * primary, both started here on free loopback ports and removed in `after`, whatever the outcome.
 *
 * - The ACL differential (the model of testkit/acl-model.ts) through the replica and through
 *   PgBouncer: the same answers as the primary, and the model's.
 * - PgBouncer: the serving pool's role, read-only mode and statement timeout hold in every
 *   transaction without any startup parameter; a write is refused.
 * - The revocation bound: with replay paused on the replica, a reader's right revoked on the primary
 *   is never served later than maxReplicaLag after its commit, and searches leave the replica. This
 *   test fails if the lag check is removed (the paused replica would keep serving the revoked row).
 * - The binary started from the retrieval.json the RetrievalPlatform renders, credential-free URLs
 *   and the login from PGUSER/PGPASSWORD: it proves the replica fresh.
 * - The replica killed mid-run: every search still answers, from the primary.
 *
 * PostgreSQL only: PGlite has no replication and no pooler.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import fc from 'fast-check';
import type pg from 'pg';
import { Registry } from 'prom-client';
import type { ChunkMetadata, Classification, Projection } from '../contract/index.ts';
import { render } from '../controller/render/index.ts';
import { RETRIEVAL_CONFIGMAP } from '../controller/render/server-config.ts';
import type { K8sObject } from '../controller/types.ts';
import { matrixArb, metadataArb, oauthArb, projectionFrom, referenceAllows } from '../testkit/acl-model.ts';
import { waitFor } from '../testkit/common/index.ts';
import { type Cluster, type PgBouncer, startPgBouncer, startReplica } from '../testkit/common/postgres.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import {
  AGENT,
  cosineDistance,
  decodeFixture,
  ENGINE,
  matrixHeader,
  meta,
  NOW,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from '../testkit/retrieval.ts';
import { createPool } from './db/pool.ts';
import { asRole, PROJECTOR_ROLE, RETRIEVAL_ROLE } from './db/roles.ts';
import { createLocalEmbedder, LOCAL_PROFILE } from './embeddings/local.ts';
import { ensureProfile } from './embeddings/profile.ts';
import { type RetrievalServer, startRetrievalServer } from './index.ts';
import { writeChunks } from './ingest/store.ts';
import { capabilityDigest, RECORD_SQL, UnmintedCapabilityError } from './ledger.ts';
import { DEFAULT_PLANNER } from './planner.ts';
import { createReplicaSet, type ReplicaSet, type RoutedResult } from './replica-set.ts';
import { replicaTiming } from './replicas.ts';
import { type SearchRequest, searchKnowledge } from './search.ts';

const skip = ENGINE === 'postgres' ? false : 'postgres only: streaming replication and PgBouncer';
const MAX_LAG_MS = 1000;
const AGENT_KEY = `${AGENT.namespace}/${AGENT.name}`;

let t: TestDatabase;
let replica: Cluster | undefined;
let bouncer: PgBouncer | undefined;
const pools: pg.Pool[] = [];
let primary: pg.Pool;
let onReplica: pg.Pool;
let viaBouncer: pg.Pool;
/** The replica's superuser session (pausing replay). */
let replicaAdmin: pg.Pool;

function own(p: pg.Pool): pg.Pool {
  pools.push(p);
  return p;
}

/** The serving pool as the server builds it (retrieval/index.ts): one-statement, read-only, as the role. */
function serving(url: string): pg.Pool {
  return asRole(
    own(createPool({ connectionString: url, max: 4, session: { role: RETRIEVAL_ROLE, readOnly: true } })),
    RETRIEVAL_ROLE,
  );
}

before(async () => {
  if (skip) return;
  t = await startTestDatabase();
  const cluster = t.db.cluster as Cluster;
  replica = await startReplica(cluster);
  bouncer = await startPgBouncer(cluster);
  primary = serving(t.db.urlAs(RETRIEVAL_ROLE));
  onReplica = serving(replica.url(t.db.name, RETRIEVAL_ROLE));
  viaBouncer = asRole(
    own(createPool({ connectionString: bouncer.url(t.db.name, RETRIEVAL_ROLE), max: 4, pooler: 'transaction' })),
    RETRIEVAL_ROLE,
    undefined,
    { transactionPooler: { statementTimeoutMs: 10_000, readOnly: true } },
  );
  replicaAdmin = own(createPool({ connectionString: replica.url(t.db.name), max: 1 }));
});

after(async () => {
  for (const p of pools) await p.end().catch(() => {});
  bouncer?.stop();
  replica?.stop();
  await t?.close();
});

/** Waits until the replica has replayed everything the primary has written so far. */
async function caughtUp(): Promise<void> {
  const lsn = (await t.pool.query('SELECT pg_current_wal_insert_lsn()::text AS l')).rows[0]?.l as string;
  for (let i = 0; i < 300; i++) {
    const r = await replicaAdmin.query('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [lsn]);
    if (r.rows[0]?.ok === true) return;
    await new Promise((res) => setTimeout(res, 20));
  }
  throw new Error('the replica did not catch up in 6 s');
}

async function load(rows: readonly { id: string; m: ChunkMetadata; v: number[] }[]): Promise<void> {
  await t.pool.query('DELETE FROM knowledge.chunks; DELETE FROM fgentic.chunks');
  await writeChunks(t.pool, {
    chunks: rows.map((r) => ({
      chunk_id: r.id,
      content: `content of ${r.id}`,
      metadata: r.m,
      embedding: r.v,
    })),
  });
}

async function ids(pool: pg.Pool, p: Projection, q: number[], k: number): Promise<string[]> {
  return (await searchKnowledge(pool, { projection: p, embedding: q, maxResults: k })).hits.map((h) => h.chunk_id);
}

/** A search the replica set routes to the replica, once a check has proven it fresh (within 5 s). */
async function onceOnReplica(set: ReplicaSet, req: SearchRequest): Promise<RoutedResult> {
  for (let i = 0; i < 100; i++) {
    await set.checkNow();
    const r = await set.search(req, DEFAULT_PLANNER);
    if (r.endpoint === 'replica') return r;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error('the replica was never proven fresh');
}

describe('scale-out on PostgreSQL: a streaming replica and PgBouncer', { skip }, () => {
  test('differential: the replica and PgBouncer answer as the primary and the model', async () => {
    let nonEmpty = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(metadataArb, { minLength: 1, maxLength: 30 }),
        fc.array(fc.oneof(matrixArb, oauthArb), { minLength: 1, maxLength: 5 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer(),
        async (metas, projections, k, seed) => {
          const rand = prng(seed);
          const rows = metas
            .filter((m) => m.principals.length + m.groups.length > 0)
            .map((m, i) => ({
              id: `c${String(i).padStart(3, '0')}`,
              m: meta({
                classification: m.classification as Classification,
                principals: m.principals,
                groups: m.groups,
              }),
              v: randomVector(rand),
            }));
          await load(rows);
          await caughtUp();
          const q = randomVector(rand);
          for (const x of projections) {
            const p = projectionFrom(x);
            const authorized = new Set(rows.filter((r) => referenceAllows(p, r.m)).map((r) => r.id));
            const expected = rows
              .filter((r) => authorized.has(r.id))
              .map((r) => ({ id: r.id, d: cosineDistance(q, r.v) }))
              .sort((a, b) => a.d - b.d || (a.id < b.id ? -1 : 1))
              .slice(0, k);
            const fromPrimary = await ids(primary, p, q, k);
            assert.equal(fromPrimary.length, expected.length, 'primary: result count');
            for (const id of fromPrimary) assert.ok(authorized.has(id), `primary: ${id} not authorized`);
            assert.deepEqual(await ids(onReplica, p, q, k), fromPrimary, 'replica = primary');
            assert.deepEqual(await ids(viaBouncer, p, q, k), fromPrimary, 'PgBouncer = primary');
            const hybrid = {
              projection: p,
              embedding: q,
              maxResults: k,
              mode: 'hybrid' as const,
              queryText: 'content',
            };
            const h = (await searchKnowledge(primary, hybrid)).hits.map((x) => x.chunk_id);
            assert.deepEqual(
              (await searchKnowledge(viaBouncer, hybrid)).hits.map((x) => x.chunk_id),
              h,
              'hybrid via PgBouncer',
            );
            assert.deepEqual(
              (await searchKnowledge(onReplica, hybrid)).hits.map((x) => x.chunk_id),
              h,
              'hybrid on the replica',
            );
            if (fromPrimary.length > 0) nonEmpty++;
          }
        },
      ),
      { numRuns: 15, seed: 35 },
    );
    assert.ok(nonEmpty > 5, `too few non-empty answers (${nonEmpty})`);
  });

  test('PgBouncer in transaction mode: role, read-only and timeout set in every transaction, no startup parameter', async () => {
    const b = bouncer as PgBouncer;
    // What the serving pool would send without pooler mode is refused by a stock PgBouncer.
    const direct = own(
      createPool({
        connectionString: b.url(t.db.name, RETRIEVAL_ROLE),
        max: 1,
        session: { role: RETRIEVAL_ROLE, readOnly: true },
      }),
    );
    await assert.rejects(direct.query('SELECT 1'), /unsupported startup parameter/);
    for (let i = 0; i < 5; i++) {
      const c = await viaBouncer.connect();
      try {
        await c.query('BEGIN READ ONLY');
        const r = await c.query(
          "SELECT current_user AS u, current_setting('transaction_read_only') AS ro, current_setting('statement_timeout') AS st",
        );
        assert.deepEqual(r.rows[0], { u: RETRIEVAL_ROLE, ro: 'on', st: '10s' });
        await c.query('COMMIT');
      } finally {
        c.release();
      }
    }
    // A statement outside a transaction is wrapped in one with the same settings: a write is refused.
    const wrapped = await viaBouncer.query(
      "SELECT current_user AS u, current_setting('transaction_read_only') AS ro, current_setting('statement_timeout') AS st",
    );
    assert.deepEqual(wrapped.rows[0], { u: RETRIEVAL_ROLE, ro: 'on', st: '10s' });
    await assert.rejects(
      viaBouncer.query('CREATE TABLE public.x (a int)'),
      (e: { code?: string }) => e.code === '25006',
    );
  });

  test('revocation bound: a paused replica stops serving a revoked right within maxReplicaLag (fails without the lag check)', async () => {
    const rand = prng(3535);
    const q = randomVector(rand);
    const rows = [
      { id: 'secret', m: meta({ principals: [P.alice] }), v: q },
      ...Array.from({ length: 8 }, (_, i) => ({
        id: `open-${i}`,
        m: meta({ principals: [P.alice, P.bob] }),
        v: randomVector(rand),
      })),
    ];
    await load(rows);
    await caughtUp();
    const alice = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    const registry = new Registry();
    const timing = replicaTiming(MAX_LAG_MS);
    const set: ReplicaSet = createReplicaSet({
      primary,
      primaryCheck: own(createPool({ connectionString: t.db.urlAs(RETRIEVAL_ROLE), max: 1 })),
      replicas: [
        {
          serving: onReplica,
          check: own(createPool({ connectionString: (replica as Cluster).url(t.db.name, RETRIEVAL_ROLE), max: 1 })),
        },
      ],
      timing,
      registry,
    });
    try {
      const before = await onceOnReplica(set, { projection: alice, embedding: q, maxResults: 5 });
      assert.equal(before.hits[0]?.chunk_id, 'secret');

      await replicaAdmin.query('SELECT pg_wal_replay_pause()');
      for (
        let i = 0;
        (await replicaAdmin.query('SELECT pg_get_wal_replay_pause_state() AS s')).rows[0]?.s !== 'paused';
        i++
      )
        if (i > 200) throw new Error('replay did not pause');
        else await new Promise((r) => setTimeout(r, 10));
      // The revocation, as the origin's writers make it: alice's right removed from the chunk.
      await t.pool.query('UPDATE knowledge.chunks SET metadata = $2::jsonb WHERE chunk_id = $1', [
        'secret',
        JSON.stringify(meta({ principals: [P.bob] })),
      ]);
      const committed = performance.now();
      assert.deepEqual(
        await ids(primary, alice, q, 5).then((x) => x.includes('secret')),
        false,
        'revoked on the primary',
      );

      let servedStale = 0;
      let staleAfterBound = 0;
      let afterBound = 0;
      let replicaAfterBound = 0;
      let lastStaleArrival = committed;
      while (performance.now() - committed < MAX_LAG_MS + 800) {
        const started = performance.now();
        const r = await set.search({ projection: alice, embedding: q, maxResults: 5 }, DEFAULT_PLANNER);
        const arrived = performance.now();
        const stale = r.hits.some((h) => h.chunk_id === 'secret');
        if (stale) {
          servedStale++;
          lastStaleArrival = arrived;
          assert.equal(r.endpoint, 'replica', 'only the paused replica can miss the revocation');
        }
        if (started - committed >= MAX_LAG_MS) {
          afterBound++;
          if (stale) staleAfterBound++;
          if (r.endpoint === 'replica') replicaAfterBound++;
        }
        await new Promise((res) => setTimeout(res, 10));
      }
      // The bound: no search returned the revoked row later than maxReplicaLag after the commit.
      assert.ok(
        lastStaleArrival - committed < MAX_LAG_MS,
        `revoked row served ${Math.round(lastStaleArrival - committed)} ms after the commit`,
      );
      assert.equal(staleAfterBound, 0, 'revoked rows served after the bound');
      assert.ok(afterBound >= 10, `searches after the bound: ${afterBound}`);
      assert.equal(replicaAfterBound, 0, 'searches left the paused replica');
      const lag = (await registry.getSingleMetric('fgentic_retrieval_replica_lag_seconds')?.get())?.values[0]?.value;
      assert.ok(lag !== undefined && lag > MAX_LAG_MS / 1000, `lag gauge ${lag}`);
      console.log(
        `# revocation bound: revoked row served ${servedStale}× by the paused replica, the last ${Math.round(lastStaleArrival - committed)} ms after the commit (bound ${MAX_LAG_MS} ms); ${afterBound} searches after the bound, all on the primary`,
      );

      // Replay resumes: the replica catches up and serves again, without the revoked row.
      await replicaAdmin.query('SELECT pg_wal_replay_resume()');
      await caughtUp();
      const back = await onceOnReplica(set, { projection: alice, embedding: q, maxResults: 5 });
      assert.ok(!back.hits.some((h) => h.chunk_id === 'secret'));
    } finally {
      await replicaAdmin.query('SELECT pg_wal_replay_resume()').catch(() => {});
      await set.close();
    }
  });

  test('ledger mode: a projection minted a moment ago, not yet replayed on the replica, is checked on the primary', async () => {
    const rand = prng(36);
    const q = randomVector(rand);
    await load(
      Array.from({ length: 6 }, (_, i) => ({
        id: `l-${i}`,
        m: meta({ principals: [P.alice] }),
        v: randomVector(rand),
      })),
    );
    await caughtUp();
    const header = matrixHeader({ caller: P.alice, audience: [P.alice] });
    const alice = decodeFixture(header);
    // A bound long enough that the paused replica stays in rotation for this test's few searches.
    const set = createReplicaSet({
      primary,
      primaryCheck: own(createPool({ connectionString: t.db.urlAs(RETRIEVAL_ROLE), max: 1 })),
      replicas: [
        {
          serving: onReplica,
          check: own(createPool({ connectionString: (replica as Cluster).url(t.db.name, RETRIEVAL_ROLE), max: 1 })),
        },
      ],
      timing: replicaTiming(10_000),
    });
    try {
      await onceOnReplica(set, { projection: alice, embedding: q, maxResults: 3 });
      await replicaAdmin.query('SELECT pg_wal_replay_pause()');
      // The projector records the value on the primary as it mints it.
      await asRole(t.pool, PROJECTOR_ROLE).query(RECORD_SQL, [capabilityDigest(header), AGENT_KEY, NOW + 600]);
      const capability = { digest: capabilityDigest(header), agent: AGENT_KEY, now: NOW };
      const r = await set.search({ projection: alice, embedding: q, maxResults: 3, capability }, DEFAULT_PLANNER);
      assert.deepEqual([r.endpoint, r.reason, r.hits.length], ['primary', 'ledger_unminted', 3]);
      // A value the projector never recorded is refused by the primary too.
      const never = { digest: capabilityDigest(`${header}x`), agent: AGENT_KEY, now: NOW };
      await assert.rejects(
        set.search({ projection: alice, embedding: q, maxResults: 3, capability: never }, DEFAULT_PLANNER),
        UnmintedCapabilityError,
      );
      // Once replayed, the replica answers the recorded value itself.
      await replicaAdmin.query('SELECT pg_wal_replay_resume()');
      await caughtUp();
      const back = await onceOnReplica(set, { projection: alice, embedding: q, maxResults: 3, capability });
      assert.equal(back.hits.length, 3);
    } finally {
      await replicaAdmin.query('SELECT pg_wal_replay_resume()').catch(() => {});
      await set.close();
    }
  });

  test('serve retrieval with a replica, and through PgBouncer: MCP calls answered, counted by endpoint', async () => {
    const rand = prng(37);
    // What ingestion does first, on an empty store: record the embedder's profile, which the server checks.
    await t.pool.query('DELETE FROM knowledge.chunks; DELETE FROM fgentic.chunks');
    assert.equal((await ensureProfile(t.ingestion, createLocalEmbedder().profile, true)).ok, true);
    await load(
      Array.from({ length: 6 }, (_, i) => ({
        id: `s-${i}`,
        m: meta({ principals: [P.alice] }),
        v: randomVector(rand),
      })),
    );
    await caughtUp();
    const header = matrixHeader({ caller: P.alice, audience: [P.alice] });
    const call = async (server: RetrievalServer) => {
      const client = new Client({ name: 'test', version: '1.0.0' });
      const transport = new StreamableHTTPClientTransport(new URL(server.mcpUrl), {
        requestInit: {
          headers: { 'x-fgentic-agent': `${AGENT.namespace}/${AGENT.name}`, 'x-fgentic-identity': header },
        },
      });
      await client.connect(transport);
      try {
        const r = await client.callTool({
          name: 'search_knowledge',
          arguments: { query: 'any', max_results: 4 },
        });
        assert.notEqual(r.isError, true, JSON.stringify(r.content));
        return (r.structuredContent as { results: unknown[] }).results.length;
      } finally {
        await client.close();
      }
    };
    const b = bouncer as PgBouncer;
    const replicaUrl = (replica as Cluster).url(t.db.name, RETRIEVAL_ROLE);
    for (const setup of [
      { databaseUrl: t.db.urlAs(RETRIEVAL_ROLE), replicaUrls: [replicaUrl] },
      {
        databaseUrl: b.url(t.db.name, RETRIEVAL_ROLE),
        replicaUrls: [replicaUrl],
        pooler: 'transaction' as const,
      },
      { databaseUrl: b.url(t.db.name, RETRIEVAL_ROLE), pooler: 'transaction' as const },
    ]) {
      const server = await startRetrievalServer({
        agents: [AGENT],
        port: 0,
        now: () => NOW,
        pool: { max: 2 },
        ...setup,
      });
      try {
        let onReplicaCount = 0;
        for (let i = 0; i < 40 && onReplicaCount === 0; i++) {
          await server.replicas?.checkNow();
          assert.equal(await call(server), 4);
          const text = await server.metrics.registry.metrics();
          onReplicaCount = Number(
            /fgentic_retrieval_searches_total\{endpoint="replica"[^}]*\} (\d+)/.exec(text)?.[1] ?? 0,
          );
          if (setup.replicaUrls === undefined) break;
        }
        if (setup.replicaUrls) assert.ok(onReplicaCount > 0, 'a search was answered by the replica');
        else assert.equal(server.replicas, undefined);
      } finally {
        await server.close();
      }
    }
  });

  test('serve retrieval (the binary) takes its replicas and bound from the retrieval.json the RetrievalPlatform renders', async () => {
    // The rendered ConfigMap carries credential-free URLs; the login comes from PGUSER/PGPASSWORD.
    const bare = (u: string) => {
      const url = new URL(u);
      const login = { user: decodeURIComponent(url.username), password: decodeURIComponent(url.password) };
      url.username = '';
      url.password = '';
      return { url: url.toString(), ...login };
    };
    const primaryUrl = bare(t.db.urlAs(RETRIEVAL_ROLE));
    const replicaUrl = bare((replica as Cluster).url(t.db.name, RETRIEVAL_ROLE));
    const resources = examples();
    (resources.platforms[0]!.spec as unknown as Record<string, unknown>)['database'] = {
      replicaUrls: [replicaUrl.url],
      maxReplicaLagMilliseconds: 600,
    };
    const rendered = render(resources);
    assert.deepEqual(rendered.conflicts, []);
    const map = rendered.objects.find((o) => o.metadata.name === RETRIEVAL_CONFIGMAP) as K8sObject & {
      data: Record<string, string>;
    };
    const json = JSON.parse(map.data['retrieval.json'] as string);
    assert.deepEqual(json.database, {
      replicaUrls: [replicaUrl.url],
      maxReplicaLagMilliseconds: 600,
      pooler: 'none',
    });
    // The store here holds the local test embedder's profile; everything else is as rendered.
    const dir = mkdtempSync(join(tmpdir(), 'replica-serve-'));
    const config = join(dir, 'retrieval.json');
    writeFileSync(config, JSON.stringify({ ...json, embeddings: { profile: LOCAL_PROFILE } }));
    const bin = new URL('../bin/fgentic-retrieval.mjs', import.meta.url).pathname;
    const child = spawn(
      process.execPath,
      [bin, 'serve', 'retrieval', '--config', config, '--port', '0', '--no-migrate'],
      {
        env: {
          ...process.env,
          DATABASE_URL: primaryUrl.url,
          PGUSER: primaryUrl.user,
          PGPASSWORD: primaryUrl.password,
          FGENTIC_LOG_LEVEL: 'info',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      err += d;
    });
    try {
      const base = await waitFor('the server to listen', () => /listening on (http:\/\/[^/\s]+)\/mcp/.exec(out)?.[1], {
        timeoutMs: 60_000,
        detail: () => err.slice(-400),
      });
      const started = err
        .split('\n')
        .filter((l) => l.includes('retrieval server listening'))
        .map((l) => JSON.parse(l))[0];
      assert.equal(started?.replicas, 1);
      assert.equal(started?.max_replica_lag_ms, 600);
      // The replica, reached with the rendered URL and the environment's login, is proven fresh.
      await waitFor(
        'a caught-up check of replica 0',
        async () =>
          /fgentic_retrieval_replica_checks_total\{replica="0",outcome="caught_up"\} [1-9]/.test(
            await (await fetch(`${base}/metrics`)).text(),
          ),
        { timeoutMs: 20_000 },
      );
      assert.ok(!err.includes(primaryUrl.password), 'no password in the logs');
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the replica killed mid-run: every search answers, from the primary after the kill', async () => {
    const rand = prng(77);
    const rows = Array.from({ length: 12 }, (_, i) => ({
      id: `k-${i}`,
      m: meta({ principals: [P.alice] }),
      v: randomVector(rand),
    }));
    await load(rows);
    await caughtUp();
    const alice = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    const registry = new Registry();
    const set = createReplicaSet({
      primary,
      primaryCheck: own(createPool({ connectionString: t.db.urlAs(RETRIEVAL_ROLE), max: 1 })),
      replicas: [
        {
          serving: onReplica,
          check: own(
            createPool({
              connectionString: (replica as Cluster).url(t.db.name, RETRIEVAL_ROLE),
              max: 1,
              connectionTimeoutMs: 1000,
            }),
          ),
        },
      ],
      timing: replicaTiming(MAX_LAG_MS),
      registry,
    });
    try {
      await onceOnReplica(set, { projection: alice, embedding: randomVector(rand), maxResults: 5 });
      const endpoints: string[] = [];
      let killedAt = -1;
      // Four searches in flight at a time; the replica is stopped (immediate shutdown) after 40.
      const worker = async () => {
        while (endpoints.length < 160) {
          const q = randomVector(rand);
          const r = await set.search({ projection: alice, embedding: q, maxResults: 5 }, DEFAULT_PLANNER);
          assert.equal(r.hits.length, 5);
          endpoints.push(r.endpoint);
          if (endpoints.length === 40 && killedAt < 0) {
            killedAt = endpoints.length;
            (replica as Cluster).stop();
          }
        }
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
      assert.ok(endpoints.slice(0, 30).includes('replica'), 'the replica served before the kill');
      assert.ok(!endpoints.slice(killedAt + 8).includes('replica'), 'nothing from the replica after the kill');
      const failed = (await registry.getSingleMetric('fgentic_retrieval_searches_total')?.get())?.values.filter(
        (v) => v.labels['endpoint'] === 'primary',
      );
      assert.ok((failed?.length ?? 0) > 0);
    } finally {
      await set.close();
    }
  });
});
