/**
 * The one shape in which a rule reports: a list of problems, empty when the value is valid. Each
 * problem has a stable reason code (rules/reasons.ts: a bounded set, safe as a metric label), the
 * field path and a content-free message. The admission webhook turns problems into denials, the reconciler into
 * `Conflict` conditions, the projector's loader into a load error. Thrown errors stay at the I/O edges
 * (reading files, parsing YAML), where there is no rule to report.
 */

import type { RuleReason } from './reasons.ts';

export interface Problem {
  /** One of rules/reasons.ts. */
  readonly reason: RuleReason;
  readonly path: string;
  readonly message: string;
}

/** Valid when empty. */
export type Problems = readonly Problem[];

export function problem(reason: RuleReason, path: string, message: string): Problem {
  return { reason, path, message };
}

/** `a.b`, or `b` alone when the base path is empty. */
export function at(base: string, field: string): string {
  return base === '' ? field : `${base}.${field}`;
}

/** One line for logs and condition messages: `path: message [reason]`. */
export function formatProblem(p: { readonly reason: string; readonly path: string; readonly message: string }): string {
  return p.path ? `${p.path}: ${p.message} [${p.reason}]` : `${p.message} [${p.reason}]`;
}

/** Several problems on one line (a load error, a condition): the first few, and how many more. */
export function formatProblems(ps: Problems, most = 3): string {
  const shown = ps.slice(0, most).map(formatProblem).join('; ');
  return ps.length > most ? `${shown}; and ${ps.length - most} more` : shown;
}

/** A guard for one of a fixed list of values (an enum field). */
export function oneOf<T extends readonly unknown[]>(values: T): (v: unknown) => v is T[number] {
  return (v: unknown): v is T[number] => values.includes(v);
}

/** An integer within inclusive bounds (a bounded number field). */
export function isIntegerIn(v: unknown, b: { readonly min: number; readonly max: number }): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= b.min && v <= b.max;
}
