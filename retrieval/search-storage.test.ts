/**
 * Where vectors are stored (migration 0012, docs/filtered-search.md "Storage"): a row written after
 * the migration keeps its vector in the row; a row written before it keeps its out-of-line (TOAST)
 * vector until the table is rewritten (VACUUM FULL), since the migration itself rewrites nothing.
 * Storage is invisible to ranking: every path returns the same ids and distances over mixed and
 * rewritten tables.
 *
 * Whether a value is in its row: on PGlite (PostgreSQL 18) `pg_column_toast_chunk_id` is NULL exactly
 * then; PostgreSQL 15 has no such function, so there the tuple's own bytes are read with pageinspect
 * (an out-of-line value is an 18-byte TOAST pointer: header byte 0x01, tag 18, VARTAG_ONDISK).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { writeChunks } from './ingest/store.ts';
import { DEFAULT_PLANNER, type PlannerOptions } from './planner.ts';
import { searchKnowledge } from './search.ts';
import {
  decodeFixture,
  ENGINE,
  matrixHeader,
  meta,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from './testing.ts';

const MIGRATION = new URL('./db/migrations/0012_inline_vectors.sql', import.meta.url);
const ROWS = 60;
let t: TestDatabase;

const rand = prng(12_012);
const vectors = Array.from({ length: 2 * ROWS }, () => randomVector(rand));
const queries = Array.from({ length: 4 }, () => randomVector(rand));
const projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
const chunk = (i: number, prefix: string) => ({
  chunk_id: `${prefix}-${String(i).padStart(3, '0')}`,
  content: `row ${i}`,
  embedding: vectors[i] as number[],
  metadata: meta({ principals: i % 4 === 3 ? [P.bob] : [P.alice] }),
});

/** For each row: is each of `columns` stored in the row (true) or out of line (false)? */
async function inRow(columns: readonly string[], where = 'true'): Promise<Map<string, boolean[]>> {
  if (ENGINE === 'pglite') {
    const r = await t.pool.query<{ chunk_id: string; inline: boolean[] }>(
      `SELECT chunk_id, ARRAY[${columns.map((c) => `pg_column_toast_chunk_id(${c}) IS NULL`).join(', ')}] AS inline
         FROM knowledge.chunks WHERE ${where}`,
    );
    return new Map(r.rows.map((row) => [row.chunk_id, row.inline]));
  }
  await t.pool.query('CREATE EXTENSION IF NOT EXISTS pageinspect');
  const attnums = (
    await t.pool.query<{ n: number }>(
      `SELECT attnum::int AS n FROM pg_attribute WHERE attrelid = 'knowledge.chunks'::regclass
         AND attname = ANY($1) ORDER BY array_position($1, attname::text)`,
      [columns],
    )
  ).rows.map((r) => r.n);
  const r = await t.pool.query<{ chunk_id: string; inline: boolean[] }>(
    `WITH tuples AS (
       SELECT i.t_ctid, i.t_attrs
         FROM generate_series(0, pg_relation_size('knowledge.chunks') / current_setting('block_size')::int - 1) AS b(blkno),
              LATERAL heap_page_item_attrs(get_raw_page('knowledge.chunks', b.blkno::int), 'knowledge.chunks'::regclass) AS i
        WHERE i.t_attrs IS NOT NULL)
     SELECT c.chunk_id,
            ARRAY(SELECT NOT (get_byte(t.t_attrs[n], 0) = 1 AND get_byte(t.t_attrs[n], 1) = 18)
                    FROM unnest($1::int[]) WITH ORDINALITY AS a(n, o) ORDER BY o) AS inline
       FROM knowledge.chunks c JOIN tuples t ON t.t_ctid = c.ctid
      WHERE ${where}`,
    [attnums],
  );
  return new Map(r.rows.map((row) => [row.chunk_id, row.inline]));
}

/** chunk_id → its vector stored in its row (true) or out of line (false). */
async function inline(): Promise<Map<string, boolean>> {
  return new Map([...(await inRow(['embedding']))].map(([id, [v]]) => [id, v === true]));
}

async function rankings(): Promise<string> {
  const out: unknown[] = [];
  for (const force of ['exact', 'hnsw'] as const) {
    const planner: PlannerOptions = { ...DEFAULT_PLANNER, force, efSearch: 400 };
    for (const embedding of queries) {
      const r = await searchKnowledge(t.pool, { projection, embedding, maxResults: 10 }, planner);
      assert.equal(r.plan, force);
      out.push(r.hits.map((h) => [h.chunk_id, h.distance]));
    }
  }
  return JSON.stringify(out);
}

before(async () => {
  t = await startTestDatabase();
});

after(async () => {
  await t?.close();
});

test('migration 0012 stores new vectors in the row, leaves old ones out of line until VACUUM FULL, and ranks the same', async () => {
  // The table as it was before the migration: pgvector's default storage and TOAST threshold.
  await t.pool.query('ALTER TABLE knowledge.chunks RESET (toast_tuple_target)');
  await t.pool.query('ALTER TABLE knowledge.chunks ALTER COLUMN embedding SET STORAGE EXTERNAL');
  await writeChunks(t.pool, { chunks: Array.from({ length: ROWS }, (_, i) => chunk(i, 'old')) });
  const before = await inline();
  assert.equal(before.size, ROWS);
  assert.ok(
    [...before.values()].every((v) => !v),
    'without the migration every vector is out of line',
  );
  const oldRanking = await rankings();

  await t.pool.query(readFileSync(MIGRATION, 'utf8'));
  // Nothing was rewritten: the same rows, still out of line, ranked the same.
  assert.deepEqual(await inline(), before);
  assert.equal(await rankings(), oldRanking);

  await writeChunks(t.pool, { chunks: Array.from({ length: ROWS }, (_, i) => chunk(ROWS + i, 'new')) });
  const mixed = await inline();
  for (const [id, isInline] of mixed) assert.equal(isInline, id.startsWith('new-'), id);
  const mixedRanking = await rankings();
  // The new rows take part in the ranking (the queries are random, so some land near them).
  assert.match(mixedRanking, /"new-/);

  await t.pool.query('VACUUM FULL knowledge.chunks');
  const rewritten = await inline();
  assert.equal(rewritten.size, 2 * ROWS);
  assert.ok(
    [...rewritten.values()].every((v) => v),
    'VACUUM FULL moves every vector into its row',
  );
  assert.equal(await rankings(), mixedRanking);
});

// A row just over a page with its vector and content both out-of-line candidates: the toaster moves
// the largest eligible value out first, which is the vector unless STORAGE MAIN takes it off the list.
test('a row too large for its page moves its content out of line, not its vector', async () => {
  // Random letters, fewer bytes than the vector: pglz cannot shrink them, and they are not the largest value.
  const letters = prng(7);
  const content = Array.from({ length: 3990 }, () =>
    String.fromCharCode(97 + Math.floor(letters() * 26)),
  ).join('');
  await writeChunks(t.pool, { chunks: [{ ...chunk(0, 'big'), content }] });
  const r = await inRow(['embedding', 'content'], "chunk_id = 'big-000'");
  assert.deepEqual(r.get('big-000'), [true, false], 'vector in the row, content out of line');
});

// With the default threshold (~2 KB) every row holding a 1024-d vector is over it, so the toaster
// compresses its content and metadata; the ACL recheck would then decompress metadata on every row.
test('a row that fits its page is stored as written: content and metadata uncompressed, in the row', async () => {
  const content = 'Quarterly plan for the storage team. '.repeat(40);
  await writeChunks(t.pool, { chunks: [{ ...chunk(1, 'page'), content }] });
  const r = await t.pool.query(
    `SELECT pg_column_compression(content) AS content_compression,
       pg_column_compression(metadata) AS metadata_compression
     FROM knowledge.chunks WHERE chunk_id = 'page-001'`,
  );
  assert.deepEqual(r.rows, [{ content_compression: null, metadata_compression: null }]);
  assert.deepEqual((await inRow(['content', 'embedding'], "chunk_id = 'page-001'")).get('page-001'), [
    true,
    true,
  ]);
});
