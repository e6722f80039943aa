/**
 * The leader's reconcile loop: passes are debounced and run one at a time from the current term's
 * caches; a failed object's backoff schedules a retry pass when it is due. The loop also holds what
 * readiness and the heartbeat ask: leadership, whether a pass has completed, the term.
 */
import { createLogger } from '../common/log.ts';
import { type ControllerMetrics, recordPass } from './metrics.ts';
import type { PassStage, ReconcileResult } from './reconcile.ts';
import { clusterState, followRetrievalNamespace, stopTerm as stopTermCaches, type Term } from './term.ts';

const log = createLogger('controller');

/** One pass's timeline (`performance.now()` ms) and the reconciler's stages. */
export interface PassTiming {
  /** When the first event (or timer) that asked for this pass arrived. */
  requestedAt: number;
  startedAt: number;
  endedAt: number;
  stages: Record<PassStage, number>;
  agentsRendered: number;
  applied: number;
  statusWrites: number;
}

export class ReconcileLoop {
  leader = false;
  /** A pass has completed (readiness, heartbeat health). */
  synced = false;
  stopped = false;
  /** One leadership term: its caches and its reconciler (backoff, remembered mirrors). */
  term: Term | undefined;
  passes = 0;
  /** The conditions the last pass computed (exported as series on each scrape). */
  passConditions: ReconcileResult['conditions'] = [];
  private running: Promise<void> | undefined;
  private pending = false;
  /** When the oldest request not yet served by a pass arrived (performance.now()). */
  private requestedAt: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly m: ControllerMetrics,
    private readonly debounceMs: number,
    private readonly onPass?: (p: PassTiming) => void,
  ) {}

  /** Asks for a pass (debounced); nothing while standby or stopped. */
  readonly schedule = (): void => {
    if (!this.leader || this.stopped) return;
    this.pending = true;
    this.requestedAt ??= performance.now();
    if (this.timer || this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.running) this.running = this.loop();
    }, this.debounceMs);
  };

  /** Resolves when no pass is pending or running. */
  whenSettled(): Promise<void> {
    return new Promise<void>((r) => {
      this.idleWaiters.push(r);
      this.settleIdle();
    });
  }

  /** Ends the term: its caches stop and its retry timer is dropped. */
  endTerm(): void {
    stopTermCaches(this.term);
    this.term = undefined;
    this.clearRetry();
  }

  /** Stops asking for passes and ends the term; resolves once a running pass is over. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = false;
    this.endTerm();
    await this.running;
  }

  private settleIdle(): void {
    if (!this.running && !this.pending && !this.timer) {
      for (const w of this.idleWaiters) w();
      this.idleWaiters = [];
    }
  }

  private async loop(): Promise<void> {
    await null; // let the caller store `running` before this pass can finish
    while (this.pending && this.leader && !this.stopped) {
      this.pending = false;
      await this.runPass();
    }
    this.running = undefined;
    this.settleIdle();
  }

  private async runPass(): Promise<void> {
    const t = this.term;
    if (!t) return;
    await t.ready;
    if (![...t.own.values()].every((i) => i.isSynced())) {
      // Never render from a partial view of our own resources: it would prune what the missing
      // resources render. The informers retry; their first list schedules a pass.
      log.warn('reconcile deferred: resources not listed yet');
      return;
    }
    await followRetrievalNamespace(t, this.schedule);
    if (this.term !== t) return;
    const end = this.m.duration.startTimer();
    const startedAt = performance.now();
    const asked = this.requestedAt ?? startedAt;
    this.requestedAt = undefined;
    this.m.queued.observe((startedAt - asked) / 1000);
    try {
      const r = await t.reconciler.pass(clusterState(t));
      this.onPass?.({
        requestedAt: asked,
        startedAt,
        endedAt: performance.now(),
        stages: r.stages,
        agentsRendered: r.agentsRendered,
        applied: r.applied,
        statusWrites: r.statusWrites,
      });
      recordPass(this.m, r, t.reconciler.backoff.size);
      this.passConditions = r.conditions;
      this.synced = true;
      this.retryAt(r.retryAt);
    } catch (e) {
      this.m.reconciles.inc({ result: 'error' });
      log.error('reconcile failed', { error: (e as Error).message });
    } finally {
      end();
      this.passes++;
    }
  }

  /** A pass when the earliest backoff is due (replacing any earlier retry). */
  private retryAt(at: number | undefined): void {
    this.clearRetry();
    if (at === undefined) return;
    this.retryTimer = setTimeout(
      () => {
        this.retryTimer = undefined;
        this.schedule();
      },
      Math.max(0, at - Date.now()),
    );
    this.retryTimer.unref();
  }

  private clearRetry(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }
}
