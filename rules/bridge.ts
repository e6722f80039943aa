/**
 * The bridge's MXID regexes (RetrievalPlatform `spec.bridge.serviceUserRegex` and each
 * `bridgedOrigins[].userIdRegex`): one rule for the CRD, the webhook, the render and the projector's
 * loader, which compiles them. A regex the loader refused would make the projector deny every request,
 * so each layer refuses exactly what the loader refuses:
 *
 * - 1 to 1,024 printable ASCII characters (MXIDs are ASCII; this also makes the CRD's character count
 *   and JavaScript's `length` the same number);
 * - anchored: `^` first, `$` last, and that `$` not escaped;
 * - no backreferences, lookaround or named groups, and no quantified group that itself contains a
 *   quantifier (the catastrophic-backtracking shape);
 * - compiles as a JavaScript regex without the `u` flag (so the identity escapes operators write,
 *   such as `\-`, stay valid).
 *
 * The CRD carries the first three as a pattern and two CEL rules generated from the sources below;
 * they use only explicit ASCII classes, so RE2 (kube-apiserver) and JavaScript read them alike. Whether
 * a regex compiles is beyond the CRD: the webhook and the render check it. Pure.
 */
import { MAX_BRIDGED_ORIGINS } from './limits.ts';
import { celString } from './names.ts';
import { at, type Problem, problem } from './result.ts';

export const BRIDGE_REGEX_MAX = 1024;

/** Printable ASCII, `^` first, `$` last, and the character before that `$` not a backslash. */
export const BRIDGE_REGEX_PATTERN = '^\\^(?:[\\x20-\\x7e]*[\\x20-\\x5b\\x5d-\\x7e])?\\$$';
/** A backreference (`\1`, `\k<`), lookaround or a named group (`(?=`, `(?!`, `(?<`). */
const BACKREF_OR_LOOKAROUND = '\\\\[1-9]|\\\\k<|\\(\\?[=!<]';
/** A group holding a quantifier, itself quantified (spaces between allowed). */
const NESTED_QUANTIFIER = '\\([^()]*[+*}][^()]*\\) *[+*{]';

const ANCHORED = new RegExp(BRIDGE_REGEX_PATTERN);
const BACKREF = new RegExp(BACKREF_OR_LOOKAROUND);
const NESTED = new RegExp(NESTED_QUANTIFIER);

export const BRIDGE_REGEX_SCHEMA = {
  minLength: 2,
  maxLength: BRIDGE_REGEX_MAX,
  pattern: BRIDGE_REGEX_PATTERN,
  'x-kubernetes-validations': [
    {
      rule: `!self.matches(${celString(BACKREF_OR_LOOKAROUND)})`,
      message: 'the regex must not use backreferences, lookaround or named groups',
    },
    {
      rule: `!self.matches(${celString(NESTED_QUANTIFIER)})`,
      message: 'the regex must not quantify a group that holds a quantifier',
    },
  ],
} as const;

/** Why `v` is not a usable bridge regex, or undefined when it is. */
export function bridgeRegexFault(v: unknown): string | undefined {
  if (typeof v !== 'string' || v.length < 2 || v.length > BRIDGE_REGEX_MAX)
    return `must be 2-${BRIDGE_REGEX_MAX} characters`;
  if (!ANCHORED.test(v)) return 'must be printable ASCII, anchored ^…$';
  if (BACKREF.test(v)) return 'uses backreferences, lookaround or named groups';
  if (NESTED.test(v)) return 'has nested quantifiers';
  try {
    new RegExp(v);
  } catch (e) {
    if (e instanceof SyntaxError) return 'does not compile';
    throw e;
  }
  return undefined;
}

/** The compiled regex, or why it is refused. */
export function compileBridgeRegex(v: unknown): RegExp | { readonly fault: string } {
  const fault = bridgeRegexFault(v);
  return fault === undefined ? new RegExp(v as string) : { fault };
}

/** The bridge's regexes and bridged networks (count, unique network labels are the CRD's list-map). */
export function checkBridgeRegexes(bridge: unknown, path: string): Problem[] {
  const b = (bridge ?? {}) as { serviceUserRegex?: unknown; bridgedOrigins?: unknown };
  const out: Problem[] = [];
  const serviceFault = bridgeRegexFault(b.serviceUserRegex);
  if (serviceFault) out.push(problem('bridge-regex', at(path, 'serviceUserRegex'), serviceFault));
  const origins = b.bridgedOrigins;
  if (origins === undefined) return out;
  if (!Array.isArray(origins) || origins.length > MAX_BRIDGED_ORIGINS)
    return [
      ...out,
      problem('bridged-origins', at(path, 'bridgedOrigins'), `must list at most ${MAX_BRIDGED_ORIGINS} networks`),
    ];
  origins.forEach((o: { userIdRegex?: unknown } | null, i) => {
    const fault = bridgeRegexFault(o?.userIdRegex);
    if (fault) out.push(problem('bridge-regex', `${at(path, 'bridgedOrigins')}[${i}].userIdRegex`, fault));
  });
  return out;
}
