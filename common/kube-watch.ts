/**
 * A list + watch of ConfigMaps in one namespace through the Kubernetes API, with the contact clock
 * both servers' staleness rules are built on (projector/kube-store.ts, retrieval/config-kube.ts).
 *
 * Contact: an established watch is contact for as long as it stays open; otherwise the last list,
 * any watch event, or the end of a watch that lived a second or delivered anything. A watch that
 * the server ends at once without a word is a failure, not contact, and is retried after a
 * backoff (common/backoff.ts `WatchGuard`, the rule the controller's informers use too), so it can
 * neither spin nor keep the staleness clock at 0. Nothing can hang: a list has a deadline from its
 * send (`listTimeoutMs`, 10 s); a watch has a watchdog from its send (the same 10 s until the server
 * answers, then `watchTimeoutSeconds + 5 s` after its last byte; the server ends a quiet watch at
 * `watchTimeoutSeconds`), so `contactAgeMs()` starts growing at most that long after the API server
 * went away, and a hung request is abandoned and retried. Failed lists and watches are retried with
 * capped exponential backoff and jitter; a 410 Expired relists.
 *
 * Selection is by label (`labelSelector`) or by name (`fieldSelector: metadata.name=...`): a request
 * with an exact `metadata.name` field selector is authorized by kube-apiserver as a request for that
 * name, so a Role can narrow it with `resourceNames` (a label-selected one cannot).
 */
import type * as k8s from '@kubernetes/client-node';
import { type BackoffPolicy, WatchGuard } from './backoff.ts';
import { openWatch, requestJson, type WatchStream } from './kube-request.ts';

/** Restarts of these watches: 250 ms doubling to 5 s, half of it random (the servers fail closed meanwhile). */
const RESTART_BACKOFF: BackoffPolicy = { baseMs: 250, capMs: 5_000, jitter: 0.5 };

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
  /** Deadline of a list request from its send (default 10 s). */
  readonly listTimeoutMs?: number;
  /** Restart schedule after a failed list or watch (default 250 ms doubling to 5 s, jittered). */
  readonly backoff?: BackoffPolicy;
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
  const listTimeoutMs = o.listTimeoutMs ?? 10_000;
  const guard = new WatchGuard(o.backoff ?? RESTART_BACKOFF);
  const objects = new Map<string, ConfigMapLike>();
  const selectors = {
    ...(o.labelSelector !== undefined ? { labelSelector: o.labelSelector } : {}),
    ...(o.fieldSelector !== undefined ? { fieldSelector: o.fieldSelector } : {}),
  };
  const path = `/api/v1/namespaces/${encodeURIComponent(o.namespace)}/configmaps`;
  let lastContact = Number.NEGATIVE_INFINITY;
  /** The open watch: when it opened and whether it delivered anything (then it is contact). */
  let current: { stream: WatchStream; openedAt: number; events: number } | undefined;
  let resourceVersion: string | undefined;
  let stopped = false;
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

  const schedule = (fn: () => void, ms: number) => {
    if (stopped) return;
    retry = setTimeout(fn, ms);
    retry.unref();
  };
  const failed = (kind: string, e: unknown, delay: number) => {
    o.onWatchError?.(kind, errorClass(e));
    schedule(() => void list(), delay);
  };

  const list = async () => {
    if (stopped) return;
    let res: { items?: ConfigMapLike[]; metadata?: { resourceVersion?: string } };
    try {
      res = await requestJson(o.kubeConfig, {
        method: 'GET',
        path,
        query: selectors,
        timeoutMs: listTimeoutMs,
      });
    } catch (e) {
      markSynced();
      return failed('list', e, guard.failure());
    }
    if (stopped) return;
    objects.clear();
    for (const cm of res.items ?? []) {
      const name = cm.metadata?.name;
      if (name !== undefined) objects.set(name, cm);
    }
    resourceVersion = res.metadata?.resourceVersion;
    lastContact = now();
    o.onObjects(objects);
    watch();
  };

  const watch = () => {
    if (stopped) return;
    let relist = false;
    const openedAt = now();
    const w: { stream: WatchStream; openedAt: number; events: number } = {
      stream: undefined as unknown as WatchStream,
      openedAt,
      events: 0,
    };
    current = w;
    w.stream = openWatch(o.kubeConfig, {
      path,
      query: {
        ...selectors,
        allowWatchBookmarks: 'true',
        timeoutSeconds: String(watchTimeout),
        ...(resourceVersion ? { resourceVersion } : {}),
      },
      // The watchdog runs from the send: a request that never answers, or a watch silent past its
      // own server-side timeout, is a dead connection.
      idleTimeoutMs: (watchTimeout + 5) * 1000,
      headerTimeoutMs: listTimeoutMs,
      onEvent: (type, raw) => {
        const obj = raw as ConfigMapLike & { code?: number };
        w.events++;
        lastContact = now();
        guard.alive();
        if (type === 'ERROR') {
          relist = true; // e.g. 410 Gone: the resourceVersion is too old
          w.stream.close();
          ended(undefined);
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
      onEnd: (err) => ended(err),
      onOpen: markSynced,
    });
    let done = false;
    const ended = (err: Error | undefined) => {
      if (done) return;
      done = true;
      markSynced(); // a watch that failed to open still settles the first sync
      if (current === w) current = undefined;
      if (stopped) return;
      const end = { failed: err !== undefined, events: w.events, livedMs: now() - w.openedAt };
      // It was open until now, unless it ended at once without a word (then it proves nothing).
      if (!WatchGuard.failed(end)) lastContact = now();
      if (relist) return schedule(() => void list(), 0);
      const delay = guard.ended(end);
      if (err) return failed('watch', err, delay);
      if (delay > 0) o.onWatchError?.('watch', 'closed at once');
      // Server-side timeout: re-watch from the last resourceVersion (at once, unless it spun).
      schedule(watch, delay);
    };
  };

  void list();

  return {
    contactAgeMs: () => {
      // An open watch is contact; one that then ends at once without a word is not counted as
      // contact afterwards (lastContact is left where the last real contact put it).
      if (current?.stream.open) return 0;
      return lastContact === Number.NEGATIVE_INFINITY ? Infinity : now() - lastContact;
    },
    synced,
    close: () => {
      stopped = true;
      if (pending) clearTimeout(pending);
      if (retry) clearTimeout(retry);
      current?.stream.close();
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
