/**
 * The retrieval side of the capability ledger (docs/ledger.md). In `ledger` mode a projection is
 * accepted only while the SHA-256 of its exact header value is recorded, unexpired and bound to the
 * same agent; the check runs as the first statement of the search's read-only transaction, through
 * `fgentic_ledger.check_v1` (migration 0008), the only ledger object the retrieval role may use.
 *
 * The digest helper and the statement texts are shared with the projector, which records the same
 * digest when it mints (projector/ledger.ts): both sides must hash the same bytes.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';

/** How projections are trusted: `plain` (the contract alone) or `ledger` (the contract plus verifier state). */
export type CapabilityMode = 'plain' | 'ledger';
export const CAPABILITY_MODES: readonly CapabilityMode[] = ['plain', 'ledger'];

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

/**
 * The projector's record as one simple-protocol message: the role change and the call run in the
 * message's implicit transaction, so `set_config(…, true)` drops to `role` for exactly this call, in
 * one round trip instead of the four of an explicit transaction (BEGIN, role, call, COMMIT) — the
 * difference is most of the ledger's cost at mint. The simple protocol carries no parameters, so the
 * values are spliced as literals, each first checked to a shape that cannot leave its literal: 32
 * bytes as hex, an agent key of two DNS-1123 labels, a safe integer; the role is a constant.
 */
export function recordMessage(role: string, digest: Buffer, agent: string, exp: number): string {
  if (digest.length !== 32) throw new RangeError('digest must be 32 bytes');
  if (!AGENT_KEY.test(agent)) throw new RangeError('agent must be namespace/name');
  if (!Number.isSafeInteger(exp)) throw new RangeError('exp must be an integer');
  if (!/^[a-z_]+$/.test(role)) throw new RangeError('role');
  return `SELECT set_config('role', '${role}', true); SELECT fgentic_ledger.record_v1('\\x${digest.toString('hex')}'::bytea, '${agent}'::text, ${exp}::bigint)`;
}

/** What a search must prove in ledger mode. */
export interface CapabilityProof {
  readonly digest: Buffer;
  readonly agent: string;
  /** The clock the contract check used, Unix seconds. */
  readonly now: number;
}

/** The ledger answered: this value was not minted for this agent, or its entry expired or was purged. */
export class UnmintedCapabilityError extends Error {
  constructor() {
    super('capability not recorded in the ledger');
    this.name = 'UnmintedCapabilityError';
  }
}

/** Run inside an open transaction: throws UnmintedCapabilityError unless the ledger has the entry. */
export async function requireRecorded(client: pg.PoolClient, proof: CapabilityProof): Promise<void> {
  const r = await client.query(CHECK_SQL, [proof.digest, proof.agent, proof.now]);
  if (r.rows[0]?.['ok'] !== true) throw new UnmintedCapabilityError();
}

/** Readiness in ledger mode: the check function exists and the serving role may execute it. */
export async function ledgerReachable(servingPool: pg.Pool): Promise<boolean> {
  const r = await servingPool.query(
    "SELECT has_function_privilege('fgentic_ledger.check_v1(bytea, text, bigint)', 'EXECUTE') AS ok",
  );
  return r.rows[0]?.['ok'] === true;
}
