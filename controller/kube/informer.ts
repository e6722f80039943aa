/**
 * A list+watch cache of one kind, as client-go's reflector keeps one: list once (in pages of 500, as
 * its pager does), then watch from the list's resourceVersion with bookmarks (so a resumed watch starts from a recent version, not the
 * list's), resume after a watch ends from the last version seen, and list again only when the API
 * server answers 410 Gone (the version was compacted away). Failed lists and watches are retried
 * after a capped exponential delay with jitter (`backoff.ts`, WATCH_BACKOFF).
 *
 * The cache is what the reconciler reads, so a pass lists nothing. Writes the controller makes are
 * written through (`upsert`, `drop`) so the next pass sees them before their watch events arrive;
 * the watch event then replaces the entry with the same or a newer version.
 */
import type * as k8s from '@kubernetes/client-node';
import { type BackoffPolicy, WATCH_BACKOFF, WatchGuard } from '../../common/backoff.ts';
import { openWatch, type WatchStream } from '../../common/kube-request.ts';
import { createLogger } from '../../common/log.ts';
import type { K8sObject } from '../types.ts';
import { collectionPath, requestJson } from './raw.ts';

const log = createLogger('controller');

export type InformerEvent = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface InformerOptions {
  kubeConfig: k8s.KubeConfig;
  apiVersion: string;
  kind: string;
  plural: string;
  labelSelector?: string;
  /** List and watch in this namespace only (default: every namespace). */
  namespace?: string;
  /** Called for every change to the cache (watch events, and the differences a re-list finds). */
  onEvent?: (type: InformerEvent, obj: K8sObject, prev: K8sObject | undefined) => void;
  /** Called when a list or watch failed, with the delay before the next attempt. */
  onRetry?: (what: 'list' | 'watch', delayMs: number, error: string) => void;
  backoff?: BackoffPolicy;
  random?: () => number;
  /** The server ends a watch after this long; the informer resumes it (default 300 s). */
  watchTimeoutSeconds?: number;
  /** Deadline of a list page, and of a watch until the server answers, from the send (default 30 s). */
  listTimeoutMs?: number;
  /** Objects per list page (`limit`; default 500, client-go's pager); 0 lists in one response. */
  listPageSize?: number;
}

/** client-go's pager default (`tools/pager` defaultPageSize). */
export const LIST_PAGE_SIZE = 500;

type ListPage = { items?: K8sObject[]; metadata?: { resourceVersion?: string; continue?: string } };

export const objectKey = (o: { metadata: { namespace?: string; name: string } }) =>
  `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/** Class of an error for logs: HTTP status or a Node error code, never a response body. */
export function errorClass(e: unknown): string {
  const x = e as { code?: number | string; statusCode?: number; cause?: { code?: string } };
  if (typeof x?.statusCode === 'number') return `HTTP ${x.statusCode}`;
  if (typeof x?.code === 'number') return `HTTP ${x.code}`;
  return String(x?.cause?.code ?? x?.code ?? 'error');
}

export class Informer {
  private readonly store = new Map<string, K8sObject>();
  private resourceVersion: string | undefined;
  private abort: WatchStream | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly guard: WatchGuard;
  /** The next watch starts from a list just made (a 410 on it then must not re-list at once). */
  private afterList = false;
  private stopped = false;
  private hasSynced = false;
  private hasSettled = false;
  private syncWaiters: (() => void)[] = [];
  private settleWaiters: (() => void)[] = [];
  /** Lists made (the first one and every re-list after 410 Gone); for metrics and tests. */
  lists = 0;
  /** Watches opened. */
  watches = 0;

  constructor(private readonly o: InformerOptions) {
    this.guard = new WatchGuard(o.backoff ?? WATCH_BACKOFF, o.random);
  }

  get apiVersion(): string {
    return this.o.apiVersion;
  }
  get kind(): string {
    return this.o.kind;
  }
  /** The namespace this cache covers; undefined for every namespace. */
  get namespace(): string | undefined {
    return this.o.namespace;
  }

  start(): void {
    this.stopped = false;
    void this.relist();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.abort?.close();
    this.abort = undefined;
    for (const w of [...this.syncWaiters, ...this.settleWaiters]) w();
    this.syncWaiters = [];
    this.settleWaiters = [];
  }

  /**
   * Resolves after the first list attempt, successful or not: a kind the cluster does not serve (an
   * upstream that moved on) must not hold the controller, which then reports the upstream instead.
   */
  settled(): Promise<void> {
    if (this.hasSettled || this.stopped) return Promise.resolve();
    return new Promise((r) => this.settleWaiters.push(r));
  }

  private settle(): void {
    if (this.hasSettled) return;
    this.hasSettled = true;
    for (const w of this.settleWaiters) w();
    this.settleWaiters = [];
  }

  /** Resolves once the first list is in the cache (or the informer was stopped). */
  synced(): Promise<void> {
    if (this.hasSynced || this.stopped) return Promise.resolve();
    return new Promise((r) => this.syncWaiters.push(r));
  }

  isSynced(): boolean {
    return this.hasSynced;
  }

  get(namespace: string | undefined, name: string): K8sObject | undefined {
    return this.store.get(`${namespace ?? ''}/${name}`);
  }

  list(): K8sObject[] {
    return [...this.store.values()];
  }

  get size(): number {
    return this.store.size;
  }

  /** The resourceVersion a resumed watch would start from (the last list, event or bookmark seen). */
  get lastSyncResourceVersion(): string | undefined {
    return this.resourceVersion;
  }

  /** Write-through of an object the controller just wrote (the API server's answer). */
  upsert(obj: K8sObject): void {
    if (!obj?.metadata?.name) return;
    this.store.set(objectKey(obj), { ...obj, apiVersion: this.o.apiVersion, kind: this.o.kind });
  }

  /** Write-through of a delete. */
  drop(namespace: string | undefined, name: string): void {
    this.store.delete(`${namespace ?? ''}/${name}`);
  }

  private retry(what: 'list' | 'watch', e: unknown, next: () => void): void {
    if (this.stopped) return;
    this.retryAfter(what, e, this.guard.failure(), next);
  }

  private retryAfter(what: 'list' | 'watch', e: unknown, delay: number, next: () => void): void {
    if (this.stopped) return;
    const error = errorClass(e);
    this.o.onRetry?.(what, delay, error);
    log.warn('informer retry', { kind: this.o.kind, what, error, delayMs: Math.round(delay) });
    this.timer = setTimeout(() => {
      this.timer = undefined;
      next();
    }, delay);
    this.timer.unref();
  }

  /**
   * One list, in pages of `listPageSize` as client-go's reflector lists through its pager: one
   * response of 100,000 objects is about 90 MB of JSON, and parsing it at once would hold the event
   * loop (and the Lease renewal behind it) for seconds; pages of 500 are parsed one at a time, with
   * the event loop free in between. The pages are one consistent list at the first page's
   * resourceVersion. A continue token the server no longer serves (410 Expired: the list took longer
   * than its compaction window) falls back to one unpaged list, as client-go's pager does.
   */
  private async listAll(): Promise<{ items: K8sObject[]; resourceVersion: string | undefined }> {
    const path = collectionPath(this.o.apiVersion, this.o.plural, this.o.namespace);
    const limit = this.o.listPageSize ?? LIST_PAGE_SIZE;
    // Plain JSON, as the watch delivers it (kube/raw.ts: the typed client renames some fields).
    const get = (query: Record<string, string | undefined>) =>
      requestJson<ListPage>(this.o.kubeConfig, {
        method: 'GET',
        path,
        query: { labelSelector: this.o.labelSelector, ...query },
        timeoutMs: this.o.listTimeoutMs ?? 30_000,
      });
    const items: K8sObject[] = [];
    let page = await get(limit > 0 ? { limit: String(limit) } : {});
    const resourceVersion = page.metadata?.resourceVersion;
    for (;;) {
      for (const item of page.items ?? []) items.push(item);
      const token = page.metadata?.continue;
      if (!token || this.stopped) return { items, resourceVersion };
      try {
        page = await get({ limit: String(limit), continue: token });
      } catch (e) {
        if ((e as { code?: number }).code !== 410) throw e;
        log.warn('list continue expired: listing again in one response', { kind: this.o.kind });
        const full = await get({});
        return { items: full.items ?? [], resourceVersion: full.metadata?.resourceVersion };
      }
    }
  }

  private async relist(): Promise<void> {
    if (this.stopped) return;
    let res: { items: K8sObject[]; resourceVersion: string | undefined };
    try {
      this.lists++;
      res = await this.listAll();
    } catch (e) {
      this.settle();
      return this.retry('list', e, () => void this.relist());
    }
    if (this.stopped) return;
    const seen = new Set<string>();
    let n = 0;
    for (const item of res.items) {
      // 100,000 objects are a while: let timers (the Lease renewal) and sockets run in between.
      if (++n % 1000 === 0) {
        await new Promise<void>((r) => setImmediate(r));
        if (this.stopped) return;
      }
      const obj = { ...item, apiVersion: this.o.apiVersion, kind: this.o.kind };
      const k = objectKey(obj);
      seen.add(k);
      const prev = this.store.get(k);
      this.store.set(k, obj);
      if (!prev) this.o.onEvent?.('ADDED', obj, undefined);
      else if (prev.metadata.resourceVersion !== obj.metadata.resourceVersion) this.o.onEvent?.('MODIFIED', obj, prev);
    }
    // A re-list after 410 Gone may have missed deletions: whatever the list lacks is gone.
    for (const [k, prev] of [...this.store]) {
      if (seen.has(k)) continue;
      this.store.delete(k);
      this.o.onEvent?.('DELETED', prev, prev);
    }
    this.resourceVersion = res.resourceVersion;
    this.guard.alive();
    if (!this.hasSynced) {
      this.hasSynced = true;
      for (const w of this.syncWaiters) w();
      this.syncWaiters = [];
    }
    this.settle();
    this.afterList = true;
    this.watch();
  }

  private watch(): void {
    if (this.stopped) return;
    const afterList = this.afterList;
    this.afterList = false;
    let gone = false;
    let events = 0;
    const opened = Date.now();
    this.watches++;
    const timeout = this.o.watchTimeoutSeconds ?? 300;
    const stream = openWatch(this.o.kubeConfig, {
      path: collectionPath(this.o.apiVersion, this.o.plural, this.o.namespace),
      query: {
        allowWatchBookmarks: 'true',
        timeoutSeconds: String(timeout),
        ...(this.resourceVersion ? { resourceVersion: this.resourceVersion } : {}),
        ...(this.o.labelSelector ? { labelSelector: this.o.labelSelector } : {}),
      },
      // The watchdog runs from the send: no answer within the list deadline, or silence past the
      // server's own timeout, ends the watch as failed.
      headerTimeoutMs: this.o.listTimeoutMs ?? 30_000,
      idleTimeoutMs: (timeout + 5) * 1000,
      onEvent: (type, o) => {
        const raw = o as K8sObject & { code?: number };
        if (type === 'ERROR') {
          // 410 Expired/Gone: our version was compacted away; only a fresh list is consistent.
          gone = raw?.code === 410;
          if (!gone) log.warn('watch error event', { kind: this.o.kind, code: raw?.code ?? 0 });
          this.abort?.close();
          ended(undefined);
          return;
        }
        this.guard.alive();
        events++;
        if (raw?.metadata?.resourceVersion) this.resourceVersion = raw.metadata.resourceVersion;
        if (type === 'BOOKMARK') return;
        const obj = { ...raw, apiVersion: this.o.apiVersion, kind: this.o.kind };
        const k = objectKey(obj);
        const prev = this.store.get(k);
        if (type === 'DELETED') {
          this.store.delete(k);
          // The echo of a delete the controller wrote through is no news.
          if (prev) this.o.onEvent?.('DELETED', obj, prev);
          return;
        }
        this.store.set(k, obj);
        // The echo of a write the controller wrote through (same resourceVersion) is no news.
        if (prev?.metadata.resourceVersion === obj.metadata.resourceVersion) return;
        this.o.onEvent?.(type as InformerEvent, obj, prev);
      },
      onEnd: (err) => ended(err),
    });
    this.abort = stream;
    let done = false;
    const ended = (err: Error | undefined) => {
      if (done) return;
      done = true;
      if (this.abort === stream) this.abort = undefined;
      if (this.stopped) return;
      if (gone) {
        this.resourceVersion = undefined;
        // 410 on the very version a list just returned: re-listing at once would spin; back off.
        if (afterList && events === 0) return this.retry('list', new Error('expired'), () => void this.relist());
        void this.relist();
        return;
      }
      // A watch the server ended (its timeout) resumes at once from the last version seen; a failed
      // one, or one closed at once without a word, backs off (common/backoff.ts WatchGuard).
      const delay = this.guard.ended({ failed: err !== undefined, events, livedMs: Date.now() - opened });
      if (delay === 0) return this.watch();
      this.retryAfter('watch', err ?? new Error('closed'), delay, () => this.watch());
    };
  }
}
