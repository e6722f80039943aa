/**
 * The retrieval side of the capability ledger (docs/ledger.md). In `ledger` mode a projection is
 * accepted only while the SHA-256 of its exact header value is recorded, unexpired and bound to the
 * same agent; the check runs as the first statement of the search's read-only transaction, through
 * `fgentic_ledger.check_v1` (migration 0008), the only ledger object the retrieval role may use.
 *
 * The digest helper and the statement texts are shared with the projector, which records the same
 * digest when it mints (projector/ledger.ts): both sides must hash the same bytes.
 *
 * The check is folded into the search statement as a filter without columns: PostgreSQL plans such a
 * qual over a STABLE function as a one-time filter evaluated before the search function's scan, so
 * a recorded value costs no extra round trip and an unrecorded one never reaches the search. Only an
 * empty answer runs the check alone, to tell `unminted` from "no authorized row". The projector
 * records after it answers (projector/ledger.ts), so a value the ledger does not have yet is
 * re-checked, at most three times, until the mint window counted from its issue second has passed
 * (`recordHorizon`); a value older than that is denied at once.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { LEDGER_MINT_WINDOW } from '../rules/ledger.ts';

/** How projections are trusted: `plain` (the contract alone) or `ledger` (the contract plus verifier state). */
export { CAPABILITY_MODES, type CapabilityMode } from '../rules/ledger.ts';

/** The denial reason when the ledger has no live entry for the value and agent (content-free, stable). */
export const UNMINTED_REASON = 'unminted';

/** SHA-256 of the header value exactly as received (ASCII base64url; no normalisation). */
export function capabilityDigest(headerValue: string): Buffer {
  return createHash('sha256').update(headerValue, 'utf8').digest();
}

/** `namespace/name`, the ledger's agent key. */
export function agentKey(agent: { readonly namespace: string; readonly name: string }): string {
  return `${agent.namespace}/${agent.name}`;
}

export const CHECK_SQL = 'SELECT fgentic_ledger.check_v1($1::bytea, $2::text, $3::bigint) AS ok';
export const RECORD_SQL = 'SELECT fgentic_ledger.record_v1($1::bytea, $2::text, $3::bigint)';
export const PURGE_SQL = 'SELECT fgentic_ledger.purge_v1() AS purged';

const AGENT_KEY = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Throws RangeError unless the record has the only shape a statement may splice (see below). */
export function checkRecord(digest: Uint8Array, agent: string, exp: number): void {
  if (digest.length !== 32) throw new RangeError('digest must be 32 bytes');
  if (!AGENT_KEY.test(agent)) throw new RangeError('agent must be namespace/name');
  if (!Number.isSafeInteger(exp)) throw new RangeError('exp must be an integer');
}

/**
 * The projector's record as one simple-protocol message: the role change and the call run in the
 * message's implicit transaction, so `set_config(…, true)` drops to `role` for exactly this call, in
 * one round trip instead of the four of an explicit transaction (BEGIN, role, call, COMMIT) — the
 * difference is most of the ledger's cost at mint. The simple protocol carries no parameters, so the
 * values are spliced as literals, each first checked to a shape that cannot leave its literal: 32
 * bytes as hex, an agent key of two DNS-1123 labels, a safe integer; the role is a constant.
 */
export function recordMessage(role: string, digest: Buffer, agent: string, exp: number): string {
  checkRecord(digest, agent, exp);
  if (!/^[a-z_]+$/.test(role)) throw new RangeError('role');
  return `SELECT set_config('role', '${role}', true); SELECT fgentic_ledger.record_v1('\\x${digest.toString('hex')}'::bytea, '${agent}'::text, ${exp}::bigint)`;
}

/**
 * Several records as one simple-protocol message (the projector's batches): one statement calls
 * record_v1 once per row of a VALUES list, so the batch commits or fails as a whole. Each value is
 * checked as in `recordMessage`.
 */
export function recordBatchMessage(
  role: string,
  entries: readonly { readonly digest: Buffer; readonly agent: string; readonly exp: number }[],
): string {
  if (entries.length === 0) throw new RangeError('empty batch');
  if (!/^[a-z_]+$/.test(role)) throw new RangeError('role');
  const rows = entries.map((e) => {
    checkRecord(e.digest, e.agent, e.exp);
    return `('\\x${e.digest.toString('hex')}'::bytea, '${e.agent}'::text, ${e.exp}::bigint)`;
  });
  return (
    `SELECT set_config('role', '${role}', true); ` +
    `SELECT fgentic_ledger.record_v1(v.d, v.a, v.e) FROM (VALUES ${rows.join(', ')}) AS v(d, a, e)`
  );
}

/** What a search must prove in ledger mode. */
export interface CapabilityProof {
  readonly digest: Buffer;
  readonly agent: string;
  /** The clock the contract check used, Unix seconds. */
  readonly now: number;
  /**
   * Where the check runs: `folded` (default) into the search statement, `separate` as its own
   * statement before the search (the earlier path, kept for bench:ledger's comparison).
   */
  readonly placement?: 'folded' | 'separate';
}

/** The ledger answered: this value was not minted for this agent, or its entry expired or was purged. */
export class UnmintedCapabilityError extends Error {
  constructor() {
    super('capability not recorded in the ledger');
    this.name = 'UnmintedCapabilityError';
  }
}

/**
 * Throws UnmintedCapabilityError unless the ledger has the entry. Runs in the search's read-only
 * transaction, or as a statement of its own on a connection whose transactions are read-only
 * (retrieval/search.ts); under READ COMMITTED each statement has its own snapshot either way.
 */
export async function requireRecorded(client: pg.PoolClient, proof: CapabilityProof): Promise<void> {
  const r = await client.query(CHECK_SQL, [proof.digest, proof.agent, proof.now]);
  if (r.rows[0]?.['ok'] !== true) throw new UnmintedCapabilityError();
}

/** A statement the way retrieval/planner.ts builds it. */
export interface CheckedStatement {
  readonly text: string;
  readonly values: readonly unknown[];
}

/**
 * The search statement under the ledger check: the check's arguments follow the search's own, and
 * its only inputs are parameters, so the planner treats it as a pseudo-constant (one-time filter
 * before the function scan; `retrieval/ledger-search.test.ts` holds the plan to that). check_v1 is
 * STABLE and SECURITY DEFINER, which also keeps it from being inlined. The order of the search's
 * rows (list, then position) is restated because a subquery's ORDER BY does not bind the outer query.
 */
export function foldCheck(statement: CheckedStatement, proof: CapabilityProof): CheckedStatement {
  const n = statement.values.length;
  return {
    text:
      `SELECT s.* FROM (${statement.text}) AS s ` +
      `WHERE fgentic_ledger.check_v1($${n + 1}::bytea, $${n + 2}::text, $${n + 3}::bigint) ` +
      'ORDER BY s.list DESC, s.ord',
    values: [...statement.values, proof.digest, proof.agent, proof.now],
  };
}

const preparedNames = new Map<string, string>();

/**
 * The name a prepared statement gets: from its text, so one name never stands for two texts (node-pg
 * keeps one cache per connection and refuses a name reused with other text).
 */
export function preparedName(text: string): string {
  let name = preparedNames.get(text);
  if (name === undefined) {
    name = `fgentic_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
    // The search's texts are a handful of literals; the bound keeps any other caller from growing it.
    if (preparedNames.size < 64) preparedNames.set(text, name);
  }
  return name;
}

async function send(
  client: pg.PoolClient,
  statement: CheckedStatement,
  prepare: boolean,
): Promise<pg.QueryResult<Record<string, unknown>>> {
  const values = statement.values as unknown[];
  if (!prepare) return client.query(statement.text, values);
  try {
    return await client.query({ name: preparedName(statement.text), text: statement.text, values });
  } catch (err) {
    // The server session and the connection disagree about what is prepared: 26000, the session does
    // not hold a statement the connection prepared (a pooler in transaction mode moved the connection
    // to another session, or it was deallocated); 42P05, the session already holds one under this name,
    // which the name's derivation from the text makes the same statement (a session shared by several
    // connections). The search only reads, so it is sent again, unnamed; nothing else is retried.
    const code = (err as { code?: unknown }).code;
    if (code !== '26000' && code !== '42P05') throw err;
    return client.query(statement.text, values);
  }
}

/**
 * Runs the search statement (in the caller's transaction, or on its own on a read-only connection),
 * under the ledger check when there is a proof; throws UnmintedCapabilityError when the ledger has no
 * live entry for it. `prepare`: send it as a prepared statement the connection keeps, so the server
 * parses and plans it once per connection (retrieval/search.ts decides when).
 */
export async function runUnderCheck(
  client: pg.PoolClient,
  statement: CheckedStatement,
  proof: CapabilityProof | undefined,
  prepare = false,
): Promise<Record<string, unknown>[]> {
  if (proof === undefined) return (await send(client, statement, prepare)).rows;
  if (proof.placement === 'separate') {
    await requireRecorded(client, proof);
    return (await send(client, statement, prepare)).rows;
  }
  const rows = (await send(client, foldCheck(statement, proof), prepare)).rows;
  // No row: either nothing is authorized or the filter refused; only the check itself can tell.
  if (rows.length === 0) await requireRecorded(client, proof);
  return rows;
}

/**
 * The mint window's default (`spec.ledger.mintWindowMilliseconds`): how long after its issue second a
 * value the ledger lacks may still be recorded. See `recordHorizon` for why it is safe.
 */
export const LEDGER_WAIT_MS: number = LEDGER_MINT_WINDOW.default;

/**
 * How long from now a value the ledger lacks may still show up, in ms: the mint window counted from
 * the value's issue second (`iat`), never more than the window from now, never negative.
 *
 * Why that is enough (the real race, docs/ledger.md "The mint window"): the projector takes `iat`
 * from the second it decides, answers within its live room check's budget (150 ms by default),
 * queues the record as it answers, and confirms it within the record deadline or stops minting. The
 * deadline lies strictly inside the window (rules/ledger.ts); what is left of the window (1 s by
 * default) covers the answer's path and the clock difference between the two pods. So a value whose
 * record the projector confirmed is visible by `iat + 1 s + window`; later, a value the ledger lacks
 * will not be recorded, and it is denied at once. `iat` is the caller's claim: a forged value may name
 * the current second, and then waits at most the window, with at most three re-checks.
 */
export function recordHorizon(issuedAt: number, nowMs: number, windowMs: number): number {
  return Math.max(0, Math.min(windowMs, (issuedAt + 1) * 1000 + windowMs - nowMs));
}

/** Re-checks at these offsets from the first refusal (the projector's batches commit within tens of ms), and at the horizon. */
export const RECHECK_AT_MS: readonly number[] = [25, 250];

/** Pauses before each re-check: at 25 ms and 250 ms when the horizon allows, and at the horizon; at most three. */
export function recheckDelays(horizonMs: number): number[] {
  const points = [...RECHECK_AT_MS.filter((p) => p < horizonMs), ...(horizonMs > 0 ? [horizonMs] : [])];
  return points.map((p, i) => p - (i === 0 ? 0 : (points[i - 1] as number)));
}

export interface MintWindow {
  /** The mint window, ms; 0 denies at once. */
  readonly windowMs: number;
  /** The value's `iat` (Unix seconds); absent: the window counts from now. */
  readonly issuedAt?: number;
  /** The clock, ms (default Date.now). */
  readonly nowMs?: () => number;
  /** Timer (tests pass a recorder). */
  readonly sleep?: (ms: number) => Promise<void>;
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** How long `awaitRecorded` may wait for this value from now, ms. */
export function waitBound(window: MintWindow): number {
  const now = (window.nowMs ?? Date.now)();
  return window.issuedAt === undefined
    ? Math.max(0, window.windowMs)
    : recordHorizon(window.issuedAt, now, window.windowMs);
}

/**
 * Re-checks until the ledger has the entry or the horizon passed: at most three statements, none
 * for a value older than its horizon. Each re-check is its own short transaction: no connection is
 * held while waiting (on the embedded database a held transaction would also hold back the
 * projector's record).
 */
export async function awaitRecorded(recorded: () => Promise<boolean>, window: MintWindow): Promise<boolean> {
  const sleep = window.sleep ?? realSleep;
  for (const d of recheckDelays(waitBound(window))) {
    await sleep(d);
    if (await recorded()) return true;
  }
  return false;
}

/**
 * One search under the ledger with the mint window: an `unminted` answer is re-checked within the
 * horizon and, once the entry shows up, the search runs again (once; it may still be denied if a
 * purge removed the entry in between). Any other outcome passes through unchanged.
 */
export async function withinMintWindow<T>(
  attempt: () => Promise<T>,
  recorded: () => Promise<boolean>,
  window: MintWindow,
): Promise<T> {
  try {
    return await attempt();
  } catch (err) {
    if (!(err instanceof UnmintedCapabilityError)) throw err;
    if (!(await awaitRecorded(recorded, window))) throw err;
    return attempt();
  }
}

/** The check alone, outside any transaction of the caller (the serving pool wraps it in its own). */
export async function isRecorded(servingPool: pg.Pool, proof: CapabilityProof): Promise<boolean> {
  const r = await servingPool.query(CHECK_SQL, [proof.digest, proof.agent, proof.now]);
  return r.rows[0]?.['ok'] === true;
}

/** A digest no value has (SHA-256 never yields it in practice) and an agent of the key's shape. */
const PROBE = { digest: Buffer.alloc(32), agent: 'readyz/probe', now: 0 };

/**
 * Readiness in ledger mode: the check a search folds in runs, as the serving role: its function
 * exists and may be executed, and what it reads is there (a dropped or renamed ledger table fails
 * it, as it fails every search).
 */
export async function ledgerReachable(servingPool: pg.Pool): Promise<boolean> {
  const r = await servingPool.query(CHECK_SQL, [PROBE.digest, PROBE.agent, PROBE.now]);
  return r.rows[0]?.['ok'] === false;
}
