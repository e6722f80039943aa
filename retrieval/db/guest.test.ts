/**
 * A guest in the origin's database: on the origin's schema (v1–v3 from its own SQL) `migrate` leaves
 * every object of the origin's exactly as it was, in both orders (origin first; this project first,
 * the origin's Jobs after), and the origin's own checks still pass afterwards, run as the origin's
 * roles: its grants, versions and indexes, its search functions as knowledge_retrieval, its connector
 * functions. The comparison is over catalog snapshots of schema `knowledge` and `public`: columns
 * (type, storage, generation, ACL), relations (kind, reloptions, ACL, owner), indexes, triggers,
 * constraints, functions (definition, owner, settings, ACL), the schemas' ACLs, and the origin roles'
 * attributes and memberships.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { applyOriginSchema, ORIGIN_SKIP } from '../../testkit/origin-fixture.ts';
import {
  type EmptyTestDatabase,
  meta,
  onlyOn,
  P,
  prng,
  randomVector,
  startEmptyTestDatabase,
} from '../../testkit/retrieval.ts';
import { migrate } from './migrate.ts';
import { createPool, toVectorParam } from './pool.ts';
import { bootstrapDatabase, INGESTION_ROLE, ORIGIN_READER_ROLE, OWNER_ROLE } from './roles.ts';

const ORIGIN_ROLES = ['knowledge_owner', 'knowledge_ingestion', 'knowledge_connector', 'knowledge_retrieval'];

/** Everything the origin owns that a guest could change, as one comparable value. */
async function originSnapshot(pool: pg.Pool): Promise<unknown> {
  const r = await pool.query(
    `SELECT json_build_object(
       'columns', (SELECT json_agg(json_build_array(c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
                    a.attnotnull, a.atthasdef, a.attgenerated, a.attstorage, a.attacl::text, a.attstattarget)
                    ORDER BY c.relname, a.attnum)
                  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                  WHERE c.relnamespace = 'knowledge'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped),
       'relations', (SELECT json_agg(json_build_array(c.relname, c.relkind, c.reloptions::text, c.relacl::text,
                      pg_get_userbyid(c.relowner), c.relpersistence, c.relrowsecurity, c.relhastriggers)
                      ORDER BY c.relname)
                    FROM pg_class c WHERE c.relnamespace IN ('knowledge'::regnamespace, 'public'::regnamespace)),
       'indexes', (SELECT json_agg(json_build_array(i.indexname, i.indexdef) ORDER BY i.indexname)
                  FROM pg_indexes i WHERE i.schemaname IN ('knowledge', 'public')),
       'triggers', (SELECT json_agg(json_build_array(c.relname, t.tgname, pg_get_triggerdef(t.oid), t.tgenabled)
                     ORDER BY c.relname, t.tgname)
                   FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                   WHERE c.relnamespace IN ('knowledge'::regnamespace, 'public'::regnamespace)),
       'constraints', (SELECT json_agg(json_build_array(c.relname, k.conname, pg_get_constraintdef(k.oid))
                        ORDER BY c.relname, k.conname)
                      FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
                      WHERE c.relnamespace = 'knowledge'::regnamespace),
       'functions', (SELECT json_agg(json_build_array(p.oid::regprocedure::text, md5(pg_get_functiondef(p.oid)),
                      pg_get_userbyid(p.proowner), p.proconfig::text, p.proacl::text, p.prosecdef)
                      ORDER BY p.oid::regprocedure::text)
                    FROM pg_proc p WHERE p.pronamespace = 'knowledge'::regnamespace),
       'schemas', (SELECT json_agg(json_build_array(n.nspname, n.nspacl::text, pg_get_userbyid(n.nspowner))
                    ORDER BY n.nspname)
                  FROM pg_namespace n WHERE n.nspname IN ('knowledge', 'public')),
       'extensions', (SELECT json_agg(json_build_array(e.extname, e.extnamespace::regnamespace::text) ORDER BY e.extname)
                     FROM pg_extension e WHERE e.extnamespace = 'public'::regnamespace),
       'roles', (SELECT json_agg(json_build_array(r.rolname, r.rolcanlogin, r.rolinherit, r.rolsuper, r.rolcreaterole,
                  r.rolcreatedb, r.rolreplication, r.rolbypassrls, r.rolconnlimit,
                  (SELECT array_agg(g.rolname ORDER BY g.rolname) FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                    WHERE m.member = r.oid)) ORDER BY r.rolname)
                FROM pg_roles r WHERE r.rolname = ANY ($1))
     ) AS s`,
    [ORIGIN_ROLES],
  );
  return r.rows[0]?.s;
}

interface Db {
  readonly db: EmptyTestDatabase;
  readonly pool: pg.Pool;
  close(): Promise<void>;
}

async function database(): Promise<Db> {
  const db = await startEmptyTestDatabase();
  const pool = createPool({ connectionString: db.url, max: 4 });
  return {
    db,
    pool,
    async close() {
      await pool.end().catch(() => {});
      await db.close();
    },
  };
}

/** The origin's schema Jobs, as knowledge_owner (its own login on PostgreSQL). */
const originJobs = (d: Db, versions: readonly (1 | 2 | 3)[] = [1, 2, 3]) =>
  applyOriginSchema(d.pool, versions, d.db.engine === 'postgres' ? d.db.urlAs(OWNER_ROLE) : undefined);

/** `migrate`, as the migration Job runs it: the owner's login on PostgreSQL. */
async function migrateAsOwner(d: Db, capability: 'plain' | 'ledger' = 'plain'): Promise<void> {
  if (d.db.engine === 'pglite') {
    await migrate(d.pool, { capability });
    return;
  }
  const owner = createPool({ connectionString: d.db.urlAs(OWNER_ROLE), max: 1 });
  try {
    await migrate(owner, { capability });
  } finally {
    await owner.end();
  }
}

/** Rows the origin's ingestion writes with its own four columns. */
async function originRows(d: Db): Promise<void> {
  const rand = prng(30_030);
  const pool =
    d.db.engine === 'postgres' ? createPool({ connectionString: d.db.urlAs(INGESTION_ROLE), max: 1 }) : d.pool;
  try {
    const rows = [
      ['o-alice', meta({ source: 'docs/o1.md', principals: [P.alice] })],
      ['o-bob', meta({ source: 'docs/o2.md', principals: [P.bob] })],
      ['o-both', meta({ source: 'docs/o3.md', principals: [P.alice, P.bob] })],
      ['o-partner', meta({ source: 'docs/o4.md', groups: ['partner/org-b/docs'] })],
    ] as const;
    for (const [id, m] of rows)
      await pool.query(
        `${d.db.engine === 'pglite' ? 'SET ROLE knowledge_ingestion; ' : ''}INSERT INTO knowledge.chunks (chunk_id, content, embedding, metadata) VALUES ('${id}', 'origin ${id}', '${toVectorParam(randomVector(rand))}', '${JSON.stringify(m)}')${d.db.engine === 'pglite' ? '; RESET ROLE' : ''}`,
      );
  } finally {
    if (pool !== d.pool) await pool.end();
  }
}

describe('a guest in the origin database', { skip: ORIGIN_SKIP }, () => {
  let origin: Db;
  before(async () => {
    if (ORIGIN_SKIP) return;
    origin = await database();
    await originJobs(origin);
    await originRows(origin);
  });

  test('without its own roles, migrate refuses before writing anything, naming each role and the step', {
    skip: onlyOn('pglite', 'roles are cluster-wide on PostgreSQL, and the test cluster has them all'),
  }, async () => {
    const before = await originSnapshot(origin.pool);
    await assert.rejects(migrateAsOwner(origin, 'ledger'), (err: Error) => {
      assert.equal(err.name, 'MigratePrerequisiteError');
      assert.match(err.message, /role fgentic_retrieval does not exist/);
      assert.match(err.message, /role knowledge_projector does not exist/);
      assert.match(err.message, /migrate --bootstrap/);
      return true;
    });
    assert.deepEqual(await originSnapshot(origin.pool), before);
    const ours = await origin.pool.query("SELECT to_regnamespace('fgentic') IS NULL AS none");
    assert.equal(ours.rows[0]?.none, true, 'nothing of the project was created');
    // The administrator's step (roles only, on the origin's database).
    await bootstrapDatabase(origin.pool);
  });
  after(async () => {
    await origin?.close();
  });

  test('origin first: migrate (both modes, twice) leaves every origin object as it was', async () => {
    const before = await originSnapshot(origin.pool);
    await migrateAsOwner(origin, 'ledger');
    assert.deepEqual(await originSnapshot(origin.pool), before);
    await migrateAsOwner(origin, 'plain');
    assert.deepEqual(await originSnapshot(origin.pool), before);
    // The origin's own record of its versions, untouched.
    const v = await origin.pool.query(
      'SELECT array_agg(version ORDER BY version) AS v FROM knowledge.schema_migrations',
    );
    assert.deepEqual(v.rows[0]?.v, [1, 2, 3]);
  });

  test("the origin's store checks pass after migrate, as the origin's roles", async () => {
    const q = (sql: string, params: unknown[] = []) => origin.pool.query(sql, params);
    // Its grants, as its Jobs set them.
    const grants = await q(
      `SELECT has_table_privilege('knowledge_retrieval', 'knowledge.chunks', 'SELECT') AS retrieval_select,
              NOT has_table_privilege('knowledge_retrieval', 'knowledge.chunks', 'INSERT') AS retrieval_no_insert,
              has_function_privilege('knowledge_retrieval', 'knowledge.search_authorized_matrix(public.vector,text[],jsonb,integer)', 'EXECUTE') AS matrix,
              has_function_privilege('knowledge_retrieval', 'knowledge.search_authorized_groups(public.vector,text[],text[],integer)', 'EXECUTE') AS groups,
              has_table_privilege('knowledge_ingestion', 'knowledge.chunks', 'SELECT, INSERT, UPDATE, DELETE') AS ingestion_rw,
              NOT has_table_privilege('knowledge_ingestion', 'knowledge.chunks', 'TRUNCATE') AS ingestion_no_truncate,
              has_function_privilege('knowledge_ingestion', 'knowledge.apply_connector_tombstone(uuid)', 'EXECUTE') AS tombstone,
              has_function_privilege('knowledge_connector', 'knowledge.begin_connector_snapshot(text,text,text,integer)', 'EXECUTE') AS begin,
              NOT has_table_privilege('knowledge_connector', 'knowledge.chunks', 'SELECT') AS connector_no_chunks,
              (SELECT count(*) FROM pg_indexes WHERE schemaname = 'knowledge' AND indexname IN
                ('chunks_classification_idx', 'chunks_principals_gin_idx', 'chunks_groups_gin_idx',
                 'chunks_source_id_idx', 'chunks_embedding_hnsw_idx'))::int AS indexes`,
    );
    assert.deepEqual(grants.rows[0], {
      retrieval_select: true,
      retrieval_no_insert: true,
      matrix: true,
      groups: true,
      ingestion_rw: true,
      ingestion_no_truncate: true,
      tombstone: true,
      begin: true,
      connector_no_chunks: true,
      indexes: 5,
    });
    // Its search functions, as knowledge_retrieval: the rows the audience may read, nothing else.
    const reader =
      origin.db.engine === 'postgres'
        ? createPool({ connectionString: origin.db.urlAs(ORIGIN_READER_ROLE), max: 1 })
        : origin.pool;
    const prefix = origin.db.engine === 'pglite' ? `SET ROLE ${ORIGIN_READER_ROLE}; ` : '';
    const suffix = origin.db.engine === 'pglite' ? '; RESET ROLE' : '';
    const unit = toVectorParam(randomVector(prng(1)));
    try {
      const ids = async (sql: string) => {
        const r = (await reader.query(`${prefix}${sql}${suffix}`)) as unknown as pg.QueryResult | pg.QueryResult[];
        const rows = (Array.isArray(r) ? r.find((x) => x.command === 'SELECT') : r)?.rows ?? [];
        return rows.map((x: { chunk_id: string }) => x.chunk_id).sort();
      };
      assert.deepEqual(
        await ids(
          `SELECT chunk_id FROM knowledge.search_authorized_matrix('${unit}', ARRAY['public'], '${JSON.stringify([P.alice])}', 10)`,
        ),
        ['o-alice', 'o-both'],
      );
      assert.deepEqual(
        await ids(
          `SELECT chunk_id FROM knowledge.search_authorized_groups('${unit}', ARRAY['public'], ARRAY['partner/org-b/docs'], 10)`,
        ),
        ['o-partner'],
      );
    } finally {
      if (reader !== origin.pool) await reader.end();
    }
    // Its connector functions: a snapshot begins as knowledge_connector; a tombstone without a claim
    // is refused by the function itself (its own error), not by a missing privilege.
    const as = async (role: string, sql: string) => {
      if (origin.db.engine === 'pglite') {
        const c = await origin.pool.connect();
        try {
          await c.query(`SET ROLE ${role}`);
          return await c.query(sql);
        } finally {
          await c.query('RESET ROLE').catch(() => {});
          c.release();
        }
      }
      const login = new pg.Client({ connectionString: origin.db.urlAs(role) });
      await login.connect();
      try {
        return await login.query(sql);
      } finally {
        await login.end();
      }
    };
    await as(
      'knowledge_connector',
      `SELECT knowledge.begin_connector_snapshot('git-markdown', 'rev-1', 'sha256:${'a'.repeat(64)}', 0)`,
    );
    await assert.rejects(
      as(INGESTION_ROLE, "SELECT knowledge.apply_connector_tombstone('00000000-0000-4000-8000-000000000000')"),
      (err: { code?: string; message?: string }) => err.code === 'P0001' && /tombstone claim/.test(String(err.message)),
    );
  });

  test('project first: the origin Jobs apply on top, and migrate again changes nothing of theirs', async () => {
    const d = await database();
    try {
      await bootstrapDatabase(d.pool);
      await migrateAsOwner(d);
      await originJobs(d);
      const before = await originSnapshot(d.pool);
      await migrateAsOwner(d);
      assert.deepEqual(await originSnapshot(d.pool), before);
      // And the project still serves there: its own functions, its own role.
      await originRows(d);
      await migrateAsOwner(d);
      const r = await d.pool.query('SELECT count(*)::int AS n FROM fgentic.chunks');
      assert.equal(r.rows[0]?.n, 4);
    } finally {
      await d.close();
    }
  });
});
