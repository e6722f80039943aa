/**
 * The projector's configuration read straight from the Kubernetes API (list + watch of the ConfigMaps
 * labelled `retrieval.fgentic.dev/projector-config=true` in its own namespace), so a revocation — a
 * room downgraded or deleted, a partner removed or its groups changed — reaches the decisions as soon
 * as the API server sends the watch event, instead of after the kubelet's ConfigMap sync (60–90 s).
 *
 * Staleness rule: an established watch is contact; when it ends, the store counts the time since
 * the last contact (a list, the watch's end, or any watch event). While that age is within
 * `maxStalenessMs` the last good configuration keeps serving; beyond it every check is denied and
 * readiness goes false until contact is back. A silently dead connection is detected by a watchdog
 * `watchTimeoutSeconds + 5 s` after its last sign of life (the server ends a quiet watch at
 * `watchTimeoutSeconds`), so the worst case is that plus `maxStalenessMs`. The same bound applies when the base and its shards are inconsistent
 * (written one after the other by the controller): the last good registry serves for at most that
 * long. A missing or invalid base configuration denies at once. The list, the watch and the contact
 * clock are common/kube-watch.ts, shared with the retrieval server's configuration.
 */
import type * as k8s from '@kubernetes/client-node';
import { type ConfigMapLike, watchConfigMaps } from '../common/kube-watch.ts';
import type { ConfigState, ConfigStore } from './config-store.ts';
import { HEARTBEAT_CONFIGMAP, HEARTBEAT_KEY, HeartbeatClock } from './heartbeat.ts';
import { createAssembler } from './registry.ts';

export const PROJECTOR_CONFIG_SELECTOR = 'retrieval.fgentic.dev/projector-config=true';
const BASE_NAME = 'fgentic-projector-config';
const BASE_KEY = 'projector.json';
const SHARD_KEY = 'registry.json';

export interface KubeStoreOptions {
  readonly kubeConfig: k8s.KubeConfig;
  readonly namespace: string;
  /** Serve the last good configuration at most this long without API contact (default 30 s). */
  readonly maxStalenessMs?: number;
  /** Server-side watch timeout; a quiet watch is re-established this often (default 20 s). */
  readonly watchTimeoutSeconds?: number;
  /**
   * Deny once the controller's heartbeat has not advanced for this long (default 30 s; 0 turns the
   * rule off, for a registry that no controller writes).
   */
  readonly maxHeartbeatAgeMs?: number;
  readonly now?: () => number;
  readonly onChange?: (state: ConfigState) => void;
  /** A failed list or watch (`list`/`watch`) and the error's class, for logs and metrics. */
  readonly onWatchError?: (kind: string, error: string) => void;
}

export interface KubeConfigStore extends ConfigStore {
  /** Seconds since the last contact with the API server: 0 while the watch is open, Infinity before any. */
  stalenessSeconds(): number;
  /** Seconds since the controller's heartbeat last advanced (Infinity before any). */
  heartbeatAgeSeconds(): number;
  /** Resolves once the first list is in and its watch is open (or after the first failure). */
  readonly synced: Promise<void>;
}

/** True when every object carries a resourceVersion (only then can versions stand for contents). */
const cm0 = (objects: ReadonlyMap<string, ConfigMapLike>) =>
  [...objects.values()].every((cm) => cm.metadata?.resourceVersion !== undefined);

/**
 * The registry as last read: the ConfigMaps' texts, the assembled configuration, and the bounds
 * that deny once it is too old (no contact, no controller heartbeat, shards inconsistent for long).
 */
class RegistryAssembly {
  private readonly texts = new Map<string, string>();
  /** resourceVersion of each registry ConfigMap last assembled: a heartbeat alone assembles nothing. */
  private versions = '';
  private readonly assemble = createAssembler();
  private generation = 0;
  state: ConfigState = { ready: false, error: 'not loaded', generation: 0 };
  private lastGood: ConfigState | undefined;
  private inconsistentSince: number | undefined;
  readonly heartbeat = new HeartbeatClock();

  constructor(
    private readonly now: () => number,
    private readonly maxStaleness: number,
    private readonly maxHeartbeatAge: number,
    private readonly contactAgeMs: () => number,
    private readonly onChange: ((s: ConfigState) => void) | undefined,
  ) {}

  /** A listed or watched set of the labelled ConfigMaps. */
  observe(objects: ReadonlyMap<string, ConfigMapLike>): void {
    this.heartbeat.observe(objects.get(HEARTBEAT_CONFIGMAP)?.data?.[HEARTBEAT_KEY], this.now());
    const v = [...objects]
      .filter(([name]) => name !== HEARTBEAT_CONFIGMAP)
      .map(([name, cm]) => `${name}@${cm.metadata?.resourceVersion ?? ''}`)
      .sort()
      .join(',');
    if (v !== this.versions || !cm0(objects)) {
      this.versions = v;
      this.texts.clear();
      for (const [name, cm] of objects) {
        if (name === HEARTBEAT_CONFIGMAP) continue;
        const text = cm.data?.[name === BASE_NAME ? BASE_KEY : SHARD_KEY];
        if (text !== undefined) this.texts.set(name, text);
      }
      this.rebuild();
    }
    this.enforceBounds();
  }

  /** Deny once the last good configuration is older than the bound (no contact, or inconsistent). */
  enforceBounds(): void {
    const stale = this.staleness(this.now());
    if (stale !== undefined) this.denyAll(stale.error, stale.reason);
    else if (!this.state.ready && this.lastGood !== undefined) this.set(this.lastGood);
  }

  /** The bound the last good configuration is past at `t`, if any. */
  private staleness(t: number): { error: string; reason?: 'registry_stale' } | undefined {
    if (this.contactAgeMs() > this.maxStaleness)
      return { error: 'registry stale: no contact with the API server', reason: 'registry_stale' };
    // A dead, stuck or non-leading controller stops advancing its heartbeat: its registry no longer
    // follows the cluster, so it is not served past the bound either.
    if (this.maxHeartbeatAge > 0 && this.heartbeat.ageMs(t) > this.maxHeartbeatAge)
      return { error: 'registry stale: no controller heartbeat', reason: 'registry_stale' };
    if (this.inconsistentSince !== undefined && t - this.inconsistentSince > this.maxStaleness)
      return { error: 'registry shards inconsistent with the manifest' };
    return undefined;
  }

  private set(next: ConfigState): void {
    const prev = this.state;
    const changed = next.ready !== prev.ready || (next.ready && prev.ready && next.config !== prev.config);
    this.state = next;
    if (changed || !next.ready) this.onChange?.(next);
  }

  private denyAll(error: string, reason?: 'registry_stale'): void {
    if (!this.state.ready && this.state.error === error) return;
    this.generation += 1;
    this.set({ ready: false, error, generation: this.generation, ...(reason ? { reason } : {}) });
  }

  private rebuild(): void {
    const base = this.texts.get(BASE_NAME);
    if (base === undefined) {
      this.lastGood = undefined;
      this.inconsistentSince = undefined;
      this.denyAll('projector.json missing');
      return;
    }
    const shards = new Map<string, string>();
    for (const [name, text] of this.texts)
      if (name !== BASE_NAME && name !== HEARTBEAT_CONFIGMAP) shards.set(name, text);
    const result = this.assemble(base, shards);
    if (result.ok) {
      this.inconsistentSince = undefined;
      this.generation += 1;
      this.lastGood = { ready: true, config: result.config, generation: this.generation };
      this.set(this.lastGood);
    } else if ('inconsistent' in result) {
      this.inconsistentSince ??= this.now();
      this.enforceBounds();
    } else {
      this.lastGood = undefined;
      this.inconsistentSince = undefined;
      this.denyAll(result.error);
    }
  }
}

export function kubeConfigStore(o: KubeStoreOptions): KubeConfigStore {
  const now = o.now ?? Date.now;
  const registry = new RegistryAssembly(
    now,
    o.maxStalenessMs ?? 30_000,
    o.maxHeartbeatAgeMs ?? 30_000,
    () => watch.contactAgeMs(),
    o.onChange,
  );
  // Events arrive one object at a time (the controller writes shards, then the manifest): the watch
  // coalesces a burst into one assembly.
  const watch = watchConfigMaps({
    kubeConfig: o.kubeConfig,
    namespace: o.namespace,
    labelSelector: PROJECTOR_CONFIG_SELECTOR,
    ...(o.watchTimeoutSeconds !== undefined ? { watchTimeoutSeconds: o.watchTimeoutSeconds } : {}),
    now,
    onObjects: (objects: ReadonlyMap<string, ConfigMapLike>) => registry.observe(objects),
    ...(o.onWatchError ? { onWatchError: o.onWatchError } : {}),
  });
  const ticker = setInterval(() => registry.enforceBounds(), 250);
  ticker.unref();

  return {
    current: () => {
      registry.enforceBounds();
      return registry.state;
    },
    stalenessSeconds: () => watch.contactAgeMs() / 1000,
    heartbeatAgeSeconds: () => registry.heartbeat.ageMs(now()) / 1000,
    synced: watch.synced,
    close: () => {
      clearInterval(ticker);
      watch.close();
    },
  };
}
