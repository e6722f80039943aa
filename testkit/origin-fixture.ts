/**
 * Test support, not used by production code: builds an embedded database the way the origin platform
 * builds its knowledge database, from the origin's own schema SQL, read verbatim from the upstream
 * fixture folder (never copied into this repository). Its README gives the recipe followed here:
 * roles LOGIN NOINHERIT with the origin's connection limits, the database owned by knowledge_owner,
 * the vector extension created by a superuser, then `data["schema.sql"]` of v1, v2 and v3 run as
 * knowledge_owner with the database name in the two `ON DATABASE knowledge` lines replaced.
 *
 * The folder is `../shared/upstream/fgentic-origin-477e415` next to the repository, or
 * FGENTIC_ORIGIN_SCHEMA_DIR. The SQL is the origin's code (Apache-2.0, github.com/fmind-ai/fgentic at
 * 477e415, infra/postgres/knowledge-schema-v1.yaml and components/knowledge-ingestion/… for v2 and
 * v3), so it is read, not copied: without the folder the tests that need it skip (ORIGIN_SKIP), and CI
 * (FGENTIC_REQUIRE_SHARED=1) turns that skip into a failure.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

const PgClient = pg.Client;

import { sharedSkip } from './common/index.ts';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const ORIGIN_SCHEMA_DIR =
  process.env['FGENTIC_ORIGIN_SCHEMA_DIR'] ?? join(REPO, '..', 'shared', 'upstream', 'fgentic-origin-477e415');

/** The node:test `skip` value of every test that applies the origin's schema. */
export const ORIGIN_SKIP = sharedSkip(ORIGIN_SCHEMA_DIR, "the origin platform's knowledge-store schema");

/** The origin's role set and connection limits (its README, step 1). */
const ORIGIN_ROLES: readonly [string, number][] = [
  ['knowledge_owner', 4],
  ['knowledge_retrieval', 16],
  ['knowledge_ingestion', 4],
  ['knowledge_connector', 2],
];

/** `data["schema.sql"]` of one origin ConfigMap, for the given database name. */
export function originSchemaSql(version: 1 | 2 | 3, database: string): string {
  const file = join(ORIGIN_SCHEMA_DIR, `knowledge-schema-v${version}.yaml`);
  if (!existsSync(file)) throw new Error(`origin schema fixture missing: ${file}`);
  // The ConfigMap is the first YAML document; schema.sql is a literal block indented by four spaces.
  const configMap = readFileSync(file, 'utf8').split(/^---$/m)[0] ?? '';
  const lines = configMap.split('\n');
  const start = lines.indexOf('  schema.sql: |');
  if (start < 0) throw new Error(`no schema.sql in ${file}`);
  const body: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line !== '' && !line.startsWith('    ')) break;
    body.push(line.slice(4));
  }
  if (!/^[a-z_][a-z0-9_]*$/.test(database)) throw new Error('database name');
  return body.join('\n').replaceAll('ON DATABASE knowledge ', `ON DATABASE ${database} `);
}

/** Steps 1–2 of the recipe on the connected (superuser) database. */
export async function prepareOriginCluster(pool: pg.Pool): Promise<string> {
  for (const [role, limit] of ORIGIN_ROLES) {
    const exists = await pool.query('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [role]);
    if (exists.rowCount === 0) await pool.query(`CREATE ROLE ${role} LOGIN NOINHERIT CONNECTION LIMIT ${limit}`);
  }
  const db = String((await pool.query('SELECT current_database() AS d')).rows[0]?.d);
  await pool.query(`ALTER DATABASE ${db} OWNER TO knowledge_owner`);
  await pool.query('CREATE EXTENSION IF NOT EXISTS vector');
  return db;
}

/**
 * Step 3: the origin's v1, v2, v3 as knowledge_owner, each in the transaction its SQL opens. With
 * `ownerUrl` (PostgreSQL) the SQL runs logged in as knowledge_owner, as the origin's Job does;
 * without it, on the superuser's connection under SET ROLE (PGlite, whose one session is every login).
 */
export async function applyOriginSchema(
  pool: pg.Pool,
  versions: readonly (1 | 2 | 3)[] = [1, 2, 3],
  ownerUrl?: string,
) {
  const db = await prepareOriginCluster(pool);
  if (ownerUrl !== undefined) {
    const owner = new PgClient({ connectionString: ownerUrl });
    await owner.connect();
    try {
      for (const v of versions) {
        try {
          await owner.query(originSchemaSql(v, db));
        } finally {
          await owner.query('ROLLBACK').catch(() => {});
        }
      }
    } finally {
      await owner.end();
    }
    return;
  }
  const client = await pool.connect();
  try {
    for (const v of versions) {
      // The SQL opens and commits its own transaction; the role is set around it, then reset, on this
      // one connection (the embedded database has a single session, so nothing runs in between).
      await client.query('SET ROLE knowledge_owner');
      try {
        await client.query(originSchemaSql(v, db));
      } finally {
        await client.query('ROLLBACK').catch(() => {});
        await client.query('RESET ROLE');
      }
    }
  } finally {
    client.release();
  }
}
