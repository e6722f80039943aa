/**
 * The soak's database: an embedded PGlite, or a PostgreSQL + pgvector cluster of the soak's own
 * (its server is stopped and started by a fault, which must not touch any other test's cluster).
 * Either way the retrieval server reaches it as an external URL through a fault proxy, so the server
 * never migrates it (retrieval/index.ts). It is prepared as an operator would: the migration step as
 * the owner, then the corpus written by the ingestion role.
 */
import pg from 'pg';
import { startEmbeddedDatabase } from '../../retrieval/db/embedded.ts';
import { migrate } from '../../retrieval/db/migrate.ts';
import { createPool } from '../../retrieval/db/pool.ts';
import { asRole, bootstrapDatabase, INGESTION_ROLE, OWNER_ROLE, RETRIEVAL_ROLE } from '../../retrieval/db/roles.ts';
import { createLocalEmbedder } from '../../retrieval/embeddings/local.ts';
import { ensureProfile } from '../../retrieval/embeddings/profile.ts';
import { type Cluster, createDatabase, findPostgres, startCluster } from '../../testkit/common/postgres.ts';

export async function prepareDatabase(url: string): Promise<void> {
  const pool = createPool({ connectionString: url, max: 1 });
  try {
    await bootstrapDatabase(pool);
    await migrate(pool);
    await ensureProfile(asRole(pool, INGESTION_ROLE), createLocalEmbedder().profile, true);
  } finally {
    await pool.end();
  }
}

export type SoakEngine = 'pglite' | 'postgres';

/** The soak's database, as the stack and the fault schedule need it. */
export interface SoakDatabase {
  readonly engine: SoakEngine;
  /** host:port the fault proxy forwards to. */
  readonly target: { readonly host: string; readonly port: number };
  /** The URL for `role` with the host and port replaced by `via` (the proxy), or the direct one. */
  urlAs(role: string, via?: string): string;
  /** PostgreSQL: the cluster (its server is stopped and started by a fault). */
  readonly cluster?: Cluster;
  /** PostgreSQL: ends every connection the serving role has open, as pg_terminate_backend does. */
  terminateServing?(): Promise<number>;
  close(): Promise<void>;
}

function via(url: string, hostPort: string | undefined): string {
  if (hostPort === undefined) return url;
  const u = new URL(url);
  u.host = hostPort;
  u.searchParams.set('sslmode', 'disable');
  return u.toString();
}

/** Starts the soak's database of `engine`, migrated, with the profile recorded; not yet seeded. */
export async function startSoakDatabase(engine: SoakEngine): Promise<SoakDatabase> {
  if (engine === 'pglite') {
    const db = await startEmbeddedDatabase({ maxConnections: 24 });
    try {
      await prepareDatabase(db.url);
    } catch (err) {
      await db.close();
      throw err;
    }
    const u = new URL(db.url);
    return {
      engine,
      target: { host: u.hostname, port: Number(u.port) },
      urlAs: (_role, hostPort) => via(db.url, hostPort),
      close: () => db.close(),
    };
  }
  const found = findPostgres();
  if ('missing' in found) throw new Error(`soak on PostgreSQL: ${found.missing}`);
  const cluster = await startCluster(found.install);
  try {
    const database = await createDatabase(cluster, 'soak');
    const admin = createPool({ connectionString: cluster.url(database.name), max: 1 });
    try {
      await bootstrapDatabase(admin);
    } finally {
      await admin.end();
    }
    const owner = createPool({ connectionString: cluster.url(database.name, OWNER_ROLE), max: 1 });
    try {
      await migrate(owner);
    } finally {
      await owner.end();
    }
    const ingestion = createPool({ connectionString: cluster.url(database.name, INGESTION_ROLE), max: 1 });
    try {
      await ensureProfile(asRole(ingestion, INGESTION_ROLE), createLocalEmbedder().profile, true);
    } finally {
      await ingestion.end();
    }
    return {
      engine,
      target: { host: '127.0.0.1', port: cluster.port },
      cluster,
      urlAs: (role, hostPort) => via(cluster.url(database.name, role), hostPort),
      async terminateServing() {
        const c = new pg.Client({ connectionString: cluster.url(database.name) });
        await c.connect();
        try {
          const r = await c.query(
            `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
              WHERE usename = $1 AND datname = current_database()`,
            [RETRIEVAL_ROLE],
          );
          return Number(r.rows[0]?.n ?? 0);
        } finally {
          await c.end();
        }
      },
      async close() {
        cluster.stop();
      },
    };
  } catch (err) {
    cluster.stop();
    throw err;
  }
}
