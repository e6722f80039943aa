/**
 * The HTTPS front of the webhook: `/validate*` (AdmissionReview v1), `/healthz`, `/readyz`, `/metrics`.
 * The serving certificate comes from a mounted Secret directory (tls.crt, tls.key) and is swapped in
 * with setSecureContext when the files change (kubelet's atomic symlink swap, cert-manager renewals).
 */
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { errorFields } from '../common/error-fields.ts';
import { fsProblem } from '../common/fs-problem.ts';
import { createLogger, type Logger } from '../common/log.ts';
import { answerOps, listen, type OpsEndpoints, Readiness, stopGracefully } from '../common/server.ts';
import type { ShutdownTiming } from '../common/shutdown.ts';
import type { ReviewOutcome } from './review.ts';

export type ReviewHandler = (body: Buffer) => ReviewOutcome | Promise<ReviewOutcome>;

export interface WebhookServerOptions {
  certDir: string;
  handler: ReviewHandler;
  port?: number;
  host?: string;
  /** Extra readiness condition (e.g. the cluster caches have synced). */
  ready?: () => boolean;
  registry?: Registry;
  /** Poll interval for certificate changes, in addition to fs.watch (default 10 s). */
  certPollMs?: number;
  maxBodyBytes?: number;
  logger?: Logger;
}

export interface WebhookServer {
  server: Server;
  port: number;
  registry: Registry;
  /** Re-reads the certificate files now; true when a new pair was installed. */
  reloadCertificate(): boolean;
  /** Stop at once: every connection is cut. */
  close(): Promise<void>;
  /** SIGTERM path: not ready, keep serving for delayMs, then drain in-flight reviews (common/shutdown.ts). */
  shutdown(timing: ShutdownTiming): Promise<{ forced: boolean }>;
}

interface KeyPair {
  cert: Buffer;
  key: Buffer;
  digest: string;
  notAfter: number;
}

/**
 * Why the certificate directory cannot serve, as `<file>: <problem>` without any key material, or
 * undefined when it can. Run before anything else starts, so a missing Secret mount is the first and
 * only thing the operator reads.
 */
export function certificateProblem(dir: string): string | undefined {
  for (const file of ['tls.crt', 'tls.key']) {
    try {
      readFileSync(join(dir, file));
    } catch (err) {
      return `${join(dir, file)}: ${fsProblem(err)}`;
    }
  }
  try {
    readPair(dir);
    return undefined;
  } catch (err) {
    // The key material itself is never echoed: only which check failed.
    return err instanceof Error && err.message === 'tls.key does not match tls.crt'
      ? `${join(dir, 'tls.key')}: does not match tls.crt`
      : `${dir}: tls.crt and tls.key are not a PEM certificate and private key`;
  }
}

function readPair(dir: string): KeyPair {
  const cert = readFileSync(join(dir, 'tls.crt'));
  const key = readFileSync(join(dir, 'tls.key'));
  const x509 = new X509Certificate(cert);
  if (!x509.checkPrivateKey(createPrivateKey(key))) throw new Error('tls.key does not match tls.crt');
  const digest = createHash('sha256').update(cert).update(key).digest('hex');
  return { cert, key, digest, notAfter: Date.parse(x509.validTo) / 1000 };
}

class Metrics {
  readonly reviews: Counter<'kind' | 'verdict' | 'reason'>;
  readonly latency: Histogram<'kind'>;
  readonly reloads: Counter<'result'>;
  readonly notAfter: Gauge;
  constructor(readonly registry: Registry) {
    this.reviews = new Counter({
      name: 'fgentic_webhook_reviews_total',
      help: 'AdmissionReviews answered, by kind, verdict and first reason code',
      labelNames: ['kind', 'verdict', 'reason'],
      registers: [registry],
    });
    this.latency = new Histogram({
      name: 'fgentic_webhook_review_duration_seconds',
      help: 'Time from request end to response, by kind',
      labelNames: ['kind'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5],
      registers: [registry],
    });
    this.reloads = new Counter({
      name: 'fgentic_webhook_certificate_reloads_total',
      help: 'Serving certificate (re)loads, by result',
      labelNames: ['result'],
      registers: [registry],
    });
    this.notAfter = new Gauge({
      name: 'fgentic_webhook_certificate_not_after_seconds',
      help: 'Expiry of the serving certificate (unix seconds)',
      registers: [registry],
    });
  }
}

const JSON_HEADERS = { 'content-type': 'application/json' };
const TEXT = { 'content-type': 'text/plain' };

/** Logs a review that was not allowed; one that threw at error, by the thrown class and code only. */
function logOutcome(log: Logger, out: ReviewOutcome): void {
  if (out.verdict === 'allowed') return;
  (out.error ? log.error : log.info)('admission', {
    kind: out.kind,
    namespace: out.namespace,
    name: out.name,
    verdict: out.verdict,
    reason: out.reason,
    ...(out.error ? { thrown: out.error.error, ...(out.error.code ? { code: out.error.code } : {}) } : {}),
  });
}

/** Runs the handler on a complete body and answers, counts and logs the outcome. */
function answerReview(res: ServerResponse, body: Buffer, opts: WebhookServerOptions, metrics: Metrics, log: Logger) {
  const start = process.hrtime.bigint();
  const send = (out: ReviewOutcome) => {
    res.writeHead(200, JSON_HEADERS).end(JSON.stringify(out.review));
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    metrics.latency.observe({ kind: out.kind }, seconds);
    metrics.reviews.inc({ kind: out.kind, verdict: out.verdict, reason: out.reason });
    logOutcome(log, out);
  };
  let result: ReviewOutcome | Promise<ReviewOutcome>;
  try {
    result = opts.handler(body);
  } catch (err) {
    result = Promise.reject(err);
  }
  if (result instanceof Promise)
    result.then(send, (err: unknown) => {
      log.error('admission review failed; denied', errorFields(err));
      metrics.reviews.inc({ kind: 'unknown', verdict: 'error', reason: 'internal' });
      res.writeHead(500, TEXT).end('internal error');
    });
  else send(result);
}

/**
 * Reads a review body of at most `maxBody` bytes and calls `done` with it; a larger one is answered
 * 413 and the connection closed, an aborted one is dropped.
 */
function readReviewBody(
  req: IncomingMessage,
  res: ServerResponse,
  maxBody: number,
  metrics: Metrics,
  done: (body: Buffer) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let aborted = false;
  req.on('data', (c: Buffer) => {
    if (aborted) return;
    size += c.length;
    if (size > maxBody) {
      aborted = true;
      metrics.reviews.inc({ kind: 'unknown', verdict: 'error', reason: 'too-large' });
      res.writeHead(413, { ...TEXT, connection: 'close' }).end('request body too large');
      req.destroy();
      return;
    }
    chunks.push(c);
  });
  req.on('error', () => {
    aborted = true;
  });
  req.on('end', () => {
    if (!aborted) done(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
  });
}

/** The request router: operations endpoints, then `POST /validate*` with a JSON body. */
function createRequestListener(
  opts: WebhookServerOptions,
  ops: OpsEndpoints,
  metrics: Metrics,
  log: Logger,
): (req: IncomingMessage, res: ServerResponse) => void {
  const maxBody = opts.maxBodyBytes ?? 3 * 1024 * 1024;
  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (req.method === 'GET' && answerOps(res, path, ops)) return;
    if (path !== '/validate' && !path.startsWith('/validate/')) {
      res.writeHead(404, TEXT).end('not found');
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST', ...TEXT }).end('POST only');
      return;
    }
    const ct = req.headers['content-type'] ?? '';
    if (!ct.startsWith('application/json')) {
      res.writeHead(415, TEXT).end('content-type must be application/json');
      return;
    }
    readReviewBody(req, res, maxBody, metrics, (body) => answerReview(res, body, opts, metrics, log));
  };
}

/**
 * The serving certificate: re-read on a change of the directory (debounced) and every `pollMs`;
 * a pair that does not load keeps the previous one.
 */
class CertificateWatch {
  private debounce: NodeJS.Timeout | undefined;
  private watcher: FSWatcher | undefined;
  private readonly poll: NodeJS.Timeout;

  constructor(
    private pair: KeyPair,
    private readonly server: Server,
    private readonly certDir: string,
    private readonly metrics: Metrics,
    private readonly log: Logger,
    pollMs: number,
  ) {
    try {
      this.watcher = watch(certDir, { persistent: false }, () => {
        clearTimeout(this.debounce);
        this.debounce = setTimeout(() => this.reload(), 100);
        this.debounce.unref();
      });
      this.watcher.on('error', () => this.watcher?.close());
    } catch {
      this.watcher = undefined;
    }
    this.poll = setInterval(() => this.reload(), pollMs);
    this.poll.unref();
  }

  /** True when a new pair was installed. */
  reload(): boolean {
    let next: KeyPair;
    try {
      next = readPair(this.certDir);
    } catch (err) {
      // Mid-rotation (one file written, not the other) or a broken Secret: keep serving the old pair.
      this.metrics.reloads.inc({ result: 'failed' });
      this.log.warn('certificate reload failed; keeping the previous certificate', {
        // The class and errno only: a message names paths and can quote file content.
        ...errorFields(err),
      });
      return false;
    }
    if (next.digest === this.pair.digest) return false;
    this.server.setSecureContext({ cert: next.cert, key: next.key, minVersion: 'TLSv1.2' });
    this.pair = next;
    this.metrics.reloads.inc({ result: 'reloaded' });
    this.metrics.notAfter.set(next.notAfter);
    this.log.info('certificate reloaded', { notAfter: new Date(next.notAfter * 1000).toISOString() });
    return true;
  }

  stop(): void {
    clearInterval(this.poll);
    clearTimeout(this.debounce);
    this.watcher?.close();
  }
}

export async function startWebhookServer(opts: WebhookServerOptions): Promise<WebhookServer> {
  const log = opts.logger ?? createLogger('webhook');
  const registry = opts.registry ?? new Registry();
  const metrics = new Metrics(registry);
  const pair = readPair(opts.certDir);
  metrics.reloads.inc({ result: 'loaded' });
  metrics.notAfter.set(pair.notAfter);
  const readiness = new Readiness(opts.ready ?? (() => true));
  const listener = createRequestListener(opts, { registry, ready: () => readiness.ready() }, metrics, log);
  const server = createServer({ cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' }, listener);
  server.keepAliveTimeout = 30_000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 10_000;
  const certificate = new CertificateWatch(pair, server, opts.certDir, metrics, log, opts.certPollMs ?? 10_000);
  let port: number;
  try {
    ({ port } = await listen(server, opts.port ?? 8443, opts.host ?? '0.0.0.0'));
  } catch (err) {
    certificate.stop();
    throw err;
  }
  log.info('webhook listening', { port });
  return {
    server,
    port,
    registry,
    reloadCertificate: () => certificate.reload(),
    close: () =>
      new Promise<void>((resolve) => {
        certificate.stop();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
    shutdown: (timing) => stopGracefully({ server, readiness, log, beforeDrain: () => certificate.stop() }, timing),
  };
}
