/** RFC 8785 JSON Canonicalization Scheme, via the `canonicalize` package. */

import { createHash } from 'node:crypto';
import canonicalizeImpl from 'canonicalize';

const encoder = new TextEncoder();

/** JCS text of a JSON value. Throws on values JSON cannot represent (NaN, lone surrogates, BigInt). */
export function jcs(value: unknown): string {
  const out = (canonicalizeImpl as unknown as (v: unknown) => string | undefined)(value);
  if (typeof out !== 'string') throw new TypeError('value has no JSON representation');
  return out;
}

export function jcsBytes(value: unknown): Uint8Array {
  return encoder.encode(jcs(value));
}

/** Lowercase hex SHA-256 of the JCS bytes (no trailing newline). */
export function jcsSha256(value: unknown): string {
  return createHash('sha256').update(jcsBytes(value)).digest('hex');
}
