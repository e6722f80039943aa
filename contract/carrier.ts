/**
 * The carrier encoding shared by X-Fgentic-Identity and X-Fgentic-Room-Context: exactly one header
 * value of unpadded base64url over UTF-8 RFC 8785 JCS, ≤ 8,192 encoded and ≤ 6,144 decoded bytes,
 * whose decoded bytes are already canonical.
 */
import { decodeBase64url, encodeBase64url } from './base64url.ts';
import { jcs, jcsBytes } from './jcs.ts';
import { accept, deny, type Verdict } from './reasons.ts';
import { decodeUtf8, isPlainObject, type JsonValue, parseStrictJson } from './strict-json.ts';

/**
 * The identity header's name, written here and nowhere else (rules/wire.ts re-exports it for the other
 * components): the lowercase form Node and agentgateway's CEL use, and the display form of kagent's
 * `allowedHeaders` and of documentation. HTTP header names are case-insensitive.
 */
export const IDENTITY_HEADER = 'x-fgentic-identity';
export const IDENTITY_HEADER_NAME = 'X-Fgentic-Identity';

export const MAX_ENCODED_BYTES = 8192;
export const MAX_DECODED_BYTES = 6144;

/** Header values as HTTP stacks present them: absent, one string, or a list of repeated values. */
export type HeaderInput = string | readonly string[] | undefined | null;

/** Reduce a header to its single value; missing and repeated values deny. */
export function singleHeaderValue(header: HeaderInput): Verdict<string> {
  if (header === undefined || header === null) return deny('missing');
  if (Array.isArray(header)) {
    if (header.length === 0) return deny('missing');
    if (header.length > 1) return deny('duplicate');
    return singleHeaderValue(header[0]);
  }
  if (typeof header !== 'string') return deny('missing');
  if (header.length === 0) return deny('missing');
  return accept(header);
}

/** Decode one carrier value to a JSON object, enforcing every encoding rule. */
export function decodeCarrier(header: HeaderInput): Verdict<{ [key: string]: JsonValue }> {
  const single = singleHeaderValue(header);
  if (!single.ok) return single;
  const value = single.value;
  // Length in UTF-16 units bounds the byte length from below; non-ASCII fails the alphabet anyway.
  if (value.length > MAX_ENCODED_BYTES) return deny('oversized');
  const bytes = decodeBase64url(value);
  if (!bytes) return deny('encoding');
  if (bytes.length > MAX_DECODED_BYTES) return deny('decoded_oversized');
  const text = decodeUtf8(bytes);
  if (text === undefined) return deny('utf8');
  const parsed = parseStrictJson(text, { maxDepth: 8, maxLength: MAX_DECODED_BYTES });
  if (!parsed.ok) return deny(parsed.error);
  if (!isPlainObject(parsed.value)) return deny('schema');
  let canonical: string;
  try {
    canonical = jcs(parsed.value);
  } catch {
    return deny('json');
  }
  if (canonical !== text) return deny('non_canonical');
  return accept(parsed.value);
}

/** Encode a JSON object as a carrier value (canonical by construction). */
export function encodeCarrier(value: unknown): string {
  return encodeBase64url(jcsBytes(value));
}
