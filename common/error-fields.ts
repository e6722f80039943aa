/**
 * What a log line may say about a caught error: its class and its code, never its message. Messages
 * carry content (a JSON parse error quotes the input, a Postgres error can quote a value, a fetch
 * error names a URL with a token in it); the class and the code (an errno name such as `EACCES`, a
 * Node code such as `ERR_INVALID_URL`, or a Postgres SQLSTATE such as `22P02`) are enough to tell
 * faults apart and hold nothing the caller sent. Pure: no I/O.
 */

export type ErrorFields = {
  /** The error's class (`TypeError`, `DatabaseError`, …), or `non-error` when something else was thrown. */
  readonly error: string;
  /** errno name, Node error code or SQLSTATE; present only when it is a plain code token. */
  readonly code?: string;
};

const NAME = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/;
const CODE = /^[A-Z0-9_]{1,64}$/;

export function errorFields(err: unknown): ErrorFields {
  if (typeof err !== 'object' || err === null) return { error: 'non-error' };
  const ctor = (err as { constructor?: { name?: unknown } }).constructor?.name;
  const name = err instanceof Error ? err.name : ctor;
  // A name or code that is not a plain token could itself be content: say only that there was one.
  const error = typeof name === 'string' && NAME.test(name) ? name : 'Error';
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && CODE.test(code) ? { error, code } : { error };
}
