/**
 * Which database serves a search when the server has read replicas, and when a replica's answer may
 * be used. Pure: plain values in, a decision out; the I/O (the periodic check, the pools, the retry)
 * is retrieval/db/replica-set.ts.
 *
 * The bound: an ACL change committed on the primary is never served by a replica later than
 * `maxLagMs` after its commit. A replica is *fresh as of* T0 when a check that started at T0 (this
 * process's monotonic clock, before it asked the primary anything) saw the replica's replayed WAL
 * position at or past the primary's WAL insert position: every transaction committed on the
 * primary before T0 is then visible to every later snapshot on the replica (replay only moves
 * forward). A search may start on a replica only while its freshness leaves room for the search
 * (`age + reserve < maxLag`), and its rows are used only if they arrived before `T0 + maxLag`; the
 * rows were read under a snapshot taken before they arrived, so a change committed at c was either
 * before T0 (and visible) or less than `maxLag` before the answer. Nothing here compares two hosts'
 * clocks, and an idle primary (no new WAL) keeps a caught-up replica fresh.
 */

/** The default `maxReplicaLag`, ms: how long after its commit an ACL change may still be missed. */
export const DEFAULT_MAX_REPLICA_LAG_MS = 1000;
/** The bounds `--max-replica-lag` accepts, ms. */
export const MAX_REPLICA_LAG_RANGE = { min: 100, max: 60_000 } as const;

export interface ReplicaTiming {
  /** The revocation bound, ms. */
  readonly maxLagMs: number;
  /** How often each replica's freshness is checked, ms (a quarter of the bound). */
  readonly checkIntervalMs: number;
  /** The room a search needs inside the bound: a replica older than `maxLag - reserve` gets none. */
  readonly reserveMs: number;
}

/** The timing for a bound: checks four times per bound, a quarter of the bound kept for the search. */
export function replicaTiming(maxLagMs: number = DEFAULT_MAX_REPLICA_LAG_MS): ReplicaTiming {
  if (
    !Number.isInteger(maxLagMs) ||
    maxLagMs < MAX_REPLICA_LAG_RANGE.min ||
    maxLagMs > MAX_REPLICA_LAG_RANGE.max
  )
    throw new RangeError(
      `max replica lag must be an integer ${MAX_REPLICA_LAG_RANGE.min}–${MAX_REPLICA_LAG_RANGE.max} ms`,
    );
  const quarter = Math.floor(maxLagMs / 4);
  return { maxLagMs, checkIntervalMs: quarter, reserveMs: quarter };
}

/** What the server knows about one replica. */
export interface ReplicaView {
  /** The start of the newest check that found the replica caught up (monotonic ms); absent: none. */
  readonly freshAsOfMs?: number;
  /** The last check or search on it failed, or it is not a standby: out of rotation until a check passes. */
  readonly down: boolean;
}

export const UNCHECKED: ReplicaView = { down: false };

/** Why a search went to the primary (metric label and log field; content-free). */
export type PrimaryReason =
  | 'no_replica'
  | 'replica_unchecked'
  | 'replica_lag'
  | 'replica_down'
  | 'replica_failed'
  | 'replica_late'
  | 'ledger_unminted';

export type Route =
  | { readonly endpoint: 'replica'; readonly index: number; readonly freshAsOfMs: number }
  | { readonly endpoint: 'primary'; readonly reason: PrimaryReason };

/** The replica's age: how long ago it was last proven to hold every commit, ms (Infinity: never). */
export function replicaAge(view: ReplicaView, nowMs: number): number {
  return view.down || view.freshAsOfMs === undefined ? Number.POSITIVE_INFINITY : nowMs - view.freshAsOfMs;
}

/**
 * Where the next search goes: a replica whose age leaves the search its reserve inside the bound,
 * taking turns among those (`turn` is a counter the caller advances); else the primary, with the
 * reason the replicas were passed over.
 */
export function chooseEndpoint(
  replicas: readonly ReplicaView[],
  nowMs: number,
  timing: ReplicaTiming,
  turn: number,
): Route {
  if (replicas.length === 0) return { endpoint: 'primary', reason: 'no_replica' };
  const eligible: number[] = [];
  replicas.forEach((r, i) => {
    if (replicaAge(r, nowMs) + timing.reserveMs < timing.maxLagMs) eligible.push(i);
  });
  if (eligible.length > 0) {
    const index = eligible[Math.abs(Math.trunc(turn)) % eligible.length] as number;
    return {
      endpoint: 'replica',
      index,
      freshAsOfMs: (replicas[index] as ReplicaView).freshAsOfMs as number,
    };
  }
  const reason: PrimaryReason = replicas.every((r) => r.down)
    ? 'replica_down'
    : replicas.some((r) => !r.down && r.freshAsOfMs !== undefined)
      ? 'replica_lag'
      : 'replica_unchecked';
  return { endpoint: 'primary', reason };
}

/** Whether rows a replica returned may be used: they arrived before its freshness plus the bound. */
export function withinBound(freshAsOfMs: number, arrivedMs: number, timing: ReplicaTiming): boolean {
  return arrivedMs - freshAsOfMs < timing.maxLagMs;
}

/** What one freshness check saw. */
export type CheckOutcome =
  | {
      readonly ok: true;
      /** Monotonic ms, taken before the primary's position was asked. */
      readonly startedMs: number;
      /** pg_is_in_recovery() on the replica. */
      readonly standby: boolean;
      /** The replica's replayed position is at or past the primary's insert position. */
      readonly caughtUp: boolean;
    }
  | { readonly ok: false };

/**
 * The replica's state after a check. Fails closed: any error, or a server that is not a standby
 * (promoted, or a primary behind the URL), takes it out of rotation and forgets its freshness. A
 * standby that is behind keeps the freshness an earlier check proved (replay only moves forward),
 * so its age grows until it catches up.
 */
export function afterCheck(prev: ReplicaView, outcome: CheckOutcome): ReplicaView {
  if (!outcome.ok || !outcome.standby) return { down: true };
  if (outcome.caughtUp)
    return {
      down: false,
      freshAsOfMs: Math.max(
        prev.down ? outcome.startedMs : (prev.freshAsOfMs ?? outcome.startedMs),
        outcome.startedMs,
      ),
    };
  return prev.down || prev.freshAsOfMs === undefined
    ? { down: false }
    : { down: false, freshAsOfMs: prev.freshAsOfMs };
}

/** A search on the replica failed (connection lost, server gone, anything but its input): out of rotation. */
export function afterSearchFailure(): ReplicaView {
  return { down: true };
}
