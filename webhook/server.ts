/**
 * The HTTPS front of the webhook: `/validate*` (AdmissionReview v1), `/healthz`, `/readyz`, `/metrics`.
 * The serving certificate comes from a mounted Secret directory (tls.crt, tls.key) and is swapped in
 * with setSecureContext when the files change (kubelet's atomic symlink swap, cert-manager renewals).
 */
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { errorFields } from '../common/error-fields.ts';
import { fsProblem } from '../common/fs-problem.ts';
import { createLogger, type Logger } from '../common/log.ts';
import { drainHttpServer, type ShutdownTiming, sleep } from '../common/shutdown.ts';
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

export async function startWebhookServer(opts: WebhookServerOptions): Promise<WebhookServer> {
  const log = opts.logger ?? createLogger('webhook');
  const registry = opts.registry ?? new Registry();
  const metrics = new Metrics(registry);
  const maxBody = opts.maxBodyBytes ?? 3 * 1024 * 1024;
  let pair = readPair(opts.certDir);
  metrics.reloads.inc({ result: 'loaded' });
  metrics.notAfter.set(pair.notAfter);

  let draining = false;
  const server = createServer({ cert: pair.cert, key: pair.key, minVersion: 'TLSv1.2' }, (req, res) => {
    const url = req.url ?? '/';
    const path = url.split('?')[0] ?? '/';
    if (req.method === 'GET' && path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    if (req.method === 'GET' && path === '/readyz') {
      const ok = !draining && (opts.ready ? opts.ready() : true);
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok' : 'not ready');
      return;
    }
    if (req.method === 'GET' && path === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
      return;
    }
    if (path !== '/validate' && !path.startsWith('/validate/')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST', 'content-type': 'text/plain' }).end('POST only');
      return;
    }
    const ct = req.headers['content-type'] ?? '';
    if (!ct.startsWith('application/json')) {
      res.writeHead(415, { 'content-type': 'text/plain' }).end('content-type must be application/json');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let aborted = false;
    req.on('data', (c: Buffer) => {
      if (aborted) return;
      size += c.length;
      if (size > maxBody) {
        aborted = true;
        metrics.reviews.inc({ kind: 'unknown', verdict: 'error', reason: 'too-large' });
        res
          .writeHead(413, { 'content-type': 'text/plain', connection: 'close' })
          .end('request body too large');
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('error', () => {
      aborted = true;
    });
    req.on('end', () => {
      if (aborted) return;
      const start = process.hrtime.bigint();
      const send = (out: ReviewOutcome) => {
        res.writeHead(200, JSON_HEADERS).end(JSON.stringify(out.review));
        const seconds = Number(process.hrtime.bigint() - start) / 1e9;
        metrics.latency.observe({ kind: out.kind }, seconds);
        metrics.reviews.inc({ kind: out.kind, verdict: out.verdict, reason: out.reason });
        if (out.verdict !== 'allowed')
          // A review that threw is logged at error, by the thrown class and code only.
          (out.error ? log.error : log.info)('admission', {
            kind: out.kind,
            namespace: out.namespace,
            name: out.name,
            verdict: out.verdict,
            reason: out.reason,
            ...(out.error
              ? { thrown: out.error.error, ...(out.error.code ? { code: out.error.code } : {}) }
              : {}),
          });
      };
      let result: ReviewOutcome | Promise<ReviewOutcome>;
      try {
        result = opts.handler(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
      } catch (err) {
        result = Promise.reject(err);
      }
      if (result instanceof Promise)
        result.then(send, (err: unknown) => {
          log.error('admission review failed; denied', errorFields(err));
          metrics.reviews.inc({ kind: 'unknown', verdict: 'error', reason: 'internal' });
          res.writeHead(500, { 'content-type': 'text/plain' }).end('internal error');
        });
      else send(result);
    });
  });
  server.keepAliveTimeout = 30_000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 10_000;

  const reloadCertificate = (): boolean => {
    let next: KeyPair;
    try {
      next = readPair(opts.certDir);
    } catch (err) {
      // Mid-rotation (one file written, not the other) or a broken Secret: keep serving the old pair.
      metrics.reloads.inc({ result: 'failed' });
      log.warn('certificate reload failed; keeping the previous certificate', {
        // The class and errno only: a message names paths and can quote file content.
        ...errorFields(err),
      });
      return false;
    }
    if (next.digest === pair.digest) return false;
    server.setSecureContext({ cert: next.cert, key: next.key, minVersion: 'TLSv1.2' });
    pair = next;
    metrics.reloads.inc({ result: 'reloaded' });
    metrics.notAfter.set(pair.notAfter);
    log.info('certificate reloaded', { notAfter: new Date(pair.notAfter * 1000).toISOString() });
    return true;
  };

  let debounce: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(opts.certDir, { persistent: false }, () => {
      clearTimeout(debounce);
      debounce = setTimeout(reloadCertificate, 100);
      debounce.unref();
    });
    watcher.on('error', () => watcher?.close());
  } catch {
    watcher = undefined;
  }
  const poll = setInterval(reloadCertificate, opts.certPollMs ?? 10_000);
  poll.unref();

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 8443, opts.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  log.info('webhook listening', { port });
  return {
    server,
    port,
    registry,
    reloadCertificate,
    close: () =>
      new Promise<void>((resolve) => {
        clearInterval(poll);
        clearTimeout(debounce);
        watcher?.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
    async shutdown(timing) {
      draining = true;
      log.info('shutting down: not ready, draining', {
        delay_ms: timing.delayMs,
        timeout_ms: timing.timeoutMs,
      });
      await sleep(timing.delayMs);
      clearInterval(poll);
      clearTimeout(debounce);
      watcher?.close();
      const result = await drainHttpServer(server, timing.timeoutMs);
      log.info('stopped', { forced: result.forced });
      return result;
    },
  };
}
