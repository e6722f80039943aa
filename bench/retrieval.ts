/**
 * Filtered vector search on the embedded database (PGlite 0.5.14 + pgvector through pglite-socket and
 * `pg`, the production code path). Arms per audience selectivity:
 *   exact    — the planner's exact path: authorized set materialized, cosine-sorted (ground truth)
 *   hnsw     — HNSW + hnsw.iterative_scan = strict_order under the same WHERE
 *   planner  — what the server does by default: one call of the SECURITY DEFINER search function as
 *              knowledge_retrieval (bounded authorized count → exact or hnsw, inside the database)
 *   direct   — the same plan choice and statements sent from the client as separate queries by a
 *              role that can read the table (how the server searched before the function path),
 *              to measure what the function path costs
 *   post     — the anti-pattern: unfiltered HNSW top-10, then filter (recall only)
 * and an unfiltered HNSW query as the latency reference. Vectors are clustered with a low intrinsic
 * dimension (a 32-d Gaussian mixture of 64 clusters mapped into 1024-d by a fixed random projection,
 * plus small isotropic noise) — closer to text embeddings than uniform noise, on which HNSW recall
 * says nothing (research/deps-probe.md §1). Audience membership is uncorrelated with the vectors.
 *
 * Env: BENCH_ROWS (20000), BENCH_QUERIES (30), BENCH_M (16), BENCH_EFC (64), BENCH_EF (40,100),
 * BENCH_SELECTIVITIES (0.001,0.01,0.05,0.1,0.5,1), BENCH_OUT (bench/results/retrieval.json).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import type pg from 'pg';
import { decodeProjection, encodeProjection, type Projection } from '../contract/index.ts';
import { startEmbeddedDatabase } from '../retrieval/db/embedded.ts';
import { migrate } from '../retrieval/db/migrate.ts';
import { createPool, toVectorParam } from '../retrieval/db/pool.ts';
import { asRole, bootstrapDatabase, RETRIEVAL_ROLE } from '../retrieval/db/roles.ts';
import { writeChunks } from '../retrieval/ingest/store.ts';
import { choosePlan, DEFAULT_PLANNER, type PlannerOptions } from '../retrieval/planner.ts';
import { buildPredicate } from '../retrieval/predicate.ts';
import { searchKnowledge } from '../retrieval/search.ts';
import { prng } from '../retrieval/testing.ts';

const N = Number(process.env['BENCH_ROWS'] ?? 20_000);
const Q = Number(process.env['BENCH_QUERIES'] ?? 30);
const M = Number(process.env['BENCH_M'] ?? 16);
const EFC = Number(process.env['BENCH_EFC'] ?? 64);
const EFS = (process.env['BENCH_EF'] ?? '40,100').split(',').map(Number);
const K = 10;
const DIMS = 1024;
const LATENT = 32;
const CLUSTERS = 64;
const SELECTIVITIES = (process.env['BENCH_SELECTIVITIES'] ?? '0.001,0.01,0.05,0.1,0.5,1')
  .split(',')
  .map(Number);
const NOW = Math.floor(Date.now() / 1000);
const AGENT = { namespace: 'kagent', name: 'knowledge-agent' };

const rand = prng(20_260_730);
const gauss = () => {
  const u = Math.max(rand(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand());
};
const projection = Array.from({ length: LATENT }, () => Float64Array.from({ length: DIMS }, gauss));
const centroids = Array.from({ length: CLUSTERS }, () =>
  Float64Array.from({ length: LATENT }, () => gauss() * 3),
);

function sample(): number[] {
  const c = centroids[Math.floor(rand() * CLUSTERS)] as Float64Array;
  const z = Array.from({ length: LATENT }, (_, i) => (c[i] ?? 0) + gauss());
  const v = new Float64Array(DIMS);
  for (let i = 0; i < LATENT; i++) {
    const row = projection[i] as Float64Array;
    const zi = z[i] ?? 0;
    for (let d = 0; d < DIMS; d++) v[d] = (v[d] ?? 0) + zi * (row[d] ?? 0);
  }
  let n = 0;
  for (let d = 0; d < DIMS; d++) n += (v[d] ?? 0) ** 2;
  n = Math.sqrt(n);
  for (let d = 0; d < DIMS; d++) v[d] = (v[d] ?? 0) / n + gauss() * 0.002;
  return Array.from(new Float32Array(v));
}

const principalFor = (s: number) => ({
  kind: 'matrix' as const,
  principal: `@sel-${String(s).replace('.', '_')}:bench.example`,
});

function projectionFor(s: number): Projection {
  const p = principalFor(s);
  const enc = encodeProjection({
    agent: AGENT,
    allowed_classifications: ['public'],
    audience: [p],
    delegation_id: 'c'.repeat(64),
    exp: NOW + 600,
    groups: [],
    iat: NOW,
    kind: 'matrix',
    principal: p.principal,
    room: {
      event_id: '$e',
      history_visibility: 'joined',
      id: '!bench:bench.example',
      join_rule: 'invite',
      state_sha256: 'd'.repeat(64),
    },
    v: 1,
  } as unknown as Projection);
  if (!enc.ok) throw new Error('bench projection invalid');
  const dec = decodeProjection(enc.value, { now: NOW, agents: [AGENT] });
  if (!dec.ok) throw new Error('bench projection invalid');
  return dec.value;
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? Number.NaN;
}

async function timed<T>(f: () => Promise<T>): Promise<[T, number]> {
  const t0 = process.hrtime.bigint();
  const r = await f();
  return [r, Number(process.hrtime.bigint() - t0) / 1e6];
}

async function unfiltered(
  pool: pg.Pool,
  q: number[],
  ef: number,
  limit: number,
): Promise<{ id: string; principals: string[] }[]> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN READ ONLY');
    // Same planner settings as the server's HNSW path, so the reference is an index scan at every ef.
    await client.query(
      "SELECT set_config('hnsw.ef_search', $1, true), set_config('enable_seqscan', 'off', true), set_config('enable_sort', 'off', true)",
      [String(ef)],
    );
    const r = await client.query(
      "SELECT chunk_id, metadata->'allowed_principals' AS p FROM knowledge.chunks ORDER BY embedding <=> $1::vector LIMIT $2",
      [toVectorParam(q), limit],
    );
    await client.query('COMMIT');
    return r.rows.map((row) => ({
      id: row.chunk_id,
      principals: row.p.map((x: { principal: string }) => x.principal),
    }));
  } finally {
    client.release();
  }
}

/** The client-side statements of the previous search path, vector mode (for the `direct` arm). */
async function direct(pool: pg.Pool, p: Projection, q: number[], planner: PlannerOptions): Promise<string[]> {
  const pred = buildPredicate(p);
  const n = pred.params.length;
  const v = toVectorParam(q);
  const client = await pool.connect();
  try {
    await client.query('BEGIN READ ONLY');
    const counted = await client.query(
      `SELECT count(*)::int AS n FROM (SELECT 1 FROM knowledge.chunks c WHERE ${pred.sql} LIMIT $${n + 1}) s`,
      [...pred.params, planner.exactThreshold + 1],
    );
    const authorized = Number(counted.rows[0]?.n ?? 0);
    const exact = () =>
      client.query(
        `WITH authorized AS MATERIALIZED (SELECT c.chunk_id, c.embedding FROM knowledge.chunks c WHERE ${pred.sql}) ` +
          `SELECT chunk_id FROM authorized ORDER BY embedding <=> $${n + 1}::vector, chunk_id LIMIT $${n + 2}`,
        [...pred.params, v, K],
      );
    let rows: { chunk_id: string }[];
    if (choosePlan(authorized, planner) === 'hnsw') {
      await client.query(
        "SELECT set_config('hnsw.iterative_scan', 'strict_order', true), set_config('hnsw.ef_search', $1, true), " +
          "set_config('hnsw.max_scan_tuples', $2, true), set_config('enable_seqscan', 'off', true), " +
          "set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true), " +
          "set_config('enable_incremental_sort', 'off', true)",
        [String(planner.efSearch), String(planner.maxScanTuples)],
      );
      rows = (
        await client.query(
          `SELECT c.chunk_id FROM knowledge.chunks c WHERE ${pred.sql} ORDER BY c.embedding <=> $${n + 1}::vector LIMIT $${n + 2}`,
          [...pred.params, v, K],
        )
      ).rows;
      if (rows.length < Math.min(K, authorized)) rows = (await exact()).rows;
    } else {
      rows = (await exact()).rows;
    }
    await client.query('COMMIT');
    return rows.map((r) => r.chunk_id);
  } finally {
    client.release();
  }
}

async function main(): Promise<void> {
  const t0 = Date.now();
  const db = await startEmbeddedDatabase();
  const pool = createPool({ connectionString: db.url, max: 2, statementTimeoutMs: 3_600_000 });
  await bootstrapDatabase(pool);
  await migrate(pool);
  // The server's view of the database: every search as knowledge_retrieval.
  const serving = asRole(pool, RETRIEVAL_ROLE);
  await pool.query('DROP INDEX knowledge.chunks_embedding_hnsw_idx');
  const member = SELECTIVITIES.map((s) => {
    const set = new Set<number>();
    const want = Math.max(1, Math.round(s * N));
    const ids = Array.from({ length: N }, (_, i) => i);
    for (let i = 0; i < want; i++) {
      const j = i + Math.floor(rand() * (N - i));
      [ids[i], ids[j]] = [ids[j] as number, ids[i] as number];
      set.add(ids[i] as number);
    }
    return set;
  });
  const tLoad = Date.now();
  const BATCH = 500;
  for (let i = 0; i < N; i += BATCH) {
    const chunks = [];
    for (let r = i; r < Math.min(N, i + BATCH); r++) {
      const principals = [{ kind: 'matrix' as const, principal: '@owner:bench.example' }];
      SELECTIVITIES.forEach((s, k) => {
        if (member[k]?.has(r)) principals.push(principalFor(s));
      });
      chunks.push({
        chunk_id: `bench-${String(r).padStart(6, '0')}`,
        content: `synthetic chunk ${r}`,
        embedding: sample(),
        metadata: {
          source: { id: `bench/${r % 100}` },
          classification: 'public' as const,
          allowed_principals: principals,
          allowed_groups: [],
        },
      });
    }
    await writeChunks(pool, { chunks });
    process.stderr.write(`\rload ${Math.min(N, i + BATCH)}/${N}`);
  }
  const loadSeconds = (Date.now() - tLoad) / 1000;
  process.stderr.write(
    `\nloaded in ${loadSeconds.toFixed(1)} s; building HNSW (m=${M}, ef_construction=${EFC})\n`,
  );
  const tBuild = Date.now();
  await pool.query("SET maintenance_work_mem = '512MB'");
  await pool.query(
    `CREATE INDEX chunks_embedding_hnsw_idx ON knowledge.chunks USING hnsw (embedding vector_cosine_ops) WITH (m = ${M}, ef_construction = ${EFC})`,
  );
  await pool.query('ANALYZE knowledge.chunks');
  const buildSeconds = (Date.now() - tBuild) / 1000;
  process.stderr.write(`HNSW built in ${buildSeconds.toFixed(1)} s\n`);

  const queries = Array.from({ length: Q }, sample);
  // Warm-up: touch the graph and the heap so no arm pays for cold WASM file-system pages.
  for (const ef of EFS) for (const q of queries) await unfiltered(pool, q, ef, K);
  await searchKnowledge(
    serving,
    { projection: projectionFor(1), embedding: queries[0] ?? sample(), maxResults: K },
    { ...DEFAULT_PLANNER, force: 'exact' },
  );

  const baseline: Record<number, { p50: number; p99: number }> = {};
  for (const ef of EFS) {
    const times: number[] = [];
    for (const q of queries) times.push((await timed(() => unfiltered(pool, q, ef, K)))[1]);
    baseline[ef] = { p50: pct(times, 0.5), p99: pct(times, 0.99) };
  }

  type Row = {
    selectivity: number;
    authorized: number;
    arm: string;
    ef_search?: number;
    recall: number;
    p50_ms?: number;
    p99_ms?: number;
    ratio_to_unfiltered_p50?: number;
    plans?: Record<string, number>;
  };
  const rows: Row[] = [];
  for (const [k, s] of SELECTIVITIES.entries()) {
    const p = projectionFor(s);
    const authorized = member[k]?.size ?? 0;
    const principal = principalFor(s).principal;
    const truth: string[][] = [];
    const exactTimes: number[] = [];
    for (const q of queries) {
      const [r, ms] = await timed(() =>
        searchKnowledge(
          serving,
          { projection: p, embedding: q, maxResults: K },
          { ...DEFAULT_PLANNER, force: 'exact' },
        ),
      );
      truth.push(r.hits.map((h) => h.chunk_id));
      exactTimes.push(ms);
    }
    const refEf = EFS[0] as number;
    const recallOf = (got: string[][]) =>
      got.reduce((acc, g, i) => {
        const want = truth[i] ?? [];
        if (want.length === 0) return acc + 1;
        return acc + g.filter((id) => want.includes(id)).length / want.length;
      }, 0) / got.length;
    rows.push({
      selectivity: s,
      authorized,
      arm: 'exact',
      recall: 1,
      p50_ms: pct(exactTimes, 0.5),
      p99_ms: pct(exactTimes, 0.99),
      ratio_to_unfiltered_p50: pct(exactTimes, 0.5) / (baseline[refEf]?.p50 ?? 1),
    });
    const arms: [string, PlannerOptions][] = [
      ...EFS.map((ef): [string, PlannerOptions] => [
        `hnsw`,
        { ...DEFAULT_PLANNER, efSearch: ef, force: 'hnsw' },
      ]),
      ['planner', DEFAULT_PLANNER],
    ];
    for (const [arm, planner] of arms) {
      const got: string[][] = [];
      const times: number[] = [];
      const plans: Record<string, number> = {};
      for (const q of queries) {
        const [r, ms] = await timed(() =>
          searchKnowledge(serving, { projection: p, embedding: q, maxResults: K }, planner),
        );
        got.push(r.hits.map((h) => h.chunk_id));
        times.push(ms);
        plans[r.plan] = (plans[r.plan] ?? 0) + 1;
      }
      const ef = planner.efSearch;
      rows.push({
        selectivity: s,
        authorized,
        arm,
        ef_search: ef,
        recall: recallOf(got),
        p50_ms: pct(times, 0.5),
        p99_ms: pct(times, 0.99),
        ratio_to_unfiltered_p50: pct(times, 0.5) / (baseline[ef]?.p50 ?? baseline[refEf]?.p50 ?? 1),
        plans,
      });
    }
    {
      const got: string[][] = [];
      const times: number[] = [];
      for (const q of queries) {
        const [ids, ms] = await timed(() => direct(pool, p, q, DEFAULT_PLANNER));
        got.push(ids);
        times.push(ms);
      }
      rows.push({
        selectivity: s,
        authorized,
        arm: 'direct',
        ef_search: DEFAULT_PLANNER.efSearch,
        recall: recallOf(got),
        p50_ms: pct(times, 0.5),
        p99_ms: pct(times, 0.99),
        ratio_to_unfiltered_p50:
          pct(times, 0.5) / (baseline[DEFAULT_PLANNER.efSearch]?.p50 ?? baseline[refEf]?.p50 ?? 1),
      });
    }
    // Post-filter anti-pattern: top-10 of the whole corpus, then drop what the audience may not read.
    const post: string[][] = [];
    for (const q of queries) {
      const top = await unfiltered(pool, q, refEf, K);
      post.push(top.filter((r) => r.principals.includes(principal)).map((r) => r.id));
    }
    rows.push({ selectivity: s, authorized, arm: 'post-filter', ef_search: refEf, recall: recallOf(post) });
  }

  const fmt = (x: number | undefined, d = 1) => (x === undefined ? '—' : x.toFixed(d));
  const lines = [
    `rows ${N}, queries ${Q}, k ${K}, HNSW m=${M} ef_construction=${EFC}; load ${loadSeconds.toFixed(1)} s, build ${buildSeconds.toFixed(1)} s`,
    `unfiltered HNSW p50/p99 ms: ${EFS.map((ef) => `ef ${ef}: ${fmt(baseline[ef]?.p50, 2)}/${fmt(baseline[ef]?.p99, 2)}`).join('; ')}`,
    '',
    '| selectivity | authorized | arm | ef_search | recall@10 | p50 ms | p99 ms | p50 / unfiltered | plans |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${(r.selectivity * 100).toFixed(1)} % | ${r.authorized} | ${r.arm} | ${r.ef_search ?? '—'} | ${r.recall.toFixed(3)} | ${fmt(r.p50_ms, 2)} | ${fmt(r.p99_ms, 2)} | ${fmt(r.ratio_to_unfiltered_p50, 2)} | ${
          r.plans
            ? Object.entries(r.plans)
                .map(([k2, v]) => `${k2}:${v}`)
                .join(' ')
            : '—'
        } |`,
    ),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(
    process.env['BENCH_OUT'] ?? 'bench/results/retrieval.json',
    `${JSON.stringify(
      {
        benchmark: 'retrieval filtered ANN',
        engine: 'PGlite 0.5.14 (PostgreSQL 18.6 WASM) + pgvector 0.8.7 via pglite-socket + pg',
        node: process.version,
        rows: N,
        queries: Q,
        k: K,
        dims: DIMS,
        vectors: `${CLUSTERS}-cluster Gaussian mixture in ${LATENT}-d latent space, random projection to ${DIMS}-d, L2-normalised + noise σ 0.002`,
        hnsw: { m: M, ef_construction: EFC },
        planner_defaults: DEFAULT_PLANNER,
        load_seconds: loadSeconds,
        build_seconds: buildSeconds,
        unfiltered: baseline,
        results: rows,
        total_seconds: (Date.now() - t0) / 1000,
      },
      null,
      2,
    )}\n`,
  );
  await pool.end();
  await db.close();
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
