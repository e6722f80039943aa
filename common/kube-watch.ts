/**
 * A list + watch of ConfigMaps in one namespace through the Kubernetes API, with the contact clock
 * both servers' staleness rules are built on (projector/kube-store.ts, retrieval/config-kube.ts).
 *
 * Contact: an established watch is contact for as long as it stays open; otherwise the last list, the
 * end of a watch or any watch event. A silently dead connection is ended by a watchdog
 * `watchTimeoutSeconds + 5 s` after its last sign of life (the server ends a quiet watch at
 * `watchTimeoutSeconds`), so `contactAgeMs()` starts growing at most that long after the API server
 * went away. Failed lists and watches are retried with capped exponential backoff and jitter; a 410
 * Expired relists.
 *
 * Selection is by label (`labelSelector`) or by name (`fieldSelector: metadata.name=...`): a request
 * with an exact `metadata.name` field selector is authorized by kube-apiserver as a request for that
 * name, so a Role can narrow it with `resourceNames` (a label-selected one cannot).
 */
import * as k8s from '@kubernetes/client-node';

export type ConfigMapLike = {
  metadata?: { name?: string; resourceVersion?: string };
  data?: Record<string, string>;
};

export interface ConfigMapWatchOptions {
  readonly kubeConfig: k8s.KubeConfig;
  readonly namespace: string;
  readonly labelSelector?: string;
  readonly fieldSelector?: string;
  /** Server-side watch timeout; a quiet watch is re-established this often (default 20 s). */
  readonly watchTimeoutSeconds?: number;
  readonly now?: () => number;
  /**
   * The selected ConfigMaps by name, after every list (at once) and after a burst of watch events
   * (coalesced over 10 ms: the controller writes related objects one after the other).
   */
  readonly onObjects: (objects: ReadonlyMap<string, ConfigMapLike>) => void;
  /** A failed list or watch (`list`/`watch`) and the error's class, for logs and metrics. */
  readonly onWatchError?: (kind: string, error: string) => void;
}

export interface ConfigMapWatch {
  /** Milliseconds since the last contact: 0 while the watch is open, Infinity before any contact. */
  contactAgeMs(): number;
  /** Resolves once the first list is in and its watch is open (or after the first failure). */
  readonly synced: Promise<void>;
  close(): void;
}

export function watchConfigMaps(o: ConfigMapWatchOptions): ConfigMapWatch {
  const now = o.now ?? Date.now;
  const watchTimeout = o.watchTimeoutSeconds ?? 20;
  const core = o.kubeConfig.makeApiClient(k8s.CoreV1Api);
  const objects = new Map<string, ConfigMapLike>();
  const selectors = {
    ...(o.labelSelector !== undefined ? { labelSelector: o.labelSelector } : {}),
    ...(o.fieldSelector !== undefined ? { fieldSelector: o.fieldSelector } : {}),
  };
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

  let pending: NodeJS.Timeout | undefined;
  const publishSoon = () => {
    if (pending || stopped) return;
    pending = setTimeout(() => {
      pending = undefined;
      if (!stopped) o.onObjects(objects);
    }, 10);
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
      const res = await core.listNamespacedConfigMap({ namespace: o.namespace, ...selectors });
      objects.clear();
      for (const cm of res.items) {
        const name = cm.metadata?.name;
        if (name !== undefined) objects.set(name, cm as ConfigMapLike);
      }
      resourceVersion = res.metadata?.resourceVersion;
      contact();
      if (!stopped) o.onObjects(objects);
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
        ...selectors,
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
        const name = obj?.metadata?.name;
        if (name === undefined) return;
        if (type === 'DELETED') objects.delete(name);
        else objects.set(name, obj);
        publishSoon();
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
        // Server-side timeout: re-watch from the last resourceVersion. client-node prepares the
        // request (credentials, TLS) before its own error handling, so a rejection here is a failed
        // watch like any other, never an unhandled rejection (common/kube-watch.test.ts).
        schedule(() => void watch().catch((e: unknown) => failed('watch', e)), 0);
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
    contactAgeMs: () =>
      watchOpen ? 0 : lastContact === Number.NEGATIVE_INFINITY ? Infinity : now() - lastContact,
    synced,
    close: () => {
      stopped = true;
      if (pending) clearTimeout(pending);
      if (watchdog) clearTimeout(watchdog);
      if (retry) clearTimeout(retry);
      abort?.abort();
    },
  };
}

/** A content-free description of a client error: HTTP status or error code, else its class. */
export function errorClass(e: unknown): string {
  const x = e as { code?: unknown; statusCode?: unknown; name?: unknown } | undefined;
  if (typeof x?.code === 'number' || typeof x?.statusCode === 'number')
    return `http ${x.code ?? x.statusCode}`;
  if (typeof x?.code === 'string') return x.code;
  return typeof x?.name === 'string' ? x.name : 'error';
}
