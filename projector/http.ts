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
 * - Ledger mode (`capability: "ledger"`): an allow is answered only once the ledger admitted the
 *   minted value (queued for its record while the ledger is healthy, or recorded in `sync`
 *   confirmation); an unhealthy ledger denies `ledger_unavailable` (docs/ledger.md).
 *
 * Three steps per check: `readCheck` (check parsing), `decideCheck` (the decision call and its I/O
 * steps), `writeDecision` + `finish` (response writing, metrics, audit).
 */
import { randomBytes as nodeRandomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { type ErrorFields, errorFields } from '../common/error-fields.ts';
import { createLogger } from '../common/log.ts';
import { answerOps, sampledGauge } from '../common/server.ts';
import { IDENTITY_HEADER } from '../rules/index.ts';
import type { ProjectorConfig } from './config.ts';
import type { ConfigStore } from './config-store.ts';
import { type Decision, decide, routeOf } from './decide.ts';
import { ConfiguredReader, liveRoomCheck, type RoomStateReader } from './homeserver.ts';
import { type CapabilityLedger, LedgerUnavailableError } from './ledger.ts';
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
  /**
   * The capability ledger, used while the configuration says `capability: "ledger"`; without one,
   * ledger mode refuses every mint (`ledger_unavailable`) and the projector is not ready.
   */
  readonly ledger?: CapabilityLedger;
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

/** A decision, or a denial from the I/O steps; `error` says what was thrown (class and code only). */
type Outcome = (Decision | { route: 'unknown'; allow: false; reason: DenyReason }) & {
  readonly error?: ErrorFields;
};

type ParsedCheck =
  | { readonly ok: true; readonly input: CheckRequest }
  | { readonly ok: false; readonly reason: DenyReason; readonly close: boolean };

/**
 * Check parsing: the normalised check request, or a denial for a body. The body is never parsed.
 * Without transfer-encoding the decision sees content-length (only "0" passes) and any bytes are
 * drained unread. With transfer-encoding (a client stack may frame an empty body as chunked) the
 * bytes are counted, never kept: an empty body is no body, and any byte denies (and closes the
 * connection, since the rest of the body is not read).
 */
function readCheck(req: IncomingMessage, done: (parsed: ParsedCheck) => void): void {
  const input = (headers: Record<string, string[] | undefined>): CheckRequest => ({
    method: req.method ?? '',
    path: req.url ?? '',
    headers,
  });
  if (req.headers['transfer-encoding'] === undefined) {
    req.resume();
    done({ ok: true, input: input(req.headersDistinct) });
    return;
  }
  let bytes = 0;
  let answered = false;
  req.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    if (chunk.length > 0 && !answered) {
      answered = true;
      done({ ok: false, reason: 'body', close: true });
    }
  });
  req.on('end', () => {
    if (answered || bytes !== 0) return;
    answered = true;
    const headers = { ...req.headersDistinct };
    delete headers['transfer-encoding'];
    done({ ok: true, input: input(headers) });
  });
  req.on('error', () => {
    if (!answered) {
      answered = true;
      done({ ok: false, reason: 'body', close: false });
    }
  });
}

/** Response writing: status and headers of one outcome; undefined when Node refuses a header value. */
function writeDecision(res: ServerResponse, decision: Outcome): number | undefined {
  if (decision.allow) {
    try {
      res.writeHead(200, {
        [IDENTITY_HEADER]: decision.headers[IDENTITY_HEADER],
        'x-user-id': decision.headers['x-user-id'],
        'content-length': '0',
        'cache-control': 'no-store',
      });
      res.end();
      return 200;
    } catch {
      return undefined;
    }
  }
  const status = statusFor(decision.reason);
  const body = denyBody(decision.reason);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    'cache-control': 'no-store',
  });
  res.end(body);
  return status;
}

/**
 * The agent and exp a just-minted value is bound to, read back from the value itself so that the
 * ledger records exactly what the retrieval server will decode. The value comes from our own encoder
 * (canonical JSON), so a plain parse suffices; anything unexpected yields undefined (refuse).
 */
export function boundOf(value: string): { agent: string; exp: number } | undefined {
  try {
    const p = JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as {
      agent?: { namespace?: unknown; name?: unknown };
      exp?: unknown;
    };
    const ns = p.agent?.namespace;
    const name = p.agent?.name;
    if (typeof ns !== 'string' || typeof name !== 'string' || !Number.isSafeInteger(p.exp)) return undefined;
    return { agent: `${ns}/${name}`, exp: p.exp as number };
  } catch {
    return undefined;
  }
}

/** The projector's series; the sampled gauges read the store, the ledger and readiness when scraped. */
function createMetrics(registry: Registry, options: ProjectorHandlerOptions, isReady: () => boolean) {
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
  const store = options.store as ConfigStore & {
    stalenessSeconds?: () => number;
    heartbeatAgeSeconds?: () => number;
  };
  if (store.heartbeatAgeSeconds !== undefined)
    sampledGauge(
      registry,
      'fgentic_projector_controller_heartbeat_age_seconds',
      "Seconds since the controller's heartbeat last advanced (-1 before any).",
      store.heartbeatAgeSeconds.bind(store),
    );
  if (store.stalenessSeconds !== undefined)
    sampledGauge(
      registry,
      'fgentic_projector_registry_staleness_seconds',
      'Seconds since the projector last had contact with the API server for its registry (0 while its watch is open).',
      store.stalenessSeconds.bind(store),
    );
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
  new Gauge({
    name: 'fgentic_projector_ledger_ready',
    help: 'Ledger mode: 1 while the capability ledger accepts writes, 0 while minting is refused; -1 in plain mode.',
    registers: [registry],
    collect() {
      const state = options.store.current();
      const ledgerMode = state.ready && state.config.capability === 'ledger';
      this.set(ledgerMode ? (options.ledger?.healthy() ? 1 : 0) : -1);
    },
  });
  const ledgerWrites = new Counter({
    name: 'fgentic_projector_ledger_writes_total',
    help: 'Capability ledger records by result (ok, error).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  return { decisions, latency, liveChecks, ignoredHeaders, ledgerWrites };
}

type Metrics = ReturnType<typeof createMetrics>;

/** Counts the headers the check ignores as plumbing (by bounded name, never value). */
function countIgnored(metrics: Metrics, input: CheckRequest): void {
  const route = routeOf(input);
  if (route === undefined) return;
  for (const name of Object.keys(input.headers)) {
    if (input.headers[name] !== undefined && classifyHeader(name, route) === 'ignored')
      metrics.ignoredHeaders.inc({ route, header: ignoredHeaderLabel(name) });
  }
}

/**
 * Ready: not draining, a valid configuration, in ledger mode a healthy ledger, and a usable live
 * room-state reader where the configuration asks for the live check.
 */
function readinessOf(options: ProjectorHandlerOptions, configured: ConfiguredReader): () => boolean {
  return () => {
    if (options.draining?.()) return false;
    const state = options.store.current();
    if (!state.ready) return false;
    // Ledger mode: not ready while nothing could be minted.
    if (state.config.capability === 'ledger' && !options.ledger?.healthy()) return false;
    if (options.homeserver !== undefined) return options.homeserver.isWarm?.() ?? true;
    return configured.usable(state.config, state.generation);
  };
}

/** Response writing: the one place a check is answered, counted and audited. */
function finish(metrics: Metrics, res: ServerResponse, started: bigint, decision: Outcome): void {
  const status = writeDecision(res, decision);
  if (status === undefined) {
    // A header value Node refuses to write: never a header-less 2xx.
    finish(metrics, res, started, { route: 'unknown', allow: false, reason: 'internal' });
    return;
  }
  const agent =
    'agent' in decision && decision.agent ? `${decision.agent.namespace}/${decision.agent.name}` : undefined;
  const reason = decision.allow ? 'ok' : decision.reason;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  metrics.decisions.inc({ route: decision.route, decision: decision.allow ? 'allow' : 'deny', reason });
  metrics.latency.observe({ route: decision.route }, seconds);
  // An unexpected throw is logged at warn, with its class and code (never its message).
  (decision.error ? log.warn : log.info)('decision', {
    route: decision.route,
    ...(agent ? { agent } : {}),
    decision: decision.allow ? 'allow' : 'deny',
    reason,
    status,
    duration_ms: Math.round(seconds * 1e6) / 1e3,
    ...(decision.error
      ? { thrown: decision.error.error, ...(decision.error.code ? { code: decision.error.code } : {}) }
      : {}),
  });
}

/** What the decision call needs besides the check itself. */
interface DecideContext {
  readonly options: ProjectorHandlerOptions;
  readonly metrics: Metrics;
  readonly now: () => number;
  readonly random: (n: number) => Uint8Array;
  readonly readerFor: (config: ProjectorConfig, generation: number) => RoomStateReader | undefined;
}

/**
 * The decision call: the pure decision, then the steps that need I/O — the live room check (local
 * route, when enabled) and, in ledger mode, recording the minted value. Resolves to the outcome to
 * write; never rejects.
 */
async function decideCheck(ctx: DecideContext, input: CheckRequest): Promise<Outcome> {
  const state = ctx.options.store.current();
  countIgnored(ctx.metrics, input);
  if (!state.ready && state.reason) return { route: 'unknown', allow: false, reason: state.reason };
  const decision = decide(input, state.ready ? state.config : undefined, {
    now: ctx.now(),
    randomBytes: ctx.random,
  });
  if (!decision.allow || !state.ready) return decision;
  const config = state.config;
  if (decision.route === 'local' && config.liveRoomCheck.enabled) {
    const denial = await checkLiveRoom(ctx, decision, config, state.generation);
    if (denial !== undefined) return denial;
  }
  return config.capability === 'ledger' ? recordMinted(ctx.options.ledger, decision, config) : decision;
}

/** The live room check of an allowed local-route decision: a denial, or undefined when it passes. */
async function checkLiveRoom(
  ctx: DecideContext,
  decision: Decision & { allow: true; route: 'local' },
  config: ProjectorConfig,
  generation: number,
): Promise<Outcome | undefined> {
  const reader = ctx.readerFor(config, generation);
  if (reader === undefined)
    return { route: 'local', allow: false, reason: 'homeserver_unavailable', agent: decision.agent };
  try {
    const result = await liveRoomCheck(reader, config, decision.room, decision.context, config.liveRoomCheck.timeoutMs);
    ctx.metrics.liveChecks.inc({ result: result.ok ? 'ok' : result.reason });
    if (!result.ok) return { route: 'local', allow: false, reason: result.reason, agent: decision.agent };
    return undefined;
  } catch (e) {
    return { route: 'local', allow: false, reason: 'internal', agent: decision.agent, error: errorFields(e) };
  }
}

/**
 * Ledger mode: the value leaves the projector only once the ledger admitted it — queued while the
 * ledger is healthy (deferred) or recorded (sync); projector/ledger.ts.
 */
async function recordMinted(
  ledger: CapabilityLedger | undefined,
  decision: Outcome & { allow: true },
  config: ProjectorConfig,
): Promise<Outcome> {
  const refuse: Outcome = {
    route: decision.route,
    allow: false,
    reason: 'ledger_unavailable',
    agent: decision.agent,
  } as Outcome;
  const value = decision.headers[IDENTITY_HEADER];
  const bound = boundOf(value);
  if (ledger === undefined || bound === undefined) return refuse;
  try {
    // The deadline of the configuration this check was decided under (spec.ledger).
    ledger.setRecordDeadline(config.ledger.recordDeadlineMilliseconds);
    await ledger.admit(value, bound.agent, bound.exp);
    return decision;
  } catch (e) {
    // A ledger that is down is the expected case; anything else is logged by its class.
    return e instanceof LedgerUnavailableError ? refuse : { ...refuse, error: errorFields(e) };
  }
}

const PROBE_BODIES = { healthy: 'ok\n', ready: 'ready\n', notReady: 'not ready\n' };

export function createProjectorHandler(options: ProjectorHandlerOptions): ProjectorHandler {
  const registry = new Registry();
  const configured = new ConfiguredReader();
  const isReady = readinessOf(options, configured);
  const metrics = createMetrics(registry, options, isReady);
  const ctx: DecideContext = {
    options,
    metrics,
    now: options.now ?? (() => Math.floor(Date.now() / 1000)),
    random: options.randomBytes ?? ((n: number) => nodeRandomBytes(n)),
    readerFor: (config, generation) => options.homeserver ?? configured.get(config, generation),
  };
  // Start loading the live check's client now (when the configuration enables it), so the replica
  // turns ready as soon as it is warm instead of on its first probe.
  isReady();
  options.homeserver?.warm?.().catch(() => {});
  options.ledger?.onWrite((result, entries) => metrics.ledgerWrites.inc({ result }, entries));

  const check = (res: ServerResponse, started: bigint, input: CheckRequest) => {
    decideCheck(ctx, input).then(
      (outcome) => finish(metrics, res, started, outcome),
      (e) =>
        finish(metrics, res, started, {
          route: 'unknown',
          allow: false,
          reason: 'internal',
          error: errorFields(e),
        }),
    );
  };

  const handler = ((req: IncomingMessage, res: ServerResponse) => {
    const started = process.hrtime.bigint();
    const target = req.url ?? '';
    if (req.method === 'GET' && OPS_PATHS.has(target) && !hasIdentityInput(req.headers)) {
      answerOps(res, target, { registry, ready: isReady, bodies: PROBE_BODIES });
      return;
    }
    readCheck(req, (parsed) => {
      if (parsed.ok) check(res, started, parsed.input);
      else {
        if (parsed.close) res.setHeader('connection', 'close');
        finish(metrics, res, started, { route: 'unknown', allow: false, reason: parsed.reason });
      }
    });
  }) as ProjectorHandler;
  Object.defineProperty(handler, 'registry', { value: registry });
  return handler;
}
