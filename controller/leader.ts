/**
 * Fenced leadership, with client-go's leader election timing (`tools/leaderelection`): a candidate
 * tries to acquire the Lease every `retryPeriod` (jittered); the leader renews every `retryPeriod`,
 * and if no renewal has succeeded within `renewDeadline` of the last one, the term is over. Defaults
 * are client-go's: leaseDuration 15 s, renewDeadline 10 s, retryPeriod 2 s. One failed renewal
 * therefore does not end a term; a term that cannot be renewed ends before any other replica may
 * take the lease (leaseDuration − renewDeadline = 5 s of margin).
 *
 * A term is a fence: `LeaderTerm.check` refuses a write once the term is over or its renewal
 * deadline has passed, even before the renew loop notices, and every write checks the term it was
 * started under right before it is sent (kube/client.ts `fence`). When a term is lost the process is
 * meant to exit so its Deployment restarts it (cli.ts), as controller-runtime does.
 */
import { FencedError } from './kube/client.ts';
import type { LeaderElector } from './kube/lease.ts';

export interface LeaderTimings {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

/** client-go's defaults (controller-runtime uses the same). */
export const LEADER_DEFAULTS: LeaderTimings = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};

export class LeaderTerm {
  private ended = false;
  private renewedAt: number;

  constructor(
    readonly id: number,
    acquiredAt: number,
    private readonly renewDeadlineMs: number,
    private readonly now: () => number,
  ) {
    this.renewedAt = acquiredAt;
  }

  renewed(at: number): void {
    this.renewedAt = Math.max(this.renewedAt, at);
  }

  end(): void {
    this.ended = true;
  }

  /** True while the term is held: not ended and renewed within the deadline. */
  valid(): boolean {
    return !this.ended && this.now() < this.renewedAt + this.renewDeadlineMs;
  }

  /** The fence: throws when a write may no longer be sent under this term. */
  readonly check = (): void => {
    if (!this.valid()) throw new FencedError(`leadership term ${this.id} is over: write refused`);
  };

  /** When the renewal deadline passes without a renewal (epoch ms). */
  get deadline(): number {
    return this.renewedAt + this.renewDeadlineMs;
  }
}

export interface ElectionOptions extends Partial<LeaderTimings> {
  now?: () => number;
  random?: () => number;
  onStarted: (term: LeaderTerm) => void;
  /** The term is over (lost, or not renewable within the deadline). */
  onStopped: (term: LeaderTerm, reason: string) => void;
  onError?: (error: Error) => void;
}

export class LeaderElection {
  private term: LeaderTerm | undefined;
  private timer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private stopped = false;
  private terms = 0;
  /** Terms lost so far. */
  private lost = 0;
  readonly timings: LeaderTimings;
  private readonly now: () => number;
  private readonly random: () => number;
  /** Resolves after the first attempt (acquired or not). */
  readonly firstAttempt: Promise<void>;
  private settleFirst: () => void = () => {};

  constructor(
    private readonly elector: Pick<LeaderElector, 'tryAcquireOrRenew' | 'release'>,
    private readonly o: ElectionOptions,
  ) {
    const lease = o.leaseDurationMs ?? LEADER_DEFAULTS.leaseDurationMs;
    const retry = o.retryPeriodMs ?? LEADER_DEFAULTS.retryPeriodMs;
    // client-go requires leaseDuration > renewDeadline > retryPeriod × 1.2 (its JitterFactor).
    const deadline = o.renewDeadlineMs ?? Math.min(LEADER_DEFAULTS.renewDeadlineMs, Math.round((lease * 2) / 3));
    if (!(lease > deadline && deadline > retry * 1.2))
      throw new Error('leader election needs leaseDuration > renewDeadline > 1.2 × retryPeriod');
    this.timings = { leaseDurationMs: lease, renewDeadlineMs: deadline, retryPeriodMs: retry };
    this.now = o.now ?? Date.now;
    this.random = o.random ?? Math.random;
    this.firstAttempt = new Promise((r) => {
      this.settleFirst = r;
    });
  }

  start(): void {
    void this.round();
  }

  current(): LeaderTerm | undefined {
    return this.term?.valid() ? this.term : undefined;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.round(), ms);
    this.timer.unref?.();
  }

  private lose(reason: string): void {
    const t = this.term;
    if (!t) return;
    this.lost++;
    this.term = undefined;
    if (this.watchdog) clearTimeout(this.watchdog);
    t.end();
    this.o.onStopped(t, reason);
  }

  /** Ends the term when its renewal deadline passes, even while a renew request hangs. */
  private armWatchdog(t: LeaderTerm): void {
    if (this.watchdog) clearTimeout(this.watchdog);
    this.watchdog = setTimeout(
      () => {
        if (this.term === t && !t.valid()) this.lose('renew deadline passed');
      },
      Math.max(0, t.deadline - this.now()) + 1,
    );
    this.watchdog.unref?.();
  }

  private async round(): Promise<void> {
    if (this.stopped) return;
    const sentAt = this.now();
    const before = this.term;
    const lostBefore = this.lost;
    let held = false;
    try {
      held = await this.elector.tryAcquireOrRenew(new Date(sentAt));
    } catch (e) {
      this.o.onError?.(e as Error);
    }
    this.settleFirst();
    if (this.stopped) return;
    // The term ended while this round was in flight (its watchdog): the owner decides what follows
    // (exit, or `restart`); this answer must not start a new term behind its back.
    if (this.lost !== lostBefore || this.term !== before) return;
    const { retryPeriodMs } = this.timings;
    if (this.term) {
      if (held && this.term.valid()) {
        this.term.renewed(sentAt);
        this.armWatchdog(this.term);
      } else if (!held && !this.term.valid()) this.lose('renew deadline passed');
      else if (held) this.lose('renewed after the deadline');
      // A failed renewal within the deadline: retried at the next period.
      if (this.term) return this.schedule(retryPeriodMs);
      return; // the term is over: the owner decides (exit, or start again)
    }
    if (held) {
      this.term = new LeaderTerm(++this.terms, sentAt, this.timings.renewDeadlineMs, this.now);
      this.armWatchdog(this.term);
      this.o.onStarted(this.term);
      return this.schedule(retryPeriodMs);
    }
    // client-go's wait.JitterUntil with JitterFactor 1.2: retryPeriod × [1, 2.2).
    this.schedule(retryPeriodMs * (1 + 1.2 * this.random()));
  }

  /** Campaign again after a lost term (the library default; `serve controller` exits instead). */
  restart(): void {
    if (this.stopped) return;
    this.schedule(this.timings.retryPeriodMs);
  }

  /** Stops campaigning; with `release`, hands a held lease back (`ReleaseOnCancel`). */
  async stop(release = true): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.watchdog) clearTimeout(this.watchdog);
    const t = this.term;
    this.term = undefined;
    t?.end();
    if (t && release) await this.elector.release().catch((e: unknown) => this.o.onError?.(e as Error));
  }
}
