/**
 * On the origin's knowledge database: its own v1–v3 schema SQL applied first (verbatim, from the
 * upstream fixture folder), then this project's migrations as knowledge_owner, then the server as
 * fgentic_retrieval. Also the other order (project first, the origin's Jobs after), rows the origin's
 * own writers change (searched after a sync, revoked at once), the serving role's refusal of every
 * table, and a differential against the origin's own search functions.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type pg from 'pg';
import {
  type AllowedClassifications,
  type ChunkMetadata,
  CLASSIFICATIONS,
  type Classification,
  type MatrixPrincipal,
} from '../../contract/index.ts';
import { applyOriginSchema, ORIGIN_SKIP, originSchemaSql } from '../../testkit/origin-fixture.ts';
import {
  AGENT,
  decodeFixture,
  type EmptyTestDatabase,
  matrixHeader,
  meta,
  NOW,
  oauthHeader,
  P,
  prng,
  randomVector,
  startEmptyTestDatabase,
  startTestDatabase,
  type TestDatabase,
} from '../../testkit/retrieval.ts';
import { seedCorpus, startRetrievalServer } from '../index.ts';
import { withIngestionLease } from '../ingest/lease.ts';
import { writeChunks } from '../ingest/store.ts';
import { DEFAULT_PLANNER } from '../planner.ts';
import { searchKnowledge } from '../search.ts';
import { loadMigrations, migrate, syncAll } from './migrate.ts';
import { createPool, toVectorParam } from './pool.ts';
import { asRole, bootstrapDatabase, INGESTION_ROLE, ORIGIN_READER_ROLE, OWNER_ROLE, RETRIEVAL_ROLE } from './roles.ts';

const ORIGIN_VERSIONS = [1, 2, 3];
/** The origin's schema Job logs in as knowledge_owner; PGlite has one session for every login. */
const ownerUrl = (db: EmptyTestDatabase) => (db.engine === 'postgres' ? db.urlAs(OWNER_ROLE) : undefined);
const PERMISSION_DENIED = (err: unknown) => (err as { code?: string }).code === '42501';

interface OriginDb {
  readonly db: EmptyTestDatabase;
  readonly pool: pg.Pool;
  close(): Promise<void>;
}

async function startOriginDatabase(): Promise<OriginDb> {
  const db = await startEmptyTestDatabase();
  const pool = createPool({ connectionString: db.url, max: db.poolSize });
  try {
    await applyOriginSchema(pool, [1, 2, 3], ownerUrl(db));
    // The database administrator's one step for this project: its roles (a no-op for the origin's).
    await bootstrapDatabase(pool);
  } catch (err) {
    await pool.end();
    await db.close();
    throw err;
  }
  return {
    db,
    pool,
    async close() {
      await pool.end().catch(() => {});
      await db.close();
    },
  };
}

async function originVersions(pool: pg.Pool): Promise<number[]> {
  return (await pool.query('SELECT version FROM knowledge.schema_migrations ORDER BY 1')).rows.map(
    (r) => r.version as number,
  );
}

const unitVector = '(ARRAY[1::real] || array_fill(0::real, ARRAY[1023]))::vector(1024)';

let o: OriginDb;
before(async () => {
  if (ORIGIN_SKIP) return;
  o = await startOriginDatabase();
});
after(async () => {
  await o?.close();
});

describe('origin first: the origin v1–v3, then this project', { skip: ORIGIN_SKIP }, () => {
  test('our migrations apply on top, skip the base schema, and leave the origin its own versions', async () => {
    assert.deepEqual(await originVersions(o.pool), ORIGIN_VERSIONS);
    const result = await migrate(o.pool);
    assert.deepEqual(
      result.applied,
      loadMigrations().map((m) => m.version),
    );
    // The origin's runtime check: exactly its own versions in its table.
    assert.deepEqual(await originVersions(o.pool), ORIGIN_VERSIONS);
    assert.deepEqual((await migrate(o.pool)).applied, []);
  });

  test("rows the origin's writers write are searched once synced; a revocation applies at once", async () => {
    const ingestion = asRole(o.pool, INGESTION_ROLE);
    const write = (id: string, m: ChunkMetadata) =>
      ingestion.query(
        `INSERT INTO knowledge.chunks (chunk_id, content, embedding, metadata) VALUES ($1, $2, ${unitVector}, $3)
         ON CONFLICT (chunk_id) DO UPDATE SET content = EXCLUDED.content, embedding = EXCLUDED.embedding,
           metadata = EXCLUDED.metadata`,
        [id, `origin ${id}`, JSON.stringify(m)],
      );
    const sync = async () => {
      const c = await ingestion.connect();
      try {
        await syncAll(c, INGESTION_ROLE);
      } finally {
        c.release();
      }
    };
    const stats = async () =>
      Number((await o.pool.query('SELECT row_count FROM fgentic.search_stats')).rows[0]?.row_count ?? 0);
    const search = async (who: MatrixPrincipal) =>
      (
        await searchKnowledge(asRole(o.pool, RETRIEVAL_ROLE), {
          projection: decodeFixture(matrixHeader({ caller: who, audience: [who] })),
          embedding: [1, ...new Array<number>(1023).fill(0)],
          maxResults: 5,
        })
      ).hits.map((h) => h.chunk_id);
    const before = await stats();
    await write('origin-acl-1', meta({ principals: [P.carol] }));
    assert.deepEqual(await search(P.carol), [], 'not searched before a sync');
    await sync();
    assert.equal(await stats(), before + 1);
    assert.deepEqual(await search(P.carol), ['origin-acl-1']);
    // The origin's upsert moves the row to alice: carol loses it on the very next search, before any
    // sync; alice gets it with the sync.
    await write('origin-acl-1', meta({ principals: [P.alice] }));
    assert.deepEqual(await search(P.carol), []);
    await sync();
    assert.deepEqual(await search(P.alice), ['origin-acl-1']);
    assert.deepEqual(await search(P.carol), []);
    await ingestion.query("DELETE FROM knowledge.chunks WHERE chunk_id = 'origin-acl-1'");
    assert.deepEqual(await search(P.alice), [], 'a deleted row is gone at once');
    await sync();
    assert.equal(await stats(), before);
  });

  test("the origin's own checks still hold: CHECKs refuse bad rows, its helpers and search answer", async () => {
    await assert.rejects(
      o.pool.query(`INSERT INTO knowledge.chunks VALUES ('x', 'x', ${unitVector}, $1)`, [
        JSON.stringify({ ...meta({ principals: [P.alice] }), extra: 1 }),
      ]),
      /chunks_metadata_valid/,
    );
    const helpers = await o.pool.query(
      "SELECT knowledge.is_full_mxid('@alice:org-a.example') AS ok, knowledge.is_full_mxid('@a:[1.2.3.4]') AS bad",
    );
    assert.deepEqual(helpers.rows[0], { ok: true, bad: false });
    // The invocation shape of the origin's own store test, as the table's owner.
    const client = await o.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query("SELECT set_config('role', 'knowledge_owner', true)");
      await client.query(
        `SELECT * FROM knowledge.search_authorized_matrix(${unitVector}, ARRAY['public']::text[],
           '[{"kind":"matrix","principal":"@alice:org-a.example"}]'::jsonb, 1)`,
      );
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  });

  test("the serving role reads no table; the origin's own reader keeps what the origin gave it", async () => {
    const retrieval = asRole(o.pool, RETRIEVAL_ROLE);
    assert.equal((await retrieval.query('SELECT current_user AS u')).rows[0]?.u, RETRIEVAL_ROLE);
    for (const sql of [
      'SELECT chunk_id FROM knowledge.chunks LIMIT 1',
      'SELECT count(*) FROM fgentic.chunks',
      'SELECT 1 FROM fgentic.embedding_profile',
      'SELECT 1 FROM fgentic.migrations',
      'SELECT 1 FROM fgentic_ledger.capabilities',
      'SELECT 1 FROM knowledge.schema_migrations',
    ])
      await assert.rejects(retrieval.query(sql), PERMISSION_DENIED, sql);
    // The origin's search functions too (the vector as a parameter: the role may not even name
    // pgvector's type, since the origin revokes `public` from PUBLIC).
    await assert.rejects(
      retrieval.query(`SELECT * FROM knowledge.search_authorized_matrix($1, ARRAY['public'], $2, 1)`, [
        toVectorParam([1, ...new Array<number>(1023).fill(0)]),
        JSON.stringify([P.alice]),
      ]),
      PERMISSION_DENIED,
    );
    const origin = asRole(o.pool, ORIGIN_READER_ROLE as never);
    await origin.query('SELECT count(*) FROM knowledge.chunks');
    await origin.query(
      `SELECT * FROM knowledge.search_authorized_matrix(${unitVector}, ARRAY['public']::text[],
         '[{"kind":"matrix","principal":"@alice:org-a.example"}]'::jsonb, 1)`,
    );
  });

  test("a replayed origin v1 Job changes nothing of this project's: the server starts and serves", async () => {
    await applyOriginSchema(o.pool, [1], ownerUrl(o.db));
    const server = await startRetrievalServer({
      agents: [AGENT],
      databaseUrl: o.db.urlAs(RETRIEVAL_ROLE),
      pool: { max: 2 },
      port: 0,
      now: () => NOW,
    });
    await server.close();
  });

  test('the server serves as fgentic_retrieval: ingestion under the lease, search through the functions', async () => {
    // Ingestion first, as the origin's ingestion login (the `ingest` path), then the server.
    await seedCorpus(o.db.urlAs(INGESTION_ROLE), [
      { content: 'origin alpha notes', metadata: meta({ source: 'docs/alpha.md', principals: [P.alice] }) },
      { content: 'origin beta notes', metadata: meta({ source: 'docs/beta.md', principals: [P.bob] }) },
    ]);
    const server = await startRetrievalServer({
      agents: [AGENT],
      databaseUrl: o.db.urlAs(RETRIEVAL_ROLE),
      pool: { max: 2 },
      port: 0,
      now: () => NOW,
    });
    try {
      assert.equal((await server.servingPool.query('SELECT current_user AS u')).rows[0]?.u, RETRIEVAL_ROLE);
      const r = await fetch(server.mcpUrl, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-11-25',
          'x-fgentic-identity': matrixHeader({ caller: P.alice, audience: [P.alice] }),
          'x-fgentic-agent': 'kagent/knowledge-agent',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'search_knowledge', arguments: { query: 'notes' } },
        }),
      });
      const msg = (await r.json()) as { result: { structuredContent: { results: { content: string }[] } } };
      assert.deepEqual(
        msg.result.structuredContent.results.map((x) => x.content),
        ['origin alpha notes'],
      );
      // The lease was released and the origin's versions are untouched.
      assert.equal((await o.pool.query('SELECT count(*)::int AS n FROM knowledge.ingestion_leases')).rows[0]?.n, 0);
      assert.deepEqual(await originVersions(o.pool), ORIGIN_VERSIONS);
    } finally {
      await server.close();
    }
  });
});

describe('project first: this project on an empty database, the origin Jobs after', {
  skip: ORIGIN_SKIP,
}, () => {
  let t: TestDatabase;
  before(async () => {
    t = await startTestDatabase();
  });
  after(async () => {
    await t?.close();
  });

  test('the retrieval role cannot SELECT knowledge.chunks on a project-first database either', async () => {
    await assert.rejects(t.retrieval.query('SELECT 1 FROM knowledge.chunks'), PERMISSION_DENIED);
  });

  test("the origin's v1–v3 still apply on top, and the search keeps working", async () => {
    await applyOriginSchema(t.pool, [1, 2, 3], ownerUrl(t.db));
    assert.deepEqual(await originVersions(t.pool), ORIGIN_VERSIONS);
    await migrate(t.pool);
    await assert.rejects(t.retrieval.query('SELECT 1 FROM knowledge.chunks'), PERMISSION_DENIED);
    await withIngestionLease(t.pool, (writer) =>
      writeChunks(writer, {
        chunks: [
          {
            chunk_id: 'pf-1',
            content: 'project first',
            metadata: meta({ principals: [P.alice] }),
            embedding: randomVector(prng(3)),
          },
        ],
      }),
    );
    const hits = await searchKnowledge(t.retrieval, {
      projection: decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] })),
      embedding: randomVector(prng(4)),
      maxResults: 5,
    });
    assert.deepEqual(
      hits.hits.map((h) => h.chunk_id),
      ['pf-1'],
    );
  });

  test('the origin re-defining the metadata CHECK: migrate leaves it as the origin made it, and writes still work', async () => {
    const db = String((await t.pool.query('SELECT current_database() AS d')).rows[0]?.d);
    // The origin's own definition, read from its v1 SQL (its CREATE TABLE names the constraint).
    const origin = /CONSTRAINT chunks_metadata_valid (CHECK \(.*\))\s*$/m.exec(originSchemaSql(1, db))?.[1];
    assert.ok(origin !== undefined);
    const constraint = async () =>
      (
        await t.pool.query(
          `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
            WHERE conrelid = 'knowledge.chunks'::regclass AND conname = 'chunks_metadata_valid'`,
        )
      ).rows[0]?.def as string;
    assert.equal(await constraint(), 'CHECK (fgentic.metadata_valid(metadata))', 'the baseline made it');
    const client = await t.pool.connect();
    try {
      await client.query('SET ROLE knowledge_owner');
      await client.query(
        `ALTER TABLE knowledge.chunks DROP CONSTRAINT chunks_metadata_valid, ADD CONSTRAINT chunks_metadata_valid ${origin}`,
      );
    } finally {
      await client.query('RESET ROLE');
      client.release();
    }
    await applyOriginSchema(t.pool, [1], ownerUrl(t.db));
    const redefined = await constraint();
    assert.equal(redefined, 'CHECK (knowledge.is_valid_metadata(metadata))');
    await migrate(t.pool);
    await migrate(t.pool);
    assert.equal(await constraint(), redefined, 'migrate leaves the origin its constraint');
    // Writes on both paths, and an ACL-only change, still land under the origin's CHECK.
    const rows = (prefix: string, n: number, who: MatrixPrincipal = P.alice) =>
      Array.from({ length: n }, (_, i) => ({
        chunk_id: `${prefix}-${i}`,
        content: `origin check ${prefix} ${i}`,
        metadata: meta({ source: `docs/${prefix}.md`, principals: [who] }),
        embedding: randomVector(prng(100 + i)),
      }));
    const bulk = await withIngestionLease(t.pool, (w) =>
      writeChunks(w, { chunks: rows('oc-bulk', 3) }, undefined, { path: 'bulk' }),
    );
    const byRow = await withIngestionLease(t.pool, (w) =>
      writeChunks(w, { chunks: rows('oc-rows', 2) }, undefined, { path: 'rows' }),
    );
    const acl = await withIngestionLease(t.pool, (w) =>
      writeChunks(w, {
        chunks: rows('oc-rows', 2, P.bob).map(({ embedding: _, ...c }) => c),
      }),
    );
    assert.deepEqual([bulk.path, bulk.upserted, byRow.path, byRow.upserted, acl.aclOnly], ['bulk', 3, 'rows', 2, 2]);
    // A bad row is still refused, by the origin's constraint under its name.
    const bad = {
      ...rows('oc-bad', 1)[0],
      metadata: { ...meta({ principals: [P.alice] }), allowed_principals: [] },
    };
    await assert.rejects(
      withIngestionLease(t.pool, (w) => writeChunks(w, { chunks: [bad as never] })),
      (err: { code?: string; constraint?: string }) =>
        err.code === '23514' && err.constraint === 'chunks_metadata_valid',
    );
    assert.equal(await constraint(), redefined);
  });
});

describe("differential: this project's search = the origin's search_authorized_* on the same rows", {
  skip: ORIGIN_SKIP,
}, () => {
  const PRINCIPALS: MatrixPrincipal[] = Object.values(P);
  const GROUPS = ['partner/org-b/docs', 'partner/org-b/eng', 'partner/org-b/doc', 'partner/org-c/docs'];

  async function originSearch(
    fn: 'matrix' | 'groups',
    q: string,
    classes: readonly string[],
    who: string,
    k: number,
  ): Promise<string[]> {
    const client = await o.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query("SELECT set_config('role', 'knowledge_owner', true)");
      const r = await client.query(
        fn === 'matrix'
          ? 'SELECT chunk_id FROM knowledge.search_authorized_matrix($1::vector, $2::text[], $3::jsonb, $4)'
          : 'SELECT chunk_id FROM knowledge.search_authorized_groups($1::vector, $2::text[], $3::text[], $4)',
        [q, classes, fn === 'matrix' ? who : JSON.parse(who), k],
      );
      await client.query('COMMIT');
      return r.rows.map((x) => x.chunk_id as string);
    } finally {
      client.release();
    }
  }

  test('same authorized set always; same ordered ids on the exact path', async () => {
    await migrate(o.pool);
    const retrieval = asRole(o.pool, RETRIEVAL_ROLE);
    let compared = 0;
    let nonEmpty = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            classification: fc.constantFrom(...CLASSIFICATIONS),
            principals: fc.subarray(PRINCIPALS),
            groups: fc.subarray(GROUPS),
          }),
          { minLength: 1, maxLength: 30 },
        ),
        fc.integer(),
        async (metas, seed) => {
          const rand = prng(seed);
          const rows = metas
            .filter((m) => m.principals.length + m.groups.length > 0)
            .map((m, i) => ({
              chunk_id: `d${String(i).padStart(3, '0')}`,
              content: `row ${i}`,
              metadata: meta({
                classification: m.classification as Classification,
                principals: m.principals,
                groups: m.groups,
              }) as ChunkMetadata,
              embedding: randomVector(rand),
            }));
          await o.pool.query('DELETE FROM knowledge.chunks; DELETE FROM fgentic.chunks');
          await withIngestionLease(o.pool, (writer) => writeChunks(writer, { chunks: rows }));
          const q = randomVector(rand);
          const qv = toVectorParam(q);
          for (const wide of [false, true]) {
            const classes: AllowedClassifications = wide ? ['approved_non_public', 'public'] : ['public'];
            const cases: { fn: 'matrix' | 'groups'; who: string; header: string }[] = [];
            for (const caller of PRINCIPALS.slice(0, 3)) {
              const audience = [caller, ...PRINCIPALS.filter((p) => p !== caller && rand() < 0.2)];
              cases.push({
                fn: 'matrix',
                who: JSON.stringify(audience),
                header: matrixHeader({ caller, audience, classifications: classes }),
              });
            }
            const groups = GROUPS.filter((g) => g.startsWith('partner/org-b/') && rand() < 0.6);
            if (groups.length > 0)
              cases.push({
                fn: 'groups',
                who: JSON.stringify(groups.sort()),
                header: oauthHeader({ policy: 'org-b', groups, classifications: classes }),
              });
            for (const c of cases) {
              const everything = await originSearch(c.fn, qv, classes, c.who, 100);
              const k = 1 + Math.floor(rand() * 20);
              const theirs = await originSearch(c.fn, qv, classes, c.who, k);
              const projection = decodeFixture(c.header);
              for (const force of ['exact', 'hnsw'] as const) {
                const ours = (
                  await searchKnowledge(
                    retrieval,
                    { projection, embedding: q, maxResults: k },
                    { ...DEFAULT_PLANNER, force },
                  )
                ).hits.map((h) => h.chunk_id);
                assert.equal(ours.length, theirs.length, `${force}: count`);
                for (const id of ours)
                  assert.ok(everything.includes(id), `${force}: ${id} not authorized by the origin`);
                if (force === 'exact') assert.deepEqual(ours, theirs, 'exact: ordered ids');
              }
              compared++;
              if (theirs.length > 0) nonEmpty++;
            }
          }
        },
      ),
      { numRuns: 15, seed: 1414 },
    );
    assert.ok(compared > 50 && nonEmpty > 20, `too few meaningful comparisons (${compared}, ${nonEmpty})`);
  });
});
