/**
 * The projector side of the capability ledger (docs/ledger.md): the SHA-256 of every header value
 * the projector mints in `ledger` mode is recorded with its agent and `exp` through
 * `fgentic_ledger.record_v1` (migration 0008). The projector's database role may call that function
 * and `purge_v1`, nothing else; it cannot read the ledger or delete a live entry.
 *
 * Two ways to confirm a mint (`confirm`):
 * - `deferred` (default): the value is answered once its record is queued; records leave in batches,
 *   one batch in flight. The ledger is healthy only while its last operation succeeded and no batch
 *   is overdue (`recordDeadlineMs`); an unhealthy ledger refuses every mint at once, so minting stops
 *   as soon as a failure is observed. A value answered before that observation and never recorded
 *   is denied by the retrieval server, which accepts nothing the ledger lacks (docs/ledger.md,
 *   "The window").
 * - `sync`: the value is answered only after the database confirmed its record (one round trip on
 *   the answer's path; slower, kept for comparison and for operators who want it).
 *
 * Expired entries are purged on a schedule by every projector replica (the purge deletes only rows
 * expired by the database's clock, so concurrent purges are harmless). The purge doubles as the
 * ledger's health probe: it also asks whether the role may still record, and while the ledger is
 * unhealthy it runs on the short retry interval until it succeeds.
 */
import type pg from 'pg';
import { createLogger } from '../common/log.ts';
import { asRole, PROJECTOR_ROLE } from '../retrieval/db/roles.ts';
import { capabilityDigest, recordBatchMessage, recordMessage } from '../retrieval/ledger.ts';
import { LEDGER_RECORD_DEADLINE } from '../rules/ledger.ts';

const log = createLogger('projector');

/** `worker`: the deferred design with the writer on its own thread (projector/ledger-worker.ts). */
export type LedgerConfirm = 'deferred' | 'sync' | 'worker';

/** The ledger cannot take this mint now: the caller refuses it (`ledger_unavailable`). */
export class LedgerUnavailableError extends Error {
  constructor() {
    super('capability ledger unavailable');
    this.name = 'LedgerUnavailableError';
  }
}

export interface CapabilityLedger {
  readonly confirm: LedgerConfirm;
  /**
   * Admit one minted value: resolves when the value may leave the projector (deferred: queued while
   * healthy; sync: recorded), rejects when it must be refused.
   */
  admit(headerValue: string, agent: string, exp: number): Promise<void>;
  /** Record one value now; resolves once the database confirmed it. */
  record(headerValue: string, agent: string, exp: number): Promise<void>;
  /** Resolves once every value admitted so far was written or its batch failed. */
  flush(): Promise<void>;
  /** Probe: delete expired entries now and confirm the role may still record; resolves to how many. */
  purge(): Promise<number>;
  /** Whether minting is possible now. */
  healthy(): boolean;
  /**
   * The record deadline of the configuration in force (`spec.ledger.recordDeadlineMilliseconds`,
   * rules/ledger.ts); the projector passes it with each mint, so a new configuration applies at once.
   */
  setRecordDeadline(ms: number): void;
  /** Observe write outcomes (entries per result), e.g. for metrics; returns the unsubscribe. */
  onWrite(listener: (result: 'ok' | 'error', entries: number) => void): () => void;
  /** Write what is queued, stop the schedule; the pool belongs to the caller unless `ownsPool` was set. */
  close(): Promise<void>;
}

export interface LedgerOptions {
  /** A pool to the knowledge database; each transaction runs as knowledge_projector. */
  readonly pool: pg.Pool;
  /** End the pool on close (the CLI's own pool). */
  readonly ownsPool?: boolean;
  /** Default `deferred`. */
  readonly confirm?: LedgerConfirm;
  /** Purge interval while healthy (default 60 s). */
  readonly purgeIntervalMs?: number;
  /** Probe interval while unhealthy (default 2 s). */
  readonly retryIntervalMs?: number;
  /**
   * Deferred: a batch not confirmed within this time marks the ledger unhealthy (default 1 s, inside
   * the retrieval server's 2 s mint window, retrieval/ledger.ts LEDGER_WAIT_MS).
   */
  readonly recordDeadlineMs?: number;
  /** Deferred: at most this many records per batch (default 256). */
  readonly maxBatch?: number;
  /** Deferred: refuse mints while this many records wait (default 4096). */
  readonly maxQueue?: number;
  /**
   * Deferred: how long a record may wait for others to share its batch (default 0: the batch leaves
   * after the current turn). Fewer, larger statements cost the database and the writer less per
   * record; the wait counts against nothing the answer waits for.
   */
  readonly lingerMs?: number;
}

const PROBE_SQL =
  "SELECT fgentic_ledger.purge_v1() AS purged, has_function_privilege('fgentic_ledger.record_v1(bytea, text, bigint)', 'EXECUTE') AS can_record";

/** Default bounds (docs/ledger.md); the rendered configuration may set others (rules/ledger.ts). */
export const DEFAULT_RECORD_DEADLINE_MS: number = LEDGER_RECORD_DEADLINE.default;
export const DEFAULT_MAX_BATCH = 256;
export const DEFAULT_MAX_QUEUE = 4_096;

export interface LedgerEntry {
  readonly digest: Buffer;
  readonly agent: string;
  readonly exp: number;
}

/** What the writer thread needs beyond the public ledger (projector/ledger-worker.ts). */
export interface LedgerCore extends CapabilityLedger {
  /**
   * Queue one record that already left the projector, whatever the health (the main thread decided
   * at admission); the shape is checked as in `admit`.
   */
  enqueue(entry: LedgerEntry): void;
  /** Another observer saw an overdue record: unhealthy until a probe succeeds. */
  suspect(): void;
}

export interface LedgerHooks {
  /** Every health change, and every successful probe (`probed`). */
  readonly onHealth?: (ok: boolean, probed: boolean) => void;
}

export function createLedger(options: LedgerOptions): CapabilityLedger {
  if (options.confirm === 'worker') throw new TypeError('the worker confirmation is createWorkerLedger');
  return createLedgerCore(options);
}

export function createLedgerCore(options: LedgerOptions, hooks: LedgerHooks = {}): LedgerCore {
  const pool = asRole(options.pool, PROJECTOR_ROLE);
  const confirm = options.confirm ?? 'deferred';
  const purgeEvery = options.purgeIntervalMs ?? 60_000;
  const retryEvery = options.retryIntervalMs ?? 2_000;
  let deadline = options.recordDeadlineMs ?? DEFAULT_RECORD_DEADLINE_MS;
  const maxBatch = options.maxBatch ?? DEFAULT_MAX_BATCH;
  const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
  const linger = options.lingerMs ?? 0;
  let lingering: NodeJS.Timeout | undefined;
  // Unknown until the first operation: not ready before the ledger has answered once.
  let ok = false;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  const listeners = new Set<(result: 'ok' | 'error', entries: number) => void>();
  const queue: LedgerEntry[] = [];
  let inFlight: Promise<void> | undefined;
  let idle: (() => void)[] = [];

  const setHealth = (result: boolean, op: 'record' | 'purge') => {
    const changed = result !== ok;
    if (changed) log[result ? 'info' : 'error'](result ? 'ledger reachable' : 'ledger unavailable', { op });
    ok = result;
    if (changed || op === 'purge') hooks.onHealth?.(result, op === 'purge' && result);
    // Down while the next probe is a whole purge interval away: probe on the retry interval instead.
    if (changed && !result && timer !== undefined && !probing) {
      clearTimeout(timer);
      timer = undefined;
      schedule();
    }
  };
  const wrote = (result: 'ok' | 'error', entries: number) => {
    for (const l of listeners) l(result, entries);
  };

  let probing = false;
  const purge = async (): Promise<number> => {
    probing = true;
    try {
      const r = await pool.query(PROBE_SQL);
      // Purging works but recording would not (grant withdrawn): minting stays refused.
      if (r.rows[0]?.['can_record'] !== true) throw new LedgerUnavailableError();
      setHealth(true, 'purge');
      return Number(r.rows[0]?.['purged'] ?? 0);
    } catch (err) {
      setHealth(false, 'purge');
      throw err;
    } finally {
      probing = false;
    }
  };

  const schedule = () => {
    if (closed) return;
    timer = setTimeout(
      () => {
        timer = undefined;
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

  /** One batch at a time; the next starts when the last settled, with whatever queued meanwhile. */
  const pump = () => {
    if (inFlight !== undefined) return;
    if (queue.length === 0) {
      const waiting = idle;
      idle = [];
      for (const w of waiting) w();
      return;
    }
    const batch = queue.splice(0, maxBatch);
    let overdue = false;
    // A batch that hangs stops minting at its deadline, not when the connection finally gives up.
    const watchdog = setTimeout(() => {
      overdue = true;
      setHealth(false, 'record');
    }, deadline);
    watchdog.unref();
    inFlight = options.pool
      .query(recordBatchMessage(PROJECTOR_ROLE, batch))
      .then(
        () => {
          // A late success records the values but does not vouch for the ledger: the probe does.
          if (!overdue) setHealth(true, 'record');
          wrote('ok', batch.length);
        },
        () => {
          setHealth(false, 'record');
          wrote('error', batch.length);
        },
      )
      .finally(() => {
        clearTimeout(watchdog);
        inFlight = undefined;
        if (linger > 0 && idle.length === 0 && queue.length > 0 && queue.length < maxBatch) later();
        else pump();
      });
  };

  /** Start the next batch after the current turn, or after the linger. */
  const later = () => {
    if (linger <= 0) {
      setImmediate(pump);
      return;
    }
    if (lingering !== undefined) return;
    lingering = setTimeout(() => {
      lingering = undefined;
      pump();
    }, linger);
    lingering.unref();
  };

  const record = async (headerValue: string, agent: string, exp: number): Promise<void> => {
    // A value of the wrong shape is refused here (RangeError) without counting as a ledger fault.
    const message = recordMessage(PROJECTOR_ROLE, capabilityDigest(headerValue), agent, exp);
    try {
      // One round trip (retrieval/ledger.ts recordMessage), still as knowledge_projector.
      await options.pool.query(message);
      setHealth(true, 'record');
      wrote('ok', 1);
    } catch (err) {
      setHealth(false, 'record');
      wrote('error', 1);
      throw err;
    }
  };

  const flush = (): Promise<void> => {
    if (inFlight === undefined && queue.length === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      idle.push(resolve);
      pump();
    });
  };

  const enqueue = (entry: LedgerEntry) => {
    // The shape is checked now, so a batch never fails for one malformed entry.
    recordMessage(PROJECTOR_ROLE, entry.digest, entry.agent, entry.exp);
    queue.push(entry);
    // Mints answered in the same turn (or within the linger) share one batch; a full batch leaves now.
    if (queue.length >= maxBatch) pump();
    else if (queue.length === 1) later();
  };

  return {
    confirm,
    enqueue,
    suspect: () => setHealth(false, 'record'),
    async admit(headerValue, agent, exp) {
      if (confirm === 'sync') return record(headerValue, agent, exp);
      if (!ok || closed || queue.length >= maxQueue) throw new LedgerUnavailableError();
      enqueue({ digest: capabilityDigest(headerValue), agent, exp });
    },
    record,
    flush,
    purge,
    healthy: () => ok && !closed,
    setRecordDeadline(ms) {
      deadline = ms;
    },
    onWrite(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      // Values already answered deserve their record, but a hung database must not hold shutdown.
      let wait: NodeJS.Timeout | undefined;
      await Promise.race([
        flush(),
        new Promise<void>((resolve) => {
          wait = setTimeout(resolve, deadline);
        }),
      ]);
      clearTimeout(wait);
      if (options.ownsPool) await options.pool.end().catch(() => {});
    },
  };
}
