/**
 * `serve webhook`: configuration, the ClusterView (in-cluster informers, or a fixed file set for local
 * runs) and the HTTPS server, until SIGTERM/SIGINT.
 */
import { readFileSync } from 'node:fs';
import { fsProblem } from '../common/fs-problem.ts';
import { apiServerProblem, loadKubeConfig } from '../common/kube-config.ts';
import { createLogger } from '../common/log.ts';
import { shutdownTimingFromEnv, waitForStopSignal } from '../common/shutdown.ts';
import { loadManifests } from './manifests.ts';
import { type ReviewOutcome, reviewBytes, reviewUnavailable } from './review.ts';
import { type ClusterView, DEFAULT_RULES_CONFIG, isObject, type RulesConfig } from './rules/types.ts';
import { certificateProblem, startWebhookServer } from './server.ts';
import { StaticClusterView } from './view.ts';

export interface WebhookConfig {
  port: number;
  certDir: string;
  controllerUser: string;
  deleteUsers: string[];
  /** Local runs only: take the cluster from these manifest paths instead of the API server. */
  offlineObjects?: string[];
}

export const DEFAULT_WEBHOOK_CONFIG: WebhookConfig = {
  port: 8443,
  certDir: '/etc/fgentic/webhook-tls',
  controllerUser: DEFAULT_RULES_CONFIG.controllerUser,
  deleteUsers: [...DEFAULT_RULES_CONFIG.deleteUsers],
};

export function parseWebhookConfig(text: string): WebhookConfig {
  const raw: unknown = JSON.parse(text);
  if (!isObject(raw)) throw new Error('webhook config must be a JSON object');
  const cfg: WebhookConfig = { ...DEFAULT_WEBHOOK_CONFIG };
  for (const [k, v] of Object.entries(raw)) {
    if (k === 'port' && Number.isInteger(v) && (v as number) > 0 && (v as number) < 65536) cfg.port = v as number;
    else if (k === 'certDir' && typeof v === 'string') cfg.certDir = v;
    else if (k === 'controllerUser' && typeof v === 'string' && v !== '') cfg.controllerUser = v;
    else if (k === 'deleteUsers' && Array.isArray(v) && v.every((x) => typeof x === 'string'))
      cfg.deleteUsers = v as string[];
    else if (k === 'offlineObjects' && Array.isArray(v) && v.every((x) => typeof x === 'string'))
      cfg.offlineObjects = v as string[];
    else throw new Error(`webhook config: invalid or unknown key ${JSON.stringify(k)}`);
  }
  return cfg;
}

/**
 * Fail closed while the caches are not synced; give the reconciler's first render of a retrieval Agent
 * one live look-up of its RetrievalAgent before denying it as undeclared.
 */
export async function handleReview(
  body: Buffer,
  view: ClusterView,
  rules: RulesConfig,
  ready: () => boolean,
  confirm?: (ns: string, name: string) => Promise<boolean>,
): Promise<ReviewOutcome> {
  if (!ready()) return reviewUnavailable(body, 'cluster cache not synced yet');
  const out = reviewBytes(body, view, rules);
  if (confirm && out.verdict === 'denied' && out.reason === 'retrieval-agent-undeclared')
    if (await confirm(out.namespace, out.name)) return reviewBytes(body, view, rules);
  return out;
}

type WebhookArgs = { configFile?: string; certDir?: string; port?: string };

/** The configuration file with the flags over it; the exit code (2) after saying what is wrong. */
function webhookConfig(args: WebhookArgs): WebhookConfig | number {
  let cfg: WebhookConfig;
  try {
    cfg = args.configFile ? parseWebhookConfig(readFileSync(args.configFile, 'utf8')) : { ...DEFAULT_WEBHOOK_CONFIG };
  } catch (err) {
    const problem = (err as NodeJS.ErrnoException).code ? fsProblem(err) : (err as Error).message;
    process.stderr.write(`serve webhook: config ${args.configFile}: ${problem}\n`);
    return 2;
  }
  if (args.certDir !== undefined) cfg.certDir = args.certDir;
  if (args.port !== undefined) {
    const p = Number(args.port);
    if (!Number.isInteger(p) || p < 0 || p > 65535) {
      process.stderr.write('serve webhook: --port must be an integer port\n');
      return 2;
    }
    cfg.port = p;
  }
  return cfg;
}

/** What the reviews read the cluster through, and how it is stopped. */
interface WebhookView {
  readonly view: ClusterView;
  readonly ready: () => boolean;
  readonly stop: () => Promise<void>;
  readonly confirm?: (ns: string, name: string) => Promise<boolean>;
}

/**
 * The fixed manifests of offlineObjects, or the API server's informers once started; undefined after
 * saying why the API cannot be used.
 */
async function clusterView(cfg: WebhookConfig, log: ReturnType<typeof createLogger>): Promise<WebhookView | undefined> {
  if (cfg.offlineObjects) {
    const view = new StaticClusterView(loadManifests(cfg.offlineObjects).flatMap((m) => (m.object ? [m.object] : [])));
    return { view, ready: () => true, stop: async () => {} };
  }
  // Without the API the webhook can only deny; say why and exit, as the controller does.
  const loaded = await loadKubeConfig();
  const problem = 'error' in loaded ? loaded.error : await apiServerProblem(loaded.kubeConfig, loaded.source);
  if ('error' in loaded || problem !== undefined) {
    process.stderr.write(`serve webhook: ${problem}; or set offlineObjects in --config\n`);
    return undefined;
  }
  const { KubeClusterView } = await import('./kube-view.ts');
  const kv = new KubeClusterView(loaded.kubeConfig, log);
  await kv.start();
  return {
    view: kv,
    ready: () => kv.ready(),
    stop: () => kv.stop(),
    confirm: (ns, name) => kv.confirmRetrievalAgent(ns, name),
  };
}

export async function runWebhookServer(args: WebhookArgs): Promise<number> {
  const log = createLogger('webhook');
  const cfg = webhookConfig(args);
  if (typeof cfg === 'number') return cfg;
  // The certificate first: without it nothing can be served, so nothing else is started.
  const certProblem = certificateProblem(cfg.certDir);
  if (certProblem !== undefined) {
    const hint = args.certDir === undefined && !args.configFile ? ' (the default; pass --cert-dir DIR)' : '';
    process.stderr.write(`serve webhook: certificate ${certProblem}${hint}\n`);
    return 1;
  }
  const rules: RulesConfig = {
    ...DEFAULT_RULES_CONFIG,
    controllerUser: cfg.controllerUser,
    deleteUsers: cfg.deleteUsers,
  };
  const cluster = await clusterView(cfg, log);
  if (cluster === undefined) return 1;
  const { view, ready, confirm } = cluster;
  let server: Awaited<ReturnType<typeof startWebhookServer>>;
  try {
    server = await startWebhookServer({
      certDir: cfg.certDir,
      port: cfg.port,
      ready,
      logger: log,
      handler: (body) => handleReview(body, view, rules, ready, confirm),
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    process.stderr.write(
      `serve webhook: ${code === 'EADDRINUSE' ? `port ${cfg.port} is already in use` : code === 'EACCES' ? `port ${cfg.port}: permission denied` : (code ?? (err as Error).message)}\n`,
    );
    await cluster.stop();
    return 1;
  }
  await waitForStopSignal();
  await server.shutdown(shutdownTimingFromEnv());
  await cluster.stop();
  return 0;
}
