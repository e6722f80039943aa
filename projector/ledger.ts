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

type WriteListener = (result: 'ok' | 'error', entries: number) => void;

/** What the parts of one ledger share: its health, the probe schedule, the deadline and the listeners. */
interface CoreState {
  readonly options: LedgerOptions;
  /** The caller's pool as knowledge_projector. */
  readonly pool: pg.Pool;
  readonly hooks: LedgerHooks;
  readonly purgeEvery: number;
  readonly retryEvery: number;
  deadline: number;
  // Unknown until the first operation: not ready before the ledger has answered once.
  ok: boolean;
  closed: boolean;
  timer: NodeJS.Timeout | undefined;
  probing: boolean;
  readonly listeners: Set<WriteListener>;
}

function setHealth(s: CoreState, result: boolean, op: 'record' | 'purge'): void {
  const changed = result !== s.ok;
  if (changed) log[result ? 'info' : 'error'](result ? 'ledger reachable' : 'ledger unavailable', { op });
  s.ok = result;
  if (changed || op === 'purge') s.hooks.onHealth?.(result, op === 'purge' && result);
  // Down while the next probe is a whole purge interval away: probe on the retry interval instead.
  if (changed && !result && s.timer !== undefined && !s.probing) {
    clearTimeout(s.timer);
    s.timer = undefined;
    schedule(s);
  }
}

function wrote(s: CoreState, result: 'ok' | 'error', entries: number): void {
  for (const l of s.listeners) l(result, entries);
}

/** The purge, which is also the health probe: it asks whether the role may still record. */
async function probe(s: CoreState): Promise<number> {
  s.probing = true;
  try {
    const r = await s.pool.query(PROBE_SQL);
    // Purging works but recording would not (grant withdrawn): minting stays refused.
    if (r.rows[0]?.['can_record'] !== true) throw new LedgerUnavailableError();
    setHealth(s, true, 'purge');
    return Number(r.rows[0]?.['purged'] ?? 0);
  } catch (err) {
    setHealth(s, false, 'purge');
    throw err;
  } finally {
    s.probing = false;
  }
}

/** The next probe: a purge interval away while healthy, the retry interval while not. */
function schedule(s: CoreState): void {
  if (s.closed) return;
  s.timer = setTimeout(
    () => {
      s.timer = undefined;
      probe(s)
        .catch(() => {})
        .finally(() => schedule(s));
    },
    s.ok ? s.purgeEvery : s.retryEvery,
  );
  s.timer.unref();
}

/** Sync confirmation: one record written before the answer. */
async function recordNow(s: CoreState, headerValue: string, agent: string, exp: number): Promise<void> {
  // A value of the wrong shape is refused here (RangeError) without counting as a ledger fault.
  const message = recordMessage(PROJECTOR_ROLE, capabilityDigest(headerValue), agent, exp);
  try {
    // One round trip (retrieval/ledger.ts recordMessage), still as knowledge_projector.
    await s.options.pool.query(message);
    setHealth(s, true, 'record');
    wrote(s, 'ok', 1);
  } catch (err) {
    setHealth(s, false, 'record');
    wrote(s, 'error', 1);
    throw err;
  }
}

/** The deferred confirmation's queue: records leave in batches, one batch in flight. */
interface Batches {
  readonly queue: LedgerEntry[];
  readonly maxBatch: number;
  readonly linger: number;
  lingering: NodeJS.Timeout | undefined;
  inFlight: Promise<void> | undefined;
  /** Who waits for the queue to empty (flush). */
  idle: (() => void)[];
}

/** One batch at a time; the next starts when the last settled, with whatever queued meanwhile. */
function pump(s: CoreState, b: Batches): void {
  if (b.inFlight !== undefined) return;
  if (b.queue.length === 0) {
    const waiting = b.idle;
    b.idle = [];
    for (const w of waiting) w();
    return;
  }
  const batch = b.queue.splice(0, b.maxBatch);
  let overdue = false;
  // A batch that hangs stops minting at its deadline, not when the connection finally gives up.
  const watchdog = setTimeout(() => {
    overdue = true;
    setHealth(s, false, 'record');
  }, s.deadline);
  watchdog.unref();
  b.inFlight = s.options.pool
    .query(recordBatchMessage(PROJECTOR_ROLE, batch))
    .then(
      () => {
        // A late success records the values but does not vouch for the ledger: the probe does.
        if (!overdue) setHealth(s, true, 'record');
        wrote(s, 'ok', batch.length);
      },
      () => {
        setHealth(s, false, 'record');
        wrote(s, 'error', batch.length);
      },
    )
    .finally(() => {
      clearTimeout(watchdog);
      b.inFlight = undefined;
      if (b.linger > 0 && b.idle.length === 0 && b.queue.length > 0 && b.queue.length < b.maxBatch) later(s, b);
      else pump(s, b);
    });
}

/** Start the next batch after the current turn, or after the linger. */
function later(s: CoreState, b: Batches): void {
  if (b.linger <= 0) {
    setImmediate(() => pump(s, b));
    return;
  }
  if (b.lingering !== undefined) return;
  b.lingering = setTimeout(() => {
    b.lingering = undefined;
    pump(s, b);
  }, b.linger);
  b.lingering.unref();
}

function flushBatches(s: CoreState, b: Batches): Promise<void> {
  if (b.inFlight === undefined && b.queue.length === 0) return Promise.resolve();
  return new Promise<void>((resolve) => {
    b.idle.push(resolve);
    pump(s, b);
  });
}

function enqueue(s: CoreState, b: Batches, entry: LedgerEntry): void {
  // The shape is checked now, so a batch never fails for one malformed entry.
  recordMessage(PROJECTOR_ROLE, entry.digest, entry.agent, entry.exp);
  b.queue.push(entry);
  // Mints answered in the same turn (or within the linger) share one batch; a full batch leaves now.
  if (b.queue.length >= b.maxBatch) pump(s, b);
  else if (b.queue.length === 1) later(s, b);
}

/** Stops the schedule and writes what is queued, for at most the deadline. */
async function closeCore(s: CoreState, b: Batches): Promise<void> {
  s.closed = true;
  if (s.timer) clearTimeout(s.timer);
  // Values already answered deserve their record, but a hung database must not hold shutdown.
  let wait: NodeJS.Timeout | undefined;
  await Promise.race([
    flushBatches(s, b),
    new Promise<void>((resolve) => {
      wait = setTimeout(resolve, s.deadline);
    }),
  ]);
  clearTimeout(wait);
  if (s.options.ownsPool) await s.options.pool.end().catch(() => {});
}

export function createLedgerCore(options: LedgerOptions, hooks: LedgerHooks = {}): LedgerCore {
  const confirm = options.confirm ?? 'deferred';
  const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
  const s: CoreState = {
    options,
    pool: asRole(options.pool, PROJECTOR_ROLE),
    hooks,
    purgeEvery: options.purgeIntervalMs ?? 60_000,
    retryEvery: options.retryIntervalMs ?? 2_000,
    deadline: options.recordDeadlineMs ?? DEFAULT_RECORD_DEADLINE_MS,
    ok: false,
    closed: false,
    timer: undefined,
    probing: false,
    listeners: new Set(),
  };
  const b: Batches = {
    queue: [],
    maxBatch: options.maxBatch ?? DEFAULT_MAX_BATCH,
    linger: options.lingerMs ?? 0,
    lingering: undefined,
    inFlight: undefined,
    idle: [],
  };
  // First contact at once, so readiness does not wait a whole interval.
  probe(s)
    .catch(() => {})
    .finally(() => schedule(s));
  const record = (headerValue: string, agent: string, exp: number) => recordNow(s, headerValue, agent, exp);

  return {
    confirm,
    enqueue: (entry) => enqueue(s, b, entry),
    suspect: () => setHealth(s, false, 'record'),
    async admit(headerValue, agent, exp) {
      if (confirm === 'sync') return record(headerValue, agent, exp);
      if (!s.ok || s.closed || b.queue.length >= maxQueue) throw new LedgerUnavailableError();
      enqueue(s, b, { digest: capabilityDigest(headerValue), agent, exp });
    },
    record,
    flush: () => flushBatches(s, b),
    purge: () => probe(s),
    healthy: () => s.ok && !s.closed,
    setRecordDeadline(ms) {
      s.deadline = ms;
    },
    onWrite(listener) {
      s.listeners.add(listener);
      return () => s.listeners.delete(listener);
    },
    close: () => closeCore(s, b),
  };
}
