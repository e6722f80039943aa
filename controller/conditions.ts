/**
 * The conditions the reconciler writes on our resources (`Ready`, `Conflict`, `Degraded`, and on the
 * RetrievalPlatform `UpstreamSupported`), each with `observedGeneration`, and the status written when
 * the upstream is unsupported. Pure apart from `reportUnsupported`, which patches status.
 */
import {
  type Condition,
  type Conflict,
  type K8sObject,
  type OwnResource,
  type RetrievalPlatform,
  resourceKey,
} from './types.ts';
import type { UpstreamVerdict } from './upstream.ts';

/** What one resource's conditions are computed from, besides the resource itself. */
export interface ConditionInputs {
  conflict?: Conflict | undefined;
  /** Failing applies of rendered objects, sorted: every resource reports them. */
  applyErrors: readonly string[];
  /** A RetrievalAgent whose MCP key cannot be mirrored (read, format or write), content-free. */
  problem?: string | undefined;
  /** Stale objects that could not be deleted, sorted: reported on the RetrievalPlatform only. */
  pruneErrors?: readonly string[];
}

const MESSAGE_MAX = 1024;

function builder(res: OwnResource, now: string) {
  const gen = res.metadata.generation;
  const g = gen !== undefined ? { observedGeneration: gen } : {};
  const prev = new Map((res.status?.conditions ?? []).map((c) => [c.type, c]));
  return (type: string, status: Condition['status'], reason: string, message: string): Condition => {
    const p = prev.get(type);
    return {
      type,
      status,
      reason,
      message,
      ...g,
      lastTransitionTime: p && p.status === status && p.lastTransitionTime ? p.lastTransitionTime : now,
    };
  };
}

export function conditionsFor(res: OwnResource, i: ConditionInputs, now: string): Condition[] {
  const mk = builder(res, now);
  const { conflict, applyErrors, problem } = i;
  const pruneErrors = i.pruneErrors ?? [];
  const applyFailed = applyErrors.length > 0;
  const ready = conflict
    ? mk('Ready', 'False', 'Conflict', conflict.message)
    : applyFailed
      ? mk('Ready', 'False', 'ApplyFailed', `${applyErrors.length} object(s) failed to apply`)
      : problem
        ? mk('Ready', 'False', 'McpKeyUnavailable', problem)
        : mk('Ready', 'True', 'Rendered', 'all rendered objects are applied');
  const degraded = applyFailed
    ? mk('Degraded', 'True', 'ApplyFailed', (applyErrors[0] ?? '').slice(0, MESSAGE_MAX))
    : problem
      ? mk('Degraded', 'True', 'McpKeyUnavailable', problem)
      : pruneErrors.length > 0
        ? mk(
            'Degraded',
            'True',
            'PruneFailed',
            `${pruneErrors.length} stale object(s) could not be deleted; first: ${pruneErrors[0]}`.slice(
              0,
              MESSAGE_MAX,
            ),
          )
        : mk('Degraded', 'False', 'Applied', 'every apply succeeded');
  return [
    ready,
    conflict
      ? mk('Conflict', 'True', conflict.reason, conflict.message)
      : mk('Conflict', 'False', 'NoConflict', 'no conflicting resource'),
    degraded,
  ];
}

/** Equal conditions, ignoring lastTransitionTime (which only moves when status moves). */
export function sameConditions(a: Condition[] | undefined, b: Condition[]): boolean {
  const strip = (c: Condition[]) =>
    c.map(({ type, status, reason, message, observedGeneration }) => ({
      type,
      status,
      reason,
      message,
      observedGeneration,
    }));
  return JSON.stringify(strip(a ?? [])) === JSON.stringify(strip(b));
}

export function upstreamCondition(res: OwnResource, v: UpstreamVerdict, now: string): Condition {
  const prev = res.status?.conditions?.find((c) => c.type === 'UpstreamSupported');
  const status = v.supported ? 'True' : 'False';
  return {
    type: 'UpstreamSupported',
    status,
    reason: v.supported ? 'Supported' : 'UnsupportedUpstream',
    message: (v.supported ? `seen ${v.seen}` : `seen ${v.seen}: ${v.problems.join('; ')}`).slice(0, MESSAGE_MAX),
    ...(res.metadata.generation !== undefined ? { observedGeneration: res.metadata.generation } : {}),
    lastTransitionTime: prev && prev.status === status && prev.lastTransitionTime ? prev.lastTransitionTime : now,
  };
}

/** The writes `reportUnsupported` needs. */
export interface StatusWriter {
  patchStatus(res: OwnResource, status: Record<string, unknown>): Promise<K8sObject | undefined>;
  event(res: OwnResource, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void>;
}

/** Ready=False/UnsupportedUpstream plus UpstreamSupported=False on each platform; other conditions stay. */
export async function reportUnsupported(
  api: StatusWriter,
  stored: ((obj: K8sObject) => void) | undefined,
  platforms: RetrievalPlatform[],
  v: UpstreamVerdict,
  now: string,
): Promise<number> {
  let writes = 0;
  for (const p of platforms) {
    const upstream = upstreamCondition(p, v, now);
    const prev = p.status?.conditions ?? [];
    const oldReady = prev.find((c) => c.type === 'Ready');
    const ready: Condition = {
      type: 'Ready',
      status: 'False',
      reason: 'UnsupportedUpstream',
      message: 'nothing new is rendered until kagent and agentgateway are supported versions',
      ...(p.metadata.generation !== undefined ? { observedGeneration: p.metadata.generation } : {}),
      lastTransitionTime:
        oldReady?.status === 'False' && oldReady.lastTransitionTime ? oldReady.lastTransitionTime : now,
    };
    const conditions = [ready, ...prev.filter((c) => c.type !== 'Ready' && c.type !== 'UpstreamSupported'), upstream];
    if (sameConditions(prev, conditions)) continue;
    const was = prev.find((c) => c.type === 'UpstreamSupported')?.status === 'False';
    const s = await api.patchStatus(p, { conditions });
    writes++;
    if (s?.metadata) stored?.({ ...s, apiVersion: p.apiVersion, kind: p.kind });
    if (!was) await api.event(p, 'Warning', 'UnsupportedUpstream', upstream.message).catch(() => undefined);
  }
  return writes;
}

/**
 * One resource's condition inputs and the signature of everything its conditions are computed from
 * besides the resource itself (empty when the pass keeps no memo). A RetrievalAgent reports the
 * failures of its own objects, the platform the shared ones and failed deletes, everyone else none,
 * so one failing object never rewrites every resource's status. Pure.
 */
export function statusInputs(
  res: OwnResource,
  o: {
    own: ReadonlyMap<string, string[]>;
    pruneErrors: readonly string[];
    conflicts: ReadonlyMap<string, Conflict>;
    platform: RetrievalPlatform | undefined;
    problem: string | undefined;
    verdictSig: string;
    memoized: boolean;
  },
): { inputs: ConditionInputs; sig: string } {
  const isPlatform = res === o.platform;
  const applyErrors =
    res.kind === 'RetrievalAgent'
      ? (o.own.get(`${res.metadata.namespace}/${res.metadata.name}`) ?? [])
      : isPlatform
        ? (o.own.get('') ?? [])
        : [];
  const inputs: ConditionInputs = {
    conflict: o.conflicts.get(resourceKey(res)),
    applyErrors,
    problem: o.problem,
    ...(isPlatform ? { pruneErrors: [...o.pruneErrors] } : {}),
  };
  if (!o.memoized) return { inputs, sig: '' };
  const errorsSig = [
    applyErrors.length,
    applyErrors[0] ?? '',
    isPlatform ? o.pruneErrors.length : 0,
    isPlatform ? (o.pruneErrors[0] ?? '') : '',
  ];
  const sig = JSON.stringify([
    inputs.conflict?.reason ?? null,
    inputs.conflict?.message ?? null,
    JSON.stringify(errorsSig),
    inputs.problem ?? null,
    res.kind === 'RetrievalPlatform' ? o.verdictSig : null,
    isPlatform,
  ]);
  return { inputs, sig };
}
