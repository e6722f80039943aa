/**
 * The bulk-load path (indexes dropped, rows loaded, indexes re-created from their recorded
 * definitions, one transaction) against the row-by-row path on the real embedded Postgres: same
 * rows, ACLs and search results; readers never see a partial load or a row they may not read; a
 * failure anywhere restores rows and indexes; a session that may not act as the owner writes row by
 * row; after-write maintenance leaves no GIN pending list behind.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import fc from 'fast-check';
import type pg from 'pg';
import type { MatrixPrincipal } from '../../contract/index.ts';
import {
  decodeFixture,
  interceptingPool,
  matrixHeader,
  meta,
  oauthHeader,
  P,
  prng,
  startTestDatabase,
  type TestDatabase,
} from '../../testkit/retrieval.ts';
import { toVectorBinary } from '../db/pool.ts';
import { INGESTION_ROLE, OWNER_ROLE } from '../db/roles.ts';
import { createLocalEmbedder } from '../embeddings/local.ts';
import { DEFAULT_PLANNER } from '../planner.ts';
import { searchKnowledge } from '../search.ts';
import { type IngestRecord, ingestRecords, prepareRecords } from './jsonl.ts';
import { withIngestionLease } from './lease.ts';
import {
  ACL_ONLY_WEIGHT,
  BULK_MIN_ROWS,
  BULK_TABLE_RATIO,
  bulkPays,
  CommitCallbackError,
  type StoredChunk,
  VECTOR_INDEX_MIN_ROWS,
  vectorIndexWaits,
  type WriteOptions,
  writeChunks,
} from './store.ts';

let t: TestDatabase;
const embedder = createLocalEmbedder();

before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});
beforeEach(async () => {
  await t.pool.query('DELETE FROM knowledge.chunks; DELETE FROM fgentic.chunks');
  // A test that bulk-loaded a small table left the vector index deferred; every test starts with it.
  await restoreDeferred(t.pool);
});

/** Builds every deferred index now, as a fixture (the superuser session). */
async function restoreDeferred(pool: pg.Pool): Promise<void> {
  const r = await pool.query('DELETE FROM fgentic.deferred_indexes RETURNING def');
  for (const row of r.rows) await pool.query(row.def);
}

const deferred = async (pool = t.pool) =>
  (await pool.query('SELECT name, am FROM fgentic.deferred_indexes ORDER BY name')).rows;

const PEOPLE: readonly MatrixPrincipal[] = [P.alice, P.bob, P.carol, P.slackBob];
const WORDS = 'budget travel incident backup roadmap partner review release policy guide'.split(' ');

/** A seeded corpus with mixed ACLs, classifications, groups and sources. */
function corpus(n: number, seed: number, tag = ''): IngestRecord[] {
  const rand = prng(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)] as T;
  return Array.from({ length: n }, (_, i) => {
    const principals = PEOPLE.filter(() => rand() < 0.4);
    const groups = rand() < 0.3 ? ['partner/org-b/docs'] : [];
    return {
      content: `${tag}chunk ${i} on ${pick(WORDS)} and ${pick(WORDS)} for team ${i % 13}`,
      metadata: meta({
        source: `docs/s-${i % 7}.md`,
        classification: rand() < 0.8 ? 'public' : 'approved_non_public',
        principals: principals.length + groups.length === 0 ? [P.alice] : principals,
        groups,
      }),
    };
  });
}

/** The records as the store takes them, embedded. */
async function stored(records: readonly IngestRecord[]): Promise<StoredChunk[]> {
  const { prepared } = prepareRecords(records, embedder.profile);
  const vectors = await embedder.embed(prepared.map((p) => p.content));
  return prepared.map((p, i) => ({
    chunk_id: p.chunk_id,
    content: p.content,
    metadata: p.metadata,
    embedding: vectors[i] ?? [],
  }));
}

/** Everything a reader or the planner could tell apart: rows with their ACLs and vectors, and indexes. */
async function snapshot() {
  const rows = (
    await t.pool.query(
      'SELECT chunk_id, content, metadata, embedding::text AS e FROM knowledge.chunks ORDER BY chunk_id',
    )
  ).rows;
  return { rows, indexes: await indexes() };
}

async function indexes() {
  return (
    await t.pool.query(
      `SELECT c.relname AS indexname, pg_get_indexdef(i.indexrelid) AS indexdef,
              i.indisvalid AND i.indisready AS usable,
              obj_description(i.indexrelid, 'pg_class') AS comment
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'fgentic.chunks'::regclass ORDER BY c.relname`,
    )
  ).rows;
}

const projections = [
  decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] })),
  decodeFixture(matrixHeader({ caller: P.bob, audience: [P.bob, P.carol] })),
  decodeFixture(
    matrixHeader({
      caller: P.slackBob,
      audience: [P.slackBob],
      classifications: ['approved_non_public', 'public'],
    }),
  ),
  decodeFixture(oauthHeader({ policy: 'org-b', groups: ['partner/org-b/docs'] })),
];

/** Vector and hybrid searches for several audiences; ids and distances in ranked order. */
async function searches(queries: readonly string[]) {
  const out: unknown[] = [];
  for (const q of queries) {
    const [embedding] = await embedder.embed([q]);
    for (const projection of projections)
      for (const mode of ['vector', 'hybrid'] as const) {
        const r = await searchKnowledge(t.retrieval, {
          projection,
          embedding: embedding ?? [],
          maxResults: 10,
          mode,
          queryText: q,
        });
        out.push(r.hits.map((h) => [h.chunk_id, h.distance.toFixed(6)]));
      }
  }
  return out;
}

/** The pool, recording the text of every statement its clients run. */
const recording = (pool: pg.Pool, into: string[]): pg.Pool =>
  interceptingPool(pool, (text) => {
    into.push(text);
    return undefined;
  });

const ingest = (records: readonly IngestRecord[], path: WriteOptions['path']) =>
  withIngestionLease(t.pool, (writer) => ingestRecords(writer, embedder, records, undefined, {}, { path }));

describe('bulk load', () => {
  test('the threshold: many rows relative to the table, never a handful', () => {
    assert.equal(bulkPays(BULK_MIN_ROWS, 0), true);
    assert.equal(bulkPays(BULK_MIN_ROWS - 1, 0), false);
    assert.equal(bulkPays(1000, 2000), true);
    assert.equal(bulkPays(1000, 2001), false);
  });

  test('the threshold counts an ACL-only row as a fraction of a new vector', () => {
    // An ACL change alone: only of the whole table, and of at least BULK_MIN_ROWS / ACL_ONLY_WEIGHT rows.
    const least = Math.ceil(BULK_MIN_ROWS / ACL_ONLY_WEIGHT);
    assert.equal(ACL_ONLY_WEIGHT * BULK_TABLE_RATIO, 1);
    assert.equal(bulkPays(0, least, least), true);
    assert.equal(bulkPays(0, least + 1, least), false, 'one row of the table left out');
    assert.equal(bulkPays(0, 5000, 5000), true);
    assert.equal(bulkPays(0, 5000, 4999), false);
    assert.equal(bulkPays(0, 0, least - 1), false);
    // Mixed: new vectors and ACL-only rows add up.
    assert.equal(bulkPays(400, 0, (BULK_MIN_ROWS - 400) / ACL_ONLY_WEIGHT - 1), false);
    assert.equal(bulkPays(400, 0, (BULK_MIN_ROWS - 400) / ACL_ONLY_WEIGHT), true);
    const weighted = 400 + 400 * ACL_ONLY_WEIGHT;
    assert.equal(bulkPays(400, weighted * BULK_TABLE_RATIO, 400), true);
    assert.equal(bulkPays(400, weighted * BULK_TABLE_RATIO + 1, 400), false);
  });

  test('the ACL index is dropped for the load and re-created as defined; the per-id counts match the table', async () => {
    const original = await indexes();
    const statements: string[] = [];
    const stats = await withIngestionLease(recording(t.pool, statements), (writer) =>
      ingestRecords(writer, embedder, corpus(BULK_MIN_ROWS + 100, 8), undefined, {}, { path: 'auto' }),
    );
    assert.equal(stats.path, 'bulk');
    // Its GIN index (fastupdate off) is dropped for the load and re-created.
    assert.ok(statements.includes('DROP INDEX fgentic.chunks_acl_gin_idx'));
    assert.ok(statements.some((s) => /^CREATE INDEX chunks_acl_gin_idx ON fgentic\.chunks /.test(s)));
    await restoreDeferred(t.pool);
    assert.deepEqual(await indexes(), original);
    const drift = await t.pool.query(
      `WITH recount AS (SELECT u.id, count(*) AS rows FROM fgentic.chunks d, unnest(d.acl) AS u(id) GROUP BY u.id),
         kept AS (SELECT id, rows FROM fgentic.acl_counts WHERE rows > 0)
       SELECT count(*)::int AS n FROM ((SELECT * FROM kept EXCEPT SELECT * FROM recount)
         UNION ALL (SELECT * FROM recount EXCEPT SELECT * FROM kept)) d`,
    );
    assert.equal(drift.rows[0].n, 0);
  });

  test('bulk and row-by-row writes of the same input leave the same rows, ACLs, indexes and search results', async () => {
    const input = corpus(BULK_MIN_ROWS + 100, 7);
    const queries = ['budget travel', 'incident backup for team 3', 'release policy'];
    const rowsStats = await ingest(input, 'rows');
    assert.equal(rowsStats.path, 'rows');
    const byRows = { ...(await snapshot()), results: await searches(queries) };
    await t.pool.query('DELETE FROM knowledge.chunks; DELETE FROM fgentic.chunks');
    const bulkStats = await ingest(input, 'auto');
    assert.equal(bulkStats.path, 'bulk', 'an empty table and 600 new rows take the bulk path');
    const byBulk = { ...(await snapshot()), results: await searches(queries) };
    assert.equal(byBulk.rows.length, input.length);
    assert.deepEqual(byBulk.rows, byRows.rows);
    // 600 rows is at most VECTOR_INDEX_MIN_ROWS: the HNSW index waits, recorded; every other index
    // is as the row path left it, and searches return the same rows at the same distances.
    assert.ok(input.length <= VECTOR_INDEX_MIN_ROWS);
    assert.deepEqual(await deferred(), [{ name: 'fgentic.chunks_embedding_hnsw_idx', am: 'hnsw' }]);
    assert.deepEqual(
      byBulk.indexes,
      byRows.indexes.filter((i: { indexname: string }) => i.indexname !== 'chunks_embedding_hnsw_idx'),
    );
    assert.ok(byBulk.indexes.every((i: { usable: boolean }) => i.usable));
    assert.deepEqual(byBulk.results, byRows.results);
    assert.deepEqual(
      { ...bulkStats, path: 'rows' },
      { ...rowsStats },
      'both report the same counts and both maintained the table',
    );
  });

  test('property: any sequence of ingests gives the same table on either path', async () => {
    const record = fc.record({
      text: fc.constantFrom(...WORDS),
      n: fc.integer({ min: 0, max: 20 }),
      source: fc.integer({ min: 0, max: 3 }),
      who: fc.subarray([...PEOPLE], { minLength: 1 }),
      groups: fc.constantFrom([], ['partner/org-b/docs']),
      classification: fc.constantFrom('public' as const, 'restricted' as const),
    });
    const step = fc.record({
      records: fc.uniqueArray(record, {
        minLength: 1,
        maxLength: 12,
        selector: (r) => `${r.source} ${r.text} ${r.n}`,
      }),
      tombstone: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 3 }), async (steps) => {
        const inputs: IngestRecord[][] = steps.map((s) => {
          const written = new Set(s.records.map((r) => r.source));
          return [
            ...s.records.map((r) => ({
              content: `${r.text} number ${r.n}`,
              metadata: meta({
                source: `docs/p-${r.source}.md`,
                classification: r.classification,
                principals: r.who,
                groups: r.groups,
              }),
            })),
            ...(s.tombstone !== undefined && !written.has(s.tombstone)
              ? [{ delete_source: `docs/p-${s.tombstone}.md` }]
              : []),
          ];
        });
        const run = async (path: 'rows' | 'bulk') => {
          await t.pool.query('DELETE FROM knowledge.chunks; DELETE FROM fgentic.chunks');
          await restoreDeferred(t.pool);
          const stats = [];
          for (const input of inputs) {
            const s = await ingest(input, path);
            stats.push({ ...s, path: undefined });
          }
          // A small table's vector index waits after a bulk load (tested on its own below); the
          // rest of the table must be identical, and so must the index once it is built.
          const waiting = (await deferred()).map((d: { am: string }) => d.am);
          assert.ok(waiting.every((am: string) => am === 'hnsw'));
          await restoreDeferred(t.pool);
          return { ...(await snapshot()), stats };
        };
        const byRows = await run('rows');
        const byBulk = await run('bulk');
        assert.deepEqual(byBulk, byRows);
      }),
      { numRuns: 6, seed: 1207 },
    );
  });

  test('a reader during a bulk load sees the table before or after it, never a part, never a row it may not read', async () => {
    // Bob's rows exist; the load adds Alice-only rows. A load committed in pieces, or rows visible
    // before their indexes or ACLs, would show up as a count between the two states.
    const bobRows = corpus(50, 3, 'bob ').map((r) =>
      'content' in r
        ? { ...r, metadata: { ...(r.metadata as object), allowed_principals: [P.bob], allowed_groups: [] } }
        : r,
    );
    await ingest(bobRows, 'rows');
    const bobIds = new Set(
      (await t.pool.query('SELECT chunk_id FROM knowledge.chunks')).rows.map((r) => r.chunk_id as string),
    );
    const aliceRows = corpus(BULK_MIN_ROWS + 50, 4, 'alice ').map((r) =>
      'content' in r
        ? {
            ...r,
            metadata: {
              ...(r.metadata as object),
              source: { id: 'docs/alice.md' },
              allowed_principals: [P.alice],
              allowed_groups: [],
            },
          }
        : r,
    );
    const bob = decodeFixture(matrixHeader({ caller: P.bob, audience: [P.bob] }));
    const alice = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    const [q] = await embedder.embed(['budget travel']);
    let finished = false;
    const load = ingest(aliceRows, 'auto').finally(() => {
      finished = true;
    });
    const counts = new Set<number>();
    let reads = 0;
    while (!finished || reads < 2) {
      const n = Number((await t.pool.query('SELECT count(*) AS n FROM knowledge.chunks')).rows[0].n);
      counts.add(n);
      const forBob = await searchKnowledge(t.retrieval, {
        projection: bob,
        embedding: q ?? [],
        maxResults: 20,
      });
      for (const h of forBob.hits) assert.ok(bobIds.has(h.chunk_id), 'Bob sees only his rows');
      const forAlice = await searchKnowledge(t.retrieval, {
        projection: alice,
        embedding: q ?? [],
        maxResults: 20,
      });
      for (const h of forAlice.hits) assert.ok(!bobIds.has(h.chunk_id), 'Alice sees only hers');
      assert.ok(forAlice.hits.length === 0 || forAlice.hits.length === 20, 'none of the load, or all of it');
      reads += 1;
    }
    const stats = await load;
    assert.equal(stats.path, 'bulk');
    assert.deepEqual(
      [...counts].filter((c) => c !== bobRows.length && c !== bobRows.length + aliceRows.length),
      [],
      'every count is the state before or after the load',
    );
    assert.ok(counts.has(bobRows.length + aliceRows.length));
  });

  test('a row that fails its CHECK in the last batch rolls back the whole load, and the dropped indexes with it', async () => {
    await ingest(corpus(20, 5, 'existing '), 'rows');
    const before = await snapshot();
    const [v] = await embedder.embed(['x']);
    const chunks: StoredChunk[] = Array.from({ length: BULK_MIN_ROWS + 10 }, (_, i) => ({
      chunk_id: `load-${i}`,
      content: `load ${i}`,
      embedding: v ?? [],
      // The database's own metadata CHECK refuses a localpart-only principal (validation bypassed here).
      metadata:
        i === BULK_MIN_ROWS + 9
          ? ({
              ...meta({ principals: [P.alice] }),
              allowed_principals: [{ kind: 'matrix', principal: '@alice' }],
            } as never)
          : meta({ principals: [P.alice] }),
    }));
    let path: string | undefined;
    await assert.rejects(
      withIngestionLease(t.pool, (w) =>
        writeChunks(w, { chunks }, undefined, {
          path: 'bulk',
          onPhase: (label) => {
            path = label;
          },
        }),
      ),
      (err: { code?: string }) => err.code === '23514',
    );
    assert.equal(path, undefined, 'it failed while loading, before the indexes were rebuilt');
    assert.deepEqual(await snapshot(), before);
  });

  test('a fault while an index is re-created rolls back the load and leaves every index as it was', async () => {
    await ingest(corpus(20, 6, 'existing '), 'rows');
    const before = await snapshot();
    let builds = 0;
    // A connection that fails on the second CREATE INDEX, as a dropped connection or a full disk would.
    const faulty = interceptingPool(t.pool, (text) =>
      /^CREATE INDEX/.test(text) && ++builds === 2 ? new Error('injected fault') : undefined,
    );
    await assert.rejects(
      withIngestionLease(faulty, (writer) =>
        ingestRecords(writer, embedder, corpus(BULK_MIN_ROWS, 8, 'new '), undefined, {}, { path: 'bulk' }),
      ),
      /injected fault/,
    );
    assert.equal(builds, 2);
    assert.deepEqual(await snapshot(), before);
    assert.deepEqual(await deferred(), [], 'the deferral was rolled back with the load');
    // And the table still takes a bulk load afterwards (its vector index waits: 520 rows).
    const again = await ingest(corpus(BULK_MIN_ROWS, 8, 'new '), 'auto');
    assert.equal(again.path, 'bulk');
    assert.deepEqual(await deferred(), [{ name: 'fgentic.chunks_embedding_hnsw_idx', am: 'hnsw' }]);
    await restoreDeferred(t.pool);
    assert.deepEqual((await snapshot()).indexes, before.indexes);
  });

  test('a lock not granted in time or a deadlock while locking: row by row in the same transaction; any other error fails the write', async () => {
    // The real server fails the LOCK statement itself with these codes (lock_timeout: 55P03; the
    // deadlock detector, when a reader holding the ACL copy waits for the table: 40P01) and aborts
    // the transaction: the statement is replaced by one that raises the same code on the server.
    const failLock = (code: string) =>
      interceptingPool(t.pool, (text) =>
        text.startsWith('LOCK TABLE')
          ? `DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '${code}'; END $$`
          : undefined,
      );
    for (const [code, prefix] of [
      ['40P01', 'deadlock '],
      ['55P03', 'lock-wait '],
    ] as const) {
      await ingest(corpus(20, 10, 'existing '), 'rows');
      const before = await indexes();
      const stats = await withIngestionLease(failLock(code), (writer) =>
        ingestRecords(writer, embedder, corpus(BULK_MIN_ROWS, 10, prefix), undefined, {}, { path: 'bulk' }),
      );
      assert.equal(stats.path, 'rows', code);
      assert.equal(stats.upserted, BULK_MIN_ROWS, code);
      assert.deepEqual(await indexes(), before, `${code}: no index was dropped`);
      const n = await t.pool.query('SELECT count(*)::int AS n FROM knowledge.chunks WHERE content LIKE $1', [
        `${prefix}%`,
      ]);
      assert.equal(n.rows[0]?.n, BULK_MIN_ROWS, code);
      // The role and settings taken for the lock were undone with the savepoint.
      const role = await t.pool.query("SELECT current_user AS u, current_setting('lock_timeout') AS lt");
      assert.notEqual(role.rows[0]?.u, OWNER_ROLE);
      assert.equal(role.rows[0]?.lt, '0');
    }
    await assert.rejects(
      withIngestionLease(failLock('XX000'), (writer) =>
        ingestRecords(writer, embedder, corpus(BULK_MIN_ROWS, 10, 'internal '), undefined, {}, { path: 'bulk' }),
      ),
      (err: { code?: string }) => err.code === 'XX000',
    );
    const none = await t.pool.query("SELECT count(*)::int AS n FROM knowledge.chunks WHERE content LIKE 'internal %'");
    assert.equal(none.rows[0]?.n, 0, 'an unexpected error writes nothing');
  });

  test('a session that may not act as the table owner writes row by row and leaves maintenance to autovacuum', async () => {
    // Its own database: a session of the ingestion role alone, as a production login of
    // knowledge_ingestion is (it may not SET ROLE knowledge_owner). PGlite serves every connection
    // from one session and does not undo SET SESSION AUTHORIZATION, so this one stays that way.
    const own = await startTestDatabase();
    try {
      await own.pool.query(`SET SESSION AUTHORIZATION ${INGESTION_ROLE}`);
      const list = async () =>
        (await own.pool.query("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'chunks' ORDER BY 1")).rows;
      const before = await list();
      const stats = await withIngestionLease(own.pool, (writer) =>
        ingestRecords(writer, embedder, corpus(BULK_MIN_ROWS, 9), undefined, {}, { path: 'bulk' }),
      );
      assert.equal(stats.path, 'rows');
      assert.equal(stats.maintenance, 'not-owner');
      assert.equal(stats.upserted, BULK_MIN_ROWS);
      assert.deepEqual(await list(), before);
    } finally {
      await own.close();
    }
  });
  test('a session that may not act as the owner falls back inside the one transaction: a bad last batch leaves nothing', async () => {
    // The fallback rolls back to a savepoint; the write must stay one transaction after it, so the
    // batches before the bad row are undone with it.
    const own = await startTestDatabase();
    try {
      await own.pool.query(`SET SESSION AUTHORIZATION ${INGESTION_ROLE}`);
      const [v] = await embedder.embed(['x']);
      const chunks: StoredChunk[] = Array.from({ length: BULK_MIN_ROWS + 10 }, (_, i) => ({
        chunk_id: `load-${i}`,
        content: `load ${i}`,
        embedding: v ?? [],
        metadata:
          i === BULK_MIN_ROWS + 9
            ? ({
                ...meta({ principals: [P.alice] }),
                allowed_principals: [{ kind: 'matrix', principal: '@alice' }],
              } as never)
            : meta({ principals: [P.alice] }),
      }));
      await assert.rejects(
        withIngestionLease(own.pool, (w) => writeChunks(w, { chunks }, undefined, { path: 'bulk', insertBatch: 100 })),
        (err: { code?: string }) => err.code === '23514',
      );
      const n = await own.pool.query('SELECT count(*)::int AS n FROM knowledge.chunks');
      assert.equal(n.rows[0].n, 0);
    } finally {
      await own.close();
    }
  });
});

describe('ACL-only writes', () => {
  const graphOid = async () =>
    (await t.pool.query("SELECT to_regclass('fgentic.chunks_embedding_hnsw_idx')::oid AS oid")).rows[0]?.oid;

  /** The same chunks, each now readable by one principal that no row had before. */
  const moveTo = (records: readonly IngestRecord[], who: MatrixPrincipal) =>
    records.map((r) => ({
      ...r,
      metadata: meta({
        source: (r as { metadata: { source: { id: string } } }).metadata.source.id,
        principals: [who],
      }),
    }));
  const vectors = async () =>
    (await t.pool.query('SELECT chunk_id, embedding::text AS e FROM knowledge.chunks ORDER BY 1')).rows;

  test('an ACL change of a few rows is updated in place: the graph is neither dropped nor rebuilt', async () => {
    const input = corpus(BULK_MIN_ROWS + 100, 30);
    await ingest(input, 'rows');
    const graph = await graphOid();
    assert.ok(graph !== null, 'the row path keeps the HNSW index');
    const before = await vectors();
    const moved = [...moveTo(input.slice(0, 100), P.ircBob), ...input.slice(100)];
    assert.equal(bulkPays(0, input.length, 100), false);
    const stats = await ingest(moved, 'auto');
    assert.deepEqual(
      { path: stats.path, aclOnly: stats.aclOnly, upserted: stats.upserted, embedded: stats.embedded },
      { path: 'rows', aclOnly: 100, upserted: 0, embedded: 0 },
    );
    assert.equal(await graphOid(), graph, 'the same index, not a rebuilt one');
    assert.deepEqual(await deferred(), []);
    assert.deepEqual(await vectors(), before);
  });

  test('an ACL change of every row drops the indexes, updates in place and rebuilds them; vectors and search follow', async () => {
    const original = await indexes();
    const input = corpus(VECTOR_INDEX_MIN_ROWS + 100, 31);
    await ingest(input, 'rows');
    const graph = await graphOid();
    const before = await vectors();
    const moved = moveTo(input, P.ircBob);
    assert.ok(bulkPays(0, input.length, moved.length));
    let atCommit: { graph: boolean; waiting: unknown[] } | undefined;
    const stats = await withIngestionLease(t.pool, (writer) =>
      ingestRecords(
        writer,
        embedder,
        moved,
        undefined,
        {},
        {
          onCommit: async () => {
            atCommit = { graph: (await graphOid()) !== null, waiting: await deferred() };
          },
        },
      ),
    );
    assert.deepEqual(
      { path: stats.path, aclOnly: stats.aclOnly, upserted: stats.upserted, embedded: stats.embedded },
      { path: 'bulk', aclOnly: input.length, upserted: 0, embedded: 0 },
    );
    assert.deepEqual(atCommit, {
      graph: false,
      waiting: [{ name: 'fgentic.chunks_embedding_hnsw_idx', am: 'hnsw' }],
    });
    assert.notEqual(await graphOid(), graph, 'the graph was rebuilt after the commit');
    assert.deepEqual(await deferred(), []);
    assert.deepEqual(await indexes(), original, 'every index is back, defined as the migrations made it');
    assert.deepEqual(await vectors(), before, 'no vector changed');
    const [q] = await embedder.embed(['budget travel']);
    const asIrcBob = decodeFixture(matrixHeader({ caller: P.ircBob, audience: [P.ircBob] }));
    const asAlice = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    const hits = async (projection: typeof asIrcBob) =>
      (await searchKnowledge(t.retrieval, { projection, embedding: q ?? [], maxResults: 10 })).hits.length;
    assert.equal(await hits(asIrcBob), 10);
    assert.equal(await hits(asAlice), 0, 'no row keeps its old ACL');
    // The same input again is a no-op: nothing written, nothing maintained.
    const again = await ingest(moved, 'auto');
    assert.deepEqual(
      {
        unchanged: again.unchanged,
        aclOnly: again.aclOnly,
        upserted: again.upserted,
        maintenance: again.maintenance,
      },
      { unchanged: input.length, aclOnly: 0, upserted: 0, maintenance: 'none' },
    );
  });
});

describe('deferred vector index', () => {
  test('the bound: only a vector index waits, and only on a table at or below VECTOR_INDEX_MIN_ROWS', () => {
    assert.equal(vectorIndexWaits('hnsw', VECTOR_INDEX_MIN_ROWS), true);
    assert.equal(vectorIndexWaits('hnsw', VECTOR_INDEX_MIN_ROWS + 1), false);
    assert.equal(vectorIndexWaits('gin', 0), false);
    assert.equal(vectorIndexWaits('btree', 0), false);
  });

  test('a write that takes the table past the bound builds the deferred index from its recorded definition', async () => {
    const original = await indexes();
    const first = await ingest(corpus(BULK_MIN_ROWS + 100, 21, 'first '), 'auto');
    assert.equal(first.path, 'bulk');
    assert.equal((await deferred()).length, 1);
    // Row by row up to the bound: still deferred.
    const upTo = VECTOR_INDEX_MIN_ROWS - (BULK_MIN_ROWS + 100);
    const secondChunks = await stored(corpus(upTo, 22, 'second '));
    const second = await withIngestionLease(t.pool, (w) =>
      writeChunks(w, { chunks: secondChunks }, undefined, { path: 'rows' }),
    );
    assert.equal(second.rebuiltIndexes, 0);
    assert.equal((await deferred()).length, 1, 'at the bound the index still waits');
    // One more row: past the bound, the same write builds it.
    const thirdChunks = await stored(corpus(1, 23, 'third '));
    const third = await withIngestionLease(t.pool, (w) =>
      writeChunks(w, { chunks: thirdChunks }, undefined, { path: 'rows' }),
    );
    assert.equal(third.rebuiltIndexes, 1);
    assert.deepEqual(await deferred(), []);
    assert.deepEqual(await indexes(), original, 'every index is back, defined as the migrations made it');
  });

  test('a bulk load that leaves the table past the bound builds the deferred index with the others', async () => {
    const original = await indexes();
    await ingest(corpus(BULK_MIN_ROWS + 100, 24, 'first '), 'auto');
    assert.equal((await deferred()).length, 1);
    const moreChunks = await stored(corpus(BULK_MIN_ROWS + 100, 25, 'more '));
    const more = await withIngestionLease(t.pool, (w) =>
      writeChunks(w, { chunks: moreChunks }, undefined, { path: 'auto' }),
    );
    assert.equal(more.path, 'bulk');
    assert.equal(more.deferredIndexes, 0);
    assert.deepEqual(await deferred(), []);
    assert.deepEqual(await indexes(), original);
  });

  test('a session that may not act as the owner leaves the index deferred, and its write still lands', async () => {
    const own = await startTestDatabase();
    try {
      await withIngestionLease(own.pool, (w) =>
        ingestRecords(w, embedder, corpus(BULK_MIN_ROWS + 100, 26), undefined, {}, { path: 'bulk' }),
      );
      assert.equal((await deferred(own.pool)).length, 1);
      await own.pool.query(`SET SESSION AUTHORIZATION ${INGESTION_ROLE}`);
      const stats = await withIngestionLease(own.pool, (w) =>
        ingestRecords(w, embedder, corpus(VECTOR_INDEX_MIN_ROWS, 27, 'more '), undefined, {}, { path: 'rows' }),
      );
      assert.equal(stats.upserted, VECTOR_INDEX_MIN_ROWS);
      const hnsw = await own.pool.query(
        "SELECT count(*)::int AS n FROM pg_indexes WHERE tablename = 'chunks' AND indexdef LIKE '% USING hnsw %'",
      );
      assert.equal(hnsw.rows[0].n, 0, 'the ingestion role may not build it');
    } finally {
      await own.close();
    }
  });
});

describe('vector index built after the commit', () => {
  const graph = async (pool = t.pool) =>
    (await pool.query("SELECT to_regclass('fgentic.chunks_embedding_hnsw_idx') IS NOT NULL AS present")).rows[0]
      ?.present as boolean;
  const large = VECTOR_INDEX_MIN_ROWS + 100;

  /** Per audience and query: the graph plan's ids and distances, and the exact plan's. */
  async function bothPlans(queries: readonly string[]) {
    const out: { hnsw: unknown; exact: unknown }[] = [];
    for (const q of queries) {
      const [embedding] = await embedder.embed([q]);
      for (const projection of projections) {
        const run = async (force: 'hnsw' | 'exact') =>
          (
            await searchKnowledge(
              t.retrieval,
              { projection, embedding: embedding ?? [], maxResults: 10 },
              { ...DEFAULT_PLANNER, exactThreshold: 0, force },
            )
          ).hits.map((h) => [h.chunk_id, h.distance.toFixed(6)]);
        out.push({ hnsw: await run('hnsw'), exact: await run('exact') });
      }
    }
    return out;
  }
  const queries = ['budget travel', 'incident backup for team 3'];

  test('rows and ACL indexes commit first; until the graph is built every search ranks exactly', async () => {
    const input = corpus(large, 41, 'graph ');
    let atCommit:
      | { rows: number; graph: boolean; waiting: unknown[]; plans: { hnsw: unknown; exact: unknown }[] }
      | undefined;
    const stats = await withIngestionLease(t.pool, (writer) =>
      ingestRecords(
        writer,
        embedder,
        input,
        undefined,
        {},
        {
          path: 'auto',
          onCommit: async () => {
            atCommit = {
              rows: (await t.pool.query('SELECT count(*)::int AS n FROM knowledge.chunks')).rows[0].n,
              graph: await graph(),
              waiting: await deferred(),
              plans: await bothPlans(queries),
            };
          },
        },
      ),
    );
    assert.equal(stats.path, 'bulk');
    assert.ok(atCommit !== undefined);
    assert.equal(atCommit.rows, large, 'every row is visible at the commit');
    assert.equal(atCommit.graph, false, 'the graph is not part of the write transaction');
    assert.deepEqual(atCommit.waiting, [{ name: 'fgentic.chunks_embedding_hnsw_idx', am: 'hnsw' }]);
    assert.ok(atCommit.plans.some((p) => (p.exact as unknown[]).length > 0));
    for (const p of atCommit.plans) assert.deepEqual(p.hnsw, p.exact, 'without the graph the graph plan is exact');
    // Then the graph is built, the definition leaves the list, and the exact answers are unchanged.
    assert.equal(stats.maintenance, 'done');
    assert.equal(await graph(), true);
    assert.deepEqual(await deferred(), []);
    assert.deepEqual(
      (await bothPlans(queries)).map((p) => p.exact),
      atCommit.plans.map((p) => p.exact),
    );
  });

  test('a failed graph build leaves the rows committed, searches exact, reports maintenance failed; the next owner write builds it', async () => {
    const original = await indexes();
    // A connection that fails on building the HNSW index, as a full disk or a dropped connection would.
    let refused = 0;
    const faulty = interceptingPool(t.pool, (text) => {
      if (!/^CREATE INDEX .* USING hnsw /.test(text)) return undefined;
      refused += 1;
      return new Error('injected fault');
    });
    const input = corpus(large, 42, 'fault ');
    const stats = await withIngestionLease(faulty, (writer) =>
      ingestRecords(writer, embedder, input, undefined, {}, { path: 'auto' }),
    );
    assert.equal(refused, 1);
    assert.deepEqual(
      { path: stats.path, upserted: stats.upserted, maintenance: stats.maintenance },
      { path: 'bulk', upserted: large, maintenance: 'failed' },
    );
    assert.equal((await t.pool.query('SELECT count(*)::int AS n FROM knowledge.chunks')).rows[0].n, large);
    assert.equal(await graph(), false);
    assert.deepEqual(await deferred(), [{ name: 'fgentic.chunks_embedding_hnsw_idx', am: 'hnsw' }]);
    for (const p of await bothPlans(queries)) assert.deepEqual(p.hnsw, p.exact);
    // The next write by an owner session, however small, builds it from the recorded definition.
    const next = await withIngestionLease(t.pool, async (w) =>
      writeChunks(w, { chunks: await stored(corpus(1, 43, 'next ')) }, undefined, { path: 'rows' }),
    );
    assert.deepEqual(
      { rebuilt: next.rebuiltIndexes, maintenance: next.maintenance },
      { rebuilt: 1, maintenance: 'done' },
    );
    assert.deepEqual(await deferred(), []);
    assert.deepEqual(await indexes(), original, 'every index is back, defined as the migrations made it');
  });

  test('a failing onCommit callback: the graph is still built, the table maintained, and the write rejects naming the callback', async () => {
    const input = corpus(large, 44, 'callback ');
    const thrown = new Error('callback failed');
    const err = await withIngestionLease(t.pool, (writer) =>
      ingestRecords(
        writer,
        embedder,
        input,
        undefined,
        {},
        {
          path: 'auto',
          onCommit: () => {
            throw thrown;
          },
        },
      ),
    ).then(
      () => assert.fail('the write should reject'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof CommitCallbackError);
    assert.equal(err.cause, thrown);
    assert.deepEqual(
      { path: err.stats.path, upserted: err.stats.upserted, maintenance: err.stats.maintenance },
      { path: 'bulk', upserted: large, maintenance: 'done' },
    );
    assert.equal((await t.pool.query('SELECT count(*)::int AS n FROM knowledge.chunks')).rows[0].n, large);
    assert.equal(await graph(), true, 'the graph does not wait for the next write');
    assert.deepEqual(await deferred(), []);
  });
});

describe('vector parameters', () => {
  test('property: a binary vector parameter is stored as the float4 rounding of each component', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.double({ min: -1e30, max: 1e30, noNaN: true }), { minLength: 1024, maxLength: 1024 }),
        async (v) => {
          const r = await t.pool.query('SELECT $1::vector::real[] AS a', [toVectorBinary(v)]);
          // real[] arrives as shortest float4 decimals: rounding them to float4 recovers the exact value.
          assert.deepEqual(Array.from(new Float32Array(r.rows[0].a)), Array.from(new Float32Array(v)));
        },
      ),
      { numRuns: 25, seed: 1212 },
    );
  });

  test('a component that is not a finite float4 is refused before it is sent', () => {
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, 1e39, -1e39])
      assert.throws(() => toVectorBinary([0.5, bad]), RangeError);
    assert.throws(() => toVectorBinary([]), RangeError);
  });
});

describe('after-write maintenance', () => {
  const pending = async () =>
    Number(
      (
        await t.pool.query(
          `SELECT coalesce(sum(gin_clean_pending_list(i.indexrelid)), 0) AS pages
             FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
            WHERE i.indrelid = 'fgentic.chunks'::regclass AND am.amname = 'gin'`,
        )
      ).rows[0].pages,
    );
  const analyzed = async () =>
    Number(
      (await t.pool.query("SELECT reltuples::bigint AS n FROM pg_class WHERE oid = 'fgentic.chunks'::regclass")).rows[0]
        .n,
    );

  test('an ingest leaves no GIN pending list and fresh planner statistics', async () => {
    await pending();
    const input = corpus(60, 10);
    assert.equal((await ingest(input, 'rows')).maintenance, 'done');
    assert.equal(await pending(), 0, 'the pending lists were merged by the ingest');
    assert.equal(await analyzed(), input.length, 'ANALYZE counted the new rows');
  });

  test('without it the pending lists stay behind (what the maintenance step removes)', async () => {
    await pending();
    const stats = await withIngestionLease(t.pool, (writer) =>
      ingestRecords(writer, embedder, corpus(60, 11), undefined, {}, { path: 'rows', maintain: false }),
    );
    assert.equal(stats.maintenance, 'none');
    assert.ok((await pending()) > 0);
  });

  test('an unchanged re-ingest writes nothing and so maintains nothing', async () => {
    const input = corpus(30, 12);
    assert.equal((await ingest(input, 'rows')).maintenance, 'done');
    assert.equal((await ingest(input, 'rows')).maintenance, 'none');
  });
});
