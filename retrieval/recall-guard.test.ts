/**
 * The recall guard of the search functions (docs/filtered-search.md#recall-guard):
 * an HNSW answer whose relative contrast (mean distance to all rows ÷ distance of the last row kept)
 * is below the corpus threshold is replaced by the exact answer. And the statistics it reads (row
 * count, sum of unit-normalized embeddings) follow every kind of write.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  cosineDistance,
  decodeFixture,
  matrixHeader,
  meta,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from '../testkit/retrieval.ts';
import { writeChunks } from './ingest/store.ts';
import { DEFAULT_PLANNER } from './planner.ts';
import { searchKnowledge } from './search.ts';

let t: TestDatabase;
const rand = prng(4_242);
const centres = [randomVector(rand), randomVector(rand), randomVector(rand)];
const near = (c: readonly number[], spread = 0.15) => {
  const noise = randomVector(rand);
  return c.map((x, i) => x + spread * (noise[i] ?? 0));
};
const rows = Array.from({ length: 150 }, (_, i) => ({
  id: `g${String(i).padStart(3, '0')}`,
  v: near(centres[i % 3] as number[]),
}));
const projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
// Above the exact bound (max(10, 3 % of 150)), so the planner's count picks HNSW.
const planner = { ...DEFAULT_PLANNER, exactThreshold: 10 };

before(async () => {
  t = await startTestDatabase();
  await writeChunks(t.pool, {
    chunks: rows.map((r) => ({
      chunk_id: r.id,
      content: `row ${r.id}`,
      embedding: r.v,
      metadata: meta({ principals: [P.alice] }),
    })),
  });
  await t.pool.query('ANALYZE fgentic.chunks');
});

after(async () => {
  await t?.close();
});

const exactIds = (q: readonly number[], k: number) =>
  rows
    .map((r) => ({ id: r.id, d: cosineDistance(q, r.v) }))
    .sort((a, b) => a.d - b.d || (a.id < b.id ? -1 : 1))
    .slice(0, k)
    .map((r) => r.id);

describe('recall guard', () => {
  test('a query near the data is answered by HNSW', async () => {
    const q = near(centres[1] as number[], 0.1);
    const r = await searchKnowledge(t.retrieval, { projection, embedding: q, maxResults: 10 }, planner);
    assert.equal(r.plan, 'hnsw');
    assert.deepEqual(
      r.hits.map((h) => h.chunk_id),
      exactIds(q, 10),
    );
  });

  test('a query far from every row (random direction, antipode) falls back to the exact path', async () => {
    const antipode = (centres[2] as number[]).map((x) => -x);
    for (const q of [randomVector(rand), randomVector(rand), antipode]) {
      const r = await searchKnowledge(t.retrieval, { projection, embedding: q, maxResults: 10 }, planner);
      assert.equal(r.plan, 'exact', 'the guard sent the query to the exact path');
      assert.deepEqual(
        r.hits.map((h) => h.chunk_id),
        exactIds(q, 10),
      );
    }
  });

  test('the threshold is the table setting: at 1 nothing falls back', async () => {
    await t.pool.query('UPDATE fgentic.search_stats SET min_contrast = 1');
    try {
      const r = await searchKnowledge(
        t.retrieval,
        { projection, embedding: randomVector(rand), maxResults: 10 },
        planner,
      );
      assert.equal(r.plan, 'hnsw');
    } finally {
      await t.pool.query('UPDATE fgentic.search_stats SET min_contrast = DEFAULT');
    }
  });
});

describe('guard statistics follow every write', () => {
  // Recomputed from the derived table, compared with what the triggers kept; the origin's writes
  // reach it through a sync (retrieval/README.md, "Keeping up with the origin's writes").
  const drift = async () => {
    await t.pool.query('SELECT * FROM fgentic.sync_batch(NULL, 100000)');
    const r = await t.pool.query(`
      SELECT s.row_count AS kept, (SELECT count(*) FROM fgentic.chunks)::bigint AS real,
        coalesce(s.unit_sum <-> (SELECT sum(l2_normalize(embedding)) FROM fgentic.chunks), 0) AS gap
      FROM fgentic.search_stats s`);
    const row = r.rows[0] ?? { kept: 0, real: 0, gap: 0 };
    return { kept: Number(row.kept), real: Number(row.real), gap: Number(row.gap) };
  };

  test('insert, update, delete and truncate', async () => {
    let d = await drift();
    assert.equal(d.kept, d.real);
    assert.ok(d.gap < 1e-3, `sum drift ${d.gap}`);
    await t.pool.query(
      "UPDATE knowledge.chunks SET embedding = (SELECT embedding FROM knowledge.chunks WHERE chunk_id = 'g000') WHERE chunk_id IN ('g001', 'g002')",
    );
    await t.pool.query("DELETE FROM knowledge.chunks WHERE chunk_id IN ('g003', 'g004', 'g005')");
    d = await drift();
    assert.equal(d.kept, d.real);
    assert.equal(d.real, rows.length - 3);
    assert.ok(d.gap < 1e-3, `sum drift ${d.gap}`);
    await t.pool.query('TRUNCATE knowledge.chunks, fgentic.chunks');
    const empty = await t.pool.query('SELECT count(*)::int AS n FROM fgentic.search_stats WHERE row_count > 0');
    assert.equal(empty.rows[0]?.n, 0);
  });
});

test('a write that changes no row leaves the corpus statistics as they were', async () => {
  await writeChunks(t.pool, {
    chunks: Array.from({ length: 3 }, (_, i) => ({
      chunk_id: `still-${i}`,
      content: `still ${i}`,
      embedding: randomVector(prng(40 + i)),
      metadata: meta({ principals: [P.alice] }),
    })),
  });
  const stats = async () =>
    (await t.pool.query('SELECT row_count, unit_sum::text AS s FROM fgentic.search_stats')).rows[0];
  const before = await stats();
  assert.ok(before?.s, 'the statistics hold a vector sum');
  // An upsert that matches nothing still fires the statement triggers on the derived table.
  await t.pool.query('SELECT * FROM fgentic.sync_batch($1, 100)', ['\uffff']);
  await t.pool.query("SELECT fgentic.sync_rows(ARRAY['no-such-row'])");
  assert.deepEqual(await stats(), before);
});
