/**
 * bench:scaleout — the search's latency on the primary, on a streaming replica and through PgBouncer
 * in transaction mode, side by side in one run on this machine's PostgreSQL (testkit/common/postgres.ts
 * starts a throwaway primary, a replica made with pg_basebackup and PgBouncer 1.18 on loopback, and
 * removes them at the end). Every arm runs the server's own search entry point (searchKnowledge) as
 * the serving role, with the pools the server builds:
 *
 *   primary          the one-statement path (startup options: role, read-only), prepared statement
 *   replica          the same, on the hot standby
 *   routed           the replica set (retrieval/replica-set.ts): freshness checks every 250 ms, the
 *                    bound checked on every answer — what `serve retrieval --replica-url` does
 *   pgbouncer        PgBouncer → primary, `--pooler transaction`: explicit read-only transaction that
 *                    sets the role and statement timeout, the statement unnamed
 *   pgbouncer-replica PgBouncer → replica, the same
 *
 * Prints a table and writes bench/results/scaleout.json. Options: --rows N (default 5000), --queries Q
 * (default 300 per arm), --concurrency C (default 1).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type pg from 'pg';
import type { Projection } from '../contract/index.ts';
import { migrate } from '../retrieval/db/migrate.ts';
import { createPool } from '../retrieval/db/pool.ts';
import { asRole, bootstrapDatabase, OWNER_ROLE, RETRIEVAL_ROLE } from '../retrieval/db/roles.ts';
import { writeChunks } from '../retrieval/ingest/store.ts';
import { DEFAULT_PLANNER } from '../retrieval/planner.ts';
import { createReplicaSet } from '../retrieval/replica-set.ts';
import { replicaTiming } from '../retrieval/replicas.ts';
import { searchKnowledge } from '../retrieval/search.ts';
import {
  createDatabase,
  findPostgres,
  type PgBouncer,
  startCluster,
  startPgBouncer,
  startReplica,
} from '../testkit/common/postgres.ts';
import { decodeFixture, matrixHeader, meta, P, prng, randomVector } from '../testkit/retrieval.ts';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '5000' },
    queries: { type: 'string', default: '300' },
    concurrency: { type: 'string', default: '1' },
  },
});
const ROWS = Number(values.rows);
const QUERIES = Number(values.queries);
const CONCURRENCY = Number(values.concurrency);

const found = findPostgres();
if ('missing' in found) {
  console.error(`bench:scaleout needs PostgreSQL + pgvector: ${found.missing}`);
  process.exit(1);
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
};

const cluster = await startCluster(found.install, { settings: { shared_buffers: '256MB' } });
let replica: Awaited<ReturnType<typeof startReplica>> | undefined;
let bouncer: PgBouncer | undefined;
let bouncerReplica: PgBouncer | undefined;
const pools: pg.Pool[] = [];
const own = (p: pg.Pool) => {
  pools.push(p);
  return p;
};
try {
  const db = await createDatabase(cluster, 'scaleout');
  // Loading is not what is measured: no statement timeout to trip on a busy machine.
  const admin = own(createPool({ connectionString: cluster.url(db.name), max: 2, statementTimeoutMs: 0 }));
  await bootstrapDatabase(admin);
  await migrate(own(createPool({ connectionString: cluster.url(db.name, OWNER_ROLE), max: 2 })), {});
  const rand = prng(35);
  // A third of the rows readable by alice, the rest by bob: the search works over a real audience.
  const batch = 500;
  for (let i = 0; i < ROWS; i += batch)
    await writeChunks(admin, {
      chunks: Array.from({ length: Math.min(batch, ROWS - i) }, (_, j) => ({
        chunk_id: `r${i + j}`,
        content: `row ${i + j}`,
        metadata: meta({ principals: (i + j) % 3 === 0 ? [P.alice] : [P.bob] }),
        embedding: randomVector(rand),
      })),
    });
  await admin.query('VACUUM ANALYZE');
  replica = await startReplica(cluster);
  bouncer = await startPgBouncer(cluster);
  bouncerReplica = await startPgBouncer(replica);

  const session = { role: RETRIEVAL_ROLE, readOnly: true } as const;
  const serving = (url: string) =>
    asRole(own(createPool({ connectionString: url, max: Math.max(2, CONCURRENCY), session })), RETRIEVAL_ROLE);
  const pooled = (url: string) =>
    asRole(
      own(createPool({ connectionString: url, max: Math.max(2, CONCURRENCY), pooler: 'transaction' })),
      RETRIEVAL_ROLE,
      undefined,
      { transactionPooler: { statementTimeoutMs: 10_000, readOnly: true } },
    );
  const primary = serving(cluster.url(db.name, RETRIEVAL_ROLE));
  const onReplica = serving(replica.url(db.name, RETRIEVAL_ROLE));
  const set = createReplicaSet({
    primary,
    primaryCheck: own(createPool({ connectionString: cluster.url(db.name, RETRIEVAL_ROLE), max: 1 })),
    replicas: [
      {
        serving: onReplica,
        check: own(createPool({ connectionString: replica.url(db.name, RETRIEVAL_ROLE), max: 1 })),
      },
    ],
    timing: replicaTiming(),
  });
  const alice: Projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
  const queries = Array.from({ length: QUERIES }, () => randomVector(rand));
  const request = (q: number[]) => ({ projection: alice, embedding: q, maxResults: 10 });
  const bouncerPool = pooled(bouncer.url(db.name, RETRIEVAL_ROLE));
  const bouncerReplicaPool = pooled(bouncerReplica.url(db.name, RETRIEVAL_ROLE));
  let routedOnReplica = 0;
  const arms: [string, (q: number[]) => Promise<unknown>][] = [
    ['primary', (q) => searchKnowledge(primary, request(q), DEFAULT_PLANNER)],
    ['replica', (q) => searchKnowledge(onReplica, request(q), DEFAULT_PLANNER)],
    [
      'routed',
      async (q) => {
        const r = await set.search(request(q), DEFAULT_PLANNER);
        if (r.endpoint === 'replica') routedOnReplica++;
      },
    ],
    ['pgbouncer', (q) => searchKnowledge(bouncerPool, request(q), DEFAULT_PLANNER)],
    ['pgbouncer-replica', (q) => searchKnowledge(bouncerReplicaPool, request(q), DEFAULT_PLANNER)],
  ];

  const times = new Map<string, number[]>(arms.map(([name]) => [name, []]));
  // Warm every arm, then interleave: query i on every arm in turn, so drift hits all arms alike.
  for (const [, run] of arms) for (const q of queries.slice(0, 20)) await run(q);
  await set.checkNow();
  routedOnReplica = 0;
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < QUERIES; i = next++) {
      const q = queries[i] as number[];
      for (const [name, run] of arms) {
        const t0 = performance.now();
        await run(q);
        times.get(name)?.push(performance.now() - t0);
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  await set.close();

  const base = quantile(times.get('primary') ?? [], 0.5);
  const results = arms.map(([name]) => {
    const xs = times.get(name) ?? [];
    return {
      arm: name,
      p50_ms: Number(quantile(xs, 0.5).toFixed(3)),
      p95_ms: Number(quantile(xs, 0.95).toFixed(3)),
      p50_vs_primary: Number((quantile(xs, 0.5) / base).toFixed(2)),
    };
  });
  console.log(
    `bench:scaleout — PostgreSQL ${found.install.version}, ${ROWS} rows, ${QUERIES} queries per arm, concurrency ${CONCURRENCY}, top 10 over a third of the rows`,
  );
  console.log('| arm | p50 ms | p95 ms | p50 / primary |\n|---|---|---|---|');
  for (const r of results) console.log(`| ${r.arm} | ${r.p50_ms} | ${r.p95_ms} | ${r.p50_vs_primary} |`);
  console.log(`routed: ${routedOnReplica} of ${QUERIES} searches answered by the replica`);
  mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
  writeFileSync(
    new URL('./results/scaleout.json', import.meta.url),
    `${JSON.stringify({ rows: ROWS, queries: QUERIES, concurrency: CONCURRENCY, routedOnReplica, results }, null, 2)}\n`,
  );
  console.log('wrote bench/results/scaleout.json');
} finally {
  for (const p of pools) await p.end().catch(() => {});
  bouncerReplica?.stop();
  bouncer?.stop();
  replica?.stop();
  cluster.stop();
}
