/**
 * X-Fgentic-Identity: the canonical identity projection of ADR 0017, in its Matrix and OAuth kinds.
 * `decodeProjection` is the one validation every consumer runs; it never throws.
 */
import { encodeBase64url } from './base64url.ts';
import { decodeCarrier, type HeaderInput, MAX_ENCODED_BYTES } from './carrier.ts';
import {
  type AllowedClassifications,
  compareAscii,
  isAllowedClassifications,
  isDns1123Label,
  isFullMxid,
  isHex64,
  isPartnerGroup,
  partnerGroupPolicy,
} from './identifiers.ts';
import { jcs } from './jcs.ts';
import { checkAudience, checkFields, checkPrincipal, type MatrixPrincipal } from './principal.ts';
import { accept, type Denial, deny, type Verdict } from './reasons.ts';
import { checkRoom, type RoomRef } from './room.ts';
import { isPlainObject, type JsonValue } from './strict-json.ts';

export type { Denial };

export interface AgentRef {
  readonly name: string;
  readonly namespace: string;
}

export interface MatrixProjection {
  readonly agent: AgentRef;
  readonly allowed_classifications: AllowedClassifications;
  readonly audience: readonly MatrixPrincipal[];
  readonly delegation_id: string;
  readonly exp: number;
  readonly groups: readonly [];
  readonly iat: number;
  readonly kind: 'matrix' | 'bridged_matrix';
  readonly network?: string;
  readonly principal: string;
  readonly room: RoomRef;
  readonly v: 1;
}

export interface OAuthClient {
  readonly audience: string;
  readonly azp: string;
  readonly issuer: string;
  readonly policy_id: string;
}

export interface OAuthProjection {
  readonly agent: AgentRef;
  readonly allowed_classifications: AllowedClassifications;
  readonly client: OAuthClient;
  readonly delegation_id: string;
  readonly exp: number;
  readonly groups: readonly string[];
  readonly iat: number;
  readonly kind: 'oidc_client';
  readonly v: 1;
}

export type Projection = MatrixProjection | OAuthProjection;

export const MAX_LIFETIME_SECONDS = 600;
export const MAX_CLOCK_SKEW_SECONDS = 30;

const COMMON = ['agent', 'allowed_classifications', 'delegation_id', 'exp', 'groups', 'iat', 'kind', 'v'];
const MATRIX_ONLY = ['audience', 'network', 'principal', 'room'];
const OAUTH_ONLY = ['client'];

export function checkAgent(v: JsonValue | undefined, path = 'agent'): Denial | AgentRef {
  if (!isPlainObject(v)) return deny('agent', path);
  const bad = checkFields(v, ['name', 'namespace'], [], path);
  if (bad) return bad.reason === 'unknown_field' ? bad : deny('agent', bad.path);
  if (!isDns1123Label(v['name']) || !isDns1123Label(v['namespace'])) return deny('agent', path);
  return { name: v['name'], namespace: v['namespace'] };
}

function isUnixSeconds(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

/** Validate a parsed projection object (schema and invariants, not time or agent binding). */
export function validateProjection(obj: { [key: string]: JsonValue }): Verdict<Projection> {
  if (obj['v'] !== 1) return deny(Object.hasOwn(obj, 'v') ? 'version' : 'schema', 'v');
  const kind = obj['kind'];
  const isMatrix = kind === 'matrix' || kind === 'bridged_matrix';
  if (!isMatrix && kind !== 'oidc_client') return deny('kind', 'kind');
  // Kind separation first, so a mixed object reports mixed_kind rather than unknown_field.
  for (const key of isMatrix ? OAUTH_ONLY : MATRIX_ONLY) {
    if (Object.hasOwn(obj, key)) return deny('mixed_kind', key);
  }
  const bad = isMatrix
    ? checkFields(obj, [...COMMON, 'audience', 'principal', 'room'], ['network'], '$')
    : checkFields(obj, [...COMMON, 'client'], [], '$');
  if (bad) return bad;

  const agent = checkAgent(obj['agent']);
  if ('ok' in agent) return agent;
  if (!isAllowedClassifications(obj['allowed_classifications']))
    return deny('classifications', 'allowed_classifications');
  const classifications = [...obj['allowed_classifications']] as unknown as AllowedClassifications;
  if (!isHex64(obj['delegation_id'])) return deny('delegation_id', 'delegation_id');
  const iat = obj['iat'];
  const exp = obj['exp'];
  if (!isUnixSeconds(iat)) return deny('schema', 'iat');
  if (!isUnixSeconds(exp)) return deny('schema', 'exp');
  const lifetime = exp - iat;
  if (lifetime < 1 || lifetime > MAX_LIFETIME_SECONDS) return deny('lifetime', 'exp');

  if (isMatrix) {
    const callerObj: { [key: string]: JsonValue } = { kind, principal: obj['principal'] ?? null };
    if (Object.hasOwn(obj, 'network')) callerObj['network'] = obj['network'] ?? null;
    const caller = checkPrincipal(callerObj, '$');
    if ('ok' in caller) return caller;
    const groups = obj['groups'];
    if (!Array.isArray(groups) || groups.length !== 0) return deny('groups', 'groups');
    const audience = checkAudience(obj['audience'], caller, 'audience');
    if ('ok' in audience) return audience;
    const room = checkRoom(obj['room'], 'room');
    if ('ok' in room) return room;
    const p: MatrixProjection = {
      agent,
      allowed_classifications: classifications,
      audience,
      delegation_id: obj['delegation_id'],
      exp,
      groups: [],
      iat,
      kind: caller.kind,
      ...(caller.kind === 'bridged_matrix' ? { network: caller.network } : {}),
      principal: caller.principal,
      room,
      v: 1,
    };
    return accept(p);
  }

  const client = checkClient(obj['client']);
  if ('ok' in client) return client;
  const fault = partnerGroupsFault(obj['groups'], client.policy_id, true);
  if (fault) return deny('groups', fault.index === undefined ? 'groups' : `groups[${fault.index}]`);
  const groups = obj['groups'] as string[];
  return accept({
    agent,
    allowed_classifications: classifications,
    client,
    delegation_id: obj['delegation_id'],
    exp,
    groups,
    iat,
    kind: 'oidc_client',
    v: 1,
  });
}

export function checkClient(v: JsonValue | undefined, path = 'client'): Denial | OAuthClient {
  if (!isPlainObject(v)) return deny('client', path);
  const bad = checkFields(v, ['audience', 'azp', 'issuer', 'policy_id'], [], path);
  if (bad) return bad;
  const { audience, azp, issuer, policy_id } = v;
  // Exact-match identifiers: printable ASCII without spaces, so no look-alike or padded value can pass.
  if (!isTokenText(issuer, 512)) return deny('client', `${path}.issuer`);
  if (!isTokenText(audience, 255)) return deny('client', `${path}.audience`);
  if (!isTokenText(azp, 255)) return deny('client', `${path}.azp`);
  if (!isDns1123Label(policy_id)) return deny('client', `${path}.policy_id`);
  return { audience, azp, issuer, policy_id };
}

export function isTokenText(v: unknown, maxBytes: number): v is string {
  return typeof v === 'string' && v.length > 0 && v.length <= maxBytes && /^[\x21-\x7e]+$/.test(v);
}

export const MAX_PARTNER_GROUPS = 16;

/** What is wrong with a partner group list: the item at fault (undefined: the list itself) and why. */
export interface PartnerGroupsFault {
  readonly index?: number;
  readonly fault: 'count' | 'pattern' | 'policy' | 'duplicate' | 'order';
}

/**
 * The one partner-group rule: 1–16 unique `partner/<policyId>/<group>` strings, every one under the
 * given policy; with `sorted`, also in strictly ascending ASCII order (a projection's canonical
 * form). Undefined when valid, else the first fault. rules/partners.ts `checkPartnerGroups` reports
 * it for our resources and the projector's file.
 */
export function partnerGroupsFault(v: unknown, policyId: unknown, sorted: boolean): PartnerGroupsFault | undefined {
  if (!Array.isArray(v) || v.length < 1 || v.length > MAX_PARTNER_GROUPS) return { fault: 'count' };
  const seen = new Set<string>();
  for (let k = 0; k < v.length; k++) {
    const g: unknown = v[k];
    if (!isPartnerGroup(g)) return { index: k, fault: 'pattern' };
    if (partnerGroupPolicy(g) !== policyId) return { index: k, fault: 'policy' };
    if (seen.has(g)) return { index: k, fault: 'duplicate' };
    const prev = v[k - 1] as string | undefined;
    if (sorted && prev !== undefined && compareAscii(prev, g) >= 0) return { index: k, fault: 'order' };
    seen.add(g);
  }
  return undefined;
}

export interface DecodeOptions {
  /** Current Unix time in seconds. */
  readonly now: number;
  /**
   * The agents this consumer serves. A projection for any other agent is denied. An empty list denies
   * everything; 'any' skips the binding and exists only for offline inspection.
   */
  readonly agents: readonly AgentRef[] | 'any';
}

/** Time rules: reject iat more than 30 s in the future, and any use at or after exp. */
export function checkTime(p: { iat: number; exp: number }, now: number): Denial | undefined {
  if (p.iat > now + MAX_CLOCK_SKEW_SECONDS) return deny('not_yet_valid', 'iat');
  if (now >= p.exp) return deny('expired', 'exp');
  return undefined;
}

export function sameAgent(a: AgentRef, b: AgentRef): boolean {
  return a.name === b.name && a.namespace === b.namespace;
}

/** The full ADR 0017 projection check: carrier encoding, schema, invariants, agent binding, time. */
export function decodeProjection(header: HeaderInput, options: DecodeOptions): Verdict<Projection> {
  try {
    if (!Number.isFinite(options.now)) return deny('expired');
    const carrier = decodeCarrier(header);
    if (!carrier.ok) return carrier;
    const checked = validateProjection(carrier.value);
    if (!checked.ok) return checked;
    const p = checked.value;
    if (options.agents !== 'any' && !options.agents.some((a) => sameAgent(a, p.agent)))
      return deny('agent_mismatch', 'agent');
    const timeDenial = checkTime(p, options.now);
    if (timeDenial) return timeDenial;
    return accept(p);
  } catch {
    // Defence in depth: no input may crash a consumer; anything unexpected denies.
    return deny('json');
  }
}

/** Encode a projection canonically after validating it; invalid input is refused, never emitted. */
export function encodeProjection(p: Projection): Verdict<string> {
  let text: string;
  try {
    text = jcs(p);
  } catch {
    return deny('json');
  }
  // The text is our own JCS output, so JSON.parse sees no duplicates or lone surrogates; validating
  // what it yields checks exactly the object a consumer will decode.
  const checked = validateProjection(JSON.parse(text));
  if (!checked.ok) return checked;
  const value = encodeBase64url(new TextEncoder().encode(text));
  if (value.length > MAX_ENCODED_BYTES) return deny('oversized');
  return accept(value);
}

export function isMatrixProjection(p: Projection): p is MatrixProjection {
  return p.kind !== 'oidc_client';
}

export { isFullMxid };
