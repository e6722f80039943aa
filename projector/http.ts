/**
 * agentgateway v1.3.1 HTTP ext-auth adapter (docs/upstream.md#agentgateway-ext-auth-request): maps a check
 * request to the pure decision and back. Nothing else lives here.
 *
 * - Any method on any path reaches the decision (which requires POST and the agent's exact path);
 *   only GET /healthz, /readyz and /metrics without any identity header are answered as operations
 *   endpoints, so a misrouted check can never receive a header-less 2xx.
 * - The body is never read: a check request that carries or announces one is denied (the rendered
 *   policy never sets forwardBody).
 * - 2xx always carries exactly one x-fgentic-identity and one x-user-id. Denials are 401/403 with
 *   `{"error":"denied","reason":"<code>"}` and nothing from the request.
 * - Authorization/Cookie values are never read; their presence denies (`credential_header`).
 * - One content-free audit line per decision: route, configured agent, decision, reason, status.
 */
import { randomBytes as nodeRandomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { createLogger } from '../common/log.ts';
import type { ProjectorConfig } from './config.ts';
import type { ConfigStore } from './config-store.ts';
import { type Decision, decide, routeOf } from './decide.ts';
import { ConfiguredReader, liveRoomCheck, type RoomStateReader } from './homeserver.ts';
import { type DenyReason, statusFor } from './reasons.ts';
import { type CheckRequest, classifyHeader, ignoredHeaderLabel } from './request.ts';

const log = createLogger('projector');

export interface ProjectorHandlerOptions {
  readonly store: ConfigStore;
  /** Current Unix time in seconds (default: wall clock, floored). */
  readonly now?: () => number;
  readonly randomBytes?: (n: number) => Uint8Array;
  /** Live room-state reader override (tests, embedded stacks); default: matrix-js-sdk from config. */
  readonly homeserver?: RoomStateReader;
  /** True once shutdown began: /readyz answers 503 while in-flight checks finish. */
  readonly draining?: () => boolean;
}

export interface ProjectorHandler {
  (req: IncomingMessage, res: ServerResponse): void;
  readonly registry: Registry;
}

const OPS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

function denyBody(reason: DenyReason): string {
  return `{"error":"denied","reason":"${reason}"}`;
}

function hasIdentityInput(headers: IncomingMessage['headers']): boolean {
  for (const name of Object.keys(headers)) {
    if (name.startsWith('x-fgentic-') || name === 'x-user-id') return true;
  }
  return false;
}

export function createProjectorHandler(options: ProjectorHandlerOptions): ProjectorHandler {
  const registry = new Registry();
  const decisions = new Counter({
    name: 'fgentic_projector_decisions_total',
    help: 'Ext-auth check decisions by route, decision and reason code.',
    labelNames: ['route', 'decision', 'reason'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'fgentic_projector_check_duration_seconds',
    help: 'Time from check request to response, by route.',
    labelNames: ['route'] as const,
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5],
    registers: [registry],
  });
  new Gauge({
    name: 'fgentic_projector_config_ready',
    help: '1 when a valid configuration is loaded, 0 when the projector denies everything.',
    registers: [registry],
    collect() {
      this.set(isReady() ? 1 : 0);
    },
  });
  const store = options.store as ConfigStore & { stalenessSeconds?: () => number };
  if (store.stalenessSeconds !== undefined) {
    const staleness = store.stalenessSeconds.bind(store);
    new Gauge({
      name: 'fgentic_projector_registry_staleness_seconds',
      help: 'Seconds since the projector last had contact with the API server for its registry (0 while its watch is open).',
      registers: [registry],
      collect() {
        const v = staleness();
        this.set(Number.isFinite(v) ? v : -1);
      },
    });
  }
  const liveChecks = new Counter({
    name: 'fgentic_projector_live_room_checks_total',
    help: 'Live homeserver room-state checks by result.',
    labelNames: ['result'] as const,
    registers: [registry],
  });

  const ignoredHeaders = new Counter({
    name: 'fgentic_projector_ignored_headers_total',
    help: 'Check-request headers ignored as mesh, proxy or tracing plumbing, by bounded header name (never values).',
    labelNames: ['route', 'header'] as const,
    registers: [registry],
  });
  const countIgnored = (input: CheckRequest) => {
    const route = routeOf(input);
    if (route === undefined) return;
    for (const name of Object.keys(input.headers)) {
      if (input.headers[name] !== undefined && classifyHeader(name, route) === 'ignored')
        ignoredHeaders.inc({ route, header: ignoredHeaderLabel(name) });
    }
  };

  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  const random = options.randomBytes ?? ((n: number) => nodeRandomBytes(n));
  const configured = new ConfiguredReader();
  const readerFor = (config: ProjectorConfig, generation: number): RoomStateReader | undefined =>
    options.homeserver ?? configured.get(config, generation);
  const isReady = (): boolean => {
    if (options.draining?.()) return false;
    const state = options.store.current();
    if (!state.ready) return false;
    if (options.homeserver !== undefined) return options.homeserver.isWarm?.() ?? true;
    return configured.usable(state.config, state.generation);
  };

  // Start loading the live check's client now (when the configuration enables it), so the replica
  // turns ready as soon as it is warm instead of on its first probe.
  isReady();
  options.homeserver?.warm?.().catch(() => {});

  const finish = (
    res: ServerResponse,
    started: bigint,
    decision: Decision | { route: 'unknown'; allow: false; reason: DenyReason },
  ) => {
    const agent =
      'agent' in decision && decision.agent
        ? `${decision.agent.namespace}/${decision.agent.name}`
        : undefined;
    let status: number;
    if (decision.allow) {
      try {
        res.writeHead(200, {
          'x-fgentic-identity': decision.headers['x-fgentic-identity'],
          'x-user-id': decision.headers['x-user-id'],
          'content-length': '0',
          'cache-control': 'no-store',
        });
        res.end();
        status = 200;
      } catch {
        // A header value Node refuses to write: never a header-less 2xx.
        return finish(res, started, { route: 'unknown', allow: false, reason: 'internal' });
      }
    } else {
      status = statusFor(decision.reason);
      const body = denyBody(decision.reason);
      res.writeHead(status, {
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(body)),
        'cache-control': 'no-store',
      });
      res.end(body);
    }
    const reason = decision.allow ? 'ok' : decision.reason;
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    decisions.inc({ route: decision.route, decision: decision.allow ? 'allow' : 'deny', reason });
    latency.observe({ route: decision.route }, seconds);
    log.info('decision', {
      route: decision.route,
      ...(agent ? { agent } : {}),
      decision: decision.allow ? 'allow' : 'deny',
      reason,
      status,
      duration_ms: Math.round(seconds * 1e6) / 1e3,
    });
  };

  const ops = (res: ServerResponse, path: string) => {
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/readyz') {
      const ok = isReady();
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ready\n' : 'not ready\n');
    } else {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    }
  };

  const check = (
    req: IncomingMessage,
    res: ServerResponse,
    started: bigint,
    headers: Record<string, string[] | undefined>,
  ) => {
    const state = options.store.current();
    const input: CheckRequest = { method: req.method ?? '', path: req.url ?? '', headers };
    countIgnored(input);
    const decision = decide(input, state.ready ? state.config : undefined, {
      now: now(),
      randomBytes: random,
    });
    if (
      !decision.allow ||
      decision.route !== 'local' ||
      !state.ready ||
      !state.config.liveRoomCheck.enabled
    ) {
      finish(res, started, decision);
      return;
    }
    const config = state.config;
    const reader = readerFor(config, state.generation);
    if (reader === undefined) {
      finish(res, started, {
        route: 'local',
        allow: false,
        reason: 'homeserver_unavailable',
        agent: decision.agent,
      });
      return;
    }
    liveRoomCheck(reader, config, decision.room, decision.context, config.liveRoomCheck.timeoutMs).then(
      (result) => {
        liveChecks.inc({ result: result.ok ? 'ok' : result.reason });
        finish(
          res,
          started,
          result.ok
            ? decision
            : { route: 'local', allow: false, reason: result.reason, agent: decision.agent },
        );
      },
      () => finish(res, started, { route: 'local', allow: false, reason: 'internal', agent: decision.agent }),
    );
  };

  const handler = ((req: IncomingMessage, res: ServerResponse) => {
    const started = process.hrtime.bigint();
    const target = req.url ?? '';
    if (req.method === 'GET' && OPS_PATHS.has(target) && !hasIdentityInput(req.headers)) {
      ops(res, target);
      return;
    }
    // The body is never parsed. Without transfer-encoding the decision sees content-length (only
    // "0" passes) and any bytes are drained unread. With transfer-encoding (a client stack may frame
    // an empty body as chunked) the bytes are counted, never kept: an empty body is no body, and any
    // byte denies.
    if (req.headers['transfer-encoding'] === undefined) {
      req.resume();
      check(req, res, started, req.headersDistinct);
      return;
    }
    let bytes = 0;
    let answered = false;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (chunk.length > 0 && !answered) {
        answered = true;
        res.setHeader('connection', 'close');
        finish(res, started, { route: 'unknown', allow: false, reason: 'body' });
      }
    });
    req.on('end', () => {
      if (answered || bytes !== 0) return;
      answered = true;
      const headers = { ...req.headersDistinct };
      delete headers['transfer-encoding'];
      check(req, res, started, headers);
    });
    req.on('error', () => {
      if (!answered) {
        answered = true;
        finish(res, started, { route: 'unknown', allow: false, reason: 'body' });
      }
    });
  }) as ProjectorHandler;
  Object.defineProperty(handler, 'registry', { value: registry });
  return handler;
}
