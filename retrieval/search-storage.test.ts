/**
 * Where the derived table keeps vectors (docs/filtered-search.md, "Storage and per-call cost"): in the row, next to
 * the ACL ids, so the exact path reads one page per authorized row instead of three TOAST pages for
 * its vector. pgvector declares its types with STORAGE external, so a 1024-d vector (4,104 bytes)
 * would otherwise always be out of line; fgentic.chunks sets STORAGE MAIN and toast_tuple_target
 * 8160 (a row is toasted only when it no longer fits a page, and then its other wide value goes
 * first). The origin's table keeps its own storage.
 *
 * Whether a value is in its row: on PGlite (PostgreSQL 18) `pg_column_toast_chunk_id` is NULL exactly
 * then; PostgreSQL 15 has no such function, so there the tuple's own bytes are read with pageinspect
 * (an out-of-line value is an 18-byte TOAST pointer: header byte 0x01, tag 18, VARTAG_ONDISK).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ENGINE, meta, P, prng, randomVector, startTestDatabase, type TestDatabase } from '../testkit/retrieval.ts';
import { writeChunks } from './ingest/store.ts';

let t: TestDatabase;
const rand = prng(12_012);

before(async () => {
  t = await startTestDatabase();
});

after(async () => {
  await t?.close();
});

/** For each row: is each of `columns` stored in the row (true) or out of line (false)? */
async function inRow(columns: readonly string[], where = 'true'): Promise<Map<string, boolean[]>> {
  if (ENGINE === 'pglite') {
    const r = await t.pool.query<{ chunk_id: string; inline: boolean[] }>(
      `SELECT chunk_id, ARRAY[${columns.map((c) => `pg_column_toast_chunk_id(${c}) IS NULL`).join(', ')}] AS inline
         FROM fgentic.chunks WHERE ${where}`,
    );
    return new Map(r.rows.map((row) => [row.chunk_id, row.inline]));
  }
  await t.pool.query('CREATE EXTENSION IF NOT EXISTS pageinspect');
  const attnums = (
    await t.pool.query<{ n: number }>(
      `SELECT attnum::int AS n FROM pg_attribute WHERE attrelid = 'fgentic.chunks'::regclass
         AND attname = ANY($1) ORDER BY array_position($1, attname::text)`,
      [columns],
    )
  ).rows.map((r) => r.n);
  const r = await t.pool.query<{ chunk_id: string; inline: boolean[] }>(
    `WITH tuples AS (
       SELECT i.t_ctid, i.t_attrs
         FROM generate_series(0, pg_relation_size('fgentic.chunks') / current_setting('block_size')::int - 1) AS b(blkno),
              LATERAL heap_page_item_attrs(get_raw_page('fgentic.chunks', b.blkno::int), 'fgentic.chunks'::regclass) AS i
        WHERE i.t_attrs IS NOT NULL)
     SELECT c.chunk_id,
            ARRAY(SELECT NOT (get_byte(t.t_attrs[n], 0) = 1 AND get_byte(t.t_attrs[n], 1) = 18)
                    FROM unnest($1::int[]) WITH ORDINALITY AS a(n, o) ORDER BY o) AS inline
       FROM fgentic.chunks c JOIN tuples t ON t.t_ctid = c.ctid
      WHERE ${where}`,
    [attnums],
  );
  return new Map(r.rows.map((row) => [row.chunk_id, row.inline]));
}

test('every vector of the derived table is in its row; the origin table is left as it is', async () => {
  await writeChunks(t.pool, {
    chunks: Array.from({ length: 40 }, (_, i) => ({
      chunk_id: `row-${String(i).padStart(3, '0')}`,
      content: `row ${i}`,
      embedding: randomVector(rand),
      metadata: meta({ principals: [P.alice] }),
    })),
  });
  const stored = await inRow(['embedding']);
  assert.equal(stored.size, 40);
  assert.ok(
    [...stored.values()].every(([v]) => v === true),
    'every vector in its row',
  );
  const settings = await t.pool.query(
    `SELECT (SELECT reloptions::text FROM pg_class WHERE oid = 'fgentic.chunks'::regclass) AS derived,
            (SELECT attstorage FROM pg_attribute WHERE attrelid = 'fgentic.chunks'::regclass AND attname = 'embedding') AS storage,
            (SELECT reloptions::text FROM pg_class WHERE oid = 'knowledge.chunks'::regclass) AS origin`,
  );
  assert.deepEqual(settings.rows[0], { derived: '{toast_tuple_target=8160}', storage: 'm', origin: null });
});

// A row just over a page: the toaster moves the largest eligible value out first, which is the
// vector unless STORAGE MAIN takes it off the list; here the keyword index's tsvector goes instead.
test('a row too large for its page moves its tsvector out of line, not its vector', async () => {
  // Random words, distinct enough that the tsvector is large and pglz cannot shrink it much.
  const letters = prng(7);
  const word = () => Array.from({ length: 6 }, () => String.fromCharCode(97 + Math.floor(letters() * 26))).join('');
  const content = Array.from({ length: 900 }, word).join(' ');
  await writeChunks(t.pool, {
    chunks: [
      {
        chunk_id: 'big-000',
        content,
        embedding: randomVector(rand),
        metadata: meta({ principals: [P.alice] }),
      },
    ],
  });
  const r = await inRow(['embedding', 'tsv'], "chunk_id = 'big-000'");
  assert.deepEqual(r.get('big-000'), [true, false], 'vector in the row, tsvector out of line');
});
