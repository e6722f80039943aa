/** The controller's metrics (docs/runbooks.md lists each) and what one pass adds to them. */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { PASS_STAGES, type ReconcileResult } from './reconcile.ts';

export function createControllerMetrics(registry: Registry) {
  return {
    reconciles: new Counter({
      name: 'fgentic_controller_reconciles_total',
      help: 'Reconcile passes',
      labelNames: ['result'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'fgentic_controller_reconcile_seconds',
      help: 'Reconcile duration',
      registers: [registry],
    }),
    applied: new Gauge({
      name: 'fgentic_controller_rendered_objects',
      help: 'Objects rendered in the last pass (applied, or already up to date)',
      registers: [registry],
    }),
    writes: new Counter({
      name: 'fgentic_controller_api_writes_total',
      help: 'Writes to the API server by the reconciler',
      labelNames: ['op'],
      registers: [registry],
    }),
    skipped: new Counter({
      name: 'fgentic_controller_unchanged_objects_total',
      help: 'Desired objects not applied because the live object already matched',
      registers: [registry],
    }),
    failing: new Gauge({
      name: 'fgentic_controller_failing_objects',
      help: 'Objects whose apply or delete failed and waits for its retry',
      registers: [registry],
    }),
    watchRetries: new Counter({
      name: 'fgentic_controller_watch_retries_total',
      help: 'Failed lists and watches of the informers, retried after a backoff',
      labelNames: ['kind', 'what'],
      registers: [registry],
    }),
    conflicts: new Gauge({
      name: 'fgentic_controller_conflicts',
      help: 'Conflicting resources in the last pass',
      registers: [registry],
    }),
    leader: new Gauge({
      name: 'fgentic_controller_leader',
      help: '1 when this replica holds the Lease',
      registers: [registry],
    }),
    // Alerts need conditions as series (RegistryTooLarge, Conflict, ...): the API server holds them
    // only in each resource's status.
    conditions: new Gauge({
      name: 'fgentic_controller_resource_conditions',
      help: 'Our resources by condition type, status and reason, as computed in the last pass',
      labelNames: ['kind', 'type', 'status', 'reason'],
      registers: [registry],
    }),
    stage: new Histogram({
      name: 'fgentic_controller_pass_stage_seconds',
      help: 'Time spent in each stage of a reconcile pass',
      labelNames: ['stage'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    heartbeats: new Counter({
      name: 'fgentic_controller_heartbeats_total',
      help: 'Heartbeat writes (projector/heartbeat.ts) by result',
      labelNames: ['result'],
      registers: [registry],
    }),
    queued: new Histogram({
      name: 'fgentic_controller_pass_wait_seconds',
      help: 'From the event that asked for a pass to its start (debounce and the pass before it)',
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
  };
}

export type ControllerMetrics = ReturnType<typeof createControllerMetrics>;

/** Records one finished pass: its stages, writes, failures, conflicts and the conditions it computed. */
export function recordPass(m: ControllerMetrics, r: ReconcileResult, failingObjects: number): void {
  for (const s of PASS_STAGES) m.stage.observe({ stage: s }, r.stages[s] / 1000);
  m.reconciles.inc({ result: r.errors.length ? 'error' : 'ok' });
  m.applied.set(r.applied + r.unchanged);
  m.writes.inc({ op: 'apply' }, r.applied);
  m.writes.inc({ op: 'delete' }, r.pruned);
  m.writes.inc({ op: 'status' }, r.statusWrites);
  m.skipped.inc(r.unchanged);
  m.failing.set(failingObjects);
  m.conflicts.set(r.conflicts.length);
}

/**
 * Our resources by condition as series: the pass's resources and the registry's rooms (kept per
 * room, registry-sync.ts), counted when /metrics is scraped.
 */
export function recordConditions(m: ControllerMetrics, conditions: ReconcileResult['conditions']): void {
  const counts = new Map<string, number>();
  for (const c of conditions) {
    const key = JSON.stringify([c.kind, c.type, c.status, c.reason]);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  m.conditions.reset();
  for (const [key, n] of counts) {
    const [kind, type, status, reason] = JSON.parse(key) as string[];
    m.conditions.set({ kind, type, status, reason }, n);
  }
}
