/**
 * The controller's client-side rate limiter: a token bucket (client-go `util/flowcontrol`
 * `NewTokenBucketRateLimiter`) every API request waits on, with priorities so that a revocation is
 * never queued behind a flood of other writes, and a pause that a 429 `Retry-After` sets for every
 * request (client-go waits out the advertised delay before retrying). The clock is injected.
 *
 * Defaults: 20 requests per second, bursts of 30 (controller-runtime's and kube-controller-manager's
 * `--kube-api-qps`/`--kube-api-burst`; client-go's bare default is 5/10). One change costs at most 3
 * writes, which the burst absorbs at once; a resync that finds nothing to do costs no request; a
 * first apply of a whole cluster (about 12,000 objects at full scale) is spread over ten minutes
 * instead of arriving at once, and API Priority and Fairness on the server side still applies.
 */
import type { RequestLimiter } from '../../common/kube-request.ts';

export interface LimiterClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

const realClock: LimiterClock = {
  now: () => Date.now(),
  sleep: (ms) =>
    new Promise((r) => {
      const t = setTimeout(r, ms);
      t.unref?.();
    }),
};

export const DEFAULT_QPS = 20;
export const DEFAULT_BURST = 30;

export class TokenBucket implements RequestLimiter {
  private tokens: number;
  private last: number;
  private paused = 0;
  private readonly waiters: { priority: number; seq: number; go: () => void }[] = [];
  private seq = 0;
  private pumping = false;
  /** Requests let through, for metrics and tests. */
  granted = 0;

  constructor(
    private qpsValue = DEFAULT_QPS,
    private burstValue = DEFAULT_BURST,
    private readonly clock: LimiterClock = realClock,
  ) {
    if (!(qpsValue > 0) || !(burstValue >= 1)) throw new Error('qps must be > 0 and burst ≥ 1');
    this.tokens = burstValue;
    this.last = clock.now();
  }

  get qps(): number {
    return this.qpsValue;
  }

  get burst(): number {
    return this.burstValue;
  }

  /** A new rate from now on (tokens already saved are capped at the new burst). */
  setRate(qps: number, burst: number): void {
    if (!(qps > 0) || !(burst >= 1)) throw new Error('qps must be > 0 and burst ≥ 1');
    this.refill();
    this.qpsValue = qps;
    this.burstValue = burst;
    this.tokens = Math.min(this.tokens, burst);
  }

  private refill(): void {
    const t = this.clock.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) * this.qps) / 1000);
    this.last = t;
  }

  acquire(priority = 1): Promise<void> {
    return new Promise((go) => {
      this.waiters.push({ priority, seq: this.seq++, go });
      this.waiters.sort((a, b) => a.priority - b.priority || a.seq - b.seq);
      void this.pump();
    });
  }

  pauseUntil(epochMs: number): void {
    this.paused = Math.max(this.paused, epochMs);
  }

  /** Hands out tokens to waiters, most urgent first, sleeping while the bucket is empty or paused. */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.waiters.length > 0) {
        const wait = this.paused - this.clock.now();
        if (wait > 0) {
          await this.clock.sleep(wait);
          continue;
        }
        this.refill();
        if (this.tokens < 1) {
          await this.clock.sleep(Math.ceil(((1 - this.tokens) * 1000) / this.qps));
          continue;
        }
        this.tokens -= 1;
        this.granted++;
        this.waiters.shift()?.go();
      }
    } finally {
      this.pumping = false;
    }
  }

  /** Waiters not yet let through. */
  get waiting(): number {
    return this.waiters.length;
  }
}
