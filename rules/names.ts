/**
 * Matrix names as the CRDs check them, built from the contract's own grammar pieces
 * (`contract/identifiers.ts`) so the schema and the validators cannot drift apart; a property test
 * (rules/names.test.ts) runs both on the same generated strings.
 *
 * A Kubernetes `pattern` is an RE2 expression, which has no lookahead, so one part of the server-name
 * rule is a CEL rule beside the pattern: a host made only of digits and dots must be an IPv4 address.
 */
import {
  IPV4_SOURCE,
  IPV6_BRACKETED_SOURCE,
  isFullMxid,
  isRoomId,
  isServerName,
  LOCALPART_SOURCE,
  OPAQUE_SOURCE,
  V12_ROOM_ID_SOURCE,
} from '../contract/index.ts';

/** Every Matrix name the CRDs carry is at most 255 bytes; the patterns admit ASCII only, so characters. */
export const MATRIX_NAME_MAX = 255;

const DNS_LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const DNS_HOST = `${DNS_LABEL}(?:\\.${DNS_LABEL})*`;
/** 1-65535 in at most five digits, leading zeros allowed (what `isServerName` accepts). */
const PORT =
  '(?:0{0,4}[1-9]|0{0,3}[1-9][0-9]|0{0,2}[1-9][0-9]{2}|0?[1-9][0-9]{3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])';
const SERVER = `(?:${DNS_HOST}|${IPV4_SOURCE}|${IPV6_BRACKETED_SOURCE})(?::${PORT})?`;

const MXID_PREFIX = `@${LOCALPART_SOURCE}:`;
const ROOM_PREFIX = `!${OPAQUE_SOURCE}:`;

export const SERVER_NAME_PATTERN = `^${SERVER}$`;
export const MXID_PATTERN = `^${MXID_PREFIX}${SERVER}$`;
export const ROOM_ID_PATTERN = `^(?:${V12_ROOM_ID_SOURCE}|${ROOM_PREFIX}${SERVER})$`;

/** CEL single-quoted string literal. */
export function celString(s: string): string {
  return `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** The digits-and-dots rule for a field whose server name follows `prefix`. */
function numericHostRule(prefix: string, what: string) {
  const numeric = `^${prefix}[0-9.]+(?::[0-9]+)?$`;
  const ipv4 = `^${prefix}${IPV4_SOURCE}(?::${PORT})?$`;
  return {
    rule: `!self.matches(${celString(numeric)}) || self.matches(${celString(ipv4)})`,
    message: `${what}: a server name of digits and dots must be an IPv4 address`,
  };
}

export const SERVER_NAME_SCHEMA = {
  pattern: SERVER_NAME_PATTERN,
  maxLength: MATRIX_NAME_MAX,
  'x-kubernetes-validations': [numericHostRule('', 'server name')],
} as const;

export const ROOM_ID_SCHEMA = {
  pattern: ROOM_ID_PATTERN,
  maxLength: MATRIX_NAME_MAX,
  'x-kubernetes-validations': [numericHostRule(ROOM_PREFIX, 'room ID')],
} as const;

export const MXID_SCHEMA = {
  pattern: MXID_PATTERN,
  maxLength: MATRIX_NAME_MAX,
  'x-kubernetes-validations': [numericHostRule(MXID_PREFIX, 'user ID')],
} as const;

/** The validators these schemas stand for (re-exported so a caller needs one import). */
export { isFullMxid, isRoomId, isServerName };
