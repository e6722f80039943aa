/**
 * The project's own migrations (./migrations), applied as the schema owner in version order, each in
 * its own transaction under an advisory lock, and recorded in `knowledge.fgentic_retrieval_migrations`
 * with the file's SHA-256. The origin's `knowledge.schema_migrations` is never read or written: its
 * versions belong to the origin's own Jobs, whose checks expect exactly their versions there.
 *
 * A file whose first line is `-- fgentic:when-absent <schema>.<table>` is the empty-database path: it
 * runs only when that table does not exist (it creates a schema compatible with the origin's v1 and
 * claims no origin version); over an origin database it is recorded as skipped.
 *
 * This runs from the `migrate` command (a Kubernetes Job with the owner's credential) and from the
 * embedded local stack before it serves; the serving process never migrates with its own role.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { OWNER_ROLE } from './roles.ts';

const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
// Arbitrary constant shared by every instance of this service.
const LOCK_KEY = 170_017_333;
const WHEN_ABSENT = /^-- fgentic:when-absent ([a-z_]+\.[a-z_]+)\n/;
export const MIGRATIONS_TABLE = 'knowledge.fgentic_retrieval_migrations';
/** Not versioned: re-asserted by every run, in this order (see the files). */
const ALWAYS = ['always_retrieval_privileges.sql', 'always_ledger_privileges.sql'];

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
  readonly sha256: string;
  /** Run only when this table is absent. */
  readonly whenAbsent?: string;
}

export interface MigrationResult {
  readonly applied: number[];
  readonly skipped: number[];
}

/** A recorded migration whose file has changed: migrations are immutable once applied. */
export class MigrationDriftError extends Error {
  constructor(readonly version: number) {
    super(`migration ${version} differs from the one recorded as applied`);
    this.name = 'MigrationDriftError';
  }
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((name) => {
      const sql = readFileSync(join(dir, name), 'utf8');
      const absent = WHEN_ABSENT.exec(sql)?.[1];
      return {
        version: Number(name.slice(0, 4)),
        name,
        sql,
        sha256: createHash('sha256').update(sql).digest('hex'),
        ...(absent ? { whenAbsent: absent } : {}),
      };
    });
}

export interface MigrateOptions {
  /** The role the DDL runs as; it owns what it creates. */
  readonly role?: string;
  readonly migrations?: readonly Migration[];
}

export async function migrate(pool: pg.Pool, options: MigrateOptions = {}): Promise<MigrationResult> {
  const role = options.role ?? OWNER_ROLE;
  const result: MigrationResult = { applied: [], skipped: [] };
  const client = await pool.connect();
  let failed = false;
  const begin = async () => {
    await client.query('BEGIN');
    await client.query("SELECT set_config('role', $1, true)", [role]);
    await client.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY]);
  };
  try {
    await begin();
    // The origin creates the schema the same way; either may come first.
    await client.query('CREATE SCHEMA IF NOT EXISTS knowledge');
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
         version integer PRIMARY KEY,
         name text NOT NULL,
         sha256 text NOT NULL,
         outcome text NOT NULL CHECK (outcome IN ('applied', 'skipped')),
         applied_at timestamptz NOT NULL DEFAULT statement_timestamp())`,
    );
    await client.query(`REVOKE ALL ON ${MIGRATIONS_TABLE} FROM PUBLIC`);
    await client.query('COMMIT');
    for (const m of options.migrations ?? loadMigrations()) {
      await begin();
      const done = await client.query(`SELECT sha256 FROM ${MIGRATIONS_TABLE} WHERE version = $1`, [
        m.version,
      ]);
      if (done.rowCount !== 0) {
        await client.query('COMMIT');
        if (done.rows[0]?.sha256 !== m.sha256) throw new MigrationDriftError(m.version);
        continue;
      }
      const skip =
        m.whenAbsent !== undefined &&
        (await client.query('SELECT to_regclass($1) IS NOT NULL AS present', [m.whenAbsent])).rows[0]
          ?.present === true;
      if (!skip) await client.query(m.sql);
      await client.query(
        `INSERT INTO ${MIGRATIONS_TABLE} (version, name, sha256, outcome) VALUES ($1, $2, $3, $4)`,
        [m.version, m.name, m.sha256, skip ? 'skipped' : 'applied'],
      );
      await client.query('COMMIT');
      (skip ? result.skipped : result.applied).push(m.version);
    }
    await begin();
    for (const file of ALWAYS) await client.query(readFileSync(join(MIGRATIONS_DIR, file), 'utf8'));
    await client.query('COMMIT');
    return result;
  } catch (err) {
    failed = true;
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release(failed ? true : undefined);
  }
}
