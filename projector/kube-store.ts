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
 * long. A missing or invalid base configuration denies at once.
 */
import * as k8s from '@kubernetes/client-node';
import type { ConfigState, ConfigStore } from './config-store.ts';
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
  readonly now?: () => number;
  readonly onChange?: (state: ConfigState) => void;
  /** A failed list or watch (`list`/`watch`) and the error's class, for logs and metrics. */
  readonly onWatchError?: (kind: string, error: string) => void;
}

export interface KubeConfigStore extends ConfigStore {
  /** Seconds since the last contact with the API server: 0 while the watch is open, Infinity before any. */
  stalenessSeconds(): number;
  /** Resolves once the first list is in and its watch is open (or after the first failure). */
  readonly synced: Promise<void>;
}

type ConfigMapLike = {
  metadata?: { name?: string; resourceVersion?: string };
  data?: Record<string, string>;
};

export function kubeConfigStore(o: KubeStoreOptions): KubeConfigStore {
  const now = o.now ?? Date.now;
  const maxStaleness = o.maxStalenessMs ?? 30_000;
  const watchTimeout = o.watchTimeoutSeconds ?? 20;
  const core = o.kubeConfig.makeApiClient(k8s.CoreV1Api);
  const texts = new Map<string, string>();
  const assemble = createAssembler();
  let generation = 0;
  let state: ConfigState = { ready: false, error: 'not loaded', generation };
  let lastGood: ConfigState | undefined;
  let inconsistentSince: number | undefined;
  let lastContact = Number.NEGATIVE_INFINITY;
  /** An established watch counts as contact; the watchdog ends one that has gone silent. */
  let watchOpen = false;
  let resourceVersion: string | undefined;
  let stopped = false;
  let backoffMs = 250;
  let abort: AbortController | undefined;
  let watchdog: NodeJS.Timeout | undefined;
  let retry: NodeJS.Timeout | undefined;
  let markSynced: () => void = () => {};
  const synced = new Promise<void>((r) => {
    markSynced = r;
  });

  const set = (next: ConfigState) => {
    const changed = next.ready !== state.ready || (next.ready && state.ready && next.config !== state.config);
    state = next;
    if (changed || !next.ready) o.onChange?.(next);
  };
  const denyAll = (error: string) => {
    if (!state.ready && state.error === error) return;
    generation += 1;
    set({ ready: false, error, generation });
  };

  // Events arrive one object at a time (the controller writes shards, then the manifest): coalesce
  // a burst into one assembly.
  let pending: NodeJS.Timeout | undefined;
  const rebuildSoon = () => {
    if (pending) return;
    pending = setTimeout(() => {
      pending = undefined;
      rebuild();
    }, 10);
  };
  const rebuild = () => {
    const base = texts.get(BASE_NAME);
    if (base === undefined) {
      lastGood = undefined;
      inconsistentSince = undefined;
      denyAll('projector.json missing');
      return;
    }
    const shards = new Map<string, string>();
    for (const [name, text] of texts) if (name !== BASE_NAME) shards.set(name, text);
    const result = assemble(base, shards);
    if (result.ok) {
      inconsistentSince = undefined;
      generation += 1;
      lastGood = { ready: true, config: result.config, generation };
      set(lastGood);
    } else if ('inconsistent' in result) {
      inconsistentSince ??= now();
      enforceBounds();
    } else {
      lastGood = undefined;
      inconsistentSince = undefined;
      denyAll(result.error);
    }
  };

  /** Deny once the last good configuration is older than the bound (no contact, or inconsistent). */
  const enforceBounds = () => {
    const t = now();
    if (!watchOpen && t - lastContact > maxStaleness)
      return denyAll('registry stale: no contact with the API server');
    if (inconsistentSince !== undefined && t - inconsistentSince > maxStaleness)
      return denyAll('registry shards inconsistent with the manifest');
    if (!state.ready && lastGood !== undefined) set(lastGood);
  };
  const ticker = setInterval(enforceBounds, 250);
  ticker.unref();

  const keyOf = (name: string): string => (name === BASE_NAME ? BASE_KEY : SHARD_KEY);
  const absorb = (cm: ConfigMapLike) => {
    const name = cm.metadata?.name;
    if (name === undefined) return;
    const text = cm.data?.[keyOf(name)];
    if (text === undefined) texts.delete(name);
    else texts.set(name, text);
  };

  const contact = () => {
    lastContact = now();
    backoffMs = 250;
  };

  const schedule = (fn: () => void, ms: number) => {
    if (stopped) return;
    retry = setTimeout(fn, ms);
    retry.unref();
  };
  const failed = (kind: string, e?: unknown) => {
    o.onWatchError?.(kind, errorClass(e));
    const wait = backoffMs;
    backoffMs = Math.min(backoffMs * 2, 5_000);
    // Jitter keeps many replicas from reconnecting in lockstep.
    schedule(list, wait / 2 + Math.random() * (wait / 2));
  };

  const list = async () => {
    if (stopped) return;
    try {
      const res = await core.listNamespacedConfigMap({
        namespace: o.namespace,
        labelSelector: PROJECTOR_CONFIG_SELECTOR,
      });
      texts.clear();
      for (const cm of res.items) absorb(cm as ConfigMapLike);
      resourceVersion = res.metadata?.resourceVersion;
      contact();
      rebuild();
      await watch();
      markSynced();
    } catch (e) {
      markSynced();
      failed('list', e);
    }
  };

  const armWatchdog = () => {
    if (watchdog) clearTimeout(watchdog);
    // A watch that stays silent past its own server-side timeout is a dead connection: reconnect.
    watchdog = setTimeout(() => abort?.abort(), (watchTimeout + 5) * 1000);
    watchdog.unref();
  };

  const watch = async () => {
    if (stopped) return;
    let ended = false;
    let relist = false;
    const w = new k8s.Watch(o.kubeConfig);
    abort = await w.watch(
      `/api/v1/namespaces/${encodeURIComponent(o.namespace)}/configmaps`,
      {
        labelSelector: PROJECTOR_CONFIG_SELECTOR,
        allowWatchBookmarks: true,
        timeoutSeconds: watchTimeout,
        ...(resourceVersion ? { resourceVersion } : {}),
      },
      (type: string, obj: ConfigMapLike & { code?: number }) => {
        armWatchdog();
        contact();
        if (type === 'ERROR') {
          relist = true; // e.g. 410 Gone: the resourceVersion is too old
          abort?.abort();
          return;
        }
        if (obj?.metadata?.resourceVersion) resourceVersion = obj.metadata.resourceVersion;
        if (type === 'BOOKMARK') return;
        if (type === 'DELETED') texts.delete(obj.metadata?.name ?? '');
        else absorb(obj);
        rebuildSoon();
      },
      (err: unknown) => {
        if (ended) return;
        ended = true;
        watchOpen = false;
        lastContact = now(); // it was open until now; the backoff is not reset by an ending

        if (watchdog) clearTimeout(watchdog);
        if (stopped) return;
        if (err && !relist) return failed('watch', err);
        if (relist) return schedule(list, 0);
        schedule(() => void watch(), 0); // server-side timeout: re-watch from the last resourceVersion
      },
    );
    if (!ended) {
      watchOpen = true;
      contact();
      armWatchdog();
    }
  };

  void list();

  return {
    current: () => {
      enforceBounds();
      return state;
    },
    stalenessSeconds: () =>
      watchOpen ? 0 : lastContact === Number.NEGATIVE_INFINITY ? Infinity : (now() - lastContact) / 1000,
    synced,
    close: () => {
      stopped = true;
      clearInterval(ticker);
      if (pending) clearTimeout(pending);
      if (watchdog) clearTimeout(watchdog);
      if (retry) clearTimeout(retry);
      abort?.abort();
    },
  };
}

/** A content-free description of a client error: HTTP status or error code, else its class. */
function errorClass(e: unknown): string {
  const x = e as { code?: unknown; statusCode?: unknown; name?: unknown } | undefined;
  if (typeof x?.code === 'number' || typeof x?.statusCode === 'number')
    return `http ${x.code ?? x.statusCode}`;
  if (typeof x?.code === 'string') return x.code;
  return typeof x?.name === 'string' ? x.name : 'error';
}
