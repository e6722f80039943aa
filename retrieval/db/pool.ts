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
  /**
   * Start every connection as this role with read-only transactions (startup options `role` and
   * `default_transaction_read_only`), for a pool that only serves searches. A connection that starts
   * this way runs each search as one statement instead of four (retrieval/db/roles.ts, asRole;
   * retrieval/search.ts). The server refuses the connection when the login may not take the role. The
   * embedded database and PgBouncer (`ignore_startup_parameters`) drop the options; each connection
   * is checked, and one that did not start this way is used as before.
   */
  readonly session?: { readonly role: string; readonly readOnly: boolean };
  /**
   * `transaction`: the URL points at a pooler in transaction mode (PgBouncer `pool_mode =
   * transaction`). The pool then sends no startup parameter a pooler refuses or would apply to one
   * server session only (`options`, `statement_timeout`; `session` is ignored): the role, read-only
   * mode and the statement timeout are set per transaction instead (retrieval/db/roles.ts, asRole
   * with `transactionPooler`).
   */
  readonly pooler?: 'transaction';
}

/** The startup `options` for PoolOptions.session; role names are this project's constants. */
export function sessionOptions(session: NonNullable<PoolOptions['session']>): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(session.role)) throw new RangeError('role name');
  return `-c role=${session.role}${session.readOnly ? ' -c default_transaction_read_only=on' : ''}`;
}

/** The statement timeout a pool's statements run under, ms. */
export function statementTimeoutMs(options: Pick<PoolOptions, 'statementTimeoutMs'>): number {
  return options.statementTimeoutMs ?? 10_000;
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
    ...(options.pooler ? {} : { statement_timeout: statementTimeoutMs(options) }),
    idleTimeoutMillis: 30_000,
    application_name: 'fgentic-retrieval',
    ...(options.session && !options.pooler ? { options: sessionOptions(options.session) } : {}),
  });
  // A broken idle connection must not crash the process; the next query fails closed instead.
  pool.on('error', () => {});
  // The same for a connection that breaks while checked out between two statements of a
  // transaction: pg emits 'error' on the client, which ends the process without a listener. The
  // statement in flight fails on its own and the caller discards the client.
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/**
 * A vector in pgvector's binary format (its recv function: int16 dimensions, int16 zero, float4
 * big-endian each). node-postgres sends a Buffer parameter in binary, so the server reads 4 KiB
 * instead of parsing ~10-20 KB of decimal text, and the client skips formatting 1024 shortest
 * decimal strings (~0.3 ms for a 1024-d float4 vector: bench:retrieval's per-call costs); ingestion
 * writes rows with it too. Components are rounded to float4 here (Math.fround) instead of by the
 * server's strtof on a decimal string; the two can differ in the last bit for rare values, which at
 * most makes a re-supplied vector count as changed once.
 */
export function toVectorBinary(v: readonly number[] | Float32Array): Buffer {
  if (v.length < 1 || v.length > 0x7fff) throw new RangeError('vector dimensions out of range');
  const b = Buffer.allocUnsafe(4 + 4 * v.length);
  b.writeInt16BE(v.length, 0);
  b.writeInt16BE(0, 2);
  for (let i = 0; i < v.length; i++) {
    const x = v[i] as number;
    if (!Number.isFinite(Math.fround(x))) throw new RangeError('vector component is not a finite float4');
    b.writeFloatBE(x, 4 + 4 * i);
  }
  return b;
}

/** Serialize a vector for a `$n::vector` parameter as text. */
export function toVectorParam(v: readonly number[] | Float32Array): string {
  const parts: string[] = [];
  for (const x of v) {
    if (!Number.isFinite(x)) throw new Error('non-finite vector component');
    parts.push(String(x));
  }
  return `[${parts.join(',')}]`;
}
