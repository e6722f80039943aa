/**
 * Kubernetes names and references as our resources carry them into rendered objects: DNS-1123
 * labels (namespaces, names, listeners, services), DNS-1123 subdomains (Secret and ModelConfig
 * names), Secret key references, ports and label maps (pod selectors of the rendered
 * NetworkPolicies). A value outside these would pass our CRDs and then be refused by the API server
 * when the reconciler applies the object it renders, so the CRD, the webhook and the render all
 * decide with this module. Pure.
 *
 * Lengths are counted in characters (Unicode code points), as kube-apiserver counts `maxLength`
 * (Go's rune count), not in UTF-16 units as JavaScript's `length` does (`charLength`).
 */
import { DNS1123_LABEL, isDns1123Label } from '../contract/index.ts';
import { DNS1123_LABEL_MAX } from './limits.ts';
import { at, type Problem, problem } from './result.ts';

/** Characters as kube-apiserver counts them for `maxLength`: code points. */
export function charLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

export const DNS1123_LABEL_PATTERN = DNS1123_LABEL.source;
export const DNS1123_SUBDOMAIN_MAX = 253;
export const DNS1123_SUBDOMAIN_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
const DNS1123_SUBDOMAIN = new RegExp(DNS1123_SUBDOMAIN_PATTERN);
export const SECRET_KEY_MAX = 253;
export const SECRET_KEY_PATTERN = '^[-._a-zA-Z0-9]+$';
const SECRET_KEY = new RegExp(SECRET_KEY_PATTERN);
export const PORT_RANGE = { min: 1, max: 65535 } as const;

export { isDns1123Label };

export function isDns1123Subdomain(v: unknown): v is string {
  return typeof v === 'string' && v.length <= DNS1123_SUBDOMAIN_MAX && DNS1123_SUBDOMAIN.test(v);
}

export function isPort(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= PORT_RANGE.min && v <= PORT_RANGE.max;
}

export const DNS1123_LABEL_SCHEMA = { pattern: DNS1123_LABEL_PATTERN, maxLength: DNS1123_LABEL_MAX } as const;
export const DNS1123_SUBDOMAIN_SCHEMA = {
  pattern: DNS1123_SUBDOMAIN_PATTERN,
  maxLength: DNS1123_SUBDOMAIN_MAX,
} as const;
export const SECRET_KEY_SCHEMA = { pattern: SECRET_KEY_PATTERN, maxLength: SECRET_KEY_MAX } as const;
export const PORT_SCHEMA = { minimum: PORT_RANGE.min, maximum: PORT_RANGE.max } as const;

/** A required (or, with `optional`, absent-or-valid) DNS-1123 label. */
export function checkLabel(v: unknown, path: string, optional = false): Problem[] {
  if (optional && v === undefined) return [];
  return isDns1123Label(v) ? [] : [problem('dns-label', path, 'must be a DNS-1123 label')];
}

export function checkSubdomain(v: unknown, path: string): Problem[] {
  return isDns1123Subdomain(v)
    ? []
    : [problem('dns-subdomain', path, `must be a DNS-1123 subdomain of at most ${DNS1123_SUBDOMAIN_MAX}`)];
}

export function checkPort(v: unknown, path: string): Problem[] {
  return v === undefined || isPort(v)
    ? []
    : [problem('port', path, `must be an integer ${PORT_RANGE.min}-${PORT_RANGE.max}`)];
}

/** `{name, key}` of a Secret: a DNS-1123 subdomain and a Secret data key. */
export function checkSecretKeyRef(v: unknown, path: string): Problem[] {
  const r = v as { name?: unknown; key?: unknown } | null;
  if (typeof r !== 'object' || r === null || Array.isArray(r))
    return [problem('secret-ref', path, 'must be an object with name and key')];
  const out: Problem[] = [];
  for (const k of Object.keys(r))
    if (k !== 'name' && k !== 'key') out.push(problem('schema', at(path, k), 'unknown field'));
  if (!isDns1123Subdomain(r.name))
    out.push(problem('secret-ref', at(path, 'name'), 'must be a DNS-1123 subdomain (a Secret name)'));
  if (typeof r.key !== 'string' || r.key.length > SECRET_KEY_MAX || !SECRET_KEY.test(r.key))
    out.push(problem('secret-ref', at(path, 'key'), 'must be a Secret data key ([-._a-zA-Z0-9]+)'));
  return out;
}

/**
 * Label maps (selectors of the rendered NetworkPolicies): at most 8 entries; keys are qualified
 * names (`[prefix/]name`, prefix a DNS-1123 subdomain, name up to 63 of `[A-Za-z0-9_.-]` starting and
 * ending alphanumeric), values up to 63 of the same characters (or empty), as kube-apiserver
 * validates labels (apimachinery `validation.IsQualifiedName`, `IsValidLabelValue`).
 */
export const MAX_LABELS = 8;
const NAME_PART = '([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]';
export const LABEL_VALUE_PATTERN = `^(${NAME_PART})?$`;
const LABEL_VALUE = new RegExp(LABEL_VALUE_PATTERN);
const LABEL_NAME = new RegExp(`^${NAME_PART}$`);

export function isLabelKey(k: string): boolean {
  const slash = k.indexOf('/');
  if (slash < 0) return LABEL_NAME.test(k);
  const prefix = k.slice(0, slash);
  return isDns1123Subdomain(prefix) && LABEL_NAME.test(k.slice(slash + 1));
}

export function checkLabelMap(v: unknown, path: string): Problem[] {
  if (v === undefined) return [];
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    return [problem('labels', path, 'must be a map of labels')];
  const entries = Object.entries(v);
  if (entries.length > MAX_LABELS) return [problem('labels', path, `must hold at most ${MAX_LABELS} labels`)];
  const out: Problem[] = [];
  entries.forEach(([k, val], i) => {
    // A key is the file's content, so a problem names its position, not the key.
    if (!isLabelKey(k)) out.push(problem('labels', `${path}{${i}}`, 'not a label key ([prefix/]name)'));
    else if (typeof val !== 'string' || !LABEL_VALUE.test(val))
      out.push(problem('labels', `${path}{${i}}`, 'not a label value (at most 63 of [A-Za-z0-9_.-])'));
  });
  return out;
}

/**
 * The CRD's part of the label rule: the value pattern and the count. Kubernetes structural schemas
 * cannot constrain map keys (no `propertyNames`), and a CEL rule over keys of unbounded length
 * would exceed the API server's cost budget, so keys are refused by the webhook and the render.
 */
export const LABEL_MAP_SCHEMA = {
  type: 'object',
  additionalProperties: { type: 'string', maxLength: DNS1123_LABEL_MAX, pattern: LABEL_VALUE_PATTERN },
  maxProperties: MAX_LABELS,
} as const;
