/**
 * The project's migrations (./migrations), applied as the schema owner in version order, each in its
 * own transaction under an advisory lock, and recorded in `fgentic.migrations` with the file's
 * SHA-256 (a recorded file that changed is refused: migrations are append-only). The origin's
 * `knowledge.schema_migrations` is never read or written: its versions belong to the origin's Jobs.
 *
 * Every run then re-asserts what depends on the deployment rather than on a version: the serving
 * role's CONNECT on the database, and the capability ledger's grants in ledger mode (revoked in
 * plain mode); and it brings the derived search data up to date with the origin's rows (a full
 * sync in short batches) and builds the project's HNSW index once there are rows to build it from.
 *
 * Online: every statement here reads the origin's tables at most (ACCESS SHARE) and writes only the
 * project's own objects, so the origin's reads and writes never wait on `migrate`
 * (retrieval/db/online-migrate.test.ts measures it).
 *
 * This runs from the `migrate` command (a Kubernetes Job with the owner's credential) and from the
 * embedded local stack before it serves; the serving process never migrates.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { onConnection } from '../../common/transaction.ts';
import { INGESTION_ROLE, OWNER_ROLE, PROJECTOR_ROLE, RETRIEVAL_ROLE as SERVING_ROLE } from './roles.ts';
import { maintainSubgraphs, type SubgraphOptions, type SubgraphReport } from './subgraphs.ts';

const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
// Arbitrary constant shared by every instance of this service.
const LOCK_KEY = 170_017_333;
export const MIGRATIONS_TABLE = 'fgentic.migrations';
/** Rows per sync statement: each is one short transaction. */
export const SYNC_BATCH = 2_000;

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
  readonly sha256: string;
}

export interface MigrationResult {
  readonly applied: number[];
  /** Origin rows (re)derived and derived rows removed by the sync that followed. */
  readonly synced: number;
  /** Whether this run built the project's HNSW index. */
  readonly vectorIndexBuilt: boolean;
  /** The filtered subgraphs kept, built and dropped (retrieval/db/subgraphs.ts). */
  readonly subgraphs?: SubgraphReport;
}

/** A recorded migration whose file has changed: migrations are immutable once applied. */
export class MigrationDriftError extends Error {
  constructor(readonly version: number) {
    super(`migration ${version} differs from the one recorded as applied`);
    this.name = 'MigrationDriftError';
  }
}

/**
 * What `migrate` needs and cannot make itself, each with what to do about it. Never a secret or a
 * row; role and object names are this project's constants.
 */
export class MigratePrerequisiteError extends Error {
  constructor(readonly missing: readonly string[]) {
    super(`cannot migrate: ${missing.join('; ')}`);
    this.name = 'MigratePrerequisiteError';
  }
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((name) => {
      const sql = readFileSync(join(dir, name), 'utf8');
      return {
        version: Number(name.slice(0, 4)),
        name,
        sql,
        sha256: createHash('sha256').update(sql).digest('hex'),
      };
    });
}

export type CapabilityGrants = 'plain' | 'ledger';

export interface MigrateOptions {
  /** The role the DDL runs as; it owns what it creates. */
  readonly role?: string;
  readonly migrations?: readonly Migration[];
  /** `ledger` grants the capability ledger's functions; `plain` (default) revokes them. */
  readonly capability?: CapabilityGrants;
  /** Progress of the sync (rows covered so far). */
  readonly onSync?: (covered: number) => void;
  /** HNSW parameters of the project's index (tests build a cheaper graph). */
  readonly hnsw?: { readonly m: number; readonly efConstruction: number };
  /** The filtered subgraphs' budget; `false` leaves them as they are. */
  readonly subgraphs?: SubgraphOptions | false;
}

/** The roles and extension the baseline names, checked before anything is written. */
async function prerequisites(client: pg.PoolClient, capability: CapabilityGrants): Promise<void> {
  const missing: string[] = [];
  const roles = [INGESTION_ROLE, SERVING_ROLE, ...(capability === 'ledger' ? [PROJECTOR_ROLE] : [])];
  const present = await client.query<{ rolname: string }>(
    'SELECT rolname FROM pg_catalog.pg_roles WHERE rolname = ANY ($1)',
    [roles],
  );
  const have = new Set(present.rows.map((r) => r.rolname));
  for (const role of roles)
    if (!have.has(role))
      missing.push(
        `role ${role} does not exist (a superuser creates it: \`fgentic-retrieval migrate --bootstrap\`, or CREATE ROLE ${role} LOGIN NOINHERIT; see deploy/README.md, "Database")`,
      );
  const vector = await client.query("SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'vector'");
  if (vector.rowCount === 0)
    missing.push('the vector extension is not installed (a superuser runs CREATE EXTENSION vector)');
  const old = await client.query("SELECT to_regclass('knowledge.fgentic_retrieval_migrations') IS NOT NULL AS old");
  if (old.rows[0]?.old === true)
    missing.push(
      'the database holds objects of a pre-release version of this project (knowledge.fgentic_retrieval_migrations); start from a database without them',
    );
  if (missing.length > 0) throw new MigratePrerequisiteError(missing);
}

export async function migrate(pool: pg.Pool, options: MigrateOptions = {}): Promise<MigrationResult> {
  const role = options.role ?? OWNER_ROLE;
  const capability = options.capability ?? 'plain';
  const applied: number[] = [];
  return onConnection(
    () => pool.connect(),
    async (client) => {
      const begin = async () => {
        await client.query('BEGIN');
        await client.query("SELECT set_config('role', $1, true)", [role]);
        await client.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY]);
      };
      await begin();
      await prerequisites(client, capability);
      await client.query('CREATE SCHEMA IF NOT EXISTS fgentic');
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
         version integer PRIMARY KEY,
         name text NOT NULL,
         sha256 text NOT NULL,
         applied_at timestamptz NOT NULL DEFAULT statement_timestamp())`,
      );
      await client.query(`REVOKE ALL ON ${MIGRATIONS_TABLE} FROM PUBLIC`);
      await client.query('COMMIT');
      for (const m of options.migrations ?? loadMigrations()) {
        await begin();
        const done = await client.query(`SELECT sha256 FROM ${MIGRATIONS_TABLE} WHERE version = $1`, [m.version]);
        if (done.rowCount !== 0) {
          await client.query('COMMIT');
          if (done.rows[0]?.sha256 !== m.sha256) throw new MigrationDriftError(m.version);
          continue;
        }
        await client.query(m.sql);
        await client.query(`INSERT INTO ${MIGRATIONS_TABLE} (version, name, sha256) VALUES ($1, $2, $3)`, [
          m.version,
          m.name,
          m.sha256,
        ]);
        await client.query('COMMIT');
        applied.push(m.version);
      }
      await begin();
      await assertGrants(client, capability);
      await client.query('COMMIT');
      const synced = await syncAll(client, role, options.onSync);
      const vectorIndexBuilt = await ensureVectorIndex(client, role, options.hnsw);
      if (options.subgraphs === false) return { applied, synced, vectorIndexBuilt };
      const subgraphs = await maintainSubgraphs(client, role, options.subgraphs);
      return { applied, synced, vectorIndexBuilt, subgraphs };
    },
  );
}

/** Grants that follow the deployment, re-asserted on every run. */
async function assertGrants(client: pg.PoolClient, capability: CapabilityGrants): Promise<void> {
  const db = String((await client.query('SELECT current_database() AS d')).rows[0]?.d);
  const ident = `"${db.replaceAll('"', '""')}"`;
  // The owner of the database may grant CONNECT; the origin revokes it from PUBLIC.
  await client.query(`GRANT CONNECT ON DATABASE ${ident} TO ${SERVING_ROLE}`);
  const check = 'fgentic_ledger.check_v1(bytea, text, bigint)';
  const record = 'fgentic_ledger.record_v1(bytea, text, bigint)';
  const purge = 'fgentic_ledger.purge_v1()';
  if (capability === 'ledger') {
    await client.query(`GRANT USAGE ON SCHEMA fgentic_ledger TO ${SERVING_ROLE}, ${PROJECTOR_ROLE}`);
    await client.query(`GRANT EXECUTE ON FUNCTION ${check} TO ${SERVING_ROLE}`);
    await client.query(`GRANT EXECUTE ON FUNCTION ${record}, ${purge} TO ${PROJECTOR_ROLE}`);
    await client.query(`GRANT CONNECT ON DATABASE ${ident} TO ${PROJECTOR_ROLE}`);
    return;
  }
  await client.query(`REVOKE ALL ON FUNCTION ${check}, ${record}, ${purge} FROM ${SERVING_ROLE}`);
  await client.query(`REVOKE ALL ON SCHEMA fgentic_ledger FROM ${SERVING_ROLE}`);
  const projector = await client.query('SELECT to_regrole($1) IS NOT NULL AS present', [PROJECTOR_ROLE]);
  if (projector.rows[0]?.present === true) {
    await client.query(`REVOKE ALL ON FUNCTION ${check}, ${record}, ${purge} FROM ${PROJECTOR_ROLE}`);
    await client.query(`REVOKE ALL ON SCHEMA fgentic_ledger FROM ${PROJECTOR_ROLE}`);
  }
}

/**
 * A full sync of the derived search data, in short statements (fgentic.sync_batch). Returns how
 * many derived rows it wrote or removed. Also what the `sync` command runs.
 */
export async function syncAll(
  client: pg.PoolClient,
  role: string,
  onProgress?: (covered: number) => void,
  batch = SYNC_BATCH,
): Promise<number> {
  let after: string | null = null;
  let changed = 0;
  let covered = 0;
  for (;;) {
    await client.query('BEGIN');
    await client.query("SELECT set_config('role', $1, true)", [role]);
    // A batch writes up to `batch` rows into the HNSW graph: on a busy server that outlasts the
    // pool's per-statement limit, which is sized for searches. It holds no lock on the origin's table
    // beyond a reader's.
    await client.query("SELECT set_config('statement_timeout', '300s', true)");
    const r: pg.QueryResult<{ last_id: string | null; derived: number; removed: number }> = await client.query(
      'SELECT last_id, derived, removed FROM fgentic.sync_batch($1, $2)',
      [after, batch],
    );
    await client.query('COMMIT');
    const row: { last_id: string | null; derived: number; removed: number } | undefined = r.rows[0];
    changed += (row?.derived ?? 0) + (row?.removed ?? 0);
    if (row?.last_id === null || row?.last_id === undefined) break;
    after = row.last_id;
    covered += batch;
    onProgress?.(covered);
  }
  return changed;
}

/** The project's HNSW index on fgentic.chunks, built when absent and not deferred by a bulk load. */
async function ensureVectorIndex(
  client: pg.PoolClient,
  role: string,
  hnsw = { m: 16, efConstruction: 64 },
): Promise<boolean> {
  await client.query('BEGIN');
  try {
    await client.query("SELECT set_config('role', $1, true)", [role]);
    const r = await client.query(
      "SELECT to_regclass('fgentic.chunks_embedding_hnsw_idx') IS NULL AND NOT EXISTS (SELECT 1 FROM fgentic.deferred_indexes) AS absent",
    );
    if (r.rows[0]?.absent !== true) {
      await client.query('COMMIT');
      return false;
    }
    if (!Number.isInteger(hnsw.m) || !Number.isInteger(hnsw.efConstruction)) throw new RangeError('hnsw');
    await client.query("SELECT set_config('statement_timeout', '0', true)");
    // Locks only the project's own table; searches meanwhile rank by an exact scan.
    await client.query(
      `CREATE INDEX chunks_embedding_hnsw_idx ON fgentic.chunks USING hnsw (embedding public.vector_cosine_ops) WITH (m = ${hnsw.m}, ef_construction = ${hnsw.efConstruction})`,
    );
    await client.query('COMMIT');
    return true;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}
