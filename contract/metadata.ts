/**
 * Chunk ACL metadata of the origin knowledge store v1 (exactly what its `is_valid_metadata` CHECK
 * admits): source, classification, allowed_principals (typed Matrix principals), allowed_groups
 * (partner groups), with at least one principal or group.
 */
import { type Classification, isClassification, isPartnerGroup, utf8Length } from './identifiers.ts';
import { checkFields, checkPrincipal, type MatrixPrincipal, principalKey } from './principal.ts';
import { accept, deny, type Verdict } from './reasons.ts';
import { isPlainObject, type JsonValue } from './strict-json.ts';

export interface ChunkSource {
  readonly id: string;
  readonly title?: string;
  readonly locator?: string;
  readonly revision?: string;
  readonly location?: string;
}

export interface ChunkMetadata {
  readonly source: ChunkSource;
  readonly classification: Classification;
  readonly allowed_principals: readonly MatrixPrincipal[];
  readonly allowed_groups: readonly string[];
}

const SOURCE_LIMITS: Record<string, number> = {
  id: 512,
  title: 512,
  locator: 2048,
  revision: 255,
  location: 512,
};

/** Trimmed, non-empty, no control characters, bounded: the origin's `is_bounded_clean_text`. */
export function isBoundedCleanText(s: unknown, maxBytes: number): s is string {
  return (
    typeof s === 'string' &&
    s.length > 0 &&
    s.trim() === s &&
    !/[\u0000-\u001f\u007f-\u009f]/.test(s) &&
    utf8Length(s) <= maxBytes
  );
}

export function validateChunkMetadata(v: unknown): Verdict<ChunkMetadata> {
  if (!isPlainObject(v)) return deny('schema', '$');
  const obj = v as { [key: string]: JsonValue };
  const bad = checkFields(obj, ['allowed_groups', 'allowed_principals', 'classification', 'source'], [], '$');
  if (bad) return bad;
  const src = obj['source'];
  if (!isPlainObject(src)) return deny('schema', 'source');
  const badSrc = checkFields(src, ['id'], ['title', 'locator', 'revision', 'location'], 'source');
  if (badSrc) return badSrc;
  for (const [key, limit] of Object.entries(SOURCE_LIMITS)) {
    if (Object.hasOwn(src, key) && !isBoundedCleanText(src[key], limit)) return deny('schema', `source.${key}`);
  }
  if (!isClassification(obj['classification'])) return deny('classifications', 'classification');
  const principalsIn = obj['allowed_principals'];
  if (!Array.isArray(principalsIn) || principalsIn.length > 64) return deny('schema', 'allowed_principals');
  const principals: MatrixPrincipal[] = [];
  const seen = new Set<string>();
  for (let k = 0; k < principalsIn.length; k++) {
    const p = checkPrincipal(principalsIn[k], `allowed_principals[${k}]`);
    if ('ok' in p) return p;
    const key = principalKey(p);
    if (seen.has(key)) return deny('schema', `allowed_principals[${k}]`);
    seen.add(key);
    principals.push(p);
  }
  const groupsIn = obj['allowed_groups'];
  if (!Array.isArray(groupsIn) || groupsIn.length > 64) return deny('schema', 'allowed_groups');
  const groups: string[] = [];
  for (let k = 0; k < groupsIn.length; k++) {
    const g = groupsIn[k];
    if (!isPartnerGroup(g) || groups.includes(g)) return deny('groups', `allowed_groups[${k}]`);
    groups.push(g);
  }
  if (principals.length + groups.length === 0) return deny('schema', 'allowed_principals');
  const source: ChunkSource = Object.fromEntries(Object.entries(src)) as unknown as ChunkSource;
  return accept({
    allowed_groups: groups,
    allowed_principals: principals,
    classification: obj['classification'],
    source,
  });
}
