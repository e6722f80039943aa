/**
 * The search keeps its planned paths when PostgreSQL's statistics change under it. A corpus grows
 * twentyfold after its first ANALYZE (written by the origin's writers, then synced); autovacuum
 * (naptime 1 s on the test cluster) then analyzes the derived table on its own, as it would in
 * production, and the planner sees new row counts and element frequencies. Before and after, counted with the table and index statistics: a small audience's
 * search is exact and reads about its own rows, a broad audience's walks the HNSW index and reads a
 * small part of the table. PostgreSQL only: PGlite has no autovacuum.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitFor } from '../testkit/common/index.ts';
import {
  decodeFixture,
  flushStatistics,
  matrixHeader,
  meta,
  oauthHeader,
  onlyOn,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from '../testkit/retrieval.ts';
import { syncAll } from './db/migrate.ts';
import { toVectorBinary, toVectorParam } from './db/pool.ts';
import { INGESTION_ROLE } from './db/roles.ts';
import { writeChunks } from './ingest/store.ts';
import { DEFAULT_PLANNER, searchStatement } from './planner.ts';
import { searchArguments } from './predicate.ts';

const skip = onlyOn('postgres', 'PGlite has no autovacuum');
// The exact path's absolute bound scaled to this corpus (1,000 by default), so both paths are taken.
const PLANNER = { ...DEFAULT_PLANNER, exactThreshold: 100 };
let t: TestDatabase;
const rand = prng(29_029);

// Rows and queries near a few centres: the recall guard sends queries far from all data to the exact
// path (docs/filtered-search.md), and this test is about the count's choice, not that guard.
const centres = Array.from({ length: 4 }, () => randomVector(rand));
const near = (i: number) => {
  const c = centres[i % centres.length] as number[];
  const noise = randomVector(rand);
  return c.map((x, k) => x + 0.15 * (noise[k] ?? 0));
};

/** `n` rows: 1 % readable by alice alone, 60 % by partner org-b, the rest by carol. */
function rows(prefix: string, n: number) {
  return Array.from({ length: n }, (_, i) => ({
    chunk_id: `${prefix}-${String(i).padStart(5, '0')}`,
    content: `row ${prefix} ${i}`,
    embedding: near(i),
    metadata:
      i % 100 === 0
        ? meta({ principals: [P.alice] })
        : i % 5 < 3
          ? meta({ groups: ['partner/org-b/docs'] })
          : meta({ principals: [P.carol] }),
  }));
}

before(async () => {
  if (skip) return;
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

interface Reads {
  readonly tableRows: number;
  readonly hnswScans: number;
}

async function reads(): Promise<Reads> {
  await flushStatistics(t.pool, t.retrieval);
  const r = await t.pool.query<{ rows: string; hnsw: string }>(
    `SELECT (SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)) FROM pg_catalog.pg_stat_user_tables
              WHERE schemaname IN ('knowledge', 'fgentic') AND relname = 'chunks') AS rows,
            (SELECT coalesce(idx_scan, 0) FROM pg_catalog.pg_stat_user_indexes
              WHERE schemaname = 'fgentic' AND indexrelname = 'chunks_embedding_hnsw_idx') AS hnsw`,
  );
  return { tableRows: Number(r.rows[0]?.rows), hnswScans: Number(r.rows[0]?.hnsw) };
}

/** One search as the serving role; what it read. */
async function searchReads(header: string): Promise<{ plan: string; read: number; walked: boolean }> {
  const before = await reads();
  const st = searchStatement(
    searchArguments(decodeFixture(header)),
    toVectorBinary(near(Math.floor(rand() * centres.length))),
    10,
    null,
    PLANNER,
  );
  const r = await t.retrieval.query(st.text, st.values as unknown[]);
  const after = await reads();
  return {
    plan: String(r.rows[0]?.plan),
    read: after.tableRows - before.tableRows,
    walked: after.hnswScans > before.hnswScans,
  };
}

async function assertPaths(total: number, when: string): Promise<void> {
  const small = await searchReads(matrixHeader({ caller: P.alice, audience: [P.alice] }));
  assert.equal(small.plan, 'exact', `${when}: alice's 1 % is ranked exactly`);
  // Her rows in the derived table, the origin rows of the best of them (typed test), their content.
  assert.ok(small.read <= total / 100 + 60, `${when}: alice's search read ${small.read} rows of ${total}`);
  const broad = await searchReads(oauthHeader({ policy: 'org-b', groups: ['partner/org-b/docs'] }));
  assert.equal(broad.plan, 'hnsw', `${when}: org-b's 60 % walks the graph`);
  assert.ok(broad.walked, `${when}: the HNSW index was scanned`);
  // The bounded count (101 rows), the walk (about ef_search = 100 candidates, a few more under the
  // filter), the tie lookup and the content: a few hundred rows, however large the table grows.
  assert.ok(broad.read <= 600, `${when}: org-b's search read ${broad.read} rows of ${total}`);
}

test('the planned paths hold before and after autovacuum analyzes a twentyfold larger table', {
  skip,
}, async () => {
  await writeChunks(t.pool, { chunks: rows('a', 400) });
  await t.pool.query('ANALYZE fgentic.chunks');
  await assertPaths(400, 'first ANALYZE, 400 rows');

  const counts = async () =>
    (
      await t.pool.query<{ auto: string; stale: string; live: string }>(
        `SELECT coalesce(autoanalyze_count, 0) AS auto, n_mod_since_analyze AS stale, n_live_tup AS live
           FROM pg_catalog.pg_stat_user_tables WHERE schemaname = 'fgentic' AND relname = 'chunks'`,
      )
    ).rows[0];
  const autoBefore = Number((await counts())?.auto);
  // Written as the origin's writers write (plain INSERTs as the ingestion role), without the ingest
  // path's own ANALYZE, so the statistics change only when autovacuum runs.
  const more = rows('b', 7_600);
  for (let i = 0; i < more.length; i += 200) {
    const batch = more.slice(i, i + 200);
    await t.ingestion.query(
      `INSERT INTO knowledge.chunks (chunk_id, content, embedding, metadata)
       SELECT c, t, e::public.vector, m FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[]) AS r(c, t, e, m)`,
      [
        batch.map((r) => r.chunk_id),
        batch.map((r) => r.content),
        batch.map((r) => toVectorParam(r.embedding)),
        batch.map((r) => JSON.stringify(r.metadata)),
      ],
    );
  }
  // The `sync` command takes the origin's writes into the derived table, the one the search plans on.
  const client = await t.ingestion.connect();
  try {
    await syncAll(client, INGESTION_ROLE);
  } finally {
    client.release();
  }
  // Autovacuum's own ANALYZE, until it has caught up (its threshold: 50 + 10 % of the live rows).
  await waitFor(
    'autovacuum to analyze knowledge.chunks',
    async () => {
      const c = await counts();
      return Number(c?.auto) > autoBefore && Number(c?.stale) <= 50 + 0.1 * Number(c?.live);
    },
    { timeoutMs: 120_000, intervalMs: 250 },
  );
  const estimate = await t.pool.query<{ n: number }>(
    "SELECT reltuples::int AS n FROM pg_catalog.pg_class WHERE oid = 'knowledge.chunks'::regclass",
  );
  assert.ok((estimate.rows[0]?.n ?? 0) > 6_000, 'the planner now sees the larger table');
  await assertPaths(8_000, 'after autovacuum, 8,000 rows');
});
