/**
 * Embedded Postgres for the local default and tests: PGlite 0.5.14 (Postgres 18 in WASM) with
 * pgvector, served on 127.0.0.1 by pglite-socket so the server still talks through `pg` — one code
 * path (research/deps-probe.md §1–2). PGlite runs one query at a time; pglite-socket queues queries
 * across connections and holds other connections while one is inside a transaction, so a small pool
 * is safe. maxConnections defaults to 1 upstream, hence the explicit value.
 */
import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

export interface EmbeddedDatabase {
  /** A postgres:// URL for `pg`. */
  readonly url: string;
  /** Pool size that fits under the socket server's connection limit. */
  readonly poolSize: number;
  close(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Directory to persist to; omit for an in-memory database. */
  readonly dataDir?: string;
  readonly port?: number;
  readonly maxConnections?: number;
}

export const DEFAULT_DATA_DIR = './data/pglite';

export async function startEmbeddedDatabase(options: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  if (options.dataDir !== undefined) mkdirSync(options.dataDir, { recursive: true });
  const db = await PGlite.create(options.dataDir, { extensions: { vector } });
  const maxConnections = options.maxConnections ?? 8;
  const server = new PGLiteSocketServer({
    db,
    host: '127.0.0.1',
    port: options.port ?? 0,
    maxConnections,
  });
  try {
    await server.start();
  } catch (err) {
    await db.close().catch(() => {});
    throw err;
  }
  const conn = server.getServerConn();
  let closed = false;
  return {
    url: `postgres://postgres@${conn}/postgres?sslmode=disable`,
    poolSize: Math.max(1, maxConnections - 2),
    async close() {
      if (closed) return;
      closed = true;
      await server.stop().catch(() => {});
      await db.close().catch(() => {});
    },
  };
}
