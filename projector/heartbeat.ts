/**
 * The controller's heartbeat (pure): a small ConfigMap the leading controller rewrites every few
 * seconds while it is healthy (controller/heartbeat.ts), and the projector's clock over it, so a
 * controller that is dead, stuck or not leading makes the projector fail closed within a bound
 * instead of serving a registry that no longer follows the cluster (projector/README.md "Registry").
 *
 * The age is measured on the projector's own clock, as client-go's leader election measures a
 * Lease (it records when it saw the record change, not the time written in it), so clock skew
 * between nodes does not move it. Only the first observation after a start uses the written time
 * (never later than now): a projector that starts while the controller is dead does not count a
 * heartbeat it has never seen advance as fresh.
 */

/** The heartbeat ConfigMap, in the projector's namespace, labelled like the registry. */
export const HEARTBEAT_CONFIGMAP = 'fgentic-controller-heartbeat';
export const HEARTBEAT_KEY = 'heartbeat.json';

export interface Heartbeat {
  /** The controller replica (its Lease identity). */
  readonly holder: string;
  /** When it was written (epoch ms, the controller's clock). */
  readonly timeMs: number;
  /** How often the controller writes it (seconds). */
  readonly periodSeconds: number;
}

export function heartbeatText(h: Heartbeat): string {
  return `${JSON.stringify({
    version: 1,
    holder: h.holder,
    time: new Date(h.timeMs).toISOString(),
    periodSeconds: h.periodSeconds,
  })}\n`;
}

/** The heartbeat in a ConfigMap's text, or undefined when it is not one. */
export function parseHeartbeat(text: string | undefined): Heartbeat | undefined {
  if (text === undefined || text.length > 4096) return undefined;
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    const timeMs = typeof v['time'] === 'string' ? Date.parse(v['time']) : Number.NaN;
    if (v['version'] !== 1 || typeof v['holder'] !== 'string' || Number.isNaN(timeMs)) return undefined;
    const period = v['periodSeconds'];
    if (typeof period !== 'number' || !Number.isInteger(period) || period < 1) return undefined;
    return { holder: v['holder'], timeMs, periodSeconds: period };
  } catch {
    return undefined;
  }
}

/** When the projector last saw the heartbeat advance, on its own clock. */
export class HeartbeatClock {
  private text: string | undefined;
  private observedAt = Number.NEGATIVE_INFINITY;

  /** The heartbeat's current text (undefined: absent), seen at `nowMs`. */
  observe(text: string | undefined, nowMs: number): void {
    if (text === this.text) return;
    const first = this.text === undefined;
    this.text = text;
    const h = parseHeartbeat(text);
    if (!h) {
      this.observedAt = Number.NEGATIVE_INFINITY;
      return;
    }
    this.observedAt = first ? Math.min(nowMs, h.timeMs) : nowMs;
  }

  /** Milliseconds since the heartbeat last advanced; Infinity when there is none. */
  ageMs(nowMs: number): number {
    return this.observedAt === Number.NEGATIVE_INFINITY ? Infinity : Math.max(0, nowMs - this.observedAt);
  }
}
