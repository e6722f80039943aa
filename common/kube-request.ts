/**
 * Requests to the Kubernetes API as plain JSON, without @kubernetes/client-node's typed
 * (de)serialisation, and watches as newline-delimited JSON streams. Shared by the controller and the
 * two servers' ConfigMap watches.
 *
 * Why plain JSON: `KubernetesObjectApi.patch` and `.list` pass built-in kinds through the client's
 * generated models, which rename fields that are reserved words in TypeScript: a NetworkPolicy
 * rule's `from` is the model's `_from`, so a plain object's `from` is silently dropped on the way out
 * (the policy would then admit every source) and comes back as `_from` on the way in.
 *
 * Nothing here can hang: every request has a deadline from the moment it is sent (not from when
 * headers arrive), and a watch has a watchdog armed at send and re-armed by every byte received.
 * Optional `RequestPolicy` hooks: a client-side rate limiter every attempt waits for, a fence that
 * refuses the attempt (a write under a lost leadership term), and 429 / `Retry-After` handling as
 * client-go's `rest.Request` does it (wait the advertised delay, then retry, at most 10 times).
 */
import http from 'node:http';
import https from 'node:https';
import { createInterface } from 'node:readline';
import type * as k8s from '@kubernetes/client-node';

/** An API error as client-node reports one: `code` is the HTTP status; `body` the Status object. */
export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly body: unknown,
    message: string,
    /** The server's `Retry-After`, in ms, when it sent one. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

export interface RawRequest {
  method: 'GET' | 'PATCH' | 'DELETE' | 'POST' | 'PUT';
  path: string;
  query?: Record<string, string | undefined>;
  body?: unknown;
  contentType?: string;
  /** Deadline for the whole request from the moment it is sent (default 30 s). */
  timeoutMs?: number;
}

/** Waits for permission to send one request (the controller's token bucket). */
export interface RequestLimiter {
  /** Resolves when a request of this priority may be sent (0 is served first). */
  acquire(priority: number): Promise<void>;
  /** The server asked every client to wait until this time (epoch ms): 429 with Retry-After. */
  pauseUntil(epochMs: number): void;
}

export interface RequestPolicy {
  limiter?: RequestLimiter;
  /** Lower is more urgent; default 1. */
  priority?: number;
  /** Called before every attempt; throws to refuse it (a leadership term that is no longer held). */
  fence?: () => void;
  /** Retries of a 429 (or a 5xx with Retry-After), each after the advertised delay (default 10). */
  maxRetries?: number;
  /** Longest Retry-After honoured, in ms (default 10 s); longer ones are waited only this long. */
  maxRetryAfterMs?: number;
  /** Injected sleep (tests). */
  sleep?: (ms: number) => Promise<void>;
}

/** The collection path of a kind: `/api/v1/namespaces/ns/configmaps` or `/apis/g/v/plural`. */
export function collectionPath(apiVersion: string, plural: string, namespace?: string): string {
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  return namespace ? `${base}/namespaces/${encodeURIComponent(namespace)}/${plural}` : `${base}/${plural}`;
}

/** `Retry-After` in ms: delta-seconds, or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(v: string | string[] | undefined, now = Date.now()): number | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  if (s === undefined || s.trim() === '') return undefined;
  if (/^\d+$/.test(s.trim())) return Number(s.trim()) * 1000;
  const t = Date.parse(s);
  return Number.isNaN(t) ? undefined : Math.max(0, t - now);
}

const defaultSleep = (ms: number) =>
  new Promise<void>((r) => {
    const t = setTimeout(r, ms);
    t.unref?.();
  });

async function prepare(kc: k8s.KubeConfig, path: string, query: Record<string, string | undefined> = {}) {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('no current cluster in the kubeconfig');
  const url = new URL(path, server);
  for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, v);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  return { url, opts, mod: url.protocol === 'https:' ? https : http };
}

/** One attempt, with an absolute deadline from the moment it is sent. */
async function attempt<T>(kc: k8s.KubeConfig, r: RawRequest): Promise<T> {
  const { url, opts, mod } = await prepare(kc, r.path, r.query);
  const payload = r.body === undefined ? undefined : JSON.stringify(r.body);
  return new Promise<T>((resolve, reject) => {
    const req = mod.request(
      url,
      {
        ...opts,
        method: r.method,
        headers: {
          ...(opts.headers ?? {}),
          accept: 'application/json',
          ...(payload !== undefined
            ? {
                'content-type': r.contentType ?? 'application/json',
                'content-length': Buffer.byteLength(payload),
              }
            : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          clearTimeout(deadline);
          const text = Buffer.concat(chunks).toString('utf8');
          let body: unknown;
          try {
            body = text ? JSON.parse(text) : undefined;
          } catch {
            body = undefined;
          }
          const code = res.statusCode ?? 0;
          if (code >= 200 && code < 300) return resolve(body as T);
          // The Status reason and the API server's message name the object and the cause; they carry
          // no object content.
          const status = body as { reason?: string; message?: string } | undefined;
          reject(
            new ApiError(
              code,
              body,
              `HTTP ${code}${status?.reason ? ` ${status.reason}` : ''}${status?.message ? `: ${status.message}` : ''}`,
              parseRetryAfter(res.headers['retry-after']),
            ),
          );
        });
        res.on('error', (e) => {
          clearTimeout(deadline);
          reject(e);
        });
      },
    );
    const deadline = setTimeout(
      () => req.destroy(Object.assign(new Error(`${r.method} ${url.pathname}: timeout`), { code: 'ETIMEDOUT' })),
      r.timeoutMs ?? 30_000,
    );
    deadline.unref?.();
    req.on('error', (e) => {
      clearTimeout(deadline);
      reject(e);
    });
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

/**
 * One request, through the policy's fence and limiter; a 429 (or a 5xx carrying Retry-After) is
 * retried after the advertised delay, which also pauses the limiter for every other request.
 */
export async function requestJson<T = unknown>(kc: k8s.KubeConfig, r: RawRequest, p: RequestPolicy = {}): Promise<T> {
  const maxRetries = p.maxRetries ?? 10;
  const sleep = p.sleep ?? defaultSleep;
  for (let tries = 0; ; tries++) {
    p.fence?.();
    await p.limiter?.acquire(p.priority ?? 1);
    // The wait may have outlived the term that asked: check again right before sending.
    p.fence?.();
    try {
      return await attempt<T>(kc, r);
    } catch (e) {
      const err = e as ApiError;
      const retryable =
        err instanceof ApiError && (err.code === 429 || (err.code >= 500 && err.retryAfterMs !== undefined));
      if (!retryable || tries >= maxRetries) throw e;
      const wait = Math.min(err.retryAfterMs ?? 1000, p.maxRetryAfterMs ?? 10_000);
      p.limiter?.pauseUntil(Date.now() + wait);
      await sleep(wait);
    }
  }
}

export interface WatchRequest {
  path: string;
  query?: Record<string, string | undefined>;
  /** The watchdog once the stream is open: ended with an error after this long without a byte. */
  idleTimeoutMs: number;
  /** The watchdog from the send until the server answers (default `idleTimeoutMs`). */
  headerTimeoutMs?: number;
  /** One decoded event: `type` and `object` of the stream's line. */
  onEvent: (type: string, object: unknown) => void;
  /** Called once: undefined when the server ended the stream normally, else the error. */
  onEnd: (error?: Error) => void;
  /** Called once the server answered 200: the watch is established. */
  onOpen?: () => void;
}

export interface WatchStream {
  /** Ends the watch; onEnd is not called afterwards. */
  close(): void;
  /** True once the server answered 200 and the stream is open. */
  readonly open: boolean;
}

/** A watch the server refused: its status and the reason its body gives end the watch. */
function endRefused(res: http.IncomingMessage, code: number, end: (e?: Error) => void): void {
  const chunks: Buffer[] = [];
  res.on('data', (c: Buffer) => chunks.push(c));
  res.on('end', () => {
    let body: { reason?: string } | undefined;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      body = undefined;
    }
    end(
      new ApiError(
        code,
        body,
        `HTTP ${code}${body?.reason ? ` ${body.reason}` : ''}`,
        parseRetryAfter(res.headers['retry-after']),
      ),
    );
  });
  res.on('error', (e) => end(e));
}

/** The open stream's lines, one event each, until `done`; a torn line is skipped. */
function readEvents(res: http.IncomingMessage, w: WatchRequest, done: () => boolean): void {
  const lines = createInterface({ input: res });
  // readline re-emits its input's errors; the response's own handler reports them.
  lines.on('error', () => undefined);
  lines.on('line', (line) => {
    if (done() || line.trim() === '') return;
    let data: { type?: string; object?: unknown };
    try {
      data = JSON.parse(line);
    } catch {
      return; // a torn line; the watch goes on
    }
    w.onEvent(String(data.type), data.object);
  });
}

/**
 * A watch (`?watch=true`) as a stream of JSON lines. The watchdog is armed when the request is sent
 * and re-armed by every byte, so a server that never answers, never sends headers, or goes silent
 * mid-stream ends the watch with an error after `idleTimeoutMs`.
 */
export function openWatch(kc: k8s.KubeConfig, w: WatchRequest): WatchStream {
  let closed = false;
  let ended = false;
  let isOpen = false;
  let req: http.ClientRequest | undefined;
  let watchdog: NodeJS.Timeout | undefined;
  const end = (e?: Error) => {
    if (watchdog) clearTimeout(watchdog);
    if (ended) return;
    ended = true;
    isOpen = false;
    req?.destroy();
    if (!closed) w.onEnd(e);
  };
  const arm = (ms = w.idleTimeoutMs) => {
    if (watchdog) clearTimeout(watchdog);
    watchdog = setTimeout(
      () => end(Object.assign(new Error('watch silent past its deadline'), { code: 'EWATCHDOG' })),
      ms,
    );
    watchdog.unref?.();
  };
  arm(w.headerTimeoutMs ?? w.idleTimeoutMs);
  prepare(kc, w.path, { watch: 'true', ...(w.query ?? {}) })
    .then(({ url, opts, mod }) => {
      if (ended || closed) return;
      req = mod.request(
        url,
        { ...opts, method: 'GET', headers: { ...(opts.headers ?? {}), accept: 'application/json' } },
        (res) => {
          arm();
          const code = res.statusCode ?? 0;
          if (code !== 200) {
            endRefused(res, code, end);
            return;
          }
          isOpen = true;
          w.onOpen?.();
          res.on('data', () => arm());
          readEvents(res, w, () => ended || closed);
          res.on('end', () => end());
          res.on('error', (e) => end(e));
          res.on('close', () => end(res.complete ? undefined : new Error('watch connection closed')));
        },
      );
      req.on('error', (e) => end(e));
      req.end();
    })
    .catch((e: unknown) => end(e as Error));
  return {
    close: () => {
      closed = true;
      end();
    },
    get open() {
      return isOpen && !ended;
    },
  };
}
