/**
 * One leadership term of the controller: its reconciler and its caches (informers) of our four kinds
 * and of the rendered kinds, each watched only where the controller may write that kind
 * (kube/client.ts `RENDERED_KINDS`), and the cluster state a pass reads from them.
 */
import type * as k8s from '@kubernetes/client-node';
import { createLogger } from '../common/log.ts';
import { ItemBackoff } from './backoff.ts';
import { OWN_KINDS_INFO, RENDERED_KINDS } from './kube/client.ts';
import { Informer, type InformerOptions } from './kube/informer.ts';
import type { LeaderTerm } from './leader.ts';
import { type ClusterState, type ClusterWriter, Reconciler, selectPlatform } from './reconcile.ts';
import { RegistrySync } from './registry-sync.ts';
import { PRUNE_SELECTOR } from './render/model.ts';
import type { K8sObject, OwnKind, OwnResource, RetrievalAgent, RetrievalPlatform } from './types.ts';
import { RESYNC, runWorkers, WorkQueue } from './workqueue.ts';

const log = createLogger('controller');

/** One leadership term: its caches and its reconciler (backoff, remembered mirrors, memos). */
export interface Term {
  own: Map<OwnKind, Informer>;
  /** Caches of the rendered kinds the controller may write in every namespace. */
  rendered: Map<string, Informer>;
  /** Caches of the rendered kinds it may write in the retrieval namespace only, in that namespace. */
  scoped: Map<string, Informer>;
  make: (
    k: { apiVersion: string; kind: string; plural: string },
    onEvent: InformerOptions['onEvent'],
    labelSelector?: string,
    namespace?: string,
  ) => Informer;
  reconciler: Reconciler;
  ready: Promise<void>;
  /** The registry's per-key work (registry-sync.ts), its queue and workers. */
  queue: WorkQueue;
  registry: RegistrySync;
  workers: Promise<void>;
  /** The leadership term these caches serve: every write checks it (leader.ts). */
  lease: LeaderTerm;
}

export const informersOf = (t: Term | undefined): Informer[] =>
  t ? [...t.own.values(), ...t.rendered.values(), ...t.scoped.values()] : [];

/** Stops a term: its caches and its registry queue (its workers end). */
export function stopTerm(t: Term | undefined): void {
  for (const i of informersOf(t)) i.stop();
  t?.queue.shutDown();
}

/** A periodic resync: the pass's memos, every registry ConfigMap, and room statuses that changed. */
export function resyncTerm(t: Term): void {
  t.reconciler.resync();
  for (const k of t.registry.allKeys()) t.queue.add(k, RESYNC);
  // Room statuses: only rooms whose object changed since their status was last found right.
  for (const r of t.own.get('RetrievalRoom')?.list() ?? [])
    if (!t.registry.verified(r)) t.queue.add(`room-status/${r.metadata.name}`, RESYNC);
}

/** What an update to one of our resources changed, apart from status and bookkeeping. */
function specOf(o: K8sObject): string {
  const { status: _s, metadata, ...rest } = o as K8sObject & { status?: unknown };
  const {
    resourceVersion: _rv,
    managedFields: _mf,
    ...meta
  } = metadata as K8sObject['metadata'] & {
    managedFields?: unknown;
  };
  return JSON.stringify([rest, meta]);
}

/** What a pass reads: the caches of this term (kube/client.ts `RENDERED_KINDS` scopes). */
export function clusterState(t: Term): ClusterState {
  const renderedOf = (apiVersion: string, kind: string, namespace?: string) => {
    const k = `${apiVersion}|${kind}`;
    const scoped = t.scoped.get(k);
    if (!scoped) return t.rendered.get(k);
    // Outside the namespace the controller may write this kind in, nothing is cached.
    return namespace === undefined || namespace === scoped.namespace ? scoped : undefined;
  };
  return {
    own: <T extends OwnResource>(kind: OwnKind) => (t.own.get(kind)?.list() ?? []) as unknown as T[],
    ownOne: <T extends OwnResource>(kind: OwnKind, namespace: string | undefined, name: string) =>
      t.own.get(kind)?.get(namespace, name) as unknown as T | undefined,
    rendered: (apiVersion, kind) => {
      const inf = renderedOf(apiVersion, kind);
      return inf?.isSynced() ? inf.list() : undefined;
    },
    live: (apiVersion, kind, namespace, name) => renderedOf(apiVersion, kind, namespace ?? '')?.get(namespace, name),
    stored: (obj) => {
      if (obj.apiVersion === OWN_KINDS_INFO[0]?.apiVersion) t.own.get(obj.kind as OwnKind)?.upsert(obj);
      else renderedOf(obj.apiVersion, obj.kind, obj.metadata.namespace ?? '')?.upsert(obj);
    },
    removed: (obj) =>
      renderedOf(obj.apiVersion, obj.kind, obj.metadata.namespace ?? '')?.drop(
        obj.metadata.namespace,
        obj.metadata.name,
      ),
  };
}

/**
 * The caches of the kinds the controller may write in the retrieval namespace only (ConfigMaps:
 * a namespaced Role there) follow the namespace the live RetrievalPlatform names; without one they
 * do not exist, and nothing of those kinds is pruned. Resolves once each has been listed once.
 */
export async function followRetrievalNamespace(t: Term, schedule: () => void): Promise<void> {
  const platforms = (t.own.get('RetrievalPlatform')?.list() ?? []) as unknown as RetrievalPlatform[];
  const ns = selectPlatform(platforms)?.spec?.namespaces?.retrieval;
  for (const k of RENDERED_KINDS) {
    if (k.scope !== 'retrieval') continue;
    const key = `${k.apiVersion}|${k.kind}`;
    const current = t.scoped.get(key);
    if (current && current.namespace === ns) continue;
    current?.stop();
    t.scoped.delete(key);
    if (ns === undefined) continue;
    const inf = t.make(k, () => schedule(), PRUNE_SELECTOR, ns);
    t.scoped.set(key, inf);
    inf.start();
    log.info('watching rendered objects in the retrieval namespace', { kind: k.kind, namespace: ns });
  }
  await Promise.all([...t.scoped.values()].map((i) => i.settled()));
}

/**
 * A new leadership term: its reconciler and the caches of our four kinds and of the rendered kinds
 * the controller may write everywhere, started; `schedule` asks for a pass.
 */
export function startTerm(
  kubeConfig: k8s.KubeConfig,
  writer: ClusterWriter,
  schedule: () => void,
  onRetry: (kind: string, what: 'list' | 'watch') => void,
  options: { concurrency: number; incremental?: boolean },
  lease: LeaderTerm,
): Term {
  const queue = new WorkQueue();
  // The term is created below; the registry reads its caches through it (one view object for the
  // term: it reads the caches when called, and the registry asks for it once per shard it digests).
  let self: Term | undefined;
  let view: ClusterState | undefined;
  const registry = new RegistrySync(writer, queue, () => {
    if (self) view ??= clusterState(self);
    return view;
  });
  const reconciler = new Reconciler(writer, { ...options, backoff: new ItemBackoff(), registry });
  /**
   * Partners, agents and the platform change registry entries too: the registry takes them from
   * its own render (no I/O) within 20 ms, not after a pass, which may be a resync still running.
   */
  let registryTimer: NodeJS.Timeout | undefined;
  const renderRegistrySoon = () => {
    if (registryTimer) return;
    registryTimer = setTimeout(() => {
      registryTimer = undefined;
      const t = self;
      if (t?.lease.valid() && [...t.own.values()].every((i) => i.isSynced()))
        t.registry.renderFrom(clusterState(t), t.reconciler.jwks);
    }, 20);
    registryTimer.unref();
  };
  const make: Term['make'] = (k, onEvent, labelSelector, namespace) =>
    new Informer({
      kubeConfig,
      apiVersion: k.apiVersion,
      kind: k.kind,
      plural: k.plural,
      ...(labelSelector ? { labelSelector } : {}),
      ...(namespace ? { namespace } : {}),
      onEvent,
      onRetry: (what) => onRetry(k.kind, what),
    });
  const own = new Map<OwnKind, Informer>();
  for (const k of OWN_KINDS_INFO)
    own.set(
      k.kind,
      make(k, (type, obj, prev) => {
        // A status-only update (ours, mostly) changes nothing the render reads.
        if (type === 'MODIFIED' && prev && specOf(prev) === specOf(obj)) return;
        // A changed RetrievalAgent or platform may name another Secret, or a rotated one: read again.
        if (k.kind === 'RetrievalAgent') {
          const ref = (obj as unknown as RetrievalAgent).spec?.mcpApiKeySecretRef;
          if (ref) reconciler.secrets.forget(obj.metadata.namespace, ref.name);
        }
        if (k.kind === 'RetrievalPlatform') {
          const ns = (obj as unknown as RetrievalPlatform).spec?.gateway?.namespace;
          if (ns) reconciler.secrets.forget(ns);
        }
        // A room is the registry's work alone, per room and at once (no debounce, no pass).
        if (k.kind === 'RetrievalRoom')
          return registry.onRoom(obj.metadata.name, type === 'DELETED' ? undefined : (obj as never));
        renderRegistrySoon();
        schedule();
      }),
    );
  const rendered = new Map<string, Informer>();
  for (const k of RENDERED_KINDS.filter((x) => x.scope === 'cluster'))
    rendered.set(
      `${k.apiVersion}|${k.kind}`,
      make(k, () => schedule(), PRUNE_SELECTOR),
    );
  const all = [...own.values(), ...rendered.values()];
  // Wait for every cache to be listed once (or to have failed once) before the first pass.
  const ready = Promise.all(all.map((i) => i.settled())).then(() => undefined);
  const workers = runWorkers(queue, options.concurrency, (key) => registry.handle(key));
  const term: Term = {
    own,
    rendered,
    scoped: new Map(),
    make,
    reconciler,
    ready,
    queue,
    registry,
    workers,
    lease,
  };
  self = term;
  for (const i of all) i.start();
  // A kind whose first list failed and later succeeds with no objects sends no event: its
  // synchronisation alone must start the pass that was deferred for it.
  for (const i of own.values()) void i.synced().then(() => schedule());
  return term;
}
