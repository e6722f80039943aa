/**
 * The `worker` confirmation of the capability ledger (docs/ledger.md, "The writer thread"): the
 * deferred design of projector/ledger.ts with the database connection, the batching, the deadline
 * watchdog and the probe on a thread of their own, so that building, sending and parsing a batch
 * statement never runs on the event loop that answers checks.
 *
 * The answering thread only hashes the value, writes a fixed-size record (32-byte digest, agent
 * index, `exp`) into a ring in shared memory, and reads shared words that the writer keeps current:
 * health, records settled, probes passed. No message crosses threads per mint; the writer is woken
 * only when a record lands in an empty ring. The answering thread refuses a mint
 * (LedgerUnavailableError) on each of the deferred mode's faults, judged on its own side wherever the
 * writer could be too slow to say so:
 * - the writer's last batch or probe failed (health word 0);
 * - a record is not settled within the record deadline (measured from when it entered the ring, so
 *   a writer that stalls is caught too); the writer is then told, and only a passing probe clears it;
 * - `maxQueue` records in the ring or in flight (not settled);
 * - the writer thread is gone (crash or exit): refused until a new writer passed its first probe.
 *   The records it held are counted as failed; their values are denied by the retrieval server.
 *
 * This module is also the writer thread's entry: started with its own URL, it serves the ledger.
 */
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { createLogger } from '../common/log.ts';
import { createPool, type PoolOptions } from '../retrieval/db/pool.ts';
import { capabilityDigest, checkRecord } from '../retrieval/ledger.ts';
import {
  type CapabilityLedger,
  createLedgerCore,
  DEFAULT_MAX_QUEUE,
  DEFAULT_RECORD_DEADLINE_MS,
  type LedgerOptions,
  LedgerUnavailableError,
} from './ledger.ts';

const log = createLogger('projector');

export interface WorkerLedgerOptions
  extends Pick<
    LedgerOptions,
    'purgeIntervalMs' | 'retryIntervalMs' | 'recordDeadlineMs' | 'maxBatch' | 'maxQueue' | 'lingerMs'
  > {
  /** How the writer thread connects (it builds its own pool; pools cannot cross threads). */
  readonly database: PoolOptions;
  /** Pause before a new writer replaces one that exited (default: the retry interval). */
  readonly respawnMs?: number;
}

export interface WorkerLedger extends CapabilityLedger {
  /** The current writer thread (tests end it to show the crash path). */
  readonly thread: () => Worker | undefined;
}

// Shared words (Int32Array indices). HEAD is written by the answering thread only; the others by the
// writer only.
const HEALTH = 0; // 1 while the writer's last operation succeeded and no batch is overdue
const SETTLED = 1; // records settled (written or failed) since this writer started
const PROBES = 2; // probes that passed since this writer started
const HEAD = 3; // records put in the ring since this writer started
const TAIL = 4; // records the writer took from the ring
const WORDS = 5;

const DIGEST_BYTES = 32;

/**
 * The writer's batches wait this long for company (docs/ledger.md, "The writer thread"): well inside
 * the record deadline and the retrieval server's first re-check, and enough to turn a steady stream
 * of mints into a few statements instead of one per mint. While records keep coming the writer is
 * never woken: it finds them when its linger ends.
 */
export const DEFAULT_WORKER_LINGER_MS = 5;

/**
 * The shared memory of one writer: the words above and a ring of fixed-size records (digest, agent
 * index, exp) with room for `maxQueue` records, so the queue bound also keeps the ring from wrapping
 * onto a record the writer has not taken yet.
 */
interface Ring extends RingViews {
  readonly capacity: number;
}

interface RingViews {
  readonly words: Int32Array;
  readonly digests: Uint8Array;
  readonly agents: Int32Array;
  readonly exps: Float64Array;
}

/** The shared buffers behind a ring's views: what the writer thread is given. */
type RingBuffers = { readonly [K in keyof RingViews]: SharedArrayBuffer };

function ringOver(buffers: RingBuffers): Ring {
  return {
    words: new Int32Array(buffers.words),
    digests: new Uint8Array(buffers.digests),
    agents: new Int32Array(buffers.agents),
    exps: new Float64Array(buffers.exps),
    capacity: buffers.agents.byteLength / 4,
  };
}

function newRing(capacity: number): RingBuffers {
  return {
    words: new SharedArrayBuffer(WORDS * 4),
    digests: new SharedArrayBuffer(capacity * DIGEST_BYTES),
    agents: new SharedArrayBuffer(capacity * 4),
    exps: new SharedArrayBuffer(capacity * 8),
  };
}

type ToWriter =
  | { readonly type: 'agent'; readonly index: number; readonly key: string }
  | { readonly type: 'suspect' }
  | { readonly type: 'deadline'; readonly ms: number }
  | { readonly type: 'flush' | 'purge' | 'close'; readonly id: number };

type FromWriter =
  | { readonly type: 'wrote'; readonly result: 'ok' | 'error'; readonly entries: number }
  | { readonly type: 'done'; readonly id: number; readonly value?: number; readonly error?: boolean };

interface WriterData {
  readonly fgenticLedgerWriter: true;
  readonly ring: RingBuffers;
  readonly database: PoolOptions;
  readonly options: Omit<WorkerLedgerOptions, 'database' | 'respawnMs'>;
}

/**
 * How to start this module as a thread. The compiled build loads its own .js file. From source, a
 * worker does not inherit the `--import tsx` hooks on Node 20, so a one-line bootstrap registers tsx
 * in the new thread before it loads this TypeScript file.
 */
function writerEntry(): [string | URL, { eval?: boolean }] {
  const self = new URL(import.meta.url);
  if (!self.pathname.endsWith('.ts')) return [self, {}];
  const tsx = import.meta.resolve('tsx/esm/api');
  return [
    `import(${JSON.stringify(tsx)}).then((m) => m.register()).then(() => import(${JSON.stringify(self.href)}))`,
    { eval: true },
  ];
}

type Waiter = { resolve: (v: number) => void; reject: (e: Error) => void };

/** The answering thread's side of the current writer, and what survives a writer's replacement. */
interface AnsweringSide {
  deadline: number;
  readonly maxQueue: number;
  ring: Ring;
  worker: Worker | undefined;
  alive: boolean;
  closed: boolean;
  respawn: NodeJS.Timeout | undefined;
  // Records put in the current writer's ring (HEAD's value), and when they went in: one entry per
  // bucket of time, stamped with its first record, so an age judged from it is never too young.
  head: number;
  buckets: { upTo: number; at: number }[];
  // Set when this thread saw an overdue record: refused until the writer's probe count passes it.
  suspectBelowProbes: number;
  agents: Map<string, number>;
  waiting: Map<number, Waiter>;
  nextId: number;
}

/** What starting a writer takes, fixed for the ledger's life. */
interface WriterStart {
  readonly database: PoolOptions;
  readonly writerOptions: WriterData['options'];
  readonly respawnMs: number;
  readonly wrote: (result: 'ok' | 'error', entries: number) => void;
}

const send = (side: AnsweringSide, m: ToWriter) => side.worker?.postMessage(m);

/** The deadline, judged here: the oldest record not settled yet must be younger than it. */
function overdue(side: AnsweringSide): boolean {
  const { words } = side.ring;
  const settled = Atomics.load(words, SETTLED);
  while (side.buckets.length > 0 && side.buckets[0]!.upTo <= settled) side.buckets.shift();
  const oldest = side.buckets[0];
  if (oldest === undefined || performance.now() - oldest.at <= side.deadline) return false;
  if (side.suspectBelowProbes < 0) {
    side.suspectBelowProbes = Atomics.load(words, PROBES) + 1;
    log.error('ledger unavailable', { op: 'record', cause: 'overdue' });
    send(side, { type: 'suspect' });
  }
  return true;
}

function healthy(side: AnsweringSide): boolean {
  const { words } = side.ring;
  if (!side.alive || side.closed || Atomics.load(words, HEALTH) !== 1) return false;
  if (side.suspectBelowProbes >= 0) {
    if (Atomics.load(words, PROBES) < side.suspectBelowProbes) return false;
    side.suspectBelowProbes = -1;
  }
  return !overdue(side);
}

/** A request the writer answers with a 'done' message (refused while no writer runs). */
function request(side: AnsweringSide, type: 'flush' | 'purge' | 'close'): Promise<number> {
  if (!side.alive) return Promise.reject(new LedgerUnavailableError());
  const id = side.nextId++;
  return new Promise<number>((resolve, reject) => {
    side.waiting.set(id, { resolve, reject });
    send(side, { type, id });
  });
}

/** Starts a writer on a fresh ring; a writer that exits is replaced after `respawnMs` unless closed. */
function spawnWriter(side: AnsweringSide, start: WriterStart): void {
  const buffers = newRing(side.maxQueue);
  side.ring = ringOver(buffers);
  side.head = 0;
  side.buckets = [];
  side.suspectBelowProbes = -1;
  side.agents = new Map();
  const data: WriterData = {
    fgenticLedgerWriter: true,
    ring: buffers,
    database: start.database,
    options: start.writerOptions,
  };
  const [entry, how] = writerEntry();
  const w = new Worker(entry, { ...how, workerData: data });
  side.worker = w;
  side.alive = true;
  // The writer must not keep a finished process alive; close() ends it explicitly.
  w.unref();
  w.on('message', (m: FromWriter) => {
    if (m.type === 'wrote') start.wrote(m.result, m.entries);
    else {
      const p = side.waiting.get(m.id);
      side.waiting.delete(m.id);
      if (m.error) p?.reject(new LedgerUnavailableError());
      else p?.resolve(m.value ?? 0);
    }
  });
  w.on('error', (err) => log.error('ledger writer failed', { error: err.name }));
  w.once('exit', (code) => writerExited(side, start, w, code));
}

/** A writer's exit: what it held is lost and every waiter refused; a new one follows unless closed. */
function writerExited(side: AnsweringSide, start: WriterStart, w: Worker, code: number): void {
  if (side.worker !== w) return;
  side.alive = false;
  side.worker = undefined;
  // What the writer held never reached the database: count it, answer every waiter.
  const lost = side.head - Atomics.load(side.ring.words, SETTLED);
  if (lost > 0) start.wrote('error', lost);
  const pending = side.waiting;
  side.waiting = new Map();
  for (const p of pending.values()) p.reject(new LedgerUnavailableError());
  if (side.closed) return;
  log.error('ledger unavailable', { op: 'writer', code });
  side.respawn = setTimeout(() => {
    side.respawn = undefined;
    if (!side.closed) spawnWriter(side, start);
  }, start.respawnMs);
  side.respawn.unref();
}

/** The writer's index of an agent key; a new key is sent once, before its first record. */
function agentIndex(side: AnsweringSide, agent: string): number {
  let index = side.agents.get(agent);
  if (index === undefined) {
    // Once per agent key, before its first record: the writer resolves indexes to keys.
    index = side.agents.size;
    side.agents.set(agent, index);
    send(side, { type: 'agent', index, key: agent });
  }
  return index;
}

/** Puts one record in the ring, stamps its time bucket and publishes it to the writer. */
function putRecord(side: AnsweringSide, digest: Uint8Array, index: number, exp: number): void {
  const { ring } = side;
  const slot = side.head % ring.capacity;
  ring.digests.set(digest, slot * DIGEST_BYTES);
  ring.agents[slot] = index;
  ring.exps[slot] = exp;
  const now = performance.now();
  const last = side.buckets[side.buckets.length - 1];
  const bucketMs = Math.max(1, Math.min(50, side.deadline / 10));
  if (last !== undefined && now - last.at < bucketMs) last.upTo = side.head + 1;
  else side.buckets.push({ upTo: side.head + 1, at: now });
  // Publish the record, then wake the writer only if it had taken everything before it (it
  // sleeps only then); the two sequentially consistent operations pair with the writer's store
  // of TAIL and load of HEAD, so a record is never left unseen.
  Atomics.store(ring.words, HEAD, ++side.head);
  if (Atomics.load(ring.words, TAIL) === side.head - 1) Atomics.notify(ring.words, HEAD, 1);
}

/** Ends the writer: it writes what it holds within twice the deadline and exits; a hung one is ended. */
async function closeWriter(side: AnsweringSide): Promise<void> {
  if (side.closed) return;
  side.closed = true;
  if (side.respawn) clearTimeout(side.respawn);
  const w = side.worker;
  if (w === undefined) return;
  const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
  send(side, { type: 'close', id: side.nextId++ });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([exited, new Promise<void>((r) => (timer = setTimeout(r, side.deadline * 2)))]);
  clearTimeout(timer);
  await w.terminate();
}

export function createWorkerLedger(options: WorkerLedgerOptions): WorkerLedger {
  const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
  const { database, respawnMs: _r, ...writerOptions } = options;
  const listeners = new Set<(result: 'ok' | 'error', entries: number) => void>();
  const side: AnsweringSide = {
    deadline: options.recordDeadlineMs ?? DEFAULT_RECORD_DEADLINE_MS,
    maxQueue,
    ring: ringOver(newRing(maxQueue)),
    worker: undefined,
    alive: false,
    closed: false,
    respawn: undefined,
    head: 0,
    buckets: [],
    suspectBelowProbes: -1,
    agents: new Map(),
    waiting: new Map(),
    nextId: 1,
  };
  spawnWriter(side, {
    database,
    writerOptions,
    respawnMs: options.respawnMs ?? options.retryIntervalMs ?? 2_000,
    wrote: (result, entries) => {
      for (const l of listeners) l(result, entries);
    },
  });

  return {
    confirm: 'worker',
    thread: () => side.worker,
    async admit(headerValue, agent, exp) {
      if (!healthy(side) || side.head - Atomics.load(side.ring.words, SETTLED) >= maxQueue)
        throw new LedgerUnavailableError();
      const digest = capabilityDigest(headerValue);
      // Refused here without counting as a ledger fault; the writer checks again before it batches.
      checkRecord(digest, agent, exp);
      putRecord(side, digest, agentIndex(side, agent), exp);
    },
    async record() {
      // Writing before answering is the sync confirmation's design, not this one's.
      throw new TypeError('the worker confirmation records after the answer; use admit');
    },
    flush: async () => {
      if (!side.alive) return;
      await request(side, 'flush').catch(() => {});
    },
    purge: () => request(side, 'purge'),
    healthy: () => healthy(side),
    setRecordDeadline(ms) {
      if (ms === side.deadline) return;
      side.deadline = ms;
      send(side, { type: 'deadline', ms });
    },
    onWrite(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close: () => closeWriter(side),
  };
}

/** `Atomics.waitAsync` (ES2024; Node 16+), typed here because the project's lib is ES2023. */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(a: Int32Array, i: number, v: number): { async: boolean; value: Promise<string> | string };
  }
).waitAsync;

/** The writer thread's side: the ring it takes from and the core it gives the records to. */
interface WritingSide {
  readonly ring: Ring;
  readonly core: ReturnType<typeof createLedgerCore>;
  readonly port: NonNullable<typeof parentPort>;
  /** Agent keys by index, as the answering thread sent them. */
  readonly agents: string[];
  tail: number;
  stopping: boolean;
}

/** Take every record in the ring up to the first whose agent key has not arrived yet. */
function take(side: WritingSide): void {
  const { ring, core, port } = side;
  const head = Atomics.load(ring.words, HEAD);
  let bad = 0;
  while (side.tail < head) {
    const slot = side.tail % ring.capacity;
    const agent = side.agents[ring.agents[slot]!];
    // Its key was posted before the record was published; the 'agent' message takes it.
    if (agent === undefined) break;
    // A copy: the slot is reused once the tail passes it.
    const digest = Buffer.from(ring.digests.slice(slot * DIGEST_BYTES, (slot + 1) * DIGEST_BYTES));
    try {
      core.enqueue({ digest, agent, exp: ring.exps[slot]! });
    } catch {
      bad++;
    }
    side.tail++;
  }
  Atomics.store(ring.words, TAIL, side.tail);
  // A record that cannot be written settles as failed at once, so the deadline does not wait for it.
  if (bad > 0) {
    Atomics.add(ring.words, SETTLED, bad);
    port.postMessage({ type: 'wrote', result: 'error', entries: bad } satisfies FromWriter);
  }
}

/** Sleeps until a record lands in an empty ring, lingers for company, takes what is there; until close. */
async function ringLoop(side: WritingSide, linger: number): Promise<void> {
  const { words } = side.ring;
  while (!side.stopping) {
    const head = Atomics.load(words, HEAD);
    if (head === side.tail) {
      const w = waitAsync(words, HEAD, head);
      if (w.async) await w.value;
      continue;
    }
    await new Promise((r) => setTimeout(r, linger));
    take(side);
  }
}

/** One message from the answering thread. */
function onAnswering(side: WritingSide, m: ToWriter): void {
  const { core, port } = side;
  switch (m.type) {
    case 'agent':
      // Records waiting for this key are taken when the current linger ends.
      side.agents[m.index] = m.key;
      return;
    case 'suspect':
      core.suspect();
      return;
    case 'deadline':
      core.setRecordDeadline(m.ms);
      return;
    case 'flush':
      take(side);
      void core.flush().then(() => port.postMessage({ type: 'done', id: m.id } satisfies FromWriter));
      return;
    case 'purge':
      core.purge().then(
        (n) => port.postMessage({ type: 'done', id: m.id, value: n } satisfies FromWriter),
        () => port.postMessage({ type: 'done', id: m.id, error: true } satisfies FromWriter),
      );
      return;
    case 'close':
      side.stopping = true;
      take(side);
      void core.close().then(() => process.exit(0));
      return;
  }
}

/**
 * The writer thread: a deferred ledger core over its own pool. It sleeps until the answering thread
 * puts a record in an empty ring, lingers, takes everything in the ring, and reports through the
 * shared words.
 */
function serveWriter(data: WriterData, port: NonNullable<typeof parentPort>): void {
  const ring = ringOver(data.ring);
  const words = ring.words;
  const pool = createPool(data.database);
  const core = createLedgerCore(
    // The ring loop below does the lingering; the core sends what it is given after the turn.
    { ...data.options, lingerMs: 0, pool, ownsPool: true, confirm: 'deferred' },
    {
      onHealth(ok, probed) {
        Atomics.store(words, HEALTH, ok ? 1 : 0);
        if (probed) Atomics.add(words, PROBES, 1);
      },
    },
  );
  core.onWrite((result, entries) => {
    Atomics.add(words, SETTLED, entries);
    port.postMessage({ type: 'wrote', result, entries } satisfies FromWriter);
  });
  const side: WritingSide = { ring, core, port, agents: [], tail: 0, stopping: false };
  void ringLoop(side, data.options.lingerMs ?? DEFAULT_WORKER_LINGER_MS);
  port.on('message', (m: ToWriter) => onAnswering(side, m));
}

if (!isMainThread && parentPort && (workerData as Partial<WriterData> | null)?.fgenticLedgerWriter === true)
  serveWriter(workerData as WriterData, parentPort);
