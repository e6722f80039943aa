/**
 * Pure classification of a failed search by Postgres SQLSTATE, so that bad input is never counted as
 * a database outage and an outage is never blamed on the caller.
 *
 * The only caller-controlled value that reaches SQL is the query text, and only in hybrid mode (the
 * keyword query); the embedding is computed here and validated before it is bound. So a data
 * exception (SQLSTATE class 22) or a program limit (class 54) in hybrid mode is a query the database
 * cannot process: the call is refused as invalid arguments. Everything else — connection failures
 * without a SQLSTATE, class 08, 53, 57, 58, XX, a missing relation (42), and class 22/54 in vector
 * mode, which no input can cause — is a database fault: `database_unavailable`.
 */
import type { SearchMode } from '../search.ts';

export type SearchFailure =
  | { readonly kind: 'input'; readonly sqlstate: string }
  | { readonly kind: 'database'; readonly sqlstate: string | undefined };

const SQLSTATE = /^[0-9A-Z]{5}$/;

/** The SQLSTATE of a `pg` error, if the error carries a well-formed one. */
export function sqlstateOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && SQLSTATE.test(code) ? code : undefined;
}

export function classifySearchError(err: unknown, mode: SearchMode): SearchFailure {
  const sqlstate = sqlstateOf(err);
  if (sqlstate !== undefined && mode === 'hybrid') {
    const cls = sqlstate.slice(0, 2);
    if (cls === '22' || cls === '54') return { kind: 'input', sqlstate };
  }
  return { kind: 'database', sqlstate };
}
