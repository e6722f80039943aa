/**
 * `fgentic-retrieval serve controller`: leader election on a Lease; the leader watches our four kinds
 * and every rendered kind, reconciles (debounced, one pass at a time, plus a periodic resync), and
 * serves /healthz, /readyz and /metrics.
 */

import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { homedir, hostname } from 'node:os';
import { delimiter, join } from 'node:path';
import { parseArgs } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { createLogger } from '../common/log.ts';
import { KubeClient, watchPaths } from './kube/client.ts';
import { LeaderElector } from './kube/lease.ts';
import { reconcileOnce } from './reconcile.ts';

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
}

export interface ControllerHandle {
  port: number;
  registry: Registry;
  isLeader(): boolean;
  /** Resolves when no reconcile is pending or running. */
  idle(): Promise<void>;
  reconciles(): number;
  stop(): Promise<void>;
}

export async function startController(o: ControllerOptions): Promise<ControllerHandle> {
  const client = new KubeClient(o.kubeConfig);
  const registry = new Registry();
  const m = {
    reconciles: new Counter({
      name: 'fgentic_controller_reconciles_total',
      help: 'Reconcile passes',
      labelNames: ['result'],
      registers: [registry],
    }),
    duration: new Histogram({
      name: 'fgentic_controller_reconcile_seconds',
      help: 'Reconcile duration',
      registers: [registry],
    }),
    applied: new Gauge({
      name: 'fgentic_controller_rendered_objects',
      help: 'Objects applied in the last pass',
      registers: [registry],
    }),
    conflicts: new Gauge({
      name: 'fgentic_controller_conflicts',
      help: 'Conflicting resources in the last pass',
      registers: [registry],
    }),
    leader: new Gauge({
      name: 'fgentic_controller_leader',
      help: '1 when this replica holds the Lease',
      registers: [registry],
    }),
    // Alerts need conditions as series (RegistryTooLarge, Conflict, ...): the API server holds them
    // only in each resource's status.
    conditions: new Gauge({
      name: 'fgentic_controller_resource_conditions',
      help: 'Our resources by condition type, status and reason, as computed in the last pass',
      labelNames: ['kind', 'type', 'status', 'reason'],
      registers: [registry],
    }),
  };
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
  let timer: NodeJS.Timeout | undefined;
  let passes = 0;
  let watches: AbortController[] = [];
  let idleWaiters: (() => void)[] = [];

  const settleIdle = () => {
    if (!running && !pending && !timer) {
      for (const w of idleWaiters) w();
      idleWaiters = [];
    }
  };

  const runPass = async () => {
    const end = m.duration.startTimer();
    try {
      const r = await reconcileOnce(client);
      m.reconciles.inc({ result: r.errors.length ? 'error' : 'ok' });
      m.applied.set(r.applied);
      m.conflicts.set(r.conflicts.length);
      const counts = new Map<string, number>();
      for (const c of r.conditions) {
        const key = JSON.stringify([c.kind, c.type, c.status, c.reason]);
        counts.set(key, (counts.get(key) ?? 0) + 1);
      }
      m.conditions.reset();
      for (const [key, n] of counts) {
        const [kind, type, status, reason] = JSON.parse(key) as string[];
        m.conditions.set({ kind, type, status, reason }, n);
      }
      synced = true;
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
    if (timer || running) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (!running) running = loop();
    }, o.debounceMs ?? 200);
  };

  const startWatches = () => {
    const watch = new k8s.Watch(o.kubeConfig);
    const open = (path: string, labelSelector?: string) => {
      if (stopped || !leader) return;
      watch
        .watch(
          path,
          { allowWatchBookmarks: true, ...(labelSelector ? { labelSelector } : {}) },
          (phase, obj) => {
            log.debug('watch event', { path, phase, name: obj?.metadata?.name });
            if (phase !== 'BOOKMARK') schedule();
          },
          (err) => {
            if (stopped || !leader) return;
            if (err) log.warn('watch ended', { path, error: String((err as Error).message ?? err) });
            setTimeout(() => open(path, labelSelector), 1000).unref();
          },
        )
        .then((ac) => watches.push(ac))
        .catch((e) => {
          log.warn('watch failed', { path, error: (e as Error).message });
          if (!stopped && leader) setTimeout(() => open(path, labelSelector), 1000).unref();
        });
    };
    for (const w of watchPaths()) open(w.path, w.labelSelector);
  };

  const stopWatches = () => {
    for (const w of watches) w.abort();
    watches = [];
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
    if (now && !leader) {
      leader = true;
      m.leader.set(1);
      log.info('became leader');
      startWatches();
      schedule();
    } else if (!now && leader) {
      leader = false;
      m.leader.set(0);
      log.warn('lost leadership');
      stopWatches();
    }
  };

  await elect();
  const renew = setInterval(() => void elect(), o.renewIntervalMs ?? 5000);
  const resync = setInterval(schedule, o.resyncIntervalMs ?? 300_000);

  const server: Server = createServer(async (req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/readyz') {
      const ready = electedOnce && (!leader || synced);
      res.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' }).end(ready ? 'ok\n' : 'not ready\n');
    } else if (path === '/metrics') {
      res.writeHead(200, { 'content-type': registry.contentType }).end(await registry.metrics());
    } else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(o.port, r));
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : o.port;

  return {
    port,
    registry,
    isLeader: () => leader,
    reconciles: () => passes,
    idle: () =>
      new Promise<void>((r) => {
        idleWaiters.push(r);
        settleIdle();
      }),
    stop: async () => {
      stopped = true;
      clearInterval(renew);
      clearInterval(resync);
      if (timer) clearTimeout(timer);
      timer = undefined;
      stopWatches();
      await running;
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
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

const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/**
 * A kubeconfig that names a cluster and reaches its API server, or a sentence saying which sources
 * were tried and what failed. Without it the client would fall back to http://localhost:8080 and
 * the leader election would retry forever.
 */
export async function usableKubeConfig(file: string | undefined): Promise<k8s.KubeConfig | string> {
  const kc = new k8s.KubeConfig();
  const envFiles = (process.env['KUBECONFIG'] ?? '').split(delimiter).filter(Boolean);
  const home = join(homedir(), '.kube', 'config');
  let source: string;
  try {
    if (file !== undefined) {
      source = `--kubeconfig ${file}`;
      kc.loadFromFile(file);
    } else if (envFiles.length > 0) {
      source = `KUBECONFIG ${envFiles.join(delimiter)}`;
      kc.loadFromDefault();
    } else if (existsSync(home)) {
      source = home;
      kc.loadFromFile(home);
    } else if (existsSync(SERVICE_ACCOUNT_TOKEN)) {
      source = 'the in-cluster service account';
      kc.loadFromCluster();
    } else
      return `no kubeconfig: tried --kubeconfig (not given), KUBECONFIG (unset), ${home} (absent) and the in-cluster service account (${SERVICE_ACCOUNT_TOKEN} absent)`;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const which = file ?? (envFiles.length > 0 ? envFiles.join(delimiter) : home);
    return `kubeconfig ${which}: ${code === 'ENOENT' ? 'does not exist' : code === 'EACCES' ? 'permission denied' : 'cannot be parsed'}`;
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster?.server) return `kubeconfig from ${source}: no current context with a cluster server`;
  try {
    const version = kc.makeApiClient(k8s.VersionApi);
    await Promise.race([
      version.getCode(),
      new Promise((_, reject) =>
        setTimeout(() => reject(Object.assign(new Error(), { code: 'ETIMEDOUT' })), 10_000).unref(),
      ),
    ]);
  } catch (e) {
    const err = e as { code?: string; cause?: { code?: string }; statusCode?: number; code_?: number };
    const why =
      err.cause?.code ??
      err.code ??
      (typeof err.statusCode === 'number' ? `HTTP ${err.statusCode}` : 'error');
    return `cannot reach the API server ${cluster.server} (kubeconfig from ${source}): ${why === 'ECONNREFUSED' ? 'connection refused' : why}`;
  }
  return kc;
}
