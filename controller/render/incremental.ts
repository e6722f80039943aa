/**
 * Incremental render: the result of `render(input)`, recomputing only what the inputs that changed
 * since the previous call can affect. Pure: the memo is a value the caller keeps and passes back.
 *
 * Dependency map (what each rendered object reads):
 * - the objects of one retrieval Agent (`renderAgentObjects`: its routes, backend, policies,
 *   NetworkPolicy and kagent Agent) read the resolved platform, that RetrievalAgent and the
 *   PartnerClients bound to it, nothing else. Each group is keyed by a fingerprint of exactly those
 *   (`agentDependencies`) and reused while the fingerprint holds; a platform change re-renders all;
 * - everything else (the two configurations with the registry, the namespace-wide policies, the
 *   shared gateway and kagent objects) reads every agent, room or partner, and is rendered again on
 *   every call; it is a few objects, and costs one pass over the registry.
 * Validation and conflicts (`analyse`) read every resource together (unique room IDs, partner keys,
 * group collisions), so they run on every call too; they are linear and cheap next to the objects.
 *
 * An object rendered again with the same content is returned as the very object of the previous
 * result, so a caller can tell unchanged objects by identity (the reconciler's hash and comparison
 * memos rely on it). The differential property test checks that the result always equals `render`.
 */
import type { Conflict, K8sObject, OwnResource, Resources } from '../types.ts';
import { analyse } from './conflicts.ts';
import { compareObjects, renderAgentObjects, renderSharedObjects } from './index.ts';
import type { Agent, Model, Partner } from './model.ts';

interface AgentEntry {
  readonly deps: string;
  readonly objects: readonly K8sObject[];
}

/** What a call keeps for the next one. Opaque to callers. */
export interface RenderMemo {
  readonly platform: string;
  readonly agents: ReadonlyMap<string, AgentEntry>;
  /** The previous result's objects by key, to hand back the same object for the same content. */
  readonly byKey: ReadonlyMap<string, K8sObject>;
}

export interface IncrementalResult {
  objects: K8sObject[];
  conflicts: Conflict[];
  memo: RenderMemo;
  /** Agents whose objects were rendered in this call, and those reused from the memo. */
  agentsRendered: number;
  agentsReused: number;
  /** The resolved model (undefined without a valid platform), for the registry (controller/registry-sync.ts). */
  model?: Model;
  /** Object key → `namespace/name` of the RetrievalAgent whose objects it is one of. */
  owners: Map<string, string>;
}

const objectKey = (o: K8sObject) => `${o.apiVersion}|${o.kind}|${o.metadata.namespace ?? ''}|${o.metadata.name}`;

/**
 * A resource as the render may read it: without status and without the metadata the API server
 * moves on every write (`resourceVersion`, `managedFields`), which no rendered object carries.
 */
function readable(r: OwnResource): unknown {
  const {
    resourceVersion: _rv,
    managedFields: _mf,
    ...metadata
  } = r.metadata as OwnResource['metadata'] & {
    resourceVersion?: string;
    managedFields?: unknown;
  };
  return { metadata, spec: r.spec };
}

/** Fingerprint of everything the per-Agent renderers read besides the platform. */
function agentFingerprint(a: Agent, partnerPrints: Map<Partner, string>): string {
  return JSON.stringify([
    a.namespace,
    a.name,
    a.uid ?? null,
    a.rpm,
    a.public,
    a.localPath,
    a.publicPath,
    readable(a.res),
    a.partners.map((p) => partnerFingerprint(p, partnerPrints)),
  ]);
}

/** A partner is bound to several agents: its fingerprint is computed once per call. */
function partnerFingerprint(p: Partner, memo: Map<Partner, string>): string {
  let f = memo.get(p);
  if (f === undefined) {
    f = JSON.stringify([p.name, readable(p.res), p.classifications, p.agents]);
    memo.set(p, f);
  }
  return f;
}

/** The dependency map: for each retrieval Agent (`namespace/name`), the fingerprint of its inputs. */
export function agentDependencies(m: Model): Map<string, string> {
  const partners = new Map<Partner, string>();
  return new Map(m.agents.map((a) => [`${a.namespace}/${a.name}`, agentFingerprint(a, partners)]));
}

function platformFingerprint(m: Model): string {
  return JSON.stringify([m.platform, readable(m.platformRes)]);
}

/** The previous object when its content is the same, so identity marks "unchanged". */
function keep(o: K8sObject, prev: ReadonlyMap<string, K8sObject> | undefined): K8sObject {
  const old = prev?.get(objectKey(o));
  return old !== undefined && JSON.stringify(old) === JSON.stringify(o) ? old : o;
}

export function renderIncremental(
  input: Resources,
  memo?: RenderMemo,
  o: { registry?: boolean } = {},
): IncrementalResult {
  const { model, conflicts } = analyse(input);
  if (!model)
    return {
      objects: [],
      conflicts,
      memo: { platform: '', agents: new Map(), byKey: new Map() },
      agentsRendered: 0,
      agentsReused: 0,
      owners: new Map(),
    };
  const platform = platformFingerprint(model);
  const reusable = memo && memo.platform === platform ? memo.agents : undefined;
  const prev = memo?.byKey;
  const agents = new Map<string, AgentEntry>();
  const objects: K8sObject[] = renderSharedObjects(model, conflicts, o).map((x) => keep(x, prev));
  let agentsRendered = 0;
  const owners = new Map<string, string>();
  const partners = new Map<Partner, string>();
  for (const a of model.agents) {
    const key = `${a.namespace}/${a.name}`;
    const deps = agentFingerprint(a, partners);
    let entry = reusable?.get(key);
    if (entry === undefined || entry.deps !== deps) {
      entry = { deps, objects: renderAgentObjects(model, a).map((o) => keep(o, prev)) };
      agentsRendered++;
    }
    agents.set(key, entry);
    for (const x of entry.objects) owners.set(objectKey(x), key);
    objects.push(...entry.objects);
  }
  objects.sort(compareObjects);
  return {
    objects,
    conflicts,
    memo: { platform, agents, byKey: new Map(objects.map((o) => [objectKey(o), o])) },
    agentsRendered,
    agentsReused: model.agents.length - agentsRendered,
    model,
    owners,
  };
}
