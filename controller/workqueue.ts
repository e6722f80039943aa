/**
 * A rate-limited work queue as client-go's `util/workqueue` defines one, in TypeScript:
 *
 * - a key is queued at most once (`dirty`): adding a queued key again changes nothing but may raise
 *   its priority;
 * - a key is processed by one worker at a time (`processing`): a key added while it is processed is
 *   queued again when that worker calls `done`;
 * - `addRateLimited` re-adds after the key's own backoff (5 ms doubling, capped, with jitter:
 *   backoff.ts `ITEM_BACKOFF`); `forget` resets it (on success, and on a new desired state, so a fix
 *   never waits out the failures of what it replaces);
 * - priorities, as controller-runtime's priority queue: lower is served first, so events of changed
 *   objects go before the periodic resync's re-check of everything (`RESYNC`), and a revocation
 *   before other work (`URGENT`).
 *
 * The clock is injected; `runWorkers` runs `n` workers over it.
 */
import { backoffDelay } from '../common/backoff.ts';
import { type BackoffPolicy, ITEM_BACKOFF } from './backoff.ts';

export const URGENT = 0;
export const NORMAL = 1;
export const RESYNC = 2;

export interface QueueTimers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: QueueTimers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface WorkQueueOptions {
  backoff?: BackoffPolicy;
  random?: () => number;
  timers?: QueueTimers;
}

export class WorkQueue {
  /** One FIFO lane per priority (URGENT, NORMAL, RESYNC); an entry whose key moved lanes is stale. */
  private readonly lanes: { keys: string[]; head: number }[] = [0, 1, 2].map(() => ({ keys: [], head: 0 }));
  private queued = 0;
  /** Queued keys and their priority. */
  private readonly dirty = new Map<string, number>();
  private readonly processing = new Set<string>();
  /** Keys added while processed: queued again on `done`, with this priority. */
  private readonly again = new Map<string, number>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { handle: unknown; priority: number }>();
  private readonly getters: ((key: string | undefined) => void)[] = [];
  private shutting = false;
  private readonly policy: BackoffPolicy;
  private readonly random: () => number;
  private readonly timers: QueueTimers;
  /** When each queued key was first added (for the oldest-item age). */
  private readonly addedAt = new Map<string, number>();

  constructor(o: WorkQueueOptions = {}) {
    this.policy = o.backoff ?? ITEM_BACKOFF;
    this.random = o.random ?? Math.random;
    this.timers = o.timers ?? realTimers;
  }

  add(key: string, priority = NORMAL): void {
    if (this.shutting) return;
    if (this.processing.has(key)) {
      const p = this.again.get(key);
      this.again.set(key, p === undefined ? priority : Math.min(p, priority));
      return;
    }
    const p = Math.max(URGENT, Math.min(RESYNC, priority));
    const queued = this.dirty.get(key);
    if (queued !== undefined) {
      if (p < queued) {
        // Raised: queued again in the more urgent lane; the old entry is skipped as stale.
        this.dirty.set(key, p);
        (this.lanes[p] as { keys: string[] }).keys.push(key);
      }
      return;
    }
    if (!this.addedAt.has(key)) this.addedAt.set(key, this.timers.now());
    const getter = this.getters.shift();
    if (getter) {
      this.processing.add(key);
      getter(key);
      return;
    }
    this.dirty.set(key, p);
    this.queued++;
    (this.lanes[p] as { keys: string[] }).keys.push(key);
  }

  /** The most urgent, oldest queued key, removed from the lanes (stale entries dropped). */
  private take(): string | undefined {
    for (let p = URGENT; p <= RESYNC; p++) {
      const lane = this.lanes[p] as { keys: string[]; head: number };
      while (lane.head < lane.keys.length) {
        const key = lane.keys[lane.head++] as string;
        if (lane.head > 1024 && lane.head * 2 > lane.keys.length) {
          lane.keys = lane.keys.slice(lane.head);
          lane.head = 0;
        }
        if (this.dirty.get(key) !== p) continue; // moved to a more urgent lane, or taken
        this.dirty.delete(key);
        this.queued--;
        return key;
      }
    }
    return undefined;
  }

  /** Adds the key after `ms` (an earlier pending add of it wins). */
  addAfter(key: string, ms: number, priority = NORMAL): void {
    if (this.shutting) return;
    if (ms <= 0) {
      this.add(key, priority);
      return;
    }
    if (this.delayed.has(key)) return;
    const handle = this.timers.setTimeout(() => {
      this.delayed.delete(key);
      this.add(key, priority);
    }, ms);
    this.delayed.set(key, { handle, priority });
  }

  /** One more failure of the key: it comes back after its backoff. Returns the delay (ms). */
  addRateLimited(key: string, priority = NORMAL): number {
    const n = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, n);
    const delay = backoffDelay(n, this.policy, this.random);
    this.addAfter(key, delay, priority);
    return delay;
  }

  /** Forgets the key's failures and cancels a pending rate-limited re-add. */
  forget(key: string): void {
    this.failures.delete(key);
    const d = this.delayed.get(key);
    if (d) {
      this.timers.clearTimeout(d.handle);
      this.delayed.delete(key);
    }
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** The next key (most urgent, then oldest); undefined once the queue is shut down. */
  get(): Promise<string | undefined> {
    if (this.shutting) return Promise.resolve(undefined);
    const key = this.take();
    if (key !== undefined) {
      this.processing.add(key);
      return Promise.resolve(key);
    }
    return new Promise((r) => this.getters.push(r));
  }

  /** The worker finished the key: it may be processed again (and is, if it was added meanwhile). */
  done(key: string): void {
    this.processing.delete(key);
    const p = this.again.get(key);
    if (p !== undefined) {
      this.again.delete(key);
      this.add(key, p);
    } else this.addedAt.delete(key);
  }

  shutDown(): void {
    this.shutting = true;
    for (const d of this.delayed.values()) this.timers.clearTimeout(d.handle);
    this.delayed.clear();
    for (const g of this.getters.splice(0)) g(undefined);
  }

  get length(): number {
    return this.queued;
  }

  get inFlight(): number {
    return this.processing.size;
  }

  /** Keys waiting out a backoff. */
  get retrying(): number {
    return this.delayed.size;
  }

  /** Age (ms) of the oldest key queued or in process, 0 when idle: a stuck queue shows here. */
  oldestAgeMs(): number {
    let min = Number.POSITIVE_INFINITY;
    for (const t of this.addedAt.values()) if (t < min) min = t;
    return min === Number.POSITIVE_INFINITY ? 0 : this.timers.now() - min;
  }

  isShutDown(): boolean {
    return this.shutting;
  }
}

/** Runs `n` workers until the queue shuts down; `handle` must not throw (it reports its own errors). */
export function runWorkers(q: WorkQueue, n: number, handle: (key: string) => Promise<void>): Promise<void> {
  const worker = async () => {
    for (;;) {
      // Keys that need no I/O resolve as microtasks only, and one key can cost milliseconds (a
      // shard serialised): yield to timers and sockets before every key, so a Lease renewal never
      // waits behind a batch of them.
      await new Promise<void>((r) => setImmediate(r));
      const key = await q.get();
      if (key === undefined) return;
      try {
        await handle(key);
      } catch {
        // A handler that throws loses nothing: the key is simply done (its handler re-adds on failure).
      } finally {
        q.done(key);
      }
    }
  };
  return Promise.all(Array.from({ length: n }, worker)).then(() => undefined);
}
