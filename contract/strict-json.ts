/**
 * A strict JSON (RFC 8259) parser for security-relevant documents. Unlike JSON.parse it rejects
 * duplicate member names (after unescaping), lone surrogates, numbers that overflow to ±Infinity,
 * any trailing data, and nesting beyond a bound. It never throws: the result is a value or an error code.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export type StrictJsonError = 'json' | 'duplicate_name';
export type StrictJsonResult = { ok: true; value: JsonValue } | { ok: false; error: StrictJsonError; offset: number };

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

/** The one-character escapes after a backslash, by the character's code; `\u` is read apart. */
const ESCAPES = new Map([
  [0x22, '"'],
  [0x5c, '\\'],
  [0x2f, '/'],
  [0x62, '\b'],
  [0x66, '\f'],
  [0x6e, '\n'],
  [0x72, '\r'],
  [0x74, '\t'],
]);

/** One parse: the text, the position, and a reader per JSON production. */
class Parser {
  i = 0;

  constructor(
    readonly text: string,
    readonly maxDepth: number,
  ) {}

  fail(error: StrictJsonError = 'json'): never {
    throw new ParseFailure(error, this.i);
  }

  skipWs(): void {
    while (this.i < this.text.length && WS.has(this.text.charCodeAt(this.i))) this.i++;
  }

  isDigit(k: number): boolean {
    const c = this.text.charCodeAt(k);
    return c >= 0x30 && c <= 0x39;
  }

  /** At `"`; the string's value, unescaped and well-formed (no lone surrogate). */
  string(): string {
    const { text } = this;
    this.i++;
    let out = '';
    let start = this.i;
    for (;;) {
      if (this.i >= text.length) this.fail();
      const c = text.charCodeAt(this.i);
      if (c === 0x22) {
        out += text.slice(start, this.i);
        this.i++;
        break;
      }
      if (c < 0x20) this.fail();
      if (c === 0x5c) {
        out += text.slice(start, this.i);
        this.i++;
        out += this.escape();
        this.i++;
        start = this.i;
        continue;
      }
      this.i++;
    }
    if (!out.isWellFormed()) this.fail();
    return out;
  }

  /** After a backslash: the escaped character; leaves the position on the escape's last character. */
  escape(): string {
    const e = this.text.charCodeAt(this.i);
    const simple = ESCAPES.get(e);
    if (simple !== undefined) return simple;
    if (e !== 0x75) this.fail();
    const hex = this.text.slice(this.i + 1, this.i + 5);
    if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail();
    this.i += 4;
    return String.fromCharCode(Number.parseInt(hex, 16));
  }

  /** RFC 8259's number grammar exactly; a value that overflows to ±Infinity fails. */
  number(): number {
    const { text } = this;
    const start = this.i;
    if (text.charCodeAt(this.i) === 0x2d) this.i++;
    if (text.charCodeAt(this.i) === 0x30) this.i++;
    else if (this.isDigit(this.i) && text.charCodeAt(this.i) !== 0x30) while (this.isDigit(this.i)) this.i++;
    else this.fail();
    if (text.charCodeAt(this.i) === 0x2e) {
      this.i++;
      if (!this.isDigit(this.i)) this.fail();
      while (this.isDigit(this.i)) this.i++;
    }
    const e = text.charCodeAt(this.i);
    if (e === 0x65 || e === 0x45) {
      this.i++;
      const sign = text.charCodeAt(this.i);
      if (sign === 0x2b || sign === 0x2d) this.i++;
      if (!this.isDigit(this.i)) this.fail();
      while (this.isDigit(this.i)) this.i++;
    }
    const n = Number(text.slice(start, this.i));
    if (!Number.isFinite(n)) this.fail();
    return n;
  }

  /** At `{`: the members, each name once. */
  object(depth: number): { [key: string]: JsonValue } {
    if (depth >= this.maxDepth) this.fail();
    this.i++;
    const obj: { [key: string]: JsonValue } = {};
    this.skipWs();
    if (this.text[this.i] === '}') {
      this.i++;
      return obj;
    }
    for (;;) {
      this.skipWs();
      if (this.text[this.i] !== '"') this.fail();
      const key = this.string();
      if (Object.hasOwn(obj, key)) this.fail('duplicate_name');
      this.skipWs();
      if (this.text[this.i] !== ':') this.fail();
      this.i++;
      const v = this.value(depth + 1);
      // defineProperty keeps "__proto__" an ordinary own member instead of a prototype change.
      if (key === '__proto__')
        Object.defineProperty(obj, key, { value: v, enumerable: true, writable: true, configurable: true });
      else obj[key] = v;
      if (this.closes('}')) return obj;
    }
  }

  /** At `[`: the elements. */
  array(depth: number): JsonValue[] {
    if (depth >= this.maxDepth) this.fail();
    this.i++;
    const arr: JsonValue[] = [];
    this.skipWs();
    if (this.text[this.i] === ']') {
      this.i++;
      return arr;
    }
    for (;;) {
      arr.push(this.value(depth + 1));
      if (this.closes(']')) return arr;
    }
  }

  /** After a member or an element: true past the closing `close`, false past a comma; anything else fails. */
  closes(close: '}' | ']'): boolean {
    this.skipWs();
    if (this.text[this.i] === ',') {
      this.i++;
      return false;
    }
    if (this.text[this.i] === close) {
      this.i++;
      return true;
    }
    return this.fail();
  }

  value(depth: number): JsonValue {
    this.skipWs();
    const c = this.text[this.i];
    if (c === '{') return this.object(depth);
    if (c === '[') return this.array(depth);
    if (c === '"') return this.string();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number();
    for (const [word, v] of LITERALS)
      if (this.text.startsWith(word, this.i)) {
        this.i += word.length;
        return v;
      }
    return this.fail();
  }
}

const LITERALS: readonly (readonly [string, JsonValue])[] = [
  ['true', true],
  ['false', false],
  ['null', null],
];

export function parseStrictJson(text: string, options: StrictJsonOptions = {}): StrictJsonResult {
  const maxDepth = options.maxDepth ?? 32;
  const maxLength = options.maxLength ?? 1 << 20;
  if (typeof text !== 'string' || text.length > maxLength) return { ok: false, error: 'json', offset: 0 };
  const p = new Parser(text, maxDepth);
  try {
    const value = p.value(0);
    p.skipWs();
    if (p.i !== text.length) p.fail();
    return { ok: true, value };
  } catch (e) {
    if (e instanceof ParseFailure) return { ok: false, error: e.error, offset: e.offset };
    // RangeError from pathological input (e.g. stack) is still a parse failure, never a crash.
    return { ok: false, error: 'json', offset: p.i };
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
