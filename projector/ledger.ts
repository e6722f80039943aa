/**
 * The projector side of the capability ledger (docs/ledger.md): before a minted `X-Fgentic-Identity`
 * leaves the projector in `ledger` mode, the SHA-256 of the exact header value is recorded with its
 * agent and `exp` through `fgentic_ledger.record_v1` (migration 0008). The projector's database role
 * may call that function and `purge_v1`, nothing else; it cannot read the ledger or delete a live
 * entry.
 *
 * Expired entries are purged on a schedule by every projector replica (the purge deletes only rows
 * expired by the database's clock, so concurrent purges are harmless). The purge doubles as the
 * ledger's health probe: the projector is ready in ledger mode only while its last ledger operation
 * succeeded, and a failed operation is retried on a short interval until one succeeds.
 */
import type pg from 'pg';
import { createLogger } from '../common/log.ts';
import { asRole, PROJECTOR_ROLE } from '../retrieval/db/roles.ts';
import { capabilityDigest, PURGE_SQL, recordMessage } from '../retrieval/ledger.ts';

const log = createLogger('projector');

export interface CapabilityLedger {
  /** Record one minted value; rejects when the ledger cannot confirm the write. */
  record(headerValue: string, agent: string, exp: number): Promise<void>;
  /** Delete expired entries now; resolves to how many. */
  purge(): Promise<number>;
  /** Whether the last ledger operation (record, purge) succeeded. */
  healthy(): boolean;
  /** Stop the schedule; the pool belongs to the caller unless `ownsPool` was set. */
  close(): Promise<void>;
}

export interface LedgerOptions {
  /** A pool to the knowledge database; each transaction runs as knowledge_projector. */
  readonly pool: pg.Pool;
  /** End the pool on close (the CLI's own pool). */
  readonly ownsPool?: boolean;
  /** Purge interval while healthy (default 60 s). */
  readonly purgeIntervalMs?: number;
  /** Probe interval while unhealthy (default 2 s). */
  readonly retryIntervalMs?: number;
  /** Called after each operation with its outcome (metrics). */
  readonly onResult?: (op: 'record' | 'purge', ok: boolean, purged?: number) => void;
}

export function createLedger(options: LedgerOptions): CapabilityLedger {
  const pool = asRole(options.pool, PROJECTOR_ROLE);
  const purgeEvery = options.purgeIntervalMs ?? 60_000;
  const retryEvery = options.retryIntervalMs ?? 2_000;
  // Unknown until the first operation: not ready before the ledger has answered once.
  let ok = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;

  const note = (op: 'record' | 'purge', result: boolean, purged?: number) => {
    if (result !== ok)
      log[result ? 'info' : 'error'](result ? 'ledger reachable' : 'ledger unavailable', { op });
    ok = result;
    options.onResult?.(op, result, purged);
  };

  const purge = async (): Promise<number> => {
    try {
      const r = await pool.query(PURGE_SQL);
      const n = Number(r.rows[0]?.['purged'] ?? 0);
      note('purge', true, n);
      return n;
    } catch (err) {
      note('purge', false);
      throw err;
    }
  };

  const schedule = () => {
    if (closed) return;
    timer = setTimeout(
      () => {
        purge()
          .catch(() => {})
          .finally(schedule);
      },
      ok ? purgeEvery : retryEvery,
    );
    timer.unref();
  };
  // First contact at once, so readiness does not wait a whole interval.
  purge()
    .catch(() => {})
    .finally(schedule);

  return {
    async record(headerValue, agent, exp) {
      // A value of the wrong shape is refused here (RangeError) without counting as a ledger fault.
      const message = recordMessage(PROJECTOR_ROLE, capabilityDigest(headerValue), agent, exp);
      try {
        // One round trip (retrieval/ledger.ts recordMessage), still as knowledge_projector.
        await options.pool.query(message);
        note('record', true);
      } catch (err) {
        note('record', false);
        throw err;
      }
    },
    purge,
    healthy: () => ok && !closed,
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      if (options.ownsPool) await options.pool.end().catch(() => {});
    },
  };
}
