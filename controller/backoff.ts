/**
 * Per-key failure bookkeeping over the shared schedule (common/backoff.ts): capped exponential
 * backoff with jitter, pure, no clock or timers.
 */
import { type BackoffPolicy, backoffDelay } from '../common/backoff.ts';

export { type BackoffPolicy, backoffDelay, WATCH_BACKOFF } from '../common/backoff.ts';

/**
 * Per-object retries of failed applies, deletes and status writes: controller-runtime's per-item
 * schedule (5 ms doubling), capped at 1 s instead of its 1,000 s so that the change an object still
 * owes lands within about a second of the API server recovering; the client-side token bucket
 * (kube/rate-limit.ts), not this cap, bounds the request rate while many objects fail.
 */
export const ITEM_BACKOFF: BackoffPolicy = { baseMs: 5, capMs: 1_000, jitter: 0.5 };

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
