/**
 * The one way the server reaches Postgres: a `pg` Pool, for production (`DATABASE_URL`) and the
 * embedded PGlite socket alike. The origin grants the retrieval role at most 16 connections
 * (docs/upstream.md#origin-knowledge-store-placement), so the pool never exceeds that.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';

export const MAX_POOL_SIZE = 16;

export interface PoolOptions {
  readonly connectionString: string;
  readonly max?: number;
  /** PEM CA bundle for verifying the server (PGSSLROOTCERT also works through the URL). */
  readonly caFile?: string;
  /** Require TLS even when the URL does not say so. */
  readonly requireTls?: boolean;
  readonly statementTimeoutMs?: number;
  readonly connectionTimeoutMs?: number;
}

export function createPool(options: PoolOptions): pg.Pool {
  const max = Math.min(Math.max(1, options.max ?? 8), MAX_POOL_SIZE);
  const ssl =
    options.caFile !== undefined
      ? { ca: readFileSync(options.caFile, 'utf8'), rejectUnauthorized: true }
      : options.requireTls
        ? { rejectUnauthorized: true }
        : undefined;
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max,
    ...(ssl ? { ssl } : {}),
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 5_000,
    statement_timeout: options.statementTimeoutMs ?? 10_000,
    idleTimeoutMillis: 30_000,
    application_name: 'fgentic-retrieval',
  });
  // A broken idle connection must not crash the process; the next query fails closed instead.
  pool.on('error', () => {});
  // The same for a connection that breaks while checked out between two statements of a
  // transaction: pg emits 'error' on the client, which ends the process without a listener. The
  // statement in flight fails on its own and the caller discards the client.
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/** Serialize a vector for a `$n::vector` parameter. */
export function toVectorParam(v: readonly number[] | Float32Array): string {
  const parts: string[] = [];
  for (const x of v) {
    if (!Number.isFinite(x)) throw new Error('non-finite vector component');
    parts.push(String(x));
  }
  return `[${parts.join(',')}]`;
}
