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

export async function serveProjector(argv: string[]): Promise<number> {
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
    process.stderr.write(`serve projector: ${(e as Error).message}\n`);
    return 2;
  }
  const port = values.port === undefined ? 8080 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write('serve projector: --port must be 0–65535\n');
    return 2;
  }
  const source = values['registry-source'] ?? 'file';
  if (source !== 'file' && source !== 'kubernetes') {
    process.stderr.write('serve projector: --registry-source must be file or kubernetes\n');
    return 2;
  }
  const staleness = values['max-staleness'] === undefined ? 30 : Number(values['max-staleness']);
  if (!Number.isInteger(staleness) || staleness < 1 || staleness > 3600) {
    process.stderr.write('serve projector: --max-staleness must be 1–3600 seconds\n');
    return 2;
  }
  const heartbeatAge = values['max-heartbeat-age'] === undefined ? 30 : Number(values['max-heartbeat-age']);
  if (!Number.isInteger(heartbeatAge) || heartbeatAge < 0 || heartbeatAge > 3600) {
    process.stderr.write('serve projector: --max-heartbeat-age must be 0–3600 seconds (0: off)\n');
    return 2;
  }
  let store: ConfigStore | undefined;
  if (source === 'kubernetes') {
    const namespace = configNamespace(values.namespace);
    if (namespace === undefined) {
      process.stderr.write(
        'serve projector: --registry-source kubernetes needs --namespace, POD_NAMESPACE or a service account namespace file\n',
      );
      return 2;
    }
    const { kubeConfigStore } = await import('./kube-store.ts');
    const loaded = await loadKubeConfig();
    if ('error' in loaded) {
      process.stderr.write(`serve projector: ${loaded.error}\n`);
      return 2;
    }
    const { kubeConfig } = loaded;
    const log = createLogger('projector');
    store = kubeConfigStore({
      kubeConfig,
      namespace,
      maxStalenessMs: staleness * 1000,
      maxHeartbeatAgeMs: heartbeatAge * 1000,
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
  const databaseUrl = process.env['DATABASE_URL'];
  let ledger: CapabilityLedger | undefined;
  if (databaseUrl) {
    const { createWorkerLedger } = await import('./ledger-worker.ts');
    const ca = process.env['DATABASE_CA_FILE'];
    ledger = createWorkerLedger({
      database: {
        connectionString: databaseUrl,
        max: 2,
        ...(ca ? { caFile: ca } : {}),
        ...(process.env['DATABASE_TLS'] === 'require' ? { requireTls: true } : {}),
        connectionTimeoutMs: 2_000,
        statementTimeoutMs: 2_000,
      },
    });
  }
  let running: Awaited<ReturnType<typeof startProjector>>;
  try {
    running = await startProjector({
      ...(store !== undefined ? { store } : { configPath: values.config ?? DEFAULT_CONFIG_PATH }),
      ...(ledger ? { ledger } : {}),
      port,
      host: values.host ?? '0.0.0.0',
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
