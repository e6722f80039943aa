/**
 * A strict JSON (RFC 8259) parser for security-relevant documents. Unlike JSON.parse it rejects
 * duplicate member names (after unescaping), lone surrogates, numbers that overflow to ±Infinity,
 * any trailing data, and nesting beyond a bound. It never throws: the result is a value or an error code.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export type StrictJsonError = 'json' | 'duplicate_name';
export type StrictJsonResult =
  | { ok: true; value: JsonValue }
  | { ok: false; error: StrictJsonError; offset: number };

export interface StrictJsonOptions {
  /** Maximum nesting of arrays and objects (default 32). */
  readonly maxDepth?: number;
  /** Maximum input length in UTF-16 code units (default 1 MiB). */
  readonly maxLength?: number;
}

class ParseFailure {
  constructor(
    readonly error: StrictJsonError,
    readonly offset: number,
  ) {}
}

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);

export function parseStrictJson(text: string, options: StrictJsonOptions = {}): StrictJsonResult {
  const maxDepth = options.maxDepth ?? 32;
  const maxLength = options.maxLength ?? 1 << 20;
  if (typeof text !== 'string' || text.length > maxLength) return { ok: false, error: 'json', offset: 0 };
  let i = 0;
  const fail = (error: StrictJsonError = 'json'): never => {
    throw new ParseFailure(error, i);
  };
  const skipWs = () => {
    while (i < text.length && WS.has(text.charCodeAt(i))) i++;
  };

  const parseString = (): string => {
    // text[i] === '"'
    i++;
    let out = '';
    let start = i;
    for (;;) {
      if (i >= text.length) fail();
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        out += text.slice(start, i);
        i++;
        break;
      }
      if (c < 0x20) fail();
      if (c === 0x5c) {
        out += text.slice(start, i);
        i++;
        const e = text.charCodeAt(i);
        switch (e) {
          case 0x22:
            out += '"';
            break;
          case 0x5c:
            out += '\\';
            break;
          case 0x2f:
            out += '/';
            break;
          case 0x62:
            out += '\b';
            break;
          case 0x66:
            out += '\f';
            break;
          case 0x6e:
            out += '\n';
            break;
          case 0x72:
            out += '\r';
            break;
          case 0x74:
            out += '\t';
            break;
          case 0x75: {
            const hex = text.slice(i + 1, i + 5);
            if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail();
            out += String.fromCharCode(Number.parseInt(hex, 16));
            i += 4;
            break;
          }
          default:
            fail();
        }
        i++;
        start = i;
        continue;
      }
      i++;
    }
    if (!out.isWellFormed()) fail();
    return out;
  };

  const isDigit = (k: number) => {
    const c = text.charCodeAt(k);
    return c >= 0x30 && c <= 0x39;
  };
  const parseNumber = (): number => {
    const start = i;
    if (text.charCodeAt(i) === 0x2d) i++;
    if (text.charCodeAt(i) === 0x30) i++;
    else if (isDigit(i) && text.charCodeAt(i) !== 0x30) while (isDigit(i)) i++;
    else fail();
    if (text.charCodeAt(i) === 0x2e) {
      i++;
      if (!isDigit(i)) fail();
      while (isDigit(i)) i++;
    }
    const e = text.charCodeAt(i);
    if (e === 0x65 || e === 0x45) {
      i++;
      const sign = text.charCodeAt(i);
      if (sign === 0x2b || sign === 0x2d) i++;
      if (!isDigit(i)) fail();
      while (isDigit(i)) i++;
    }
    const n = Number(text.slice(start, i));
    if (!Number.isFinite(n)) fail();
    return n;
  };

  const parseValue = (depth: number): JsonValue => {
    skipWs();
    const c = text[i];
    if (c === '{') {
      if (depth >= maxDepth) fail();
      i++;
      const obj: { [key: string]: JsonValue } = {};
      skipWs();
      if (text[i] === '}') {
        i++;
        return obj;
      }
      for (;;) {
        skipWs();
        if (text[i] !== '"') fail();
        const key = parseString();
        if (Object.hasOwn(obj, key)) fail('duplicate_name');
        skipWs();
        if (text[i] !== ':') fail();
        i++;
        const v = parseValue(depth + 1);
        // defineProperty keeps "__proto__" an ordinary own member instead of a prototype change.
        if (key === '__proto__')
          Object.defineProperty(obj, key, { value: v, enumerable: true, writable: true, configurable: true });
        else obj[key] = v;
        skipWs();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return obj;
        }
        fail();
      }
    }
    if (c === '[') {
      if (depth >= maxDepth) fail();
      i++;
      const arr: JsonValue[] = [];
      skipWs();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(parseValue(depth + 1));
        skipWs();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return arr;
        }
        fail();
      }
    }
    if (c === '"') return parseString();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return parseNumber();
    if (text.startsWith('true', i)) {
      i += 4;
      return true;
    }
    if (text.startsWith('false', i)) {
      i += 5;
      return false;
    }
    if (text.startsWith('null', i)) {
      i += 4;
      return null;
    }
    return fail();
  };

  try {
    const value = parseValue(0);
    skipWs();
    if (i !== text.length) fail();
    return { ok: true, value };
  } catch (e) {
    if (e instanceof ParseFailure) return { ok: false, error: e.error, offset: e.offset };
    // RangeError from pathological input (e.g. stack) is still a parse failure, never a crash.
    return { ok: false, error: 'json', offset: i };
  }
}

/** Decode UTF-8 bytes strictly (no replacement characters, no BOM stripping). */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function decodeUtf8(bytes: Uint8Array): string | undefined {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return undefined;
  }
}

export function isPlainObject(v: unknown): v is { [key: string]: JsonValue } {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
