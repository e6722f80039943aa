/**
 * Helpers shared by the kagent rules (kagent-agent.ts), the reproduction of kagent's schema
 * (kagent-schema.ts) and the advisory warnings (kagent-advice.ts). Pure.
 */
import {
  type AdmissionInput,
  type ClusterView,
  type Findings,
  field,
  isObject,
  type Json,
  type JsonObject,
  type KubeObject,
  meta,
  type RulesConfig,
  str,
} from './types.ts';

export interface Ctx {
  f: Findings;
  cfg: RulesConfig;
  view: ClusterView;
  ns: string;
  name: string;
}

/** Deterministic serialisation with sorted keys, for comparing two objects. */
function stable(v: Json | undefined): string {
  if (v === undefined) return 'undefined';
  if (Array.isArray(v)) return `[${v.map(stable).join(',')}]`;
  if (isObject(v))
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable(v[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

const BOOKKEEPING_META = new Set([
  'finalizers',
  'managedFields',
  'resourceVersion',
  'generation',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
]);

/**
 * An UPDATE that only removes finalizers (or touches server-maintained metadata/status) changes nothing
 * the agent runtime reads; anyone with RBAC for it may do it, so a stuck deletion can be finished.
 */
export function onlyFinalizerRemoval(oldObj: KubeObject | null, newObj: KubeObject | null): boolean {
  if (!oldObj || !newObj) return false;
  const strip = (o: KubeObject): JsonObject => {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(o)) {
      if (k === 'status') continue;
      if (k === 'metadata' && isObject(v)) {
        const m: JsonObject = {};
        for (const [mk, mv] of Object.entries(v)) if (!BOOKKEEPING_META.has(mk)) m[mk] = mv;
        out[k] = m;
      } else out[k] = v;
    }
    return out;
  };
  if (stable(strip(oldObj)) !== stable(strip(newObj))) return false;
  const fin = (o: KubeObject): Json[] => {
    const f = field(meta(o), 'finalizers');
    return Array.isArray(f) ? f : [];
  };
  const before = new Set(fin(oldObj).map((x) => stable(x)));
  return fin(newObj).every((x) => before.has(stable(x)));
}

/**
 * Calls `visit` for every key of an object tree whose lower-cased name is `wanted`, with its dotted
 * path. Paths are only built for matches (this runs on every reviewed Agent).
 */
export function findKeys(root: Json, wanted: string, visit: (key: string, value: Json, path: string) => void): void {
  const segments: string[] = [];
  const pathOf = () => segments.join('').replace(/^\./, '');
  const walk = (node: Json): void => {
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const v = node[i] as Json;
        if (typeof v !== 'object' || v === null) continue;
        segments.push(`[${i}]`);
        walk(v);
        segments.pop();
      }
      return;
    }
    if (!isObject(node)) return;
    for (const k in node) {
      const v = node[k] as Json;
      if (k.length === wanted.length && k.toLowerCase() === wanted) {
        segments.push(`.${k}`);
        visit(k, v, pathOf());
        segments.pop();
      }
      if (typeof v === 'object' && v !== null) {
        segments.push(`.${k}`);
        walk(v);
        segments.pop();
      }
    }
  };
  walk(root);
}

export function arr(v: Json | undefined): Json[] | undefined {
  return Array.isArray(v) ? v : undefined;
}

/** The namespace a tool reference resolves in (kagent: omitted or empty means the Agent's own). */
export function refNamespace(ref: JsonObject, agentNamespace: string): string {
  const ns = str(ref, 'namespace');
  return ns === undefined || ns === '' ? agentNamespace : ns;
}

/**
 * The prologue of every object the reconciler owns (a retrieval Agent, the retrieval RemoteMCPServer):
 * only the controller may change it, except a delete by a garbage-collecting user and an update that
 * only removes finalizers. True when that settles the review (allowed, or denied with `reason`).
 */
export function settledByOwnership(
  f: Findings,
  input: AdmissionInput,
  cfg: RulesConfig,
  reason: string,
  what: string,
): boolean {
  if (input.username === cfg.controllerUser) return false;
  if (input.operation === 'DELETE' && cfg.deleteUsers.includes(input.username)) return true;
  if (input.operation === 'UPDATE' && onlyFinalizerRemoval(input.oldObject, input.object)) return true;
  f.deny(reason, 'metadata', `${what}; only ${cfg.controllerUser} may ${input.operation.toLowerCase()} it`);
  return true;
}

/** The object a CREATE or UPDATE writes; undefined (nothing to check, or denied as malformed) otherwise. */
export function writtenObject(f: Findings, input: AdmissionInput): KubeObject | undefined {
  if (input.operation === 'DELETE' || input.operation === 'CONNECT') return undefined;
  if (!input.object) f.deny('malformed', 'object', `${input.operation} without an object`);
  return input.object ?? undefined;
}
