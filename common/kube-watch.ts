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

/** One open watch request: when it opened, what it delivered, and how it ended. */
interface OpenWatch {
  stream: WatchStream;
  readonly openedAt: number;
  events: number;
  /** An ERROR event (e.g. 410 Gone: the resourceVersion is too old) asks for a fresh list. */
  relist: boolean;
  done: boolean;
}

/** The list + watch loop: the selected objects, the last resourceVersion and the contact clock. */
class ConfigMapLoop implements ConfigMapWatch {
  private readonly now: () => number;
  private readonly watchTimeout: number;
  private readonly listTimeoutMs: number;
  private readonly guard: WatchGuard;
  private readonly objects = new Map<string, ConfigMapLike>();
  private readonly selectors: Record<string, string>;
  private readonly path: string;
  private lastContact = Number.NEGATIVE_INFINITY;
  private current: OpenWatch | undefined;
  private resourceVersion: string | undefined;
  private stopped = false;
  private retry: NodeJS.Timeout | undefined;
  private pending: NodeJS.Timeout | undefined;
  private markSynced: () => void = () => {};
  readonly synced = new Promise<void>((r) => {
    this.markSynced = r;
  });

  constructor(private readonly o: ConfigMapWatchOptions) {
    this.now = o.now ?? Date.now;
    this.watchTimeout = o.watchTimeoutSeconds ?? 20;
    this.listTimeoutMs = o.listTimeoutMs ?? 10_000;
    this.guard = new WatchGuard(o.backoff ?? RESTART_BACKOFF);
    this.selectors = {
      ...(o.labelSelector !== undefined ? { labelSelector: o.labelSelector } : {}),
      ...(o.fieldSelector !== undefined ? { fieldSelector: o.fieldSelector } : {}),
    };
    this.path = `/api/v1/namespaces/${encodeURIComponent(o.namespace)}/configmaps`;
  }

  contactAgeMs(): number {
    // An open watch is contact; one that then ends at once without a word is not counted as
    // contact afterwards (lastContact is left where the last real contact put it).
    if (this.current?.stream.open) return 0;
    return this.lastContact === Number.NEGATIVE_INFINITY ? Infinity : this.now() - this.lastContact;
  }

  close(): void {
    this.stopped = true;
    if (this.pending) clearTimeout(this.pending);
    if (this.retry) clearTimeout(this.retry);
    this.current?.stream.close();
  }

  async list(): Promise<void> {
    if (this.stopped) return;
    let res: { items?: ConfigMapLike[]; metadata?: { resourceVersion?: string } };
    try {
      res = await requestJson(this.o.kubeConfig, {
        method: 'GET',
        path: this.path,
        query: this.selectors,
        timeoutMs: this.listTimeoutMs,
      });
    } catch (e) {
      this.markSynced();
      return this.failed('list', e, this.guard.failure());
    }
    if (this.stopped) return;
    this.objects.clear();
    for (const cm of res.items ?? []) {
      const name = cm.metadata?.name;
      if (name !== undefined) this.objects.set(name, cm);
    }
    this.resourceVersion = res.metadata?.resourceVersion;
    this.lastContact = this.now();
    this.o.onObjects(this.objects);
    this.watch();
  }

  private publishSoon(): void {
    if (this.pending || this.stopped) return;
    this.pending = setTimeout(() => {
      this.pending = undefined;
      if (!this.stopped) this.o.onObjects(this.objects);
    }, 10);
  }

  private schedule(fn: () => void, ms: number): void {
    if (this.stopped) return;
    this.retry = setTimeout(fn, ms);
    this.retry.unref();
  }

  private failed(kind: string, e: unknown, delay: number): void {
    this.o.onWatchError?.(kind, errorClass(e));
    this.schedule(() => void this.list(), delay);
  }

  private watch(): void {
    if (this.stopped) return;
    const w: OpenWatch = {
      stream: undefined as unknown as WatchStream,
      openedAt: this.now(),
      events: 0,
      relist: false,
      done: false,
    };
    this.current = w;
    w.stream = openWatch(this.o.kubeConfig, {
      path: this.path,
      query: {
        ...this.selectors,
        allowWatchBookmarks: 'true',
        timeoutSeconds: String(this.watchTimeout),
        ...(this.resourceVersion ? { resourceVersion: this.resourceVersion } : {}),
      },
      // The watchdog runs from the send: a request that never answers, or a watch silent past its
      // own server-side timeout, is a dead connection.
      idleTimeoutMs: (this.watchTimeout + 5) * 1000,
      headerTimeoutMs: this.listTimeoutMs,
      onEvent: (type, raw) => this.event(w, type, raw as ConfigMapLike & { code?: number }),
      onEnd: (err) => this.ended(w, err),
      onOpen: this.markSynced,
    });
  }

  private event(w: OpenWatch, type: string, obj: ConfigMapLike & { code?: number }): void {
    w.events++;
    this.lastContact = this.now();
    this.guard.alive();
    if (type === 'ERROR') {
      w.relist = true;
      w.stream.close();
      this.ended(w, undefined);
      return;
    }
    if (obj?.metadata?.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
    if (type === 'BOOKMARK') return;
    const name = obj?.metadata?.name;
    if (name === undefined) return;
    if (type === 'DELETED') this.objects.delete(name);
    else this.objects.set(name, obj);
    this.publishSoon();
  }

  private ended(w: OpenWatch, err: Error | undefined): void {
    if (w.done) return;
    w.done = true;
    this.markSynced(); // a watch that failed to open still settles the first sync
    if (this.current === w) this.current = undefined;
    if (this.stopped) return;
    const end = { failed: err !== undefined, events: w.events, livedMs: this.now() - w.openedAt };
    // It was open until now, unless it ended at once without a word (then it proves nothing).
    if (!WatchGuard.failed(end)) this.lastContact = this.now();
    if (w.relist) {
      this.schedule(() => void this.list(), 0);
      return;
    }
    const delay = this.guard.ended(end);
    if (err) {
      this.failed('watch', err, delay);
      return;
    }
    if (delay > 0) this.o.onWatchError?.('watch', 'closed at once');
    // Server-side timeout: re-watch from the last resourceVersion (at once, unless it spun).
    this.schedule(() => this.watch(), delay);
  }
}

export function watchConfigMaps(o: ConfigMapWatchOptions): ConfigMapWatch {
  const loop = new ConfigMapLoop(o);
  void loop.list();
  return {
    contactAgeMs: () => loop.contactAgeMs(),
    synced: loop.synced,
    close: () => loop.close(),
  };
}

/** A content-free description of a client error: HTTP status or error code, else its class. */
export function errorClass(e: unknown): string {
  const x = e as { code?: unknown; statusCode?: unknown; name?: unknown } | undefined;
  if (typeof x?.code === 'number' || typeof x?.statusCode === 'number') return `http ${x.code ?? x.statusCode}`;
  if (typeof x?.code === 'string') return x.code;
  return typeof x?.name === 'string' ? x.name : 'error';
}
