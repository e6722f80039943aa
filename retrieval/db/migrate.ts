/**
 * Applies the SQL files in ./migrations in version order, each in its own transaction under an
 * advisory lock, recording versions in knowledge.schema_migrations (the origin's table; our own
 * additions use versions ≥ 100 so they never collide with the origin's 1–3).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';

const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
// Arbitrary constant shared by every instance of this service.
const LOCK_KEY = 170_017_333;

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((name) => ({ version: Number(name.slice(0, 4)), name, sql: readFileSync(join(dir, name), 'utf8') }));
}

/** Returns the versions applied by this call. */
export async function migrate(pool: pg.Pool): Promise<number[]> {
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    for (const m of loadMigrations()) {
      await client.query('BEGIN');
      try {
        await client.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY]);
        // The table is absent before the first migration creates it.
        const exists = await client.query(
          "SELECT to_regclass('knowledge.schema_migrations') IS NOT NULL AS present",
        );
        const done =
          exists.rows[0]?.present === true &&
          (await client.query('SELECT 1 FROM knowledge.schema_migrations WHERE version = $1', [m.version]))
            .rowCount !== 0;
        if (done) {
          await client.query('COMMIT');
          continue;
        }
        await client.query(m.sql);
        await client.query(
          'INSERT INTO knowledge.schema_migrations (version) VALUES ($1) ON CONFLICT DO NOTHING',
          [m.version],
        );
        await client.query('COMMIT');
        applied.push(m.version);
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    }
  } finally {
    client.release();
  }
  return applied;
}
