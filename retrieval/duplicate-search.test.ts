/**
 * Bit-identical copies of one vector (one text ingested under several sources) are the common tie:
 * every copy is exactly as far from any query as the others. When the top-k cut-off falls inside such
 * a group, the approximate path must return the copies the exact ranking returns (smallest chunk_id
 * first) and only those the audience may read. HNSW yields copies in graph order, so without the
 * tie lookup of migration 0009 this returns other copies at low and high ef_search alike.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  axisVector,
  decodeFixture,
  matrixHeader,
  meta,
  nearRows,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from '../testkit/retrieval.ts';
import { writeChunks } from './ingest/store.ts';
import { DEFAULT_PLANNER } from './planner.ts';
import { searchKnowledge } from './search.ts';

const COPIES = 30;
let t: TestDatabase;

const axis = axisVector;
const query = axis(0, 1, 0, 0);
// chunk_ids in an order unrelated to insertion order; every third copy is bob's alone.
const copyId = (i: number) => `dup-${String((i * 11) % COPIES).padStart(2, '0')}`;
const aliceMay = (i: number) => i % 3 !== 2;
const projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));

before(async () => {
  t = await startTestDatabase();
  const rand = prng(31_337);
  const alice = meta({ principals: [P.alice] });
  await writeChunks(t.pool, {
    chunks: [
      ...nearRows(alice),
      ...Array.from({ length: COPIES }, (_, i) => ({
        chunk_id: copyId(i),
        content: `copy ${i}`,
        embedding: axis(0, 0.9, 1000, 0.43),
        metadata: aliceMay(i) ? alice : meta({ principals: [P.bob] }),
      })),
      ...Array.from({ length: 100 }, (_, i) => ({
        chunk_id: `fill-${String(i).padStart(3, '0')}`,
        content: `filler ${i}`,
        embedding: randomVector(rand),
        metadata: alice,
      })),
    ],
  });
});

after(async () => {
  await t?.close();
});

test('copies of one vector at the cut-off: the approximate path returns the exact ranking', async () => {
  const readable = Array.from({ length: COPIES }, (_, i) => i)
    .filter(aliceMay)
    .map(copyId)
    .sort();
  for (const k of [5, 10, 20]) {
    const req = { projection, embedding: query, maxResults: k };
    const exact = await searchKnowledge(t.pool, req, { ...DEFAULT_PLANNER, force: 'exact' });
    // The exact ranking itself: the four closer rows, then alice's copies by chunk_id.
    assert.deepEqual(
      exact.hits.map((h) => h.chunk_id),
      [...['near-0', 'near-1', 'near-2', 'near-3'], ...readable].slice(0, k),
    );
    for (const efSearch of [1, 4, 10, 40, 100]) {
      const approx = await searchKnowledge(t.pool, req, { ...DEFAULT_PLANNER, efSearch, force: 'hnsw' });
      assert.equal(approx.plan, 'hnsw');
      assert.deepEqual(
        approx.hits.map((h) => h.chunk_id),
        exact.hits.map((h) => h.chunk_id),
        `k ${k}, ef_search ${efSearch}`,
      );
    }
  }
});

// Many copies of one vector: past the 10 rows pgvector keeps in one graph element they take several
// elements, and with more of them than a neighbour list holds (2 × m at layer 0; m = 8 here) the
// lists around them hold only copies. A walk that enters them returns copies and misses the closer
// rows, in about half the index builds (random levels). The walk then ends inside a tie group, and
// the search answers from the exact path instead (migration 0015).
test('hundreds of copies of one vector: the default plan never loses the closer rows', async (ctx) => {
  const many = await startTestDatabase();
  try {
    const rand = prng(40_404);
    const alice = meta({ principals: [P.alice] });
    await writeChunks(many.pool, {
      chunks: [
        ...Array.from({ length: 4 }, (_, i) => ({
          chunk_id: `near-${i}`,
          content: `near ${i}`,
          embedding: axis(0, 1, 900 + i, 0.1 * (i + 1)),
          metadata: alice,
        })),
        ...Array.from({ length: 400 }, (_, i) => ({
          chunk_id: `many-${String(i).padStart(3, '0')}`,
          content: `copy ${i}`,
          embedding: axis(0, 0.9, 1000, 0.43),
          metadata: alice,
        })),
        ...Array.from({ length: 200 }, (_, i) => ({
          chunk_id: `fill-${String(i).padStart(3, '0')}`,
          content: `filler ${i}`,
          embedding: randomVector(rand),
          metadata: alice,
        })),
      ],
    });
    const req = { projection, embedding: query, maxResults: 10 };
    const want = ['near-0', 'near-1', 'near-2', 'near-3', ...Array.from({ length: 6 }, (_, i) => `many-00${i}`)];
    let trapped = 0;
    for (let build = 0; build < 8; build++) {
      await many.pool.query('DROP INDEX IF EXISTS fgentic.chunks_embedding_hnsw_idx');
      await many.pool.query(
        'CREATE INDEX chunks_embedding_hnsw_idx ON fgentic.chunks USING hnsw (embedding vector_cosine_ops) WITH (m = 8, ef_construction = 32)',
      );
      const walk = await searchKnowledge(many.pool, req, { ...DEFAULT_PLANNER, force: 'hnsw' });
      if (walk.hits[0]?.chunk_id !== 'near-0') trapped++;
      // The bound is lowered so the default plan would take the graph for this audience.
      const auto = await searchKnowledge(many.pool, req, { ...DEFAULT_PLANNER, exactThreshold: 5 });
      assert.deepEqual(
        auto.hits.map((h) => h.chunk_id),
        want,
        `build ${build} (${auto.plan})`,
      );
    }
    ctx.diagnostic(`walks that missed the closer rows: ${trapped} of 8 builds`);
  } finally {
    await many.close();
  }
});
