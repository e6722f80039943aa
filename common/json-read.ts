/**
 * Small typed readers for JSON that came from outside (a request body, a manifest, a file): each
 * answers the value when it has the asked type and `undefined` otherwise, so callers fail closed
 * without casting. Pure.
 */

export type JsonRecord = Record<string, unknown>;

/** A JSON object (not null, not an array). */
export function isObject(v: unknown): v is JsonRecord {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `v` when it is an object, else undefined. */
export function asObject(v: unknown): JsonRecord | undefined {
  return isObject(v) ? v : undefined;
}

/** The own member `key` of an object (never an inherited one such as `__proto__`). */
export function field(o: unknown, key: string): unknown {
  return isObject(o) && Object.hasOwn(o, key) ? o[key] : undefined;
}

/** The member `key` when it is a string. */
export function stringField(o: unknown, key: string): string | undefined {
  const v = field(o, key);
  return typeof v === 'string' ? v : undefined;
}

/** The member `key` when it is an object. */
export function objectField(o: unknown, key: string): JsonRecord | undefined {
  return asObject(field(o, key));
}

/** `v` when it is an array, else undefined. */
export function asArray(v: unknown): unknown[] | undefined {
  return Array.isArray(v) ? v : undefined;
}

/** The strings of `v` when it is an array (other items dropped), else an empty list. */
export function stringsOf(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}
