/**
 * `fgentic-retrieval serve controller`: leader election on a Lease; the leader keeps list+watch
 * caches (informers) of our four kinds and of every rendered kind, reconciles from them (debounced,
 * one pass at a time, plus a periodic resync), retries failed objects when their backoff is due, and
 * serves /healthz, /readyz and /metrics.
 */

import { createServer, type Server } from 'node:http';
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import type * as k8s from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { apiServerProblem, loadKubeConfig } from '../common/kube-config.ts';
import { createLogger } from '../common/log.ts';
import { answerOps, listen, type OpsEndpoints } from '../common/server.ts';
import { startHeartbeat } from './heartbeat.ts';
import { KubeClient } from './kube/client.ts';
import type { Informer } from './kube/informer.ts';
import { LeaderElector } from './kube/lease.ts';
import { DEFAULT_BURST, DEFAULT_QPS, TokenBucket } from './kube/rate-limit.ts';
import { LEADER_DEFAULTS, LeaderElection } from './leader.ts';
import { ReconcileLoop } from './loop.ts';
import { type ControllerMetrics, createControllerMetrics, recordConditions } from './metrics.ts';
import { type ClusterWriter, selectPlatform } from './reconcile.ts';
import { informersOf, resyncTerm, startTerm } from './term.ts';
import type { RetrievalPlatform } from './types.ts';

const log = createLogger('controller');

export interface ControllerOptions {
  kubeConfig: k8s.KubeConfig;
  port: number;
  leaseNamespace: string;
  leaseName?: string;
  identity?: string;
  leaseDurationSeconds?: number;
  /** client-go's retryPeriod: how often a candidate tries and a leader renews (default 2 s). */
  renewIntervalMs?: number;
  /** client-go's renewDeadline: a leader that cannot renew within it loses its term (default 10 s). */
  renewDeadlineMs?: number;
  /** Called when a term is lost; `serve controller` exits so the Deployment restarts it. Default: campaign again. */
  onLostLeadership?: () => void;
  /** Client-side rate limit of every API request (default 20 per second, bursts of 30). */
  qps?: number;
  burst?: number;
  /** How often the leader writes its heartbeat (default 5 s; projector/heartbeat.ts). */
  heartbeatPeriodMs?: number;
  /** A registry write failing longer than this stops the heartbeat (default 10 s). */
  stuckAfterMs?: number;
  resyncIntervalMs?: number;
  debounceMs?: number;
  /** Applies and deletes in flight at once (default 8). */
  concurrency?: number;
  /** The writer the reconciler uses (default: the KubeClient); tests and benchmarks count through it. */
  writer?: (client: KubeClient) => ClusterWriter;
  /** Incremental render and memos (default true; `Reconciler` option of the same name). */
  incremental?: boolean;
  /** Called after every pass with where its time went (the benchmark's stage table). */
  onPass?: (p: PassTiming) => void;
}

import type { PassTiming } from './loop.ts';

export type { PassTiming };

export interface ControllerHandle {
  port: number;
  registry: Registry;
  isLeader(): boolean;
  /** Resolves when no reconcile is pending or running. */
  idle(): Promise<void>;
  reconciles(): number;
  /** The informers of the current leadership term (empty while standby). */
  informers(): Informer[];
  /** The client-side rate limiter every request of this controller waits on. */
  limiter: TokenBucket;
  /** Starts a full resync now (what the periodic timer does). */
  resync(): void;
  stop(): Promise<void>;
}

/** The API client of every request: rate-limited, and each write fenced by the current term. */
function fencedClient(o: ControllerOptions, loop: ReconcileLoop) {
  const limiter = new TokenBucket(o.qps ?? DEFAULT_QPS, o.burst ?? DEFAULT_BURST);
  const client = new KubeClient(o.kubeConfig, { limiter });
  // Every write checks the term it is sent under: none after the term is lost or unrenewable.
  client.fence = () => {
    const t = loop.term?.lease;
    if (!t) throw Object.assign(new Error('not the leader: write refused'), { fenced: true });
    t.check();
  };
  return { limiter, client, writer: o.writer ? o.writer(client) : client };
}

/**
 * Leader election on the Lease: a won term starts its caches and a pass; a lost one stops them and
 * either ends the process (`onLostLeadership`) or campaigns again.
 */
function createElection(
  o: ControllerOptions,
  identity: string,
  loop: ReconcileLoop,
  writer: ClusterWriter,
  m: ControllerMetrics,
): LeaderElection {
  const leaseDurationSeconds = o.leaseDurationSeconds ?? LEADER_DEFAULTS.leaseDurationMs / 1000;
  const elector = new LeaderElector(o.kubeConfig, {
    name: o.leaseName ?? 'fgentic-retrieval-controller',
    namespace: o.leaseNamespace,
    identity,
    leaseDurationSeconds,
  });
  const election: LeaderElection = new LeaderElection(elector, {
    leaseDurationMs: leaseDurationSeconds * 1000,
    retryPeriodMs: o.renewIntervalMs ?? LEADER_DEFAULTS.retryPeriodMs,
    ...(o.renewDeadlineMs !== undefined ? { renewDeadlineMs: o.renewDeadlineMs } : {}),
    onStarted: (lease) => {
      if (loop.stopped) return;
      loop.leader = true;
      m.leader.set(1);
      log.info('became leader', { term: lease.id });
      loop.term = startTerm(
        o.kubeConfig,
        writer,
        loop.schedule,
        (kind: string, what: 'list' | 'watch') => m.watchRetries.inc({ kind, what }),
        {
          concurrency: o.concurrency ?? 8,
          ...(o.incremental !== undefined ? { incremental: o.incremental } : {}),
        },
        lease,
      );
      loop.schedule();
    },
    onStopped: (lease, reason) => {
      loop.leader = false;
      m.leader.set(0);
      log.error('lost leadership: no more writes under this term', { term: lease.id, reason });
      loop.endTerm();
      if (loop.stopped) return;
      if (o.onLostLeadership) o.onLostLeadership();
      else election.restart();
    },
    onError: (e) => log.warn('lease error', { error: e.message.slice(0, 200) }),
  });
  return election;
}

/**
 * The leader's heartbeat (projector/heartbeat.ts): written while the term is valid, a pass has
 * completed, the caches are listed and no registry write has failed for longer than `stuckAfterMs`.
 */
function startControllerHeartbeat(
  o: ControllerOptions,
  identity: string,
  loop: ReconcileLoop,
  writer: ClusterWriter,
  m: ControllerMetrics,
) {
  return startHeartbeat({
    writer,
    identity,
    ...(o.heartbeatPeriodMs !== undefined ? { periodMs: o.heartbeatPeriodMs } : {}),
    context: () => {
      const t = loop.term;
      const platforms = (t?.own.get('RetrievalPlatform')?.list() ?? []) as unknown as RetrievalPlatform[];
      const ns = selectPlatform(platforms)?.spec?.namespaces?.retrieval;
      // No heartbeat before a pass has rendered the registry (an unsupported upstream renders nothing).
      if (!t || !ns || !t.registry.rendered) return undefined;
      const owner = t.registry.index.object('fgentic-projector-config')?.metadata.ownerReferences;
      return { namespace: ns, ...(owner ? { ownerReferences: owner } : {}) };
    },
    healthy: () => {
      const t = loop.term;
      return (
        t?.lease.valid() === true &&
        loop.synced &&
        [...t.own.values()].every((i) => i.isSynced()) &&
        t.registry.oldestFailureMs() < (o.stuckAfterMs ?? 10_000)
      );
    },
    onWrite: (ok) => m.heartbeats.inc({ result: ok ? 'ok' : 'error' }),
  });
}

export async function startController(o: ControllerOptions): Promise<ControllerHandle> {
  const registry = new Registry();
  const m = createControllerMetrics(registry);
  const loop = new ReconcileLoop(m, o.debounceMs ?? 200, o.onPass);
  const { limiter, writer } = fencedClient(o, loop);
  const identity = o.identity ?? `${hostname()}-${process.pid}`;
  const election = createElection(o, identity, loop, writer, m);
  const heartbeat = startControllerHeartbeat(o, identity, loop, writer, m);
  const resync = () => {
    if (loop.term) resyncTerm(loop.term);
    loop.schedule();
  };

  election.start();
  await election.firstAttempt;
  const resyncTimer = setInterval(resync, o.resyncIntervalMs ?? 300_000);
  const { server, port } = await startProbeServer(o.port, {
    registry,
    // Ready once the first campaign is over: a standby at once, a leader after its first pass.
    ready: () => !loop.leader || loop.synced,
    // Conditions as series: the pass's resources and the registry's rooms.
    beforeScrape: () => recordConditions(m, [...loop.passConditions, ...(loop.term?.registry.roomConditions() ?? [])]),
  });

  return {
    port,
    registry,
    isLeader: () => loop.leader,
    limiter,
    reconciles: () => loop.passes,
    informers: () => informersOf(loop.term),
    resync,
    // No pass pending or running, and no registry key queued or in process.
    idle: async () => {
      for (;;) {
        await loop.whenSettled();
        const q = loop.term?.queue;
        if (!q || (q.length === 0 && q.inFlight === 0)) return;
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    stop: async () => {
      loop.stopped = true;
      heartbeat.stop();
      clearInterval(resyncTimer);
      await loop.stop();
      // ReleaseOnCancel: hand the Lease back so a standby replica takes over at once.
      await election.stop(true);
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const PROBE_BODIES = { healthy: 'ok\n', ready: 'ok\n', notReady: 'not ready\n' };

/** /healthz, /readyz and /metrics on `port` (0: any free port); any other path is 404. */
async function startProbeServer(port: number, ops: OpsEndpoints): Promise<{ server: Server; port: number }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (!answerOps(res, path, { ...ops, bodies: PROBE_BODIES })) res.writeHead(404).end();
  });
  const address = await listen(server, port);
  return { server, port: address.port };
}

export async function serveController(argv: string[]): Promise<number> {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        config: { type: 'string' },
        kubeconfig: { type: 'string' },
        port: { type: 'string' },
        namespace: { type: 'string' },
        identity: { type: 'string' },
        'kube-api-qps': { type: 'string' },
        'kube-api-burst': { type: 'string' },
      },
    }) as { values: Record<string, string | undefined> });
  } catch (e) {
    process.stderr.write(
      `serve controller: ${(e as Error).message}\nusage: fgentic-retrieval serve controller [--kubeconfig FILE] [--port 8080] [--namespace fgentic-system] [--kube-api-qps 20] [--kube-api-burst 30]\n`,
    );
    return 2;
  }
  const qps = Number(values['kube-api-qps'] ?? 20);
  const burst = Number(values['kube-api-burst'] ?? 30);
  if (!(qps > 0 && qps <= 10_000) || !Number.isInteger(burst) || burst < 1 || burst > 10_000) {
    process.stderr.write('serve controller: --kube-api-qps must be > 0 and --kube-api-burst an integer ≥ 1\n');
    return 2;
  }
  const kc = await usableKubeConfig(values['kubeconfig'] ?? values['config']);
  if (typeof kc === 'string') {
    process.stderr.write(`serve controller: ${kc}\n`);
    return 1;
  }
  let lostLeadership: () => void = () => undefined;
  const handle = await startController({
    onLostLeadership: () => lostLeadership(),
    kubeConfig: kc,
    port: Number(values['port'] ?? process.env['PORT'] ?? 8080),
    leaseNamespace: values['namespace'] ?? process.env['POD_NAMESPACE'] ?? 'fgentic-system',
    ...(values['identity'] ? { identity: values['identity'] } : {}),
    qps,
    burst,
  });
  log.info('controller serving', { port: handle.port });
  const lost = await new Promise<boolean>((resolve) => {
    process.once('SIGTERM', () => resolve(false));
    process.once('SIGINT', () => resolve(false));
    lostLeadership = () => resolve(true);
  });
  await handle.stop();
  // A lost term ends the process (controller-runtime's "leader election lost"): its Deployment
  // restarts it as a fresh candidate, with nothing of the old term left in memory.
  return lost ? 1 : 0;
}

/**
 * A kubeconfig that names a cluster and reaches its API server, or a sentence saying which sources
 * were tried and what failed (common/kube-config.ts); the leader election needs the API from the start.
 */
export async function usableKubeConfig(file: string | undefined): Promise<k8s.KubeConfig | string> {
  const loaded = await loadKubeConfig(file);
  if ('error' in loaded) return loaded.error;
  return (await apiServerProblem(loaded.kubeConfig, loaded.source)) ?? loaded.kubeConfig;
}
