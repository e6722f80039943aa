/**
 * Which database serves a search when the server has read replicas, and when a replica's answer may
 * be used. Pure: plain values in, a decision out; the I/O (the periodic check, the pools, the retry)
 * is retrieval/replica-set.ts.
 *
 * The bound: an ACL change committed on the primary is never served by a replica later than
 * `maxLagMs` after its commit. A replica is *fresh as of* T0 when a check that started at T0 (this
 * process's monotonic clock, before it asked the primary anything) read the primary's WAL insert
 * position L, and the replica's replayed position has since been seen at or past L: every
 * transaction committed on the primary before T0 is then visible to every later snapshot on the
 * replica (replay only moves forward). A search may start on a replica only while its freshness leaves room for the search
 * (`age + reserve < maxLag`), and its rows are used only if they arrived before `T0 + maxLag`; the
 * rows were read under a snapshot taken before they arrived, so a change committed at c was either
 * before T0 (and visible) or less than `maxLag` before the answer. Nothing here compares two hosts'
 * clocks, and an idle primary (no new WAL) keeps a caught-up replica fresh.
 */

import { isMaxReplicaLag, MAX_REPLICA_LAG } from '../rules/database.ts';

/** The default `maxReplicaLag`, ms: how long after its commit an ACL change may still be missed. */
export const DEFAULT_MAX_REPLICA_LAG_MS = MAX_REPLICA_LAG.default;

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
  if (!isMaxReplicaLag(maxLagMs))
    throw new RangeError(`max replica lag must be an integer ${MAX_REPLICA_LAG.min}–${MAX_REPLICA_LAG.max} ms`);
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

/** The primary's WAL insert position, asked at `startedMs` (monotonic ms, taken before asking). */
export interface PrimarySample {
  readonly startedMs: number;
  readonly lsn: bigint;
}

/** A `pg_lsn` text (`X/Y`, hex) as a number; undefined for anything else. */
export function parseLsn(text: unknown): bigint | undefined {
  if (typeof text !== 'string') return undefined;
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  return m ? (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`) : undefined;
}

/**
 * The newest sample start the replica is proven fresh as of: the latest sample whose position it
 * has replayed. On a primary that keeps writing, a replica is rarely at the position of this very
 * instant, but it has passed the one asked a check or two ago; that sample's start is its proof.
 */
export function provenAsOf(samples: readonly PrimarySample[], replayed: bigint): number | undefined {
  let best: number | undefined;
  for (const s of samples) if (s.lsn <= replayed && (best === undefined || s.startedMs > best)) best = s.startedMs;
  return best;
}

/** The samples worth keeping: those younger than the bound (an older proof is useless). */
export function keepSamples(samples: readonly PrimarySample[], nowMs: number, timing: ReplicaTiming): PrimarySample[] {
  return samples.filter((s) => nowMs - s.startedMs < timing.maxLagMs);
}

/** What one freshness check saw. */
export type CheckOutcome =
  | {
      readonly ok: true;
      /** pg_is_in_recovery() on the replica. */
      readonly standby: boolean;
      /** provenAsOf for its replayed position; absent: it has replayed none of the recent samples. */
      readonly provenAsOfMs?: number;
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
  const earlier = prev.down ? undefined : prev.freshAsOfMs;
  const proven = outcome.provenAsOfMs;
  const fresh = proven === undefined ? earlier : earlier === undefined ? proven : Math.max(earlier, proven);
  return fresh === undefined ? { down: false } : { down: false, freshAsOfMs: fresh };
}

/** A search on the replica failed (connection lost, server gone, anything but its input): out of rotation. */
export function afterSearchFailure(): ReplicaView {
  return { down: true };
}
