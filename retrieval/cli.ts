/**
 * CLI entry point of the retrieval server (wired by cli/main.ts):
 *   serve retrieval [--config-source file|kubernetes] [--config FILE] [--namespace NS]
 *                   [--max-staleness SECONDS] [--port N] [--host H] [--data-dir DIR] [--no-migrate]
 *                   [--replica-url URL]... [--max-replica-lag MS] [--pooler transaction]
 * The database is DATABASE_URL (TLS via DATABASE_CA_FILE and DATABASE_TLS=require) when set, else the
 * embedded PGlite persisted under ./data/pglite. The commands that write to the store (ingest,
 * migrate, sync) are in store-commands.ts, re-exported here for the callers that import them from here.
 */
import { parseFlags, UsageError, usageError } from '../common/args.ts';
import { configNamespace, loadKubeConfig } from '../common/kube-config.ts';
import { createLogger } from '../common/log.ts';
import { shutdownTimingFromEnv, waitForStopSignal } from '../common/shutdown.ts';
import type { RetrievalConfig } from './config.ts';
import { ConfigFileError, embedderFor, readConfig } from './config-file.ts';
import { fileRetrievalConfigStore, type RetrievalConfigState, type RetrievalConfigStore } from './config-store.ts';
import { DatabaseInUseError, DEFAULT_DATA_DIR } from './db/embedded.ts';
import { type RetrievalServerOptions, startRetrievalServer } from './index.ts';
import { databaseProblem } from './ingest/errors.ts';
import {
  type DatabaseTopology,
  databaseTopology,
  type FlaggedTopology,
  startTopology,
  tlsFromEnv,
} from './topology.ts';

export { INGEST_USAGE, ingestCommand, migrateCommand, syncCommand } from './store-commands.ts';

const log = createLogger('retrieval');
const DEFAULT_CONFIG = '/etc/fgentic/retrieval.json';

function port(v: string | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError('--port must be an integer 0–65535');
  return n;
}

export const SERVE_RETRIEVAL_USAGE =
  'fgentic-retrieval serve retrieval [--config-source file|kubernetes] [--config FILE] [--namespace NS] [--max-staleness SECONDS] [--port N] [--host ADDR] [--data-dir DIR] [--no-migrate] [--replica-url URL]... [--max-replica-lag MS] [--pooler transaction]';

type ConfigSourceFlags = {
  source: 'file' | 'kubernetes';
  namespace: string | undefined;
  stalenessSeconds: number;
};

function configSourceFlags(values: Record<string, string | boolean | undefined>): ConfigSourceFlags {
  const source = (values['config-source'] as string | undefined) ?? 'file';
  if (source !== 'file' && source !== 'kubernetes') throw new UsageError('--config-source must be file or kubernetes');
  const raw = values['max-staleness'] as string | undefined;
  const stalenessSeconds = raw === undefined ? 30 : Number(raw);
  if (!Number.isInteger(stalenessSeconds) || stalenessSeconds < 1 || stalenessSeconds > 3600)
    throw new UsageError('--max-staleness must be 1–3600 seconds');
  if (source === 'file' && (values['namespace'] !== undefined || raw !== undefined))
    throw new UsageError('--namespace and --max-staleness need --config-source kubernetes');
  if (source === 'kubernetes' && values['config'] !== undefined)
    throw new UsageError('--config reads a file: not with --config-source kubernetes');
  return { source, namespace: values['namespace'] as string | undefined, stalenessSeconds };
}

const logState = (source: string) => (s: RetrievalConfigState) =>
  s.ready
    ? s.rejected
      ? log.warn('configuration rejected: the previous one keeps serving', {
          generation: s.generation,
          source,
          problem: s.rejected,
          agents: s.config.agents.length,
        })
      : log.info('configuration loaded', { generation: s.generation, source, agents: s.config.agents.length })
    : log.error('configuration unavailable: refusing every call', {
        generation: s.generation,
        source,
        error: s.error,
      });

/**
 * The configuration through the Kubernetes API: resolves with the store and its first valid
 * configuration, which may take until the controller has rendered it (or the API is reachable); a
 * stop signal meanwhile resolves undefined.
 */
async function kubernetesConfig(
  flags: ConfigSourceFlags,
  stop: Promise<unknown>,
): Promise<{ store: RetrievalConfigStore; config: RetrievalConfig } | string | undefined> {
  const namespace = configNamespace(flags.namespace);
  if (namespace === undefined)
    return '--config-source kubernetes needs --namespace, POD_NAMESPACE or a service account namespace file';
  const { kubeRetrievalConfigStore } = await import('./config-kube.ts');
  const loaded = await loadKubeConfig();
  if ('error' in loaded) return loaded.error;
  const { kubeConfig } = loaded;
  const store = kubeRetrievalConfigStore({
    kubeConfig,
    namespace,
    maxStalenessMs: flags.stalenessSeconds * 1000,
    onWatchError: (kind, error) => log.warn('configuration API request failed', { request: kind, error }),
    onChange: logState('kubernetes'),
  });
  let stopped = false;
  void stop.then(() => {
    stopped = true;
  });
  await Promise.race([store.synced, stop]);
  let waiting = false;
  for (;;) {
    if (stopped) {
      store.close();
      return undefined;
    }
    const s = store.current();
    if (s.ready) return { store, config: s.config };
    if (!waiting) log.info('waiting for a valid configuration before starting', { error: s.error });
    waiting = true;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * The embedder and the database pools are built once: a changed `embeddings` or `database` section
 * applies at the next start (a rollout), which the log says once per section.
 */
function noteRestartOnlyChanges(store: RetrievalConfigStore, started: RetrievalConfig): NodeJS.Timeout {
  const sections = ['embeddings', 'database'] as const;
  const startedText = sections.map((k) => JSON.stringify(started[k]));
  const noted = new Set<string>();
  const timer = setInterval(() => {
    const s = store.current();
    if (!s.ready) return;
    sections.forEach((k, i) => {
      if (!noted.has(k) && JSON.stringify(s.config[k]) !== startedText[i]) {
        noted.add(k);
        log.warn(`${k} configuration changed: it applies at the next start`);
      }
    });
  }, 5_000);
  timer.unref();
  return timer;
}

type ServeValues = Record<string, string | boolean | undefined>;

interface ServeFlags {
  readonly values: ServeValues;
  readonly listenPort: number;
  readonly configSource: ConfigSourceFlags;
  readonly topology: FlaggedTopology;
}

/** The serve retrieval flags; throws a UsageError for a bad one. */
function parseServeFlags(argv: string[]): ServeFlags {
  const values = parseFlags(argv, {
    config: { type: 'string' },
    'config-source': { type: 'string' },
    namespace: { type: 'string' },
    'max-staleness': { type: 'string' },
    port: { type: 'string' },
    host: { type: 'string' },
    'data-dir': { type: 'string' },
    'no-migrate': { type: 'boolean' },
    'replica-url': { type: 'string', multiple: true },
    'max-replica-lag': { type: 'string' },
    pooler: { type: 'string' },
  }).values as ServeValues;
  return {
    values,
    listenPort: port(values['port'] as string | undefined, 8080),
    configSource: configSourceFlags(values),
    topology: databaseTopology(values, process.env, Boolean(process.env['DATABASE_URL'])),
  };
}

type StartConfig = { store: RetrievalConfigStore; config: RetrievalConfig };

/**
 * The configuration store and the configuration to start with, or the exit code when there is none:
 * 0 when a stop signal came first, 2 for a configuration that cannot be had (said on stderr).
 */
async function startConfig(flags: ServeFlags, stop: Promise<unknown>): Promise<StartConfig | number> {
  if (flags.configSource.source === 'kubernetes') {
    const got = await kubernetesConfig(flags.configSource, stop);
    if (got === undefined) return 0;
    if (typeof got === 'string') {
      process.stderr.write(`serve retrieval: ${got}\n`);
      return 2;
    }
    return got;
  }
  const path = String(flags.values['config'] ?? DEFAULT_CONFIG);
  let config: RetrievalConfig;
  try {
    config = readConfig(path, flags.values['config'] === undefined);
  } catch (err) {
    // Invalid configuration: refuse to start (the path names the field, never a value).
    process.stderr.write(`serve retrieval: ${err instanceof ConfigFileError ? err.message : 'cannot read config'}\n`);
    return 2;
  }
  return { store: fileRetrievalConfigStore(path, { onChange: logState('file') }), config };
}

/** What the server starts with: the database, the listener and the start-only settings. */
function serverOptions(
  flags: ServeFlags,
  { store, config }: StartConfig,
  topology: DatabaseTopology,
  databaseUrl: string | undefined,
): RetrievalServerOptions {
  const { values } = flags;
  return {
    config: store,
    embedder: embedderFor(config.embeddings),
    ...(databaseUrl
      ? { databaseUrl, pool: tlsFromEnv() }
      : { dataDir: String(values['data-dir'] ?? DEFAULT_DATA_DIR) }),
    host: String(values['host'] ?? (databaseUrl ? '0.0.0.0' : '127.0.0.1')),
    port: flags.listenPort,
    migrate: values['no-migrate'] !== true,
    capability: config.capability,
    // Read at start, like the capability itself (rules/ledger.ts bounds it).
    ledgerWaitMs: config.ledger.mintWindowMilliseconds,
    // Read at start, like the embedder (noteRestartOnlyChanges).
    replicaUrls: topology.replicaUrls,
    maxReplicaLagMs: topology.maxReplicaLagMs,
    ...(topology.pooler ? { pooler: topology.pooler } : {}),
  };
}

/** Why the server did not start, for stderr: a known problem's message, else the error's name only. */
function startFailure(err: unknown, databaseUrl: string | undefined, listenPort: number): string {
  if (err instanceof DatabaseInUseError) return err.message;
  const db = databaseProblem(err, databaseUrl);
  if (db) return db.message;
  if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') return `port ${listenPort} is already in use`;
  return `failed to start (${err instanceof Error ? err.name : 'unknown'})`;
}

export async function serveRetrieval(argv: string[]): Promise<number> {
  let flags: ServeFlags;
  try {
    flags = parseServeFlags(argv);
  } catch (err) {
    return usageError('serve retrieval', SERVE_RETRIEVAL_USAGE, err);
  }
  const stop = waitForStopSignal();
  const start = await startConfig(flags, stop);
  if (typeof start === 'number') return start;
  const { store, config } = start;
  const databaseUrl = process.env['DATABASE_URL'];
  let topology: DatabaseTopology;
  try {
    topology = startTopology(flags.topology, config.database, Boolean(databaseUrl));
  } catch (err) {
    store.close();
    process.stderr.write(`serve retrieval: ${(err as Error).message}\n`);
    return 2;
  }
  const noting = noteRestartOnlyChanges(store, config);
  try {
    const server = await startRetrievalServer(serverOptions(flags, start, topology, databaseUrl));
    if (!server.profileOk) log.error('serving /readyz=false until the embedding profile matches');
    process.stdout.write(`retrieval listening on ${server.mcpUrl}\n`);
    await stop;
    await server.shutdown(shutdownTimingFromEnv());
    return 0;
  } catch (err) {
    const msg = startFailure(err, databaseUrl, flags.listenPort);
    log.error('retrieval server failed to start', { error: err instanceof Error ? err.name : 'unknown' });
    process.stderr.write(`serve retrieval: ${msg}\n`);
    return 1;
  } finally {
    clearInterval(noting);
    store.close();
  }
}
