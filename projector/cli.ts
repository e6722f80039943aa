/**
 * `fgentic-retrieval serve projector [--config FILE] [--port N] [--host ADDR]
 *  [--registry-source file|kubernetes] [--namespace NS] [--max-staleness SECONDS]
 *  [--max-heartbeat-age SECONDS]`: runs until SIGTERM
 * or SIGINT, then shuts down gracefully (common/shutdown.ts: not ready, drain in-flight checks) and
 * resolves 0. An invalid or missing configuration does not stop the server: it denies every check
 * and reports not ready until a valid one appears. With `--registry-source kubernetes` the
 * configuration and its registry shards are read through the API (list + watch of the labelled
 * ConfigMaps in the namespace), so revocations apply within seconds.
 *
 * Ledger mode (`capability: "ledger"` in the configuration, docs/ledger.md): DATABASE_URL names the
 * knowledge database, with the credentials of the `knowledge_projector` role in PGUSER/PGPASSWORD
 * and TLS as for `serve retrieval` (DATABASE_CA_FILE, DATABASE_TLS=require). Without DATABASE_URL a
 * ledger-mode configuration refuses every mint and the projector reports not ready. Records are
 * confirmed after the answer, in batches, by a writer thread that owns the database connection
 * (projector/ledger-worker.ts, `worker`), so the answering event loop never handles a batch.
 */
import { parseArgs } from 'node:util';
import { configNamespace, loadKubeConfig } from '../common/kube-config.ts';
import { createLogger } from '../common/log.ts';
import { shutdownTimingFromEnv, waitForStopSignal } from '../common/shutdown.ts';
import type { ConfigStore } from './config-store.ts';
import { startProjector } from './index.ts';
import type { CapabilityLedger } from './ledger.ts';

export const DEFAULT_CONFIG_PATH = '/etc/fgentic/projector.json';

interface ServeFlags {
  readonly config: string | undefined;
  readonly host: string | undefined;
  readonly namespace: string | undefined;
  readonly port: number;
  readonly source: 'file' | 'kubernetes';
  readonly stalenessSeconds: number;
  readonly heartbeatAgeSeconds: number;
}

/** The flags, checked; a usage message (exit 2) for the first one out of range. */
function parseServeFlags(argv: string[]): ServeFlags | string {
  let values: {
    config?: string;
    port?: string;
    host?: string;
    'registry-source'?: string;
    namespace?: string;
    'max-staleness'?: string;
    'max-heartbeat-age'?: string;
  };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        config: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        'registry-source': { type: 'string' },
        namespace: { type: 'string' },
        'max-staleness': { type: 'string' },
        'max-heartbeat-age': { type: 'string' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    return (e as Error).message;
  }
  const port = values.port === undefined ? 8080 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) return '--port must be 0–65535';
  const source = values['registry-source'] ?? 'file';
  if (source !== 'file' && source !== 'kubernetes') return '--registry-source must be file or kubernetes';
  const staleness = values['max-staleness'] === undefined ? 30 : Number(values['max-staleness']);
  if (!Number.isInteger(staleness) || staleness < 1 || staleness > 3600)
    return '--max-staleness must be 1–3600 seconds';
  const heartbeatAge = values['max-heartbeat-age'] === undefined ? 30 : Number(values['max-heartbeat-age']);
  if (!Number.isInteger(heartbeatAge) || heartbeatAge < 0 || heartbeatAge > 3600)
    return '--max-heartbeat-age must be 0–3600 seconds (0: off)';
  return {
    config: values.config,
    host: values.host,
    namespace: values.namespace,
    port,
    source,
    stalenessSeconds: staleness,
    heartbeatAgeSeconds: heartbeatAge,
  };
}

/**
 * `--registry-source kubernetes`: the configuration and its shards through list + watch of the
 * labelled ConfigMaps; a sentence (exit 2) when no namespace or kubeconfig is found.
 */
async function kubernetesStore(flags: ServeFlags): Promise<ConfigStore | string> {
  const namespace = configNamespace(flags.namespace);
  if (namespace === undefined)
    return '--registry-source kubernetes needs --namespace, POD_NAMESPACE or a service account namespace file';
  const { kubeConfigStore } = await import('./kube-store.ts');
  const loaded = await loadKubeConfig();
  if ('error' in loaded) return loaded.error;
  const log = createLogger('projector');
  return kubeConfigStore({
    kubeConfig: loaded.kubeConfig,
    namespace,
    maxStalenessMs: flags.stalenessSeconds * 1000,
    maxHeartbeatAgeMs: flags.heartbeatAgeSeconds * 1000,
    onWatchError: (kind, error) => log.warn('registry API request failed', { request: kind, error }),
    onChange: (s) =>
      s.ready
        ? log.info('configuration loaded', { generation: s.generation, source: 'kubernetes' })
        : log.error('configuration unavailable: denying every check', {
            generation: s.generation,
            error: s.error,
          }),
  });
}

/** The capability ledger's writer thread when DATABASE_URL is set (TLS as for `serve retrieval`). */
async function ledgerFromEnv(env: NodeJS.ProcessEnv): Promise<CapabilityLedger | undefined> {
  const databaseUrl = env['DATABASE_URL'];
  if (!databaseUrl) return undefined;
  const { createWorkerLedger } = await import('./ledger-worker.ts');
  const ca = env['DATABASE_CA_FILE'];
  return createWorkerLedger({
    database: {
      connectionString: databaseUrl,
      max: 2,
      ...(ca ? { caFile: ca } : {}),
      ...(env['DATABASE_TLS'] === 'require' ? { requireTls: true } : {}),
      connectionTimeoutMs: 2_000,
      statementTimeoutMs: 2_000,
    },
  });
}

export async function serveProjector(argv: string[]): Promise<number> {
  const flags = parseServeFlags(argv);
  if (typeof flags === 'string') {
    process.stderr.write(`serve projector: ${flags}\n`);
    return 2;
  }
  let store: ConfigStore | undefined;
  if (flags.source === 'kubernetes') {
    const found = await kubernetesStore(flags);
    if (typeof found === 'string') {
      process.stderr.write(`serve projector: ${found}\n`);
      return 2;
    }
    store = found;
  }
  const ledger = await ledgerFromEnv(process.env);
  let running: Awaited<ReturnType<typeof startProjector>>;
  try {
    running = await startProjector({
      ...(store !== undefined ? { store } : { configPath: flags.config ?? DEFAULT_CONFIG_PATH }),
      ...(ledger ? { ledger } : {}),
      port: flags.port,
      host: flags.host ?? '0.0.0.0',
    });
  } catch (e) {
    await ledger?.close();
    process.stderr.write(`serve projector: cannot listen: ${(e as NodeJS.ErrnoException).code ?? 'error'}\n`);
    return 1;
  }
  process.stderr.write(`projector listening on ${running.url}\n`);
  await waitForStopSignal();
  await running.shutdown(shutdownTimingFromEnv());
  return 0;
}
