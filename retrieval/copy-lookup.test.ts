/**
 * Migration 0009's copy lookup on its own: when the HNSW walk sees one row at the cut-off distance,
 * the bit-identical copies of that row are taken from the vector key's index, authorized under the
 * same predicate and ordered by chunk_id, so the answer is the exact ranking's. (Only the cut-off
 * row's copies are looked up: copies of a row ranked before the cut-off that the walk did not see are
 * not, docs/filtered-search.md, "Ties".) Copies are usually in
 * the graph too, and then the walk sees them itself; here, in this test database only, the copies are
 * written while the HNSW index takes no inserts (pg_index.indisready off), so the walk cannot see
 * them and only the lookup can supply them.
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

let t: TestDatabase;

const axis = axisVector;
const query = axis(0, 1, 0, 0);
const copy = axis(0, 0.9, 1000, 0.43);
const projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));

async function hnswTakesInserts(on: boolean): Promise<void> {
  await t.pool.query(
    "UPDATE pg_catalog.pg_index SET indisready = $1 WHERE indexrelid = 'fgentic.chunks_embedding_hnsw_idx'::regclass",
    [on],
  );
}

before(async () => {
  t = await startTestDatabase();
  const rand = prng(9_009);
  const alice = meta({ principals: [P.alice] });
  await writeChunks(t.pool, {
    chunks: [
      ...nearRows(alice),
      { chunk_id: 'dup-50', content: 'copy in the graph', embedding: copy, metadata: alice },
      ...Array.from({ length: 60 }, (_, i) => ({
        chunk_id: `fill-${String(i).padStart(2, '0')}`,
        content: `filler ${i}`,
        embedding: randomVector(rand),
        metadata: alice,
      })),
    ],
  });
  await hnswTakesInserts(false);
  try {
    await writeChunks(t.pool, {
      chunks: [
        { chunk_id: 'dup-10', content: 'copy 10', embedding: copy, metadata: alice },
        // Bob's alone: the lookup applies the same predicate.
        { chunk_id: 'dup-20', content: 'copy 20', embedding: copy, metadata: meta({ principals: [P.bob] }) },
        { chunk_id: 'dup-30', content: 'copy 30', embedding: copy, metadata: alice },
      ],
    });
  } finally {
    await hnswTakesInserts(true);
  }
});

after(async () => {
  await t?.close();
});

test('copies the walk cannot see, at the cut-off: the HNSW answer is the exact ranking, copies by chunk_id, ACL applied', async () => {
  // At k = 5 the cut-off row is the copy in the graph (dup-50); the lookup must put dup-10 there (the
  // smallest chunk_id alice may read; dup-20 is bob's alone).
  const req = { projection, embedding: query, maxResults: 5 };
  const expected = ['near-0', 'near-1', 'near-2', 'near-3', 'dup-10'];
  const exact = await searchKnowledge(t.retrieval, req, { ...DEFAULT_PLANNER, force: 'exact' });
  assert.deepEqual(
    exact.hits.map((h) => h.chunk_id),
    expected,
  );
  for (const efSearch of [10, 40, 100]) {
    const approx = await searchKnowledge(t.retrieval, req, { ...DEFAULT_PLANNER, efSearch, force: 'hnsw' });
    assert.equal(approx.plan, 'hnsw');
    assert.deepEqual(
      approx.hits.map((h) => h.chunk_id),
      expected,
      `ef_search ${efSearch}`,
    );
  }
});

test('the walk itself does not see them (what makes the test above isolate the lookup)', async () => {
  // The index scan alone, under the same planner settings as the search's walk.
  const client = await t.pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(
      "SELECT set_config('enable_seqscan', 'off', true), set_config('enable_sort', 'off', true), set_config('hnsw.ef_search', '100', true)",
    );
    const r = await client.query(`SELECT chunk_id FROM fgentic.chunks ORDER BY embedding <=> $1::vector LIMIT 20`, [
      `[${query.join(',')}]`,
    ]);
    await client.query('COMMIT');
    const ids = r.rows.map((row) => String(row.chunk_id));
    assert.ok(ids.includes('dup-50'));
    for (const id of ['dup-10', 'dup-20', 'dup-30']) assert.ok(!ids.includes(id), `${id} is not in the graph`);
  } finally {
    client.release();
  }
});
