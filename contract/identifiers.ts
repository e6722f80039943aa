/**
 * Identifier grammars shared by the contract, the CRDs, the webhook and the database CHECKs.
 * Matrix grammars follow the client-server spec's user-ID and room-ID appendix. `isFullMxid` is a
 * subset of the origin knowledge store's `knowledge.is_full_mxid` (never accepting a string that
 * function refuses; proven by retrieval/db/mxid.test.ts against the origin's SQL): same localpart
 * `[a-z0-9._=/+-]` and 4–255 bytes, but stricter server names — ports 1–65535, DNS labels of 1–63
 * characters without a leading or trailing '-', no all-digit name that is not an IPv4 address, and
 * IPv6 literals in the RFC 3986 `IPv6address` form (which PostgreSQL's inet also accepts).
 */

const utf8 = new TextEncoder();

/** UTF-8 byte length without allocating (lone surrogates count as U+FFFD, as TextEncoder does). */
export function utf8Length(s: string): number {
  let n = 0;
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && k + 1 < s.length) {
      const d = s.charCodeAt(k + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        k++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const HEX64 = /^[0-9a-f]{64}$/;
export const PARTNER_GROUP = /^partner\/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * Unanchored sources of the grammar pieces, exported so the CRD patterns are built from the same text
 * (rules/names.ts); each is used below exactly as exported.
 */
export const LOCALPART_SOURCE = '[a-z0-9._=/+-]+';
export const IPV4_SOURCE = '(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)(\\.(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)){3}';
export const IPV6_BRACKETED_SOURCE = ipv6BracketedSource();
export const V12_ROOM_ID_SOURCE = '![A-Za-z0-9_-]{43}';
export const OPAQUE_SOURCE = '[\\x21-\\x39\\x3b-\\x7e]+'; // printable ASCII without ':'

const LOCALPART = new RegExp(`^${LOCALPART_SOURCE}$`);
const DNS_NAME = /^[A-Za-z0-9.-]{1,255}$/;
const IPV4 = new RegExp(`^${IPV4_SOURCE}$`);
const IPV6_BRACKETED = new RegExp(`^${IPV6_BRACKETED_SOURCE}$`);
const PORT = /^[0-9]{1,5}$/;
const V12_ROOM_ID = new RegExp(`^${V12_ROOM_ID_SOURCE}$`);
const OPAQUE = new RegExp(`^${OPAQUE_SOURCE}$`);
const EVENT_ID = /^\$[\x21-\x7e]+$/;

/**
 * `[` RFC 3986 IPv6address `]`, as one regular expression: eight 16-bit groups, or fewer around one
 * `::` that stands for at least one group, the last 32 bits optionally a dotted IPv4 address. The
 * same expression is spelled out in migration 0001 so the database and the contract agree.
 */
function ipv6BracketedSource(): string {
  const h16 = '[0-9A-Fa-f]{1,4}';
  const octet = '(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])';
  const ls32 = `(?:${h16}:${h16}|${octet}(?:\\.${octet}){3})`;
  const groups = (n: number) => (n === 0 ? '' : `(?:${h16}:){${n}}`);
  const head = (n: number) => (n === 0 ? `(?:${h16})?` : `(?:(?:${h16}:){0,${n}}${h16})?`);
  const forms = [
    `${groups(6)}${ls32}`,
    `::${groups(5)}${ls32}`,
    `${head(0)}::${groups(4)}${ls32}`,
    `${head(1)}::${groups(3)}${ls32}`,
    `${head(2)}::${groups(2)}${ls32}`,
    `${head(3)}::${h16}:${ls32}`,
    `${head(4)}::${ls32}`,
    `${head(5)}::${h16}`,
    `${head(6)}::`,
  ];
  return `\\[(?:${forms.join('|')})\\]`;
}

export function isDns1123Label(s: unknown): s is string {
  return typeof s === 'string' && DNS1123_LABEL.test(s);
}

export function isHex64(s: unknown): s is string {
  return typeof s === 'string' && HEX64.test(s);
}

/** Matrix server name: DNS name, IPv4 literal or bracketed IPv6 literal, optional port 1–65535. */
export function isServerName(s: string): boolean {
  let host = s;
  const bracketEnd = s.lastIndexOf(']');
  const colon = s.lastIndexOf(':');
  if (colon > bracketEnd) {
    const port = s.slice(colon + 1);
    if (!PORT.test(port)) return false;
    const n = Number(port);
    if (n < 1 || n > 65535) return false;
    host = s.slice(0, colon);
  }
  if (host.startsWith('[')) return IPV6_BRACKETED.test(host);
  if (/^[0-9.]+$/.test(host)) return IPV4.test(host);
  if (!DNS_NAME.test(host)) return false;
  // Labels must be non-empty and not start or end with '-'.
  return host.split('.').every((label) => label.length > 0 && label.length <= 63 && !/^-|-$/.test(label));
}

/** A complete Matrix user ID: `@localpart:server`, at most 255 UTF-8 bytes. A localpart alone fails. */
export function isFullMxid(s: unknown): s is string {
  if (typeof s !== 'string' || s.length < 4 || utf8Length(s) > 255 || s[0] !== '@') return false;
  const colon = s.indexOf(':');
  if (colon < 2) return false;
  return LOCALPART.test(s.slice(1, colon)) && isServerName(s.slice(colon + 1));
}

/** Room IDs: legacy `!opaque:server` or room-version-12 domainless `!<43 unpadded base64url>`. */
export function isRoomId(s: unknown): s is string {
  if (typeof s !== 'string' || s[0] !== '!' || utf8Length(s) > 255) return false;
  if (V12_ROOM_ID.test(s)) return true;
  const colon = s.indexOf(':');
  if (colon < 2) return false;
  return OPAQUE.test(s.slice(1, colon)) && isServerName(s.slice(colon + 1));
}

/** Event IDs: `$` and printable ASCII (v1–v2 `$opaque:server`, v3+ hash forms), at most 255 bytes. */
export function isEventId(s: unknown): s is string {
  return typeof s === 'string' && s.length >= 2 && s.length <= 255 && EVENT_ID.test(s);
}

export function isPartnerGroup(s: unknown): s is string {
  return typeof s === 'string' && PARTNER_GROUP.test(s);
}

/** The policy segment of `partner/<policy>/<group>`. */
export function partnerGroupPolicy(group: string): string {
  return group.split('/')[1] ?? '';
}

export const CLASSIFICATIONS = [
  'public',
  'approved_non_public',
  'restricted',
  'regulated',
  'secret',
  'authentication',
] as const;
export type Classification = (typeof CLASSIFICATIONS)[number];

export function isClassification(s: unknown): s is Classification {
  return typeof s === 'string' && (CLASSIFICATIONS as readonly string[]).includes(s);
}

/** The only two classification ceilings a projection or registry entry may carry (ADR 0017). */
export type AllowedClassifications = readonly ['public'] | readonly ['approved_non_public', 'public'];

export function isAllowedClassifications(v: unknown): v is AllowedClassifications {
  if (!Array.isArray(v)) return false;
  if (v.length === 1) return v[0] === 'public';
  return v.length === 2 && v[0] === 'approved_non_public' && v[1] === 'public';
}

/** Compare strings by their UTF-8 bytes (what the ADR's sort orders use). */
export function compareUtf8(a: string, b: string): number {
  if (a === b) return 0;
  // Below U+D800, UTF-16 code-unit order equals code-point order, which equals UTF-8 byte order.
  if (!HIGH_UNITS.test(a) && !HIGH_UNITS.test(b)) return a < b ? -1 : 1;
  return Buffer.compare(utf8.encode(a), utf8.encode(b));
}

const HIGH_UNITS = /[\ud800-\uffff]/;

/** Plain ASCII/byte order for ASCII-only strings such as partner groups. */
export function compareAscii(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
