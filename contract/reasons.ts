/**
 * Stable denial reason codes. They appear in HTTP/MCP error bodies, metrics labels and audit logs,
 * so they never carry input content and never change meaning once published.
 */
export const REASONS = [
  // carrier (header) level
  'missing', // no header value
  'duplicate', // more than one header value
  'oversized', // encoded value longer than 8,192 bytes
  'encoding', // not unpadded, canonical base64url
  'decoded_oversized', // decoded JSON longer than 6,144 bytes
  'utf8', // decoded bytes are not valid UTF-8
  'json', // not strict JSON (syntax, lone surrogate, non-finite number, depth, trailing data)
  'duplicate_name', // an object repeats a member name
  'non_canonical', // decoded bytes differ from their RFC 8785 re-encoding
  // schema level
  'schema', // wrong type or missing field
  'unknown_field', // a field the schema does not define
  'version', // v is not 1
  'kind', // unknown identity kind
  'mixed_kind', // fields of another identity kind are present
  'principal', // not a complete MXID (e.g. localpart only)
  'network', // bridged network missing, forbidden or not a DNS-1123 label
  'audience', // audience size, order, uniqueness or caller membership
  'groups', // group list shape, order, namespace
  'classifications', // not exactly ["public"] or ["approved_non_public","public"]
  'room', // room object invariants
  'delegation_id', // not 64 lowercase hex
  'client', // OAuth client object
  'agent', // agent object shape
  'agent_mismatch', // agent is not one this consumer serves
  'lifetime', // exp - iat outside 1..600
  'expired', // now >= exp
  'not_yet_valid', // iat > now + 30
  'snapshot', // room-state snapshot invariants
] as const;

export type Reason = (typeof REASONS)[number];

/** A content-free denial: the reason code and, where useful, the JSON path of the offending field. */
export interface Denial {
  readonly ok: false;
  readonly reason: Reason;
  readonly path?: string;
}

export interface Accept<T> {
  readonly ok: true;
  readonly value: T;
}

export type Verdict<T> = Accept<T> | Denial;

export function deny(reason: Reason, path?: string): Denial {
  return path === undefined ? { ok: false, reason } : { ok: false, reason, path };
}

export function accept<T>(value: T): Accept<T> {
  return { ok: true, value };
}
