/**
 * Searches on read replicas under the revocation bound (retrieval/replicas.ts decides; this file
 * does the I/O). Each replica's freshness is checked every `checkIntervalMs` on connections of its
 * own (one to the primary, one per replica), so a busy serving pool never delays a check:
 *
 *   T0 = monotonic now; L = pg_current_wal_insert_lsn() on the primary, kept as a sample (T0, L)
 *   while younger than the bound; on each replica: pg_is_in_recovery(), pg_last_wal_replay_lsn() R.
 *
 * The replica is fresh as of the newest sample start T0 whose L ≤ R (retrieval/replicas.ts). A search goes to a replica chosen by `chooseEndpoint`
 * and its rows are used only if they arrived within the bound of that freshness; otherwise, and on
 * any failure on the replica, the search runs once on the primary (the retry policy: at most one
 * more attempt, always on the primary; a failure there reaches the caller). In ledger mode an
 * `unminted` answer from a replica is asked again of the primary, where the projector records (a
 * value minted a moment ago may not have been replayed yet); a recorded answer from a replica stands,
 * as entries only disappear by expiry, which the check compares with the request's clock.
 *
 * Nothing logged or labelled names a URL, a query, a projection or a row: replicas are numbered by
 * their position in the configuration.
 */
import type pg from 'pg';
import { Counter, Gauge, type Registry } from 'prom-client';
import { errorFields } from '../common/error-fields.ts';
import { createLogger } from '../common/log.ts';
import { UnmintedCapabilityError } from './ledger.ts';
import { classifySearchError } from './mcp/db-errors.ts';
import type { PlannerOptions } from './planner.ts';
import {
  afterCheck,
  afterSearchFailure,
  type CheckOutcome,
  chooseEndpoint,
  keepSamples,
  type PrimaryReason,
  type PrimarySample,
  parseLsn,
  provenAsOf,
  type ReplicaTiming,
  type ReplicaView,
  replicaAge,
  UNCHECKED,
  withinBound,
} from './replicas.ts';
import { type SearchRequest, type SearchResult, searchKnowledge } from './search.ts';

const log = createLogger('retrieval');

export const PRIMARY_POSITION_SQL = 'SELECT pg_catalog.pg_current_wal_insert_lsn()::text AS lsn';
export const REPLICA_POSITION_SQL =
  'SELECT pg_catalog.pg_is_in_recovery() AS standby, pg_catalog.pg_last_wal_replay_lsn()::text AS replayed';

/** A check statement that took longer than the bound: it proves nothing in time. */
class CheckTimeoutError extends Error {
  constructor() {
    super('replica check timed out');
    this.name = 'CheckTimeoutError';
  }
}

/**
 * One check statement, given at most `ms`: a connection whose statement did not answer in time (a
 * server gone silent, a network that drops packets) is destroyed rather than waited for, so the next
 * check opens a fresh one instead of queueing behind it.
 */
async function timedQuery(pool: pg.Pool, text: string, ms: number): Promise<pg.QueryResult<Record<string, unknown>>> {
  const client = await pool.connect();
  let timer: NodeJS.Timeout | undefined;
  try {
    const r = await Promise.race([
      client.query(text),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new CheckTimeoutError()), ms);
      }),
    ]);
    client.release();
    return r;
  } catch (err) {
    client.release(true);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

export interface ReplicaEndpoint {
  /** What searches run on: the replica's serving pool (asRole, as the primary's). */
  readonly serving: pg.Pool;
  /** One connection of its own for the freshness check. */
  readonly check: pg.Pool;
}

export interface ReplicaSetOptions {
  /** The primary's serving pool: searches that leave the replicas, and the ledger's re-checks. */
  readonly primary: pg.Pool;
  /** One connection of its own on the primary for the checks. */
  readonly primaryCheck: pg.Pool;
  readonly replicas: readonly ReplicaEndpoint[];
  readonly timing: ReplicaTiming;
  readonly registry?: Registry;
  /** Monotonic ms (default performance.now). */
  readonly clock?: () => number;
}

export type Endpoint = 'primary' | 'replica';

export interface RoutedResult extends SearchResult {
  readonly endpoint: Endpoint;
  /** Why the primary served it (absent when a replica did). */
  readonly reason?: PrimaryReason;
}

export interface ReplicaSet {
  /** One search, on a fresh replica or the primary. */
  search(req: SearchRequest, planner: PlannerOptions): Promise<RoutedResult>;
  /** Runs one round of checks now (the timer runs them every checkIntervalMs). */
  checkNow(): Promise<void>;
  /** What the server knows about each replica (tests, /metrics). */
  views(): readonly ReplicaView[];
  /** Stops the checks and ends the check pools (not the serving pools). */
  close(): Promise<void>;
}

/** The searches and checks counters, and the lag gauge read from `views` at each scrape. */
function replicaMetrics(
  registry: Registry | undefined,
  clock: () => number,
  views: readonly ReplicaView[],
): { searches: Counter; checks: Counter } {
  const registers = registry ? [registry] : [];
  const searches = new Counter({
    name: 'fgentic_retrieval_searches_total',
    help: 'Searches by the endpoint that answered (primary, replica) and, for the primary, why (no_replica, replica_lag, replica_unchecked, replica_down, replica_failed, replica_late, ledger_unminted).',
    labelNames: ['endpoint', 'reason'],
    registers,
  });
  const checks = new Counter({
    name: 'fgentic_retrieval_replica_checks_total',
    help: 'Replica freshness checks by replica (position in the configuration) and outcome (caught_up, behind, not_standby, failed).',
    labelNames: ['replica', 'outcome'],
    registers,
  });
  new Gauge({
    name: 'fgentic_retrieval_replica_lag_seconds',
    help: 'Per replica: time since a check last proved it held every commit of the primary (an upper bound of its replay lag; +Inf when down or never proven). Searches leave it before the revocation bound.',
    labelNames: ['replica'],
    registers,
    collect() {
      const now = clock();
      views.forEach((v, i) => {
        this.set({ replica: String(i) }, replicaAge(v, now) / 1000);
      });
    },
  });
  return { searches, checks };
}

/** One replica's check: whether it is a standby and as of which kept primary sample it is proven. */
async function checkReplica(
  replica: ReplicaEndpoint,
  i: number,
  samples: readonly PrimarySample[],
  maxLagMs: number,
): Promise<CheckOutcome> {
  try {
    const r = await timedQuery(replica.check, REPLICA_POSITION_SQL, maxLagMs);
    const row = r.rows[0] as { standby?: unknown; replayed?: unknown } | undefined;
    const replayed = parseLsn(row?.replayed);
    const proven = replayed === undefined ? undefined : provenAsOf(samples, replayed);
    return {
      ok: true,
      standby: row?.standby === true,
      ...(proven !== undefined ? { provenAsOfMs: proven } : {}),
    };
  } catch (err) {
    log.warn('replica check failed', { replica: i, ...errorFields(err) });
    return { ok: false };
  }
}

/** The checks counter's outcome label. Pure. */
function outcomeLabel(outcome: CheckOutcome, startedMs: number): string {
  if (!outcome.ok) return 'failed';
  if (!outcome.standby) return 'not_standby';
  return outcome.provenAsOfMs === startedMs ? 'caught_up' : 'behind';
}

/** A replica set's state: what is known of each replica, the primary samples, the check schedule. */
interface SetState {
  readonly options: ReplicaSetOptions;
  readonly clock: () => number;
  readonly views: ReplicaView[];
  readonly searches: Counter;
  readonly checks: Counter;
  samples: PrimarySample[];
  checking: Promise<void> | undefined;
  closed: boolean;
  timer: NodeJS.Timeout | undefined;
  turn: number;
}

function setView(s: SetState, i: number, next: ReplicaView, why: string): void {
  const prev = s.views[i] as ReplicaView;
  s.views[i] = next;
  if (prev.down !== next.down)
    (next.down ? log.warn : log.info)(next.down ? 'replica out of rotation' : 'replica in rotation', {
      replica: i,
      reason: why,
    });
}

/** One round: a primary sample, then every replica's check against the samples kept. */
async function runChecks(s: SetState): Promise<void> {
  const { options, clock } = s;
  const { timing } = options;
  const startedMs = clock();
  try {
    const r = await timedQuery(options.primaryCheck, PRIMARY_POSITION_SQL, timing.maxLagMs);
    const lsn = parseLsn(r.rows[0]?.['lsn']);
    if (lsn === undefined) throw new TypeError('primary position');
    s.samples = [...keepSamples(s.samples, clock(), timing), { startedMs, lsn }];
  } catch (err) {
    // Without the primary's position nothing new is proven; each replica keeps what an earlier
    // check proved (the samples kept), and ages.
    log.warn('replica check: primary position unavailable', errorFields(err));
  }
  await Promise.all(
    options.replicas.map(async (replica, i) => {
      const outcome = await checkReplica(replica, i, s.samples, timing.maxLagMs);
      s.checks.inc({ replica: String(i), outcome: outcomeLabel(outcome, startedMs) });
      setView(
        s,
        i,
        afterCheck(s.views[i] as ReplicaView, outcome),
        !outcome.ok ? 'check_failed' : outcome.standby ? 'standby' : 'not_standby',
      );
    }),
  );
}

/** A round now, or the one already running. */
function checkNow(s: SetState): Promise<void> {
  s.checking ??= runChecks(s).finally(() => {
    s.checking = undefined;
  });
  return s.checking;
}

function schedule(s: SetState): void {
  if (s.closed) return;
  s.timer = setTimeout(() => {
    void checkNow(s).finally(() => schedule(s));
  }, s.options.timing.checkIntervalMs);
  s.timer.unref();
}

async function onPrimary(
  s: SetState,
  req: SearchRequest,
  planner: PlannerOptions,
  reason: PrimaryReason,
): Promise<RoutedResult> {
  const result = await searchKnowledge(s.options.primary, req, planner);
  s.searches.inc({ endpoint: 'primary', reason });
  return { ...result, endpoint: 'primary' as const, reason };
}

/** One search on the endpoint chosen for it; once more on the primary when the replica's answer is unusable. */
async function routedSearch(s: SetState, req: SearchRequest, planner: PlannerOptions): Promise<RoutedResult> {
  const { options, clock } = s;
  const route = chooseEndpoint(s.views, clock(), options.timing, s.turn++);
  if (route.endpoint === 'primary') return onPrimary(s, req, planner, route.reason);
  const replica = options.replicas[route.index] as ReplicaEndpoint;
  let result: SearchResult;
  try {
    result = await searchKnowledge(replica.serving, req, planner);
  } catch (err) {
    if (err instanceof UnmintedCapabilityError) return onPrimary(s, req, planner, 'ledger_unminted');
    // The same input fails the same way on the primary.
    if (classifySearchError(err, req.mode ?? 'vector').kind === 'input') throw err;
    log.warn('search failed on a replica: retrying on the primary', {
      replica: route.index,
      ...errorFields(err),
    });
    setView(s, route.index, afterSearchFailure(), 'search_failed');
    return onPrimary(s, req, planner, 'replica_failed');
  }
  // Rows that arrived too late could miss a change older than the bound: not used.
  if (!withinBound(route.freshAsOfMs, clock(), options.timing)) return onPrimary(s, req, planner, 'replica_late');
  s.searches.inc({ endpoint: 'replica', reason: '' });
  return { ...result, endpoint: 'replica' };
}

export function createReplicaSet(options: ReplicaSetOptions): ReplicaSet {
  const clock = options.clock ?? (() => performance.now());
  const views: ReplicaView[] = options.replicas.map(() => UNCHECKED);
  const s: SetState = {
    options,
    clock,
    views,
    ...replicaMetrics(options.registry, clock, views),
    samples: [],
    checking: undefined,
    closed: false,
    timer: undefined,
    turn: 0,
  };
  if (options.replicas.length > 0) void checkNow(s).finally(() => schedule(s));
  return {
    search: (req, planner) => routedSearch(s, req, planner),
    checkNow: () => checkNow(s),
    views: () => [...views],
    async close() {
      s.closed = true;
      if (s.timer) clearTimeout(s.timer);
      await s.checking?.catch(() => {});
      await options.primaryCheck.end().catch(() => {});
      for (const r of options.replicas) await r.check.end().catch(() => {});
    },
  };
}
