/**
 * Test-only: server-side apply field ownership for the API-server double, after the structured-merge-diff
 * rules kube-apiserver applies (https://kubernetes.io/docs/reference/using-api/server-side-apply/):
 * every field belongs to the managers that last set it; an apply that changes a field another manager
 * owns is a conflict unless forced (then ownership moves); a field an applier stops sending is removed
 * when no other manager owns it; an update (PUT, merge patch) takes the fields it changes without
 * conflict. Simplification, stated: every list is atomic (one field), as for lists without
 * `x-kubernetes-list-type: map|set`; maps are granular.
 */

type Obj = Record<string, any>;

export type Ownership = Map<string, { operation: 'Apply' | 'Update'; fields: Set<string> }>;

// A field path is its segments joined by NUL (label keys contain dots and slashes; NUL cannot occur).
const SEP = '\u0000';
const join = (...segs: string[]) => segs.join(SEP);
/** The path as kube-apiserver prints it in conflicts: `.metadata.labels.app.kubernetes.io/name`. */
export const display = (path: string) => `.${path.split(SEP).join('.')}`;

const isMap = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Field path → value for every leaf an object sets (metadata: labels, annotations, owners, finalizers). */
export function leaves(o: Obj): Map<string, unknown> {
  const out = new Map<string, unknown>();
  const walk = (v: unknown, at: string) => {
    if (isMap(v) && Object.keys(v).length > 0) for (const [k, x] of Object.entries(v)) walk(x, join(at, k));
    else out.set(at, v);
  };
  for (const [k, v] of Object.entries(o)) {
    if (k === 'apiVersion' || k === 'kind' || k === 'status') continue;
    if (k === 'metadata') {
      for (const m of ['labels', 'annotations'])
        for (const [lk, lv] of Object.entries((v as Obj)?.[m] ?? {})) out.set(join('metadata', m, lk), lv);
      for (const m of ['ownerReferences', 'finalizers'])
        if ((v as Obj)?.[m] !== undefined) out.set(join('metadata', m), (v as Obj)[m]);
      continue;
    }
    walk(v, k);
  }
  return out;
}

const related = (a: string, b: string) => a === b || a.startsWith(`${b}${SEP}`) || b.startsWith(`${a}${SEP}`);
const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

function segments(path: string): string[] {
  return path.split(SEP);
}

function setPath(o: Obj, path: string, value: unknown): void {
  const segs = segments(path);
  let cur = o;
  for (const s of segs.slice(0, -1)) {
    if (!isMap(cur[s])) cur[s] = {};
    cur = cur[s];
  }
  cur[segs[segs.length - 1] as string] = structuredClone(value);
}

function deletePath(o: Obj, path: string): void {
  const segs = segments(path);
  const chain: Obj[] = [o];
  for (const s of segs.slice(0, -1)) {
    const next = chain[chain.length - 1]?.[s];
    if (!isMap(next)) return;
    chain.push(next);
  }
  delete chain[chain.length - 1]?.[segs[segs.length - 1] as string];
  // Drop maps the removal emptied (an applier that stops sending a map's last key removes the map).
  for (let i = chain.length - 1; i > 0; i--)
    if (Object.keys(chain[i] as Obj).length === 0) delete chain[i - 1]?.[segs[i - 1] as string];
}

export interface Conflict {
  manager: string;
  field: string;
}

export interface ApplyOutcome {
  object: Obj;
  owners: Ownership;
  conflicts: Conflict[];
}

/** Server-side apply of `applied` by `manager` onto `existing` (undefined when creating). */
export function apply(
  existing: Obj | undefined,
  owners: Ownership,
  applied: Obj,
  manager: string,
  force: boolean,
): ApplyOutcome {
  const cur = existing ? leaves(existing) : new Map<string, unknown>();
  const want = leaves(applied);
  const next: Ownership = new Map([...owners].map(([m, o]) => [m, { ...o, fields: new Set(o.fields) }]));
  const conflicts: Conflict[] = [];
  for (const [path, value] of want)
    for (const [other, o] of next) {
      if (other === manager) continue;
      for (const f of o.fields) {
        if (!related(f, path)) continue;
        const changes = f === path ? !same(cur.get(f), value) : true;
        if (!changes) continue;
        if (force) o.fields.delete(f);
        else conflicts.push({ manager: other, field: display(f) });
      }
    }
  if (conflicts.length > 0) return { object: existing as Obj, owners, conflicts };
  const object: Obj = existing
    ? structuredClone(existing)
    : { apiVersion: applied['apiVersion'], kind: applied['kind'] };
  const held = new Set([...next].filter(([m]) => m !== manager).flatMap(([, o]) => [...o.fields]));
  for (const f of next.get(manager)?.fields ?? []) if (!want.has(f) && !held.has(f)) deletePath(object, f);
  object['metadata'] = { ...(object['metadata'] ?? {}), name: applied['metadata']?.name };
  if (applied['metadata']?.namespace) object['metadata'].namespace = applied['metadata'].namespace;
  for (const [path, value] of want) setPath(object, path, value);
  next.set(manager, { operation: 'Apply', fields: new Set(want.keys()) });
  for (const [m, o] of next) if (o.fields.size === 0) next.delete(m);
  return { object, owners: next, conflicts };
}

/** A non-apply write by `manager`: it takes every field it changed; removed fields lose their owners. */
export function update(before: Obj | undefined, after: Obj, owners: Ownership, manager: string): Ownership {
  const b = before ? leaves(before) : new Map<string, unknown>();
  const a = leaves(after);
  const next: Ownership = new Map([...owners].map(([m, o]) => [m, { ...o, fields: new Set(o.fields) }]));
  const changed = [...a].filter(([p, v]) => !b.has(p) || !same(b.get(p), v)).map(([p]) => p);
  for (const [, o] of next)
    for (const f of [...o.fields]) if (!a.has(f) || changed.some((c) => related(c, f))) o.fields.delete(f);
  if (changed.length > 0) {
    const mine = next.get(manager)?.fields ?? new Set<string>();
    for (const c of changed) mine.add(c);
    next.set(manager, { operation: next.get(manager)?.operation ?? 'Update', fields: mine });
  }
  for (const [m, o] of next) if (o.fields.size === 0) next.delete(m);
  return next;
}

/** `metadata.managedFields` in the FieldsV1 form (`f:<name>` keys), for clients that read it. */
export function managedFields(owners: Ownership, apiVersion: string): Obj[] {
  return [...owners].map(([manager, o]) => {
    const tree: Obj = {};
    for (const f of [...o.fields].sort()) {
      let cur = tree;
      for (const s of segments(f)) cur = cur[`f:${s}`] ??= {};
    }
    return { manager, operation: o.operation, apiVersion, fieldsType: 'FieldsV1', fieldsV1: tree };
  });
}
