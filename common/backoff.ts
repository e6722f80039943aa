/**
 * Capped exponential backoff with jitter, and the one rule for restarting a list or watch. Pure: no
 * clock, no timers, the random source injected.
 *
 * Policies: failed work items follow controller-runtime's per-item limiter (client-go
 * `util/workqueue/default_rate_limiters.go`, 5 ms doubled per failure of the same item), capped here
 * at 1 s (controller/workqueue.ts says why); list and watch restarts follow client-go's reflector
 * (`tools/cache/reflector.go`: 800 ms doubling to 30 s). Jitter keeps objects or replicas that failed
 * together from retrying in lockstep.
 */

export interface BackoffPolicy {
  /** Delay after the first failure (ms). */
  baseMs: number;
  /** No delay exceeds this (ms). */
  capMs: number;
  /** Fraction of the delay that is random, in [0, 1]: the delay lies in [d × (1 − jitter), d]. */
  jitter: number;
}

/** Re-list / re-watch after a failed list or watch (client-go reflector: 800 ms doubling to 30 s). */
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

/** A watch that lived at least this long, or delivered anything, ended normally (its server timeout). */
export const MIN_WATCH_LIFE_MS = 1000;

/** How one list or watch ended, as `WatchGuard.ended` judges it. */
export interface WatchEnd {
  /** The request failed (an error, a non-2xx answer, a timeout or the watchdog). */
  readonly failed: boolean;
  /** Events (bookmarks included) the watch delivered. */
  readonly events: number;
  /** How long it was open, in ms. */
  readonly livedMs: number;
}

/**
 * The one restart rule both watch clients use (controller/kube/informer.ts, common/kube-watch.ts):
 * a watch the server ended normally after a while (its `timeoutSeconds`) resumes at once; a failure,
 * or a watch that ended at once without a single event (a server or proxy closing it with 200), is
 * retried after the reflector's backoff, so it can never spin. The failure count resets only on a
 * sign of life: an event, or a watch that stayed open.
 */
export class WatchGuard {
  private failures = 0;
  constructor(
    private readonly policy: BackoffPolicy = WATCH_BACKOFF,
    private readonly random: () => number = Math.random,
  ) {}

  /** True when the end counts as a failure (so it is not contact with the API server either). */
  static failed(e: WatchEnd): boolean {
    return e.failed || (e.events === 0 && e.livedMs < MIN_WATCH_LIFE_MS);
  }

  /** Records how a watch ended and returns the delay (ms) before the next attempt. */
  ended(e: WatchEnd): number {
    if (!WatchGuard.failed(e)) {
      this.failures = 0;
      return 0;
    }
    return this.failure();
  }

  /** Records a failed attempt (a list, or a watch that could not be opened) and returns the delay. */
  failure(): number {
    this.failures++;
    return backoffDelay(this.failures, this.policy, this.random);
  }

  /** A sign of life (a successful list, an event): the next failure starts the schedule again. */
  alive(): void {
    this.failures = 0;
  }

  get consecutiveFailures(): number {
    return this.failures;
  }
}
