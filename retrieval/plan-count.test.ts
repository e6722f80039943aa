/**
 * The bounded count that chooses the plan (migration 0012): when ANALYZE's statistics say many rows
 * pass the integer prefilter, the count first reads the table's first pages, then falls back to the
 * GIN count if those pages hold too few authorized rows. The plan must be the one an exact count
 * gives, wherever the authorized rows sit in the table: here alice may read half the rows, and they
 * are written either before or after all of bob's (with vectors in the row, about one row per page).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { writeChunks } from './ingest/store.ts';
import { DEFAULT_PLANNER, type PlannerOptions } from './planner.ts';
import { searchKnowledge } from './search.ts';
import {
  decodeFixture,
  matrixHeader,
  meta,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from './testing.ts';

const HALF = 100;
// bound = max(exact_threshold, 3 % of 200 rows) = 20: alice's 100 rows take the HNSW plan, carol's 10
// the exact one. The statistics put alice at a share of 0.5, so her count starts with the first
// ceil(2 × 21 ÷ 0.5) = 84 pages.
const PLANNER: PlannerOptions = { ...DEFAULT_PLANNER, exactThreshold: 20 };
let t: TestDatabase;

const rand = prng(120_012);
const query = randomVector(rand);
// A few of alice's rows lie near the query, so the recall guard keeps an HNSW answer (its k-th
// distance is far below the corpus mean).
const near = (v: readonly number[]) => {
  const noise = randomVector(rand);
  return v.map((x, i) => x + 0.2 * (noise[i] as number));
};

function rows(prefix: string, owner: 'alice' | 'bob') {
  return Array.from({ length: HALF }, (_, i) => ({
    chunk_id: `${prefix}-${owner}-${String(i).padStart(3, '0')}`,
    content: `${owner} ${i}`,
    embedding: owner === 'alice' && i < 10 ? near(query) : randomVector(rand),
    metadata: meta({
      principals: owner === 'alice' ? (i < 10 ? [P.alice, P.carol] : [P.alice]) : [P.bob],
    }),
  }));
}

async function load(order: 'alice-first' | 'alice-last') {
  await t.pool.query('TRUNCATE knowledge.chunks');
  const alice = rows(order, 'alice');
  const bob = rows(order, 'bob');
  // One statement per row, so the physical order is the order written.
  for (const c of order === 'alice-first' ? [...alice, ...bob] : [...bob, ...alice])
    await writeChunks(t.pool, { chunks: [c] });
  const pages = await t.pool.query<{ n: number }>(
    "SELECT count(DISTINCT (ctid::text::point)[0])::int AS n FROM knowledge.chunks WHERE chunk_id LIKE '%-alice-%'",
  );
  // The premise: alice's rows fill about one page each, so where they sit decides what 84 pages hold.
  assert.ok((pages.rows[0]?.n ?? 0) >= HALF * 0.9);
}

const plan = async (who: (typeof P)[keyof typeof P]) =>
  (
    await searchKnowledge(
      t.pool,
      {
        projection: decodeFixture(matrixHeader({ caller: who, audience: [who] })),
        embedding: query,
        maxResults: 5,
      },
      PLANNER,
    )
  ).plan;

before(async () => {
  t = await startTestDatabase();
});

after(async () => {
  await t?.close();
});

for (const order of ['alice-first', 'alice-last'] as const) {
  test(`the plan follows the authorized count, not the pages read first (${order})`, async () => {
    await load(order);
    assert.equal(await plan(P.alice), 'hnsw');
    assert.equal(await plan(P.carol), 'exact');
  });
}
