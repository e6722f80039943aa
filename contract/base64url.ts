/**
 * Unpadded base64url (RFC 4648 §5) with a canonical-only decoder: no padding, no '+' or '/',
 * no whitespace, and the unused trailing bits of the last character must be zero, so each byte
 * string has exactly one accepted encoding.
 */

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const VALUE = new Int16Array(128).fill(-1);
for (let k = 0; k < ALPHABET.length; k++) VALUE[ALPHABET.charCodeAt(k)] = k;

export function encodeBase64url(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64url');
}

export function decodeBase64url(text: string): Uint8Array | undefined {
  if (typeof text !== 'string') return undefined;
  const n = text.length;
  if (n % 4 === 1) return undefined;
  for (let k = 0; k < n; k++) {
    const c = text.charCodeAt(k);
    if (c >= 128 || VALUE[c] === -1) return undefined;
  }
  if (n > 0) {
    const last = VALUE[text.charCodeAt(n - 1)]!;
    if (n % 4 === 2 && (last & 0x0f) !== 0) return undefined;
    if (n % 4 === 3 && (last & 0x03) !== 0) return undefined;
  }
  const buf = Buffer.from(text, 'base64url');
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}
