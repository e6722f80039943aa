/**
 * Ranking is defined as (distance, then chunk_id). With many rows at exactly the same distance across
 * the top-k cut-off, the approximate path must return the same ids as the exact path.
 *
 * Tied rows are built so the distances are bit-identical, not merely close: each is a·e₀ + b·eⱼ for a
 * different axis j, so every row computes the same dot product and norm against the query e₀ (adding
 * zero terms is exact in floating point), yet the rows are distinct vectors and distinct graph nodes.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  axisVector,
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
import { DEFAULT_PLANNER, type PlannerOptions } from './planner.ts';
import { type SearchResult, searchKnowledge } from './search.ts';

const TIED = 40;
const CLOSER = 4;
const FILLER = 100;
const K = 10;

let t: TestDatabase;

const axis = axisVector;

// chunk_ids in an order unrelated to insertion order, so "first inserted" cannot pass for "smallest id".
const rand = prng(13_013);
const tiedIds = Array.from({ length: TIED }, (_, i) => `tie-${String((i * 37) % TIED).padStart(3, '0')}`);
const tiedOrder = [...tiedIds].sort(() => rand() - 0.5);
const query = axis(0, 1, 0, 0);
const projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));

const search = (planner: PlannerOptions, k = K): Promise<SearchResult> =>
  searchKnowledge(t.pool, { projection, embedding: query, maxResults: k }, planner);

before(async () => {
  t = await startTestDatabase();
  const m = meta({ principals: [P.alice] });
  const chunks = [
    // Strictly closer rows, each at its own distance.
    ...Array.from({ length: CLOSER }, (_, i) => ({
      chunk_id: `near-${i}`,
      content: `near ${i}`,
      embedding: axis(0, 1, 900 + i, 0.1 * (i + 1)),
      metadata: m,
    })),
    ...tiedOrder.map((id) => ({
      chunk_id: id,
      content: `tied ${id}`,
      embedding: axis(0, 0.8, 1 + 2 * tiedIds.indexOf(id), 0.6),
      metadata: m,
    })),
    // Unrelated rows: random directions, nearly orthogonal to the query.
    ...Array.from({ length: FILLER }, (_, i) => ({
      chunk_id: `fill-${String(i).padStart(4, '0')}`,
      content: `filler ${i}`,
      embedding: randomVector(rand),
      metadata: m,
    })),
  ];
  await writeChunks(t.pool, { chunks });
});

after(async () => {
  await t?.close();
});

test('the exact path breaks exact distance ties by chunk_id', async () => {
  const exact = await search({ ...DEFAULT_PLANNER, force: 'exact' });
  const tiedDistance = exact.hits[CLOSER]?.distance;
  assert.ok(tiedDistance !== undefined);
  // The fixture really produces ties: every tied row the exact path returns has the same distance.
  for (const h of exact.hits.slice(CLOSER)) assert.equal(h.distance, tiedDistance);
  const want = [...Array.from({ length: CLOSER }, (_, i) => `near-${i}`), ...[...tiedIds].sort().slice(0, K - CLOSER)];
  assert.deepEqual(
    exact.hits.map((h) => h.chunk_id),
    want,
  );
});

// HNSW need not visit every row tied at the cut-off (one run at ef_search 40 returned tie-008 instead
// of tie-002), so the search function takes the tie group from an exact lookup of that distance.
test('the approximate path returns the exact ranking when distances tie at the cut-off', async () => {
  for (const k of [5, K, 20]) {
    const exact = await search({ ...DEFAULT_PLANNER, force: 'exact' }, k);
    for (const efSearch of [1, 10, 40, 100, 400]) {
      const approx = await search({ ...DEFAULT_PLANNER, efSearch, force: 'hnsw' }, k);
      assert.equal(approx.plan, 'hnsw');
      // Same distances found...
      assert.deepEqual(
        approx.hits.map((h) => h.distance),
        exact.hits.map((h) => h.distance),
      );
      // ...so the same ids, in the same order.
      assert.deepEqual(
        approx.hits.map((h) => h.chunk_id),
        exact.hits.map((h) => h.chunk_id),
        `k ${k}, ef_search ${efSearch}`,
      );
    }
  }
});
