/**
 * The one way the servers read their configuration files (`projector.json`, `retrieval.json`): walk
 * the parsed JSON, collect every problem in the shape the rules report (rules/result.ts) instead of
 * stopping at the first, and build the configuration only when there is none. Each field is checked
 * with the rule of its family (the same the CRDs, the webhook and the render use); this module adds
 * only the file's shape: objects with known members, arrays, plain strings (file paths), booleans.
 *
 * Problems are content-free: a path (`bridge.bridgedOrigins[2].userIdRegex`), a fixed message and a
 * reason code. An unknown member is reported at its object's path, not by its name, which is the
 * file's content. Pure.
 */
import { isObject, type JsonRecord } from '../common/json-read.ts';
import { type Problem, type Problems, problem } from './result.ts';

export type ReadResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly problems: Problems };

type Obj = JsonRecord;

export { isObject };

const CONTROL = /[\x00-\x1f\x7f]/;

export class ConfigReader {
  readonly problems: Problem[] = [];

  /** Adds a rule's problems; true when it reported none. */
  add(ps: Problems): boolean {
    this.problems.push(...ps);
    return ps.length === 0;
  }

  report(p: Problem): void {
    this.problems.push(p);
  }

  /** An object with every `required` member and no member outside `required` and `optional`. */
  object(v: unknown, path: string, required: readonly string[], optional: readonly string[] = []): Obj | undefined {
    if (!isObject(v)) {
      this.report(problem(v === undefined ? 'required' : 'schema', path, 'must be an object'));
      return undefined;
    }
    if (Object.keys(v).some((k) => !required.includes(k) && !optional.includes(k)))
      this.report(problem('schema', path, 'has an unknown member'));
    for (const k of required)
      if (!Object.hasOwn(v, k)) this.report(problem('required', path === '' ? k : `${path}.${k}`, 'required'));
    return v;
  }

  /** An array of at most `max` items. */
  array(v: unknown, path: string, max: number): unknown[] | undefined {
    if (!Array.isArray(v)) {
      this.report(problem(v === undefined ? 'required' : 'schema', path, 'must be an array'));
      return undefined;
    }
    if (v.length > max) {
      this.report(problem('schema', path, `must hold at most ${max} entries`));
      return undefined;
    }
    return v;
  }

  /** A plain string (a file path, an origin): 1 to `max` characters, no control character, trimmed. */
  string(v: unknown, path: string, max: number): string | undefined {
    if (typeof v !== 'string' || v === '' || v.length > max || CONTROL.test(v) || v.trim() !== v) {
      this.report(problem('schema', path, `must be a string of 1-${max} characters without control characters`));
      return undefined;
    }
    return v;
  }

  boolean(v: unknown, path: string): boolean | undefined {
    if (typeof v === 'boolean') return v;
    this.report(problem('schema', path, 'must be a boolean'));
    return undefined;
  }

  /** `v` when `rule` reports nothing about it, else undefined (its problems are kept). */
  checked<T>(v: unknown, rule: (v: unknown, path: string) => Problems, path: string): T | undefined {
    return this.add(rule(v, path)) ? (v as T) : undefined;
  }

  /** The configuration `build` makes, when nothing was reported. */
  result<T>(build: () => T): ReadResult<T> {
    return this.problems.length === 0 ? { ok: true, value: build() } : { ok: false, problems: this.problems };
  }
}
