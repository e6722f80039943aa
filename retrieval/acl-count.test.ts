/**
 * The plan's choice (docs/filtered-search.md) reads fgentic.acl_counts, the number of rows that
 * carry each ACL id, which statement triggers on the derived table keep. Every kind of write the
 * origin's own writers make (insert, upsert, ACL update, rename, content-only update, delete,
 * truncate), followed by a sync, must leave the counts equal to a recount of the derived table, and
 * the plan must follow them as the writes change them: a stale count would choose HNSW for an
 * audience that can read only a few rows, or the exact path for one that can read many.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  decodeFixture,
  matrixHeader,
  meta,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from '../testkit/retrieval.ts';
import { syncAll } from './db/migrate.ts';
import { INGESTION_ROLE } from './db/roles.ts';
import { writeChunks } from './ingest/store.ts';
import { DEFAULT_PLANNER, type PlannerOptions } from './planner.ts';
import { searchKnowledge } from './search.ts';

// bound = max(exact_threshold, 3 % of the rows) = 20 for the 40 rows below.
const PLANNER: PlannerOptions = { ...DEFAULT_PLANNER, exactThreshold: 20 };
let t: TestDatabase;

const rand = prng(140_014);
const query = randomVector(rand);
// Bob's first rows lie near the query, so the recall guard keeps an HNSW answer for him.
const near = () => {
  const noise = randomVector(rand);
  return query.map((x, i) => x + 0.2 * (noise[i] as number));
};
const id = (i: number) => `r${String(i).padStart(2, '0')}`;

// Ids whose kept count differs from a recount of the derived table (0 when equal).
async function drift(): Promise<number> {
  const r = await t.pool.query<{ n: number }>(`
    WITH recount AS (SELECT u.id, count(*) AS rows FROM fgentic.chunks d, unnest(d.acl) AS u(id) GROUP BY u.id),
      kept AS (SELECT id, rows FROM fgentic.acl_counts WHERE rows > 0)
    SELECT ((SELECT count(*) FROM (SELECT * FROM kept EXCEPT SELECT * FROM recount) a)
      + (SELECT count(*) FROM (SELECT * FROM recount EXCEPT SELECT * FROM kept) b))::int AS n`);
  return r.rows[0]?.n ?? -1;
}

const plan = async (who: (typeof P)[keyof typeof P]) =>
  (
    await searchKnowledge(
      t.retrieval,
      {
        projection: decodeFixture(matrixHeader({ caller: who, audience: [who] })),
        embedding: query,
        maxResults: 5,
      },
      PLANNER,
    )
  ).plan;

const principals = (ps: readonly (typeof P)[keyof typeof P][]) => JSON.stringify(ps);

/** The `sync` command's work, as the ingestion role. */
async function sync(): Promise<void> {
  const client = await t.ingestion.connect();
  try {
    await syncAll(client, INGESTION_ROLE);
  } finally {
    client.release();
  }
}

before(async () => {
  t = await startTestDatabase();
  // r00–r09 near the query, readable by alice and bob; r10–r39 elsewhere, alice only.
  await writeChunks(t.ingestion, {
    chunks: Array.from({ length: 40 }, (_, i) => ({
      chunk_id: id(i),
      content: `row ${i}`,
      embedding: i < 10 ? near() : randomVector(rand),
      metadata: meta({ principals: i < 10 ? [P.alice, P.bob] : [P.alice] }),
    })),
  });
  await t.pool.query('ANALYZE fgentic.chunks');
});

after(async () => {
  await t?.close();
});

describe('the per-id counts follow every write', () => {
  test('after the initial write: alice (40 rows) on HNSW, bob (10 rows) exact', async () => {
    assert.equal(await drift(), 0);
    assert.equal(await plan(P.alice), 'hnsw');
    assert.equal(await plan(P.bob), 'exact');
  });

  test('an ACL update moves bob above the bound', async () => {
    await t.ingestion.query(
      `UPDATE knowledge.chunks SET metadata = jsonb_set(metadata, '{allowed_principals}', $1::jsonb)
       WHERE chunk_id BETWEEN 'r10' AND 'r24'`,
      [principals([P.alice, P.bob])],
    );
    // Not searched as widened until a sync takes the changed rows.
    assert.equal(await plan(P.bob), 'exact');
    await sync();
    assert.equal(await drift(), 0);
    assert.equal(await plan(P.bob), 'hnsw');
  });

  test('content-only updates, renames and upserts keep the counts equal', async () => {
    await t.ingestion.query("UPDATE knowledge.chunks SET content = content || ' (edited)'");
    await t.ingestion.query("UPDATE knowledge.chunks SET chunk_id = 'r39-renamed' WHERE chunk_id = 'r39'");
    await sync();
    assert.equal(await drift(), 0);
    // An upsert of an existing row with a new ACL: bob loses r24.
    const [row] = (
      await t.pool.query<{ e: string }>("SELECT embedding::text AS e FROM knowledge.chunks WHERE chunk_id = 'r24'")
    ).rows;
    await t.ingestion.query(
      `INSERT INTO knowledge.chunks (chunk_id, content, embedding, metadata) VALUES ('r24', 'row 24', $1, $2)
       ON CONFLICT (chunk_id) DO UPDATE SET metadata = EXCLUDED.metadata`,
      [row?.e, JSON.stringify(meta({ principals: [P.alice] }))],
    );
    await sync();
    assert.equal(await drift(), 0);
    assert.equal(await plan(P.bob), 'hnsw');
  });

  test('a delete moves bob back to the exact path', async () => {
    await t.ingestion.query("DELETE FROM knowledge.chunks WHERE chunk_id BETWEEN 'r10' AND 'r19'");
    await sync();
    assert.equal(await drift(), 0);
    // 10 near rows + r20–r23: 14 authorized, at or below the bound.
    assert.equal(await plan(P.bob), 'exact');
    assert.equal(await plan(P.alice), 'hnsw');
  });

  test('truncate empties the counts', async () => {
    await t.pool.query('TRUNCATE knowledge.chunks');
    await sync();
    const n = await t.pool.query<{ n: number }>(
      'SELECT (SELECT coalesce(sum(rows), 0) FROM fgentic.acl_counts) + (SELECT count(*) FROM fgentic.chunks) AS n',
    );
    assert.equal(Number(n.rows[0]?.n), 0);
    await t.pool.query('TRUNCATE fgentic.chunks');
    assert.equal(await drift(), 0);
  });
});
