/**
 * The plumbing every server of this package shares: listening, the operations endpoints
 * (`/healthz`, `/readyz`, `/metrics`), readiness with a draining flag, and the graceful stop of
 * common/shutdown.ts. Each server keeps its own request handling; this is only what they had
 * written out alike.
 */
import type { Server as HttpServer, ServerResponse } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { Gauge, type Registry } from 'prom-client';
import type { Logger } from './log.ts';
import { drainHttpServer, type ShutdownTiming, sleep } from './shutdown.ts';

type AnyServer = HttpServer | HttpsServer;

/** Starts listening; rejects with the listen error (a port in use) instead of emitting it. */
export async function listen(server: AnyServer, port: number, host?: string): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    const done = () => {
      server.off('error', reject);
      resolve();
    };
    if (host === undefined) server.listen(port, done);
    else server.listen(port, host, done);
  });
  return server.address() as AddressInfo;
}

/** `http://host:port` of a listening server (IPv6 hosts bracketed). */
export function urlOf(address: AddressInfo, scheme = 'http'): string {
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `${scheme}://${host}:${address.port}`;
}

/**
 * Readiness: a server is ready while it is not draining and every condition holds. Draining is set
 * once by the SIGTERM path and never cleared.
 */
export class Readiness {
  private isDraining = false;
  constructor(private readonly condition: () => boolean = () => true) {}
  get draining(): boolean {
    return this.isDraining;
  }
  drain(): void {
    this.isDraining = true;
  }
  ready(): boolean {
    return !this.isDraining && this.condition();
  }
}

/** The bodies a server answers its probes with (kept per server: scripts and tests read them). */
export interface ProbeBodies {
  readonly healthy: string;
  readonly ready: string;
  readonly notReady: string;
}

export const PLAIN_BODIES: ProbeBodies = { healthy: 'ok', ready: 'ok', notReady: 'not ready' };

export interface OpsEndpoints {
  readonly registry: Registry;
  readonly ready: () => boolean;
  readonly bodies?: ProbeBodies;
  /** Runs before each scrape (series computed on demand). */
  readonly beforeScrape?: () => void;
}

const TEXT = { 'content-type': 'text/plain' };

/** Answers `path` when it is one of the operations endpoints; false when it is not. */
export function answerOps(res: ServerResponse, path: string, ops: OpsEndpoints): boolean {
  const bodies = ops.bodies ?? PLAIN_BODIES;
  if (path === '/healthz') {
    res.writeHead(200, TEXT).end(bodies.healthy);
  } else if (path === '/readyz') {
    const ok = ops.ready();
    res.writeHead(ok ? 200 : 503, TEXT).end(ok ? bodies.ready : bodies.notReady);
  } else if (path === '/metrics') {
    ops.beforeScrape?.();
    sendMetrics(res, ops.registry);
  } else return false;
  return true;
}

/** The registry's text exposition, or a bare 500 when collecting fails. */
export function sendMetrics(res: ServerResponse, registry: Registry): void {
  registry.metrics().then(
    (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
    () => res.writeHead(500).end(),
  );
}

/** A gauge read when scraped; a non-finite reading is exported as -1 ("never"). */
export function sampledGauge(registry: Registry, name: string, help: string, read: () => number): Gauge {
  return new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      const v = read();
      this.set(Number.isFinite(v) ? v : -1);
    },
  });
}

export interface GracefulStop {
  readonly server: Pick<HttpServer, 'close' | 'closeIdleConnections' | 'closeAllConnections'>;
  readonly readiness: Readiness;
  readonly log: Logger;
  /** After the delay, before the listener closes (stop timers and watchers). */
  readonly beforeDrain?: () => void;
  /** After in-flight requests finished (close stores and pools). */
  readonly afterDrain?: () => Promise<void> | void;
}

/**
 * The SIGTERM path: not ready at once, keep serving for `delayMs` while endpoints propagate, then
 * drain in-flight requests (common/shutdown.ts).
 */
export async function stopGracefully(s: GracefulStop, timing: ShutdownTiming): Promise<{ forced: boolean }> {
  s.readiness.drain();
  s.log.info('shutting down: not ready, draining', {
    delay_ms: timing.delayMs,
    timeout_ms: timing.timeoutMs,
  });
  await sleep(timing.delayMs);
  s.beforeDrain?.();
  const result = await drainHttpServer(s.server, timing.timeoutMs);
  await s.afterDrain?.();
  s.log.info('stopped', { forced: result.forced });
  return result;
}
