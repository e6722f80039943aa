/** Typed Matrix principals: the audience entries of a projection and the `allowed_principals` rows. */
import { compareUtf8, isDns1123Label, isFullMxid } from './identifiers.ts';
import { type Denial, deny } from './reasons.ts';
import { isPlainObject, type JsonValue } from './strict-json.ts';

export type MatrixPrincipal =
  | { readonly kind: 'matrix'; readonly principal: string }
  | { readonly kind: 'bridged_matrix'; readonly network: string; readonly principal: string };

/** Fields allowed in an object, and which of them are required. Unknown fields deny. */
export function checkFields(
  obj: { [key: string]: JsonValue },
  required: readonly string[],
  optional: readonly string[],
  path: string,
): Denial | undefined {
  for (const key of Object.keys(obj)) {
    if (!required.includes(key) && !optional.includes(key)) return deny('unknown_field', `${path}.${key}`);
  }
  for (const key of required) {
    if (!Object.hasOwn(obj, key)) return deny('schema', `${path}.${key}`);
  }
  return undefined;
}

/** Validate one typed principal object (exactly kind + principal [+ network when bridged]). */
export function checkPrincipal(v: JsonValue | undefined, path: string): Denial | MatrixPrincipal {
  if (!isPlainObject(v)) return deny('schema', path);
  const kind = v['kind'];
  if (kind === 'matrix') {
    if (Object.hasOwn(v, 'network')) return deny('network', `${path}.network`);
    const bad = checkFields(v, ['kind', 'principal'], [], path);
    if (bad) return bad;
    if (!isFullMxid(v['principal'])) return deny('principal', `${path}.principal`);
    return { kind, principal: v['principal'] };
  }
  if (kind === 'bridged_matrix') {
    if (!Object.hasOwn(v, 'network')) return deny('network', `${path}.network`);
    const bad = checkFields(v, ['kind', 'network', 'principal'], [], path);
    if (bad) return bad;
    if (!isDns1123Label(v['network'])) return deny('network', `${path}.network`);
    if (!isFullMxid(v['principal'])) return deny('principal', `${path}.principal`);
    return { kind, network: v['network'], principal: v['principal'] };
  }
  return deny('kind', `${path}.kind`);
}

/** The ADR's audience order: UTF-8 bytes of (kind, network-or-empty, principal). */
export function comparePrincipals(
  a: { kind: string; network?: string; principal: string },
  b: { kind: string; network?: string; principal: string },
): number {
  return (
    compareUtf8(a.kind, b.kind) ||
    compareUtf8(a.network ?? '', b.network ?? '') ||
    compareUtf8(a.principal, b.principal)
  );
}

export function principalKey(p: { kind: string; network?: string; principal: string }): string {
  return `${p.kind}\u0000${p.network ?? ''}\u0000${p.principal}`;
}

export function samePrincipal(a: MatrixPrincipal, b: MatrixPrincipal): boolean {
  return principalKey(a) === principalKey(b);
}

/** Strip an object to the typed-principal shape (drops event_id etc.). */
export function toPrincipal(p: {
  kind: 'matrix' | 'bridged_matrix';
  network?: string;
  principal: string;
}): MatrixPrincipal {
  return p.kind === 'bridged_matrix'
    ? { kind: 'bridged_matrix', network: p.network ?? '', principal: p.principal }
    : { kind: 'matrix', principal: p.principal };
}

/**
 * Audience: 1–16 unique typed principals, strictly ascending in the ADR order, containing `caller`.
 */
export function checkAudience(
  v: JsonValue | undefined,
  caller: MatrixPrincipal,
  path: string,
): Denial | MatrixPrincipal[] {
  if (!Array.isArray(v) || v.length < 1 || v.length > 16) return deny('audience', path);
  const out: MatrixPrincipal[] = [];
  for (let k = 0; k < v.length; k++) {
    const p = checkPrincipal(v[k], `${path}[${k}]`);
    if ('ok' in p) return p;
    const prev = out[k - 1];
    if (prev && comparePrincipals(prev, p) >= 0) return deny('audience', `${path}[${k}]`);
    out.push(p);
  }
  if (!out.some((p) => samePrincipal(p, caller))) return deny('audience', path);
  return out;
}
