/**
 * Bench-only: the reconcile pass as the controller ran it before informer caches (list everything,
 * apply every rendered object one by one, list every rendered kind to prune, on every pass). Kept so
 * `npm run bench:controller` can measure it side by side with the current controller. Not shipped.
 */
import { createLogger } from '../common/log.ts';
import { RENDERED_KINDS } from '../controller/kube/client.ts';
import { mirrorMcpKeys } from '../controller/kube/mcp-keys.ts';
import { render } from '../controller/render/index.ts';
import type {
  Condition,
  Conflict,
  K8sObject,
  OwnResource,
  PartnerClient,
  Resources,
  RetrievalAgent,
  RetrievalPlatform,
  RetrievalRoom,
} from '../controller/types.ts';
import { resourceKey } from '../controller/types.ts';
import { judgeUpstream, type UpstreamFacts, type UpstreamVerdict } from '../controller/upstream.ts';

const log = createLogger('controller');

/** What the reconciler needs from the cluster (KubeClient implements it). */
export interface ClusterApi {
  listOwn<T extends OwnResource>(kind: OwnResource['kind']): Promise<T[]>;
  /** Server-side apply; resolves to the object as stored (its uid names it in owner references). */
  apply(obj: K8sObject): Promise<K8sObject>;
  listRendered(apiVersion: string, kind: string, namespace?: string): Promise<K8sObject[]>;
  /** Deletes; resolves to false when the object did not exist. */
  delete(obj: K8sObject): Promise<boolean>;
  patchStatus(res: OwnResource, status: Record<string, unknown>): Promise<unknown>;
  event(res: OwnResource, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void>;
  readSecretKey(namespace: string, name: string, key: string): Promise<string | undefined>;
  /** The kagent and agentgateway APIs the cluster serves. */
  upstream(): Promise<UpstreamFacts>;
}

export interface ReconcileResult {
  applied: number;
  pruned: number;
  conflicts: Conflict[];
  errors: string[];
  /** Set when the upstream is unsupported: nothing was applied or pruned. */
  unsupported?: UpstreamVerdict;
  /** The conditions this pass computed for every resource (what their status says once written). */
  conditions: { kind: OwnResource['kind']; type: string; status: Condition['status']; reason: string }[];
}

const objKey = (o: K8sObject) => `${o.apiVersion}|${o.kind}|${o.metadata.namespace ?? ''}|${o.metadata.name}`;

function conditionsFor(
  res: OwnResource,
  conflict: Conflict | undefined,
  errors: string[],
  now: string,
  problem?: string,
): Condition[] {
  const gen = res.metadata.generation;
  const g = gen !== undefined ? { observedGeneration: gen } : {};
  const prev = new Map((res.status?.conditions ?? []).map((c) => [c.type, c]));
  const mk = (type: string, status: Condition['status'], reason: string, message: string): Condition => {
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
  const degraded = errors.length > 0;
  return [
    conflict
      ? mk('Ready', 'False', 'Conflict', conflict.message)
      : degraded
        ? mk('Ready', 'False', 'ApplyFailed', `${errors.length} object(s) failed to apply`)
        : problem
          ? mk('Ready', 'False', 'McpKeyUnavailable', problem)
          : mk('Ready', 'True', 'Rendered', 'all rendered objects are applied'),
    conflict
      ? mk('Conflict', 'True', conflict.reason, conflict.message)
      : mk('Conflict', 'False', 'NoConflict', 'no conflicting resource'),
    degraded
      ? mk('Degraded', 'True', 'ApplyFailed', errors[0]?.slice(0, 1024) ?? '')
      : problem
        ? mk('Degraded', 'True', 'McpKeyUnavailable', problem)
        : mk('Degraded', 'False', 'Applied', 'every apply succeeded'),
  ];
}

function sameConditions(a: Condition[] | undefined, b: Condition[]): boolean {
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

export async function reconcileOnce(api: ClusterApi, now = () => new Date()): Promise<ReconcileResult> {
  const [platforms, agents, rooms, partners] = await Promise.all([
    api.listOwn<RetrievalPlatform>('RetrievalPlatform'),
    api.listOwn<RetrievalAgent>('RetrievalAgent'),
    api.listOwn<RetrievalRoom>('RetrievalRoom'),
    api.listOwn<PartnerClient>('PartnerClient'),
  ]);
  const live = (r: OwnResource) => !r.metadata.deletionTimestamp;
  const input: Resources = {
    platforms: platforms.filter(live),
    agents: agents.filter(live),
    rooms: rooms.filter(live),
    partners: partners.filter(live),
  };
  // An upstream the design does not hold on: render nothing new and prune nothing, so whatever works
  // keeps working, and say what was seen on the RetrievalPlatform.
  const verdict = judgeUpstream(await api.upstream());
  if (!verdict.supported) {
    await reportUnsupported(api, input.platforms, verdict, now().toISOString());
    log.warn('unsupported upstream', { seen: verdict.seen, problems: verdict.problems.length });
    return { applied: 0, pruned: 0, conflicts: [], errors: [], conditions: [], unsupported: verdict };
  }
  const jwt = input.platforms.find((p) => p.metadata.name === 'default')?.spec.jwt;
  if (jwt?.jwksSecretRef) {
    const v = await api.readSecretKey(
      input.platforms[0]?.spec.gateway.namespace ?? 'default',
      jwt.jwksSecretRef.name,
      jwt.jwksSecretRef.key,
    );
    if (v) input.jwksInline = v;
  }
  const { objects, conflicts } = render(input);
  // The MCP routes' API keys, mirrored from each Agent's own MCP credential (fails closed when absent).
  const mirror = await mirrorMcpKeys(api, objects);

  const errors: string[] = [];
  let applied = 0;
  const uids = new Map<string, string>();
  const applyOne = async (o: K8sObject) => {
    try {
      const stored = await api.apply(o);
      if (stored?.metadata?.uid) uids.set(objKey(o), stored.metadata.uid);
      applied++;
    } catch (e) {
      errors.push(
        `apply ${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}: ${(e as Error).message}`,
      );
    }
  };
  for (const o of objects) await applyOne(o);
  // Each mirrored key is owned by its Agent's MCP policy, applied above: the garbage collector then
  // removes the key with the policy, so the controller never needs to list Secrets.
  for (const { secret, ownerPolicy } of mirror.secrets) {
    const policyKey = `agentgateway.dev/v1alpha1|AgentgatewayPolicy|${secret.metadata.namespace}|${ownerPolicy}`;
    const uid = uids.get(policyKey);
    if (!uid) continue; // its policy failed to apply; that error is already recorded
    secret.metadata.ownerReferences = [
      { apiVersion: 'agentgateway.dev/v1alpha1', kind: 'AgentgatewayPolicy', name: ownerPolicy, uid },
    ];
    objects.push(secret);
    await applyOne(secret);
  }

  // Prune only when every apply succeeded, so a transient failure never removes a working route.
  let pruned = 0;
  if (errors.length === 0) {
    const desired = new Set(objects.map(objKey));
    // A key whose source is unusable must stop working now, not when its policy goes.
    for (const s of mirror.stale) {
      try {
        if (await api.delete(s)) pruned++;
      } catch (e) {
        errors.push(`delete Secret ${s.metadata.namespace}/${s.metadata.name}: ${(e as Error).message}`);
      }
    }
    for (const k of RENDERED_KINDS) {
      let existing: K8sObject[];
      try {
        existing = await api.listRendered(k.apiVersion, k.kind);
      } catch (e) {
        errors.push(`list ${k.kind}: ${(e as Error).message}`);
        continue;
      }
      for (const o of existing) {
        if (desired.has(objKey({ ...o, apiVersion: k.apiVersion, kind: k.kind }))) continue;
        try {
          if (await api.delete({ ...o, apiVersion: k.apiVersion, kind: k.kind })) pruned++;
        } catch (e) {
          errors.push(
            `delete ${k.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}: ${(e as Error).message}`,
          );
        }
      }
    }
  }

  const byKey = new Map(conflicts.map((c) => [resourceKey({ kind: c.kind, metadata: c }), c]));
  const stamp = now().toISOString();
  const computed: ReconcileResult['conditions'] = [];
  for (const res of [
    ...input.platforms,
    ...input.agents,
    ...input.rooms,
    ...input.partners,
  ] as OwnResource[]) {
    const conflict = byKey.get(resourceKey(res));
    const problem =
      res.kind === 'RetrievalAgent'
        ? mirror.problems.get(`${res.metadata.namespace}/${res.metadata.name}`)
        : undefined;
    const conditions = conditionsFor(res, conflict, errors, stamp, problem);
    if (res.kind === 'RetrievalPlatform') conditions.push(upstreamCondition(res, verdict, stamp));
    for (const c of conditions)
      computed.push({ kind: res.kind, type: c.type, status: c.status, reason: c.reason });
    if (
      sameConditions(res.status?.conditions, conditions) &&
      res.status?.observedGeneration === res.metadata.generation
    )
      continue;
    const wasConflict = res.status?.conditions?.find((c) => c.type === 'Conflict')?.status === 'True';
    const hadProblem =
      res.status?.conditions?.find((c) => c.type === 'Degraded')?.reason === 'McpKeyUnavailable';
    try {
      await api.patchStatus(res, {
        ...(res.metadata.generation !== undefined ? { observedGeneration: res.metadata.generation } : {}),
        conditions,
      });
      if (conflict && !wasConflict) await api.event(res, 'Warning', conflict.reason, conflict.message);
      if (!conflict && wasConflict)
        await api.event(res, 'Normal', 'ConflictResolved', 'the resource renders again');
      if (problem && !hadProblem) await api.event(res, 'Warning', 'McpKeyUnavailable', problem);
    } catch (e) {
      errors.push(`status ${res.kind} ${res.metadata.name}: ${(e as Error).message}`);
    }
  }
  const platform = input.platforms[0];
  if (errors.length && platform) {
    await api.event(platform, 'Warning', 'ApplyFailed', errors[0] as string).catch(() => undefined);
  }
  log.info('reconciled', { applied, pruned, conflicts: conflicts.length, errors: errors.length });
  return { applied, pruned, conflicts, errors, conditions: computed };
}

function upstreamCondition(res: OwnResource, v: UpstreamVerdict, now: string): Condition {
  const prev = res.status?.conditions?.find((c) => c.type === 'UpstreamSupported');
  const status = v.supported ? 'True' : 'False';
  return {
    type: 'UpstreamSupported',
    status,
    reason: v.supported ? 'Supported' : 'UnsupportedUpstream',
    message: (v.supported ? `seen ${v.seen}` : `seen ${v.seen}: ${v.problems.join('; ')}`).slice(0, 1024),
    ...(res.metadata.generation !== undefined ? { observedGeneration: res.metadata.generation } : {}),
    lastTransitionTime:
      prev && prev.status === status && prev.lastTransitionTime ? prev.lastTransitionTime : now,
  };
}

/** Ready=False/UnsupportedUpstream plus UpstreamSupported=False on each platform; other conditions stay. */
async function reportUnsupported(
  api: ClusterApi,
  platforms: RetrievalPlatform[],
  v: UpstreamVerdict,
  now: string,
): Promise<void> {
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
    const conditions = [
      ready,
      ...prev.filter((c) => c.type !== 'Ready' && c.type !== 'UpstreamSupported'),
      upstream,
    ];
    if (sameConditions(prev, conditions)) continue;
    const was = prev.find((c) => c.type === 'UpstreamSupported')?.status === 'False';
    await api.patchStatus(p, { conditions });
    if (!was) await api.event(p, 'Warning', 'UnsupportedUpstream', upstream.message).catch(() => undefined);
  }
}
