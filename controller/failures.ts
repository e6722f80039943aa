/**
 * The reconciler's failing writes, keyed as its backoff is: `apply <objKey>` and `delete <objKey>`,
 * each with its last error. A mirror is a Secret, the only Secret the controller writes. Pure.
 */
export const MIRROR_APPLY = 'apply v1|Secret|';

/** Failing applies of rendered objects (mirrors aside), sorted. */
export function applyFailures(failing: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const [k, v] of failing) if (k.startsWith('apply ') && !k.startsWith(MIRROR_APPLY)) out.push(v);
  return out.sort();
}

/** Failing applies by owner: a RetrievalAgent (`namespace/name`), or '' for the shared objects. */
export function ownFailures(
  failing: ReadonlyMap<string, string>,
  owners: ReadonlyMap<string, string>,
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [k, v] of failing) {
    if (!k.startsWith('apply ') || k.startsWith(MIRROR_APPLY)) continue;
    const owner = owners.get(k.slice('apply '.length)) ?? '';
    out.set(owner, [...(out.get(owner) ?? []), v]);
  }
  for (const l of out.values()) l.sort();
  return out;
}

/** Failing deletes, sorted. */
export function deleteFailures(failing: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const [k, v] of failing) if (k.startsWith('delete ')) out.push(v);
  return out.sort();
}
