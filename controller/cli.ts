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
import { KubeClient } from './kube/client.ts';
import type { Informer } from './kube/informer.ts';
import { LeaderElector } from './kube/lease.ts';
import { createControllerMetrics, recordPass } from './metrics.ts';
import type { ClusterWriter, PassStage } from './reconcile.ts';
import { clusterState, followRetrievalNamespace, informersOf, startTerm, type Term } from './term.ts';

const log = createLogger('controller');

export interface ControllerOptions {
  kubeConfig: k8s.KubeConfig;
  port: number;
  leaseNamespace: string;
  leaseName?: string;
  identity?: string;
  leaseDurationSeconds?: number;
  renewIntervalMs?: number;
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

/** One pass's timeline (`performance.now()` ms) and the reconciler's stages. */
export interface PassTiming {
  /** When the first event (or timer) that asked for this pass arrived. */
  requestedAt: number;
  startedAt: number;
  endedAt: number;
  stages: Record<PassStage, number>;
  agentsRendered: number;
  applied: number;
  statusWrites: number;
}

export interface ControllerHandle {
  port: number;
  registry: Registry;
  isLeader(): boolean;
  /** Resolves when no reconcile is pending or running. */
  idle(): Promise<void>;
  reconciles(): number;
  /** The informers of the current leadership term (empty while standby). */
  informers(): Informer[];
  /** Starts a full resync now (what the periodic timer does). */
  resync(): void;
  stop(): Promise<void>;
}

export async function startController(o: ControllerOptions): Promise<ControllerHandle> {
  const client = new KubeClient(o.kubeConfig);
  const writer = o.writer ? o.writer(client) : client;
  const registry = new Registry();
  const m = createControllerMetrics(registry);
  const elector = new LeaderElector(client.coordination, {
    name: o.leaseName ?? 'fgentic-retrieval-controller',
    namespace: o.leaseNamespace,
    identity: o.identity ?? `${hostname()}-${process.pid}`,
    leaseDurationSeconds: o.leaseDurationSeconds ?? 15,
  });

  let leader = false;
  let electedOnce = false;
  let synced = false;
  let stopped = false;
  let running: Promise<void> | undefined;
  let pending = false;
  /** When the oldest request not yet served by a pass arrived (performance.now()). */
  let requestedAt: number | undefined;
  let timer: NodeJS.Timeout | undefined;
  let retryTimer: NodeJS.Timeout | undefined;
  let passes = 0;
  let idleWaiters: (() => void)[] = [];
  // One leadership term: its caches and its reconciler (backoff, remembered mirrors).
  let term: Term | undefined;

  const settleIdle = () => {
    if (!running && !pending && !timer) {
      for (const w of idleWaiters) w();
      idleWaiters = [];
    }
  };

  const runPass = async () => {
    const t = term;
    if (!t) return;
    await t.ready;
    if (![...t.own.values()].every((i) => i.isSynced())) {
      // Never render from a partial view of our own resources: it would prune what the missing
      // resources render. The informers retry; their first list schedules a pass.
      log.warn('reconcile deferred: resources not listed yet');
      return;
    }
    await followRetrievalNamespace(t, schedule);
    if (term !== t) return;
    const end = m.duration.startTimer();
    const startedAt = performance.now();
    const asked = requestedAt ?? startedAt;
    requestedAt = undefined;
    m.queued.observe((startedAt - asked) / 1000);
    try {
      const r = await t.reconciler.pass(clusterState(t));
      o.onPass?.({
        requestedAt: asked,
        startedAt,
        endedAt: performance.now(),
        stages: r.stages,
        agentsRendered: r.agentsRendered,
        applied: r.applied,
        statusWrites: r.statusWrites,
      });
      recordPass(m, r, t.reconciler.backoff.size);
      synced = true;
      if (retryTimer) clearTimeout(retryTimer);
      retryTimer = undefined;
      if (r.retryAt !== undefined) {
        retryTimer = setTimeout(
          () => {
            retryTimer = undefined;
            schedule();
          },
          Math.max(0, r.retryAt - Date.now()),
        );
        retryTimer.unref();
      }
    } catch (e) {
      m.reconciles.inc({ result: 'error' });
      log.error('reconcile failed', { error: (e as Error).message });
    } finally {
      end();
      passes++;
    }
  };

  const loop = async () => {
    await null; // let the caller store `running` before this pass can finish
    while (pending && leader && !stopped) {
      pending = false;
      await runPass();
    }
    running = undefined;
    settleIdle();
  };

  const schedule = () => {
    if (!leader || stopped) return;
    pending = true;
    requestedAt ??= performance.now();
    if (timer || running) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (!running) running = loop();
    }, o.debounceMs ?? 200);
  };

  const stopTerm = () => {
    for (const i of informersOf(term)) i.stop();
    term = undefined;
    if (retryTimer) clearTimeout(retryTimer);
    retryTimer = undefined;
  };

  let electing = false;
  const elect = async () => {
    if (electing) return;
    electing = true;
    let now = false;
    try {
      now = await elector.tryAcquireOrRenew();
    } catch (e) {
      log.warn('lease error', { error: (e as Error).message });
    } finally {
      electing = false;
    }
    electedOnce = true;
    if (stopped) return;
    if (now && !leader) {
      leader = true;
      m.leader.set(1);
      log.info('became leader');
      term = startTerm(
        o.kubeConfig,
        writer,
        schedule,
        (kind: string, what: 'list' | 'watch') => m.watchRetries.inc({ kind, what }),
        {
          concurrency: o.concurrency ?? 8,
          ...(o.incremental !== undefined ? { incremental: o.incremental } : {}),
        },
      );
      schedule();
    } else if (!now && leader) {
      leader = false;
      m.leader.set(0);
      log.warn('lost leadership');
      stopTerm();
    }
  };

  const resync = () => {
    term?.reconciler.resync();
    schedule();
  };

  await elect();
  const renew = setInterval(() => void elect(), o.renewIntervalMs ?? 5000);
  const resyncTimer = setInterval(resync, o.resyncIntervalMs ?? 300_000);

  const { server, port } = await startProbeServer(o.port, registry, () => electedOnce && (!leader || synced));

  return {
    port,
    registry,
    isLeader: () => leader,
    reconciles: () => passes,
    informers: () => informersOf(term),
    resync,
    idle: () =>
      new Promise<void>((r) => {
        idleWaiters.push(r);
        settleIdle();
      }),
    stop: async () => {
      stopped = true;
      clearInterval(renew);
      clearInterval(resyncTimer);
      if (timer) clearTimeout(timer);
      timer = undefined;
      pending = false;
      stopTerm();
      await running;
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** /healthz, /readyz (`ready()`) and /metrics on `port` (0: any free port). */
async function startProbeServer(
  port: number,
  registry: Registry,
  ready: () => boolean,
): Promise<{ server: Server; port: number }> {
  const server: Server = createServer(async (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/readyz') {
      const ok = ready();
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok\n' : 'not ready\n');
    } else if (path === '/metrics') {
      res.writeHead(200, { 'content-type': registry.contentType }).end(await registry.metrics());
    } else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(port, r));
  const addr = server.address();
  return { server, port: typeof addr === 'object' && addr ? addr.port : port };
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
      },
    }) as { values: Record<string, string | undefined> });
  } catch (e) {
    process.stderr.write(
      `serve controller: ${(e as Error).message}\nusage: fgentic-retrieval serve controller [--kubeconfig FILE] [--port 8080] [--namespace fgentic-system]\n`,
    );
    return 2;
  }
  const kc = await usableKubeConfig(values['kubeconfig'] ?? values['config']);
  if (typeof kc === 'string') {
    process.stderr.write(`serve controller: ${kc}\n`);
    return 1;
  }
  const handle = await startController({
    kubeConfig: kc,
    port: Number(values['port'] ?? process.env['PORT'] ?? 8080),
    leaseNamespace: values['namespace'] ?? process.env['POD_NAMESPACE'] ?? 'fgentic-system',
    ...(values['identity'] ? { identity: values['identity'] } : {}),
  });
  log.info('controller serving', { port: handle.port });
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await handle.stop();
  return 0;
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
