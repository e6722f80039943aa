/**
 * The one shape in which a rule reports: a list of problems, empty when the value is valid. Each
 * problem has a stable reason code (a bounded set, safe as a metric label), the field path and a
 * content-free message. The admission webhook turns problems into denials, the reconciler into
 * `Conflict` conditions, the projector's loader into a load error. Thrown errors stay at the I/O edges
 * (reading files, parsing YAML), where there is no rule to report.
 */

export interface Problem {
  readonly reason: string;
  readonly path: string;
  readonly message: string;
}

/** Valid when empty. */
export type Problems = readonly Problem[];

export function problem(reason: string, path: string, message: string): Problem {
  return { reason, path, message };
}

/** `a.b`, or `b` alone when the base path is empty. */
export function at(base: string, field: string): string {
  return base === '' ? field : `${base}.${field}`;
}

/** One line for logs and condition messages: `path: message [reason]`. */
export function formatProblem(p: Problem): string {
  return p.path ? `${p.path}: ${p.message} [${p.reason}]` : `${p.message} [${p.reason}]`;
}
