/**
 * The `worker` confirmation of the capability ledger (docs/ledger.md, "The writer thread"): the
 * deferred design of projector/ledger.ts with the database connection, the batching, the deadline
 * watchdog and the probe on a thread of their own, so that building, sending and parsing a batch
 * statement never runs on the event loop that answers checks.
 *
 * The answering thread only hashes the value, appends a fixed-size record (32-byte digest, agent
 * index, `exp`) to the batch of the current turn, posts that batch once per turn, and reads shared
 * words that the writer keeps current: health, records settled, probes passed. It refuses a mint
 * (LedgerUnavailableError) on each of the deferred mode's faults, judged on its own side wherever the
 * writer could be too slow to say so:
 * - the writer's last batch or probe failed (health word 0);
 * - a posted record is not settled within the record deadline (measured from the post, so a writer
 *   that stalls is caught too); the writer is then told, and only a passing probe clears it;
 * - `maxQueue` records posted and not settled;
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

// Shared words (Int32Array indices), written by the writer only.
const HEALTH = 0; // 1 while the writer's last operation succeeded and no batch is overdue
const SETTLED = 1; // records settled (written or failed) since this writer started
const PROBES = 2; // probes that passed since this writer started
const WORDS = 3;

const DIGEST_BYTES = 32;

/**
 * The writer's batches wait this long for company (docs/ledger.md, "The writer thread"): well inside
 * the record deadline and the retrieval server's first re-check, and enough to turn a steady stream
 * of mints into a few statements instead of one per mint.
 */
export const DEFAULT_WORKER_LINGER_MS = 5;

type ToWriter =
  | { readonly type: 'agent'; readonly index: number; readonly key: string }
  | {
      readonly type: 'records';
      readonly digests: Uint8Array;
      readonly agents: Int32Array;
      readonly exps: Float64Array;
    }
  | { readonly type: 'suspect' }
  | { readonly type: 'deadline'; readonly ms: number }
  | { readonly type: 'flush' | 'purge' | 'close'; readonly id: number };

type FromWriter =
  | { readonly type: 'wrote'; readonly result: 'ok' | 'error'; readonly entries: number }
  | { readonly type: 'done'; readonly id: number; readonly value?: number; readonly error?: boolean };

interface WriterData {
  readonly fgenticLedgerWriter: true;
  readonly shared: SharedArrayBuffer;
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

export function createWorkerLedger(options: WorkerLedgerOptions): WorkerLedger {
  let deadline = options.recordDeadlineMs ?? DEFAULT_RECORD_DEADLINE_MS;
  const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
  const respawnMs = options.respawnMs ?? options.retryIntervalMs ?? 2_000;
  const { database, respawnMs: _r, ...writerOptions } = options;
  const listeners = new Set<(result: 'ok' | 'error', entries: number) => void>();
  const wrote = (result: 'ok' | 'error', entries: number) => {
    for (const l of listeners) l(result, entries);
  };

  let shared = new Int32Array(new SharedArrayBuffer(WORDS * 4));
  let worker: Worker | undefined;
  let alive = false;
  let closed = false;
  let respawn: NodeJS.Timeout | undefined;
  // Records posted to the current writer, and per post the running total and when it left.
  let posted = 0;
  let posts: { upTo: number; at: number }[] = [];
  // Set when this thread saw an overdue record: refused until the writer's probe count passes it.
  let suspectBelowProbes = -1;
  // The batch of the current turn.
  let digests: Buffer[] = [];
  let agentIdx: number[] = [];
  let exps: number[] = [];
  let agents = new Map<string, number>();
  let waiting = new Map<number, { resolve: (v: number) => void; reject: (e: Error) => void }>();
  let nextId = 1;

  const send = (m: ToWriter, transfer?: ArrayBuffer[]) => worker?.postMessage(m, transfer);

  const postTurn = () => {
    if (digests.length === 0 || !alive) return;
    const n = digests.length;
    const d = new Uint8Array(n * DIGEST_BYTES);
    for (let i = 0; i < n; i++) d.set(digests[i]!, i * DIGEST_BYTES);
    const a = Int32Array.from(agentIdx);
    const e = Float64Array.from(exps);
    digests = [];
    agentIdx = [];
    exps = [];
    posted += n;
    posts.push({ upTo: posted, at: performance.now() });
    send({ type: 'records', digests: d, agents: a, exps: e }, [d.buffer, a.buffer, e.buffer]);
  };

  /** The deadline, judged here: the oldest post not settled yet must be younger than it. */
  const overdue = (): boolean => {
    const settled = Atomics.load(shared, SETTLED);
    while (posts.length > 0 && posts[0]!.upTo <= settled) posts.shift();
    const oldest = posts[0];
    if (oldest === undefined || performance.now() - oldest.at <= deadline) return false;
    if (suspectBelowProbes < 0) {
      suspectBelowProbes = Atomics.load(shared, PROBES) + 1;
      log.error('ledger unavailable', { op: 'record', cause: 'overdue' });
      send({ type: 'suspect' });
    }
    return true;
  };

  const healthy = (): boolean => {
    if (!alive || closed || Atomics.load(shared, HEALTH) !== 1) return false;
    if (suspectBelowProbes >= 0) {
      if (Atomics.load(shared, PROBES) < suspectBelowProbes) return false;
      suspectBelowProbes = -1;
    }
    return !overdue();
  };

  const request = (type: 'flush' | 'purge' | 'close'): Promise<number> => {
    if (!alive) return Promise.reject(new LedgerUnavailableError());
    postTurn();
    const id = nextId++;
    return new Promise<number>((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      send({ type, id });
    });
  };

  const spawn = () => {
    shared = new Int32Array(new SharedArrayBuffer(WORDS * 4));
    posted = 0;
    posts = [];
    suspectBelowProbes = -1;
    agents = new Map();
    const data: WriterData = {
      fgenticLedgerWriter: true,
      shared: shared.buffer as SharedArrayBuffer,
      database,
      options: writerOptions,
    };
    const [entry, how] = writerEntry();
    const w = new Worker(entry, { ...how, workerData: data });
    worker = w;
    alive = true;
    // The writer must not keep a finished process alive; close() ends it explicitly.
    w.unref();
    w.on('message', (m: FromWriter) => {
      if (m.type === 'wrote') wrote(m.result, m.entries);
      else {
        const p = waiting.get(m.id);
        waiting.delete(m.id);
        if (m.error) p?.reject(new LedgerUnavailableError());
        else p?.resolve(m.value ?? 0);
      }
    });
    w.on('error', (err) => log.error('ledger writer failed', { error: err.name }));
    w.once('exit', (code) => {
      if (worker !== w) return;
      alive = false;
      worker = undefined;
      // What the writer held never reached the database: count it, answer every waiter.
      const lost = posted - Atomics.load(shared, SETTLED) + digests.length;
      digests = [];
      agentIdx = [];
      exps = [];
      if (lost > 0) wrote('error', lost);
      const pending = waiting;
      waiting = new Map();
      for (const p of pending.values()) p.reject(new LedgerUnavailableError());
      if (closed) return;
      log.error('ledger unavailable', { op: 'writer', code });
      respawn = setTimeout(() => {
        respawn = undefined;
        if (!closed) spawn();
      }, respawnMs);
      respawn.unref();
    });
  };
  spawn();

  return {
    confirm: 'worker',
    thread: () => worker,
    async admit(headerValue, agent, exp) {
      if (!healthy() || posted - Atomics.load(shared, SETTLED) + digests.length >= maxQueue)
        throw new LedgerUnavailableError();
      const digest = capabilityDigest(headerValue);
      // Refused here without counting as a ledger fault; the writer checks again before it batches.
      checkRecord(digest, agent, exp);
      let index = agents.get(agent);
      if (index === undefined) {
        index = agents.size;
        agents.set(agent, index);
        send({ type: 'agent', index, key: agent });
      }
      digests.push(digest);
      agentIdx.push(index);
      exps.push(exp);
      // After the current turn: mints answered in the same turn share one post.
      if (digests.length === 1) setImmediate(postTurn);
    },
    async record() {
      // Writing before answering is the sync confirmation's design, not this one's.
      throw new TypeError('the worker confirmation records after the answer; use admit');
    },
    flush: async () => {
      if (!alive) return;
      await request('flush').catch(() => {});
    },
    purge: () => request('purge'),
    healthy,
    setRecordDeadline(ms) {
      if (ms === deadline) return;
      deadline = ms;
      send({ type: 'deadline', ms });
    },
    onWrite(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      if (closed) return;
      closed = true;
      if (respawn) clearTimeout(respawn);
      const w = worker;
      if (w === undefined) return;
      // The writer writes what it holds within the deadline and exits; a hung one is ended.
      const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
      postTurn();
      send({ type: 'close', id: nextId++ });
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited, new Promise<void>((r) => (timer = setTimeout(r, deadline * 2)))]);
      clearTimeout(timer);
      await w.terminate();
    },
  };
}

/** The writer thread: a deferred ledger core over its own pool, reporting through the shared words. */
function serveWriter(data: WriterData, port: NonNullable<typeof parentPort>): void {
  const shared = new Int32Array(data.shared);
  const pool = createPool(data.database);
  const core = createLedgerCore(
    { lingerMs: DEFAULT_WORKER_LINGER_MS, ...data.options, pool, ownsPool: true, confirm: 'deferred' },
    {
      onHealth(ok, probed) {
        Atomics.store(shared, HEALTH, ok ? 1 : 0);
        if (probed) Atomics.add(shared, PROBES, 1);
      },
    },
  );
  core.onWrite((result, entries) => {
    Atomics.add(shared, SETTLED, entries);
    port.postMessage({ type: 'wrote', result, entries } satisfies FromWriter);
  });
  const agents: string[] = [];
  port.on('message', (m: ToWriter) => {
    switch (m.type) {
      case 'agent':
        agents[m.index] = m.key;
        return;
      case 'records': {
        const bad: number[] = [];
        for (let i = 0; i < m.agents.length; i++) {
          const digest = Buffer.from(m.digests.buffer, m.digests.byteOffset + i * DIGEST_BYTES, DIGEST_BYTES);
          try {
            core.enqueue({ digest, agent: agents[m.agents[i]!] ?? '', exp: m.exps[i]! });
          } catch {
            bad.push(i);
          }
        }
        // A record that cannot be written settles as failed at once, so the deadline does not wait for it.
        if (bad.length > 0) {
          Atomics.add(shared, SETTLED, bad.length);
          port.postMessage({ type: 'wrote', result: 'error', entries: bad.length } satisfies FromWriter);
        }
        return;
      }
      case 'suspect':
        core.suspect();
        return;
      case 'deadline':
        core.setRecordDeadline(m.ms);
        return;
      case 'flush':
        void core.flush().then(() => port.postMessage({ type: 'done', id: m.id } satisfies FromWriter));
        return;
      case 'purge':
        core.purge().then(
          (n) => port.postMessage({ type: 'done', id: m.id, value: n } satisfies FromWriter),
          () => port.postMessage({ type: 'done', id: m.id, error: true } satisfies FromWriter),
        );
        return;
      case 'close':
        void core.close().then(() => process.exit(0));
        return;
    }
  });
}

if (!isMainThread && parentPort && (workerData as Partial<WriterData> | null)?.fgenticLedgerWriter === true)
  serveWriter(workerData as WriterData, parentPort);
