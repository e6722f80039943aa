/**
 * Capped exponential backoff with jitter, pure: no clock, no timers, the random source injected.
 *
 * Two policies use it. Failed applies follow controller-runtime's default per-item limiter (client-go
 * `util/workqueue/default_rate_limiters.go`: 5 ms doubled per failure of the same item, capped at
 * 1000 s). Watch restarts follow client-go's reflector (`tools/cache/reflector.go`: 800 ms doubling
 * to 30 s). Both add jitter here so that many objects, or many replicas, that failed together do not
 * retry in lockstep.
 */

export interface BackoffPolicy {
  /** Delay after the first failure (ms). */
  baseMs: number;
  /** No delay exceeds this (ms). */
  capMs: number;
  /** Fraction of the delay that is random, in [0, 1]: the delay lies in [d × (1 − jitter), d]. */
  jitter: number;
}

/** Per-object retries of failed applies, deletes and status writes. */
export const ITEM_BACKOFF: BackoffPolicy = { baseMs: 5, capMs: 1_000_000, jitter: 0.5 };
/** Re-list / re-watch after a failed list or watch. */
export const WATCH_BACKOFF: BackoffPolicy = { baseMs: 800, capMs: 30_000, jitter: 0.5 };

/**
 * The delay before retry number `failures` (1 = after the first failure). `random` returns a number
 * in [0, 1). Monotone in `failures` before jitter, never above `capMs`, never below
 * `min(base·2^(n−1), cap) × (1 − jitter)`.
 */
export function backoffDelay(failures: number, p: BackoffPolicy, random: () => number = Math.random): number {
  if (!Number.isFinite(failures) || failures < 1) return 0;
  // 2^exp overflows to Infinity long before it matters; clamp the exponent so the product stays finite.
  const exp = Math.min(failures - 1, 60);
  const ceiling = Math.min(p.baseMs * 2 ** exp, p.capMs);
  const r = Math.min(Math.max(random(), 0), 1);
  const jitter = Math.min(Math.max(p.jitter, 0), 1);
  return ceiling * (1 - jitter * r);
}

/** Failure counts per key; a success forgets the key (as a workqueue's `Forget`). */
export class ItemBackoff {
  private readonly failures = new Map<string, { n: number; due: number }>();

  constructor(
    private readonly policy: BackoffPolicy = ITEM_BACKOFF,
    private readonly random: () => number = Math.random,
  ) {}

  /** Records a failure at `now` and returns when the key may be tried again. */
  fail(key: string, now: number): number {
    const n = (this.failures.get(key)?.n ?? 0) + 1;
    const due = now + backoffDelay(n, this.policy, this.random);
    this.failures.set(key, { n, due });
    return due;
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  /** True while the key waits out its delay. */
  waiting(key: string, now: number): boolean {
    const f = this.failures.get(key);
    return f !== undefined && f.due > now;
  }

  failuresOf(key: string): number {
    return this.failures.get(key)?.n ?? 0;
  }

  /** The earliest due time among waiting keys, or undefined when none fail. */
  nextDue(): number | undefined {
    let min: number | undefined;
    for (const f of this.failures.values()) if (min === undefined || f.due < min) min = f.due;
    return min;
  }

  get size(): number {
    return this.failures.size;
  }

  keys(): string[] {
    return [...this.failures.keys()];
  }
}
