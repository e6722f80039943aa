/**
 * The origin's single-writer ingestion lease: one row `chunks-v1` in knowledge.ingestion_leases (the
 * origin's v2 table; migration 0002 creates the same table when v2 is absent) with a random holder and
 * an expiry. Every writer of knowledge.chunks takes it first, so this project's `ingest` and the
 * origin's ingestion never write at the same time.
 *
 * - acquire: insert the row, or take it over only when it has expired; otherwise LeaseBusyError.
 * - every transaction of the writer (through `asRole`'s guard) re-reads the row FOR UPDATE and aborts
 *   unless this holder still owns an unexpired lease, so an expired lease that someone else took over
 *   can never be written under, and the row lock keeps a reclaimer from racing a commit.
 * - renewal every third of the lifetime while the work runs; release deletes only our own row.
 * The lifetime defaults to the origin's (35 minutes, docs/upstream.md#origin-ingestion).
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { asRole, INGESTION_ROLE } from '../db/roles.ts';

export const LEASE_NAME = 'chunks-v1';
export const DEFAULT_LEASE_SECONDS = 35 * 60;

export class LeaseBusyError extends Error {
  constructor() {
    super('ingestion lease held by another writer');
    this.name = 'LeaseBusyError';
  }
}

export class LeaseLostError extends Error {
  constructor() {
    super('ingestion lease lost');
    this.name = 'LeaseLostError';
  }
}

export interface Lease {
  readonly holder: string;
  /** Runs inside each write transaction; throws LeaseLostError unless the lease is still ours. */
  guard(client: pg.PoolClient): Promise<void>;
  renew(): Promise<void>;
  release(): Promise<void>;
}

export async function acquireLease(db: pg.Pool, seconds = DEFAULT_LEASE_SECONDS): Promise<Lease> {
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 86_400) throw new RangeError('lease lifetime');
  const holder = randomUUID();
  const taken = await db.query(
    `INSERT INTO knowledge.ingestion_leases (name, holder, expires_at)
     VALUES ($1, $2::uuid, statement_timestamp() + make_interval(secs => $3))
     ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
     WHERE knowledge.ingestion_leases.expires_at <= statement_timestamp()
     RETURNING holder`,
    [LEASE_NAME, holder, seconds],
  );
  if (taken.rowCount !== 1) throw new LeaseBusyError();
  return {
    holder,
    async guard(client) {
      const r = await client.query(
        `SELECT 1 FROM knowledge.ingestion_leases
         WHERE name = $1 AND holder = $2::uuid AND expires_at > statement_timestamp() FOR UPDATE`,
        [LEASE_NAME, holder],
      );
      if (r.rowCount !== 1) throw new LeaseLostError();
    },
    async renew() {
      const r = await db.query(
        `UPDATE knowledge.ingestion_leases SET expires_at = statement_timestamp() + make_interval(secs => $3)
         WHERE name = $1 AND holder = $2::uuid AND expires_at > statement_timestamp()`,
        [LEASE_NAME, holder, seconds],
      );
      if (r.rowCount !== 1) throw new LeaseLostError();
    },
    async release() {
      await db.query('DELETE FROM knowledge.ingestion_leases WHERE name = $1 AND holder = $2::uuid', [
        LEASE_NAME,
        holder,
      ]);
    },
  };
}

export interface LeaseOptions {
  readonly seconds?: number;
}

/**
 * Run `work` as the single writer: it gets a pool whose every transaction runs as the ingestion role
 * and checks the lease. The lease is released afterwards, whether the work succeeded or not.
 */
export async function withIngestionLease<T>(
  pool: pg.Pool,
  work: (writer: pg.Pool) => Promise<T>,
  options: LeaseOptions = {},
): Promise<T> {
  const seconds = options.seconds ?? DEFAULT_LEASE_SECONDS;
  const ingestion = asRole(pool, INGESTION_ROLE);
  const lease = await acquireLease(ingestion, seconds);
  // A failed renewal needs no handling here: the next write transaction's guard refuses to write.
  const timer = setInterval(
    () => {
      lease.renew().catch(() => {});
    },
    Math.max(1_000, (seconds * 1_000) / 3),
  );
  timer.unref();
  try {
    return await work(asRole(pool, INGESTION_ROLE, (client) => lease.guard(client)));
  } finally {
    clearInterval(timer);
    await lease.release().catch(() => {});
  }
}
