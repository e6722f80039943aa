/**
 * CLI entry points (wired by cli/main.ts):
 *   serve retrieval [--config-source file|kubernetes] [--config FILE] [--namespace NS]
 *                   [--max-staleness SECONDS] [--port N] [--host H] [--data-dir DIR] [--no-migrate]
 *                   [--replica-url URL]... [--max-replica-lag MS] [--pooler transaction]
 *   ingest --jsonl FILE | --bundle DIR [--database-url URL | --data-dir DIR] [--config FILE]
 *   migrate [--database-url URL] [--bootstrap] [--data-dir DIR]
 * The database is DATABASE_URL (or --database-url for ingest; TLS via DATABASE_CA_FILE and
 * DATABASE_TLS=require) when set, else the embedded PGlite
 * persisted under ./data/pglite. An embedded data directory belongs to one process (db/embedded.ts);
 * an ingest aimed at a directory another process holds writes through that process's database.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { parseFlags, UsageError, usageError } from '../common/args.ts';
import { fsProblem } from '../common/fs-problem.ts';
import { configNamespace, loadKubeConfig } from '../common/kube-config.ts';
import { createLogger } from '../common/log.ts';
import { shutdownTimingFromEnv, waitForStopSignal } from '../common/shutdown.ts';
import { parseStrictJson } from '../contract/index.ts';
import {
  isDirect,
  isMaxReplicaLag,
  isPoolerMode,
  MAX_REPLICA_LAG,
  MAX_REPLICA_LAG_MESSAGE,
  MAX_REPLICAS,
  POOLER_MODES,
  type ReplicaSettings,
} from '../rules/database.ts';
import { describeProblems, type RetrievalConfig, readConfig as readConfigValue } from './config.ts';
import {
  fileRetrievalConfigStore,
  type RetrievalConfigState,
  type RetrievalConfigStore,
} from './config-store.ts';
import { dataDirTarget } from './data-dir.ts';
import {
  DatabaseInUseError,
  DEFAULT_DATA_DIR,
  type EmbeddedDatabase,
  startEmbeddedDatabase,
} from './db/embedded.ts';
import { MigratePrerequisiteError, MigrationDriftError, migrate, syncAll } from './db/migrate.ts';
import { createPool } from './db/pool.ts';
import { asRole, bootstrapDatabase, INGESTION_ROLE, OWNER_ROLE } from './db/roles.ts';
import { maintainSubgraphs } from './db/subgraphs.ts';
import { createLocalEmbedder, LOCAL_PROFILE } from './embeddings/local.ts';
import { createOpenAIEmbedder } from './embeddings/openai.ts';
import { ensureProfile } from './embeddings/profile.ts';
import type { Embedder } from './embeddings/types.ts';
import { startRetrievalServer } from './index.ts';
import { bundleRecords } from './ingest/bundle.ts';
import { databaseProblem, IngestError } from './ingest/errors.ts';
import { type IngestStats, ingestPrepared, prepareRecords, readJsonlFile } from './ingest/jsonl.ts';
import { LeaseBusyError, withIngestionLease } from './ingest/lease.ts';
import { createProgress } from './ingest/progress.ts';
import { StoreConflictError } from './ingest/store.ts';

const log = createLogger('retrieval');
const DEFAULT_CONFIG = '/etc/fgentic/retrieval.json';

export function embedderFor(config: RetrievalConfig['embeddings']): Embedder {
  if (config.profile === LOCAL_PROFILE) return createLocalEmbedder();
  // The loader guarantees both for every profile but the local one.
  if (config.url === undefined || config.model === undefined)
    throw new Error('embeddings: url and model are required for this profile');
  return createOpenAIEmbedder({
    url: config.url,
    model: config.model,
    profile: config.profile,
    ...(config.tokenFile !== undefined ? { tokenFile: config.tokenFile } : {}),
  });
}

/**
 * TLS for DATABASE_URL: `sslmode`/`sslrootcert` in the URL work as usual; DATABASE_CA_FILE adds a CA
 * bundle and DATABASE_TLS=require forces verified TLS (the origin cluster rejects non-TLS: docs/upstream.md#origin-knowledge-store-placement).
 */
function tlsFromEnv(): { caFile?: string; requireTls?: boolean } {
  const ca = process.env['DATABASE_CA_FILE'];
  return {
    ...(ca ? { caFile: ca } : {}),
    ...(process.env['DATABASE_TLS'] === 'require' ? { requireTls: true } : {}),
  };
}

function port(v: string | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError('--port must be an integer 0–65535');
  return n;
}

/** A configuration file problem, naming the path tried (and whether it was the default). */
export class ConfigFileError extends Error {
  constructor(path: string, isDefault: boolean, problem: string) {
    super(`config ${path}${isDefault ? ' (the default; pass --config FILE)' : ''}: ${problem}`);
    this.name = 'ConfigFileError';
  }
}

/** Reads and validates retrieval.json; problems name the file and the field, never a value. */
export function readConfig(path: string, isDefault: boolean): RetrievalConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigFileError(path, isDefault, fsProblem(err));
  }
  const parsed = parseStrictJson(text, { maxDepth: 8, maxLength: 1 << 20 });
  if (!parsed.ok)
    throw new ConfigFileError(
      path,
      isDefault,
      parsed.error === 'duplicate_name'
        ? 'a member name appears twice'
        : `not valid JSON at offset ${parsed.offset}`,
    );
  const read = readConfigValue(parsed.value);
  if (!read.ok) throw new ConfigFileError(path, isDefault, describeProblems(read.problems));
  return read.value;
}

export const SERVE_RETRIEVAL_USAGE =
  'fgentic-retrieval serve retrieval [--config-source file|kubernetes] [--config FILE] [--namespace NS] [--max-staleness SECONDS] [--port N] [--host ADDR] [--data-dir DIR] [--no-migrate] [--replica-url URL]... [--max-replica-lag MS] [--pooler transaction]';

export interface DatabaseTopology {
  /** Read replicas searches may use (retrieval/replica-set.ts). */
  readonly replicaUrls: readonly string[];
  /** The revocation bound on replicas, ms. */
  readonly maxReplicaLagMs: number;
  /** Every database URL is a pooler in transaction mode. */
  readonly pooler?: 'transaction';
}

/**
 * The read replicas and pooler mode from the flags and the environment: `--replica-url` (repeatable)
 * and `DATABASE_REPLICA_URLS` (comma-separated; from a Secret, like DATABASE_URL) together,
 * `--max-replica-lag MS`, `--pooler transaction` or `DATABASE_POOLER=transaction`. These URLs may
 * carry a password, so a URL is never echoed: a problem names its position only. `explicit` says
 * whether any of them was given. Pure.
 */
export function databaseTopology(
  values: Record<string, unknown>,
  env: Readonly<Record<string, string | undefined>>,
  hasPrimary: boolean,
): DatabaseTopology & { readonly explicit: boolean } {
  const flagged = (values['replica-url'] as string[] | undefined) ?? [];
  const fromEnv = (env['DATABASE_REPLICA_URLS'] ?? '')
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
  const replicaUrls = [...flagged, ...fromEnv];
  replicaUrls.forEach((u, i) => {
    let scheme: string | undefined;
    try {
      scheme = new URL(u).protocol;
    } catch {
      scheme = undefined;
    }
    if (scheme !== 'postgres:' && scheme !== 'postgresql:')
      throw new UsageError(`replica URL #${i + 1} must be a postgres:// URL`);
  });
  if (replicaUrls.length > MAX_REPLICAS) throw new UsageError(`at most ${MAX_REPLICAS} replica URLs`);
  if (replicaUrls.length > 0 && !hasPrimary)
    throw new UsageError('replica URLs need DATABASE_URL (the primary)');
  const rawLag = values['max-replica-lag'] as string | undefined;
  const maxReplicaLagMs = rawLag === undefined ? MAX_REPLICA_LAG.default : Number(rawLag);
  if (!isMaxReplicaLag(maxReplicaLagMs)) throw new UsageError(`--max-replica-lag ${MAX_REPLICA_LAG_MESSAGE}`);
  const pooler = (values['pooler'] as string | undefined) ?? env['DATABASE_POOLER'];
  if (pooler !== undefined && !isPoolerMode(pooler))
    throw new UsageError(`--pooler (DATABASE_POOLER) must be ${POOLER_MODES.join(' or ')}`);
  if (pooler === 'transaction' && !hasPrimary) throw new UsageError('--pooler needs DATABASE_URL');
  return {
    replicaUrls,
    maxReplicaLagMs,
    ...(pooler === 'transaction' ? { pooler } : {}),
    explicit: replicaUrls.length > 0 || rawLag !== undefined || pooler !== undefined,
  };
}

/**
 * The topology the server starts with: the configuration's `database` section (rendered from the
 * RetrievalPlatform) or the flags and environment, never a mix of both, which would leave an
 * operator guessing which bound holds. Throws a UsageError naming both sources. Pure.
 */
export function startTopology(
  flagged: DatabaseTopology & { readonly explicit: boolean },
  configured: ReplicaSettings,
  hasPrimary: boolean,
): DatabaseTopology {
  const fromConfig = !isDirect(configured);
  if (fromConfig && flagged.explicit)
    throw new UsageError(
      'replica settings come from the configuration (database) or from --replica-url/--max-replica-lag/--pooler and DATABASE_REPLICA_URLS/DATABASE_POOLER, not both',
    );
  if (!fromConfig)
    return {
      replicaUrls: flagged.replicaUrls,
      maxReplicaLagMs: flagged.maxReplicaLagMs,
      ...(flagged.pooler ? { pooler: flagged.pooler } : {}),
    };
  if (!hasPrimary)
    throw new UsageError("the configuration's database section needs DATABASE_URL (the primary)");
  return {
    replicaUrls: configured.replicaUrls,
    maxReplicaLagMs: configured.maxReplicaLagMilliseconds,
    ...(configured.pooler === 'transaction' ? { pooler: 'transaction' as const } : {}),
  };
}

type ConfigSourceFlags = {
  source: 'file' | 'kubernetes';
  namespace: string | undefined;
  stalenessSeconds: number;
};

function configSourceFlags(values: Record<string, string | boolean | undefined>): ConfigSourceFlags {
  const source = (values['config-source'] as string | undefined) ?? 'file';
  if (source !== 'file' && source !== 'kubernetes')
    throw new UsageError('--config-source must be file or kubernetes');
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

export async function serveRetrieval(argv: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  let listenPort: number;
  let flags: ConfigSourceFlags;
  let flagTopology: ReturnType<typeof databaseTopology>;
  try {
    values = parseFlags(argv, {
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
    }).values as Record<string, string | boolean | undefined>;
    listenPort = port(values['port'] as string | undefined, 8080);
    flags = configSourceFlags(values);
    flagTopology = databaseTopology(values, process.env, Boolean(process.env['DATABASE_URL']));
  } catch (err) {
    return usageError('serve retrieval', SERVE_RETRIEVAL_USAGE, err);
  }
  const stop = waitForStopSignal();
  let config: RetrievalConfig;
  let store: RetrievalConfigStore;
  if (flags.source === 'kubernetes') {
    const got = await kubernetesConfig(flags, stop);
    if (got === undefined) return 0;
    if (typeof got === 'string') {
      process.stderr.write(`serve retrieval: ${got}\n`);
      return 2;
    }
    ({ store, config } = got);
  } else {
    const path = String(values['config'] ?? DEFAULT_CONFIG);
    try {
      config = readConfig(path, values['config'] === undefined);
    } catch (err) {
      // Invalid configuration: refuse to start (the path names the field, never a value).
      process.stderr.write(
        `serve retrieval: ${err instanceof ConfigFileError ? err.message : 'cannot read config'}\n`,
      );
      return 2;
    }
    store = fileRetrievalConfigStore(path, { onChange: logState('file') });
  }
  const databaseUrl = process.env['DATABASE_URL'];
  let topology: DatabaseTopology;
  try {
    topology = startTopology(flagTopology, config.database, Boolean(databaseUrl));
  } catch (err) {
    store.close();
    process.stderr.write(`serve retrieval: ${(err as Error).message}\n`);
    return 2;
  }
  const noting = noteRestartOnlyChanges(store, config);
  try {
    const server = await startRetrievalServer({
      config: store,
      embedder: embedderFor(config.embeddings),
      ...(databaseUrl
        ? { databaseUrl, pool: tlsFromEnv() }
        : { dataDir: String(values['data-dir'] ?? DEFAULT_DATA_DIR) }),
      host: String(values['host'] ?? (databaseUrl ? '0.0.0.0' : '127.0.0.1')),
      port: listenPort,
      migrate: values['no-migrate'] !== true,
      capability: config.capability,
      // Read at start, like the capability itself (rules/ledger.ts bounds it).
      ledgerWaitMs: config.ledger.mintWindowMilliseconds,
      // Read at start, like the embedder (noteRestartOnlyChanges).
      replicaUrls: topology.replicaUrls,
      maxReplicaLagMs: topology.maxReplicaLagMs,
      ...(topology.pooler ? { pooler: topology.pooler } : {}),
    });
    if (!server.profileOk) log.error('serving /readyz=false until the embedding profile matches');
    process.stdout.write(`retrieval listening on ${server.mcpUrl}\n`);
    await stop;
    await server.shutdown(shutdownTimingFromEnv());
    return 0;
  } catch (err) {
    const db = databaseProblem(err, databaseUrl);
    const msg =
      err instanceof DatabaseInUseError
        ? err.message
        : db
          ? db.message
          : (err as NodeJS.ErrnoException).code === 'EADDRINUSE'
            ? `port ${listenPort} is already in use`
            : `failed to start (${err instanceof Error ? err.name : 'unknown'})`;
    log.error('retrieval server failed to start', { error: err instanceof Error ? err.name : 'unknown' });
    process.stderr.write(`serve retrieval: ${msg}\n`);
    return 1;
  } finally {
    clearInterval(noting);
    store.close();
  }
}

export const INGEST_USAGE =
  'fgentic-retrieval ingest (--jsonl FILE | --bundle DIR) [--database-url URL | --data-dir DIR] [--config FILE]';

/**
 * Where an ingest writes: --database-url / DATABASE_URL; else the embedded data directory, through
 * the process that holds it when one does (its lock file names its URL), else opened here.
 */
async function ingestTarget(
  values: Record<string, string | undefined>,
): Promise<{ url: string; embedded?: EmbeddedDatabase }> {
  const url = values['database-url'] ?? process.env['DATABASE_URL'];
  if (url) return { url };
  return dataDirTarget('ingest', 'writing', values['data-dir'] ?? DEFAULT_DATA_DIR, (l: string) =>
    process.stderr.write(l),
  );
}

export async function ingestCommand(argv: string[]): Promise<number> {
  let values: Record<string, string | undefined>;
  try {
    values = parseFlags(argv, {
      jsonl: { type: 'string' },
      bundle: { type: 'string' },
      'database-url': { type: 'string' },
      config: { type: 'string' },
      'data-dir': { type: 'string' },
    }).values as Record<string, string | undefined>;
    if ((values['jsonl'] === undefined) === (values['bundle'] === undefined))
      throw new UsageError('exactly one of --jsonl FILE or --bundle DIR');
    if (values['database-url'] !== undefined && values['data-dir'] !== undefined)
      throw new UsageError('--database-url and --data-dir exclude each other');
  } catch (err) {
    return usageError('ingest', INGEST_USAGE, err);
  }
  let embedder: Embedder;
  try {
    embedder = values['config']
      ? embedderFor(readConfig(values['config'], false).embeddings)
      : createLocalEmbedder();
  } catch (err) {
    process.stderr.write(`ingest: ${err instanceof ConfigFileError ? err.message : 'invalid config'}\n`);
    return 2;
  }
  // Input first: a bad file fails in milliseconds, before any database is opened.
  let load: (writer: pg.Pool) => Promise<IngestStats>;
  let pool: pg.Pool | undefined;
  let target: { url: string; embedded?: EmbeddedDatabase } | undefined;
  const progress = createProgress();
  try {
    // Every record is validated here, before a database is opened or created.
    if (values['jsonl'] !== undefined) {
      const input = prepareRecords(readJsonlFile(values['jsonl']), embedder.profile);
      load = (writer) => ingestPrepared(writer, embedder, input, progress);
    } else {
      const { records, prefix, sources } = bundleRecords(values['bundle'] ?? '');
      const input = prepareRecords(records, embedder.profile);
      load = (writer) =>
        ingestPrepared(writer, embedder, input, progress, {
          replacePrefix: prefix,
          replaceSources: sources,
        });
    }
    target = await ingestTarget(values);
    // An embedded database runs its queries on this process's thread, and a running stack's queues
    // connections behind an open transaction: a new connection may wait for a long statement.
    pool = createPool({
      connectionString: target.url,
      max: 2,
      statementTimeoutMs: 300_000,
      connectionTimeoutMs: 30_000,
    });
    // An embedded database this process opened is its own: prepare it as its owner. A running
    // stack's is already prepared; an external database is migrated by the `migrate` Job. Ingest
    // itself writes as the ingestion role only, under the single-writer lease.
    if (target.embedded) {
      await bootstrapDatabase(pool);
      await migrate(pool);
    }
    const state = await ensureProfile(asRole(pool, INGESTION_ROLE), embedder.profile, true);
    if (!state.ok) {
      process.stderr.write(
        `ingest: the database holds embeddings of another profile (${state.reason}); refusing to write\n`,
      );
      return 1;
    }
    const stats = await withIngestionLease(pool, (writer) => load(writer));
    process.stdout.write(`${JSON.stringify(stats)}\n`);
    return 0;
  } catch (err) {
    const db = databaseProblem(err, target?.url ?? values['database-url'] ?? process.env['DATABASE_URL']);
    if (
      err instanceof IngestError ||
      err instanceof DatabaseInUseError ||
      err instanceof StoreConflictError ||
      err instanceof LeaseBusyError
    )
      process.stderr.write(`ingest: ${err.message}\n`);
    else if (db) process.stderr.write(`ingest: ${db.message}\n`);
    else {
      // Not an input or connection problem: a fault. Its name only; messages may quote data.
      const name = err instanceof Error ? err.name : 'unknown';
      const code = (err as { code?: unknown } | undefined)?.code;
      process.stderr.write(`ingest: failed (${name}${typeof code === 'string' ? ` ${code}` : ''})\n`);
      log.error('ingest failed', { error: name, ...(typeof code === 'string' ? { code } : {}) });
    }
    return 1;
  } finally {
    await pool?.end().catch(() => {});
    await target?.embedded?.close();
  }
}

/**
 * `migrate [--database-url URL] [--bootstrap] [--data-dir DIR] [--capability plain|ledger]`: apply
 * this project's migrations as knowledge_owner (the Job's login role, or a member of it), re-assert
 * the deployment's grants, and sync the derived search data (retrieval/db/migrate.ts).
 * `--bootstrap` first creates the roles and the vector extension and hands the database to
 * knowledge_owner, which needs a superuser; it is the database administrator's one step before the
 * first `migrate` (deploy/README.md, "Database"). Without a URL it migrates the embedded database.
 */
export async function migrateCommand(argv: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        'database-url': { type: 'string' },
        'data-dir': { type: 'string' },
        bootstrap: { type: 'boolean' },
        capability: { type: 'string' },
        'subgraph-budget': { type: 'string' },
      },
    }));
  } catch {
    process.stderr.write('migrate: invalid arguments\n');
    return 2;
  }
  const capability = values['capability'] ?? 'plain';
  if (capability !== 'plain' && capability !== 'ledger') {
    process.stderr.write('migrate: --capability must be plain or ledger\n');
    return 2;
  }
  const budget = subgraphBudget(values['subgraph-budget']);
  if (budget === null) {
    process.stderr.write('migrate: --subgraph-budget must be a whole number of MiB\n');
    return 2;
  }
  const url = (values['database-url'] as string | undefined) ?? process.env['DATABASE_URL'];
  let embedded: Awaited<ReturnType<typeof startEmbeddedDatabase>> | undefined;
  let pool: ReturnType<typeof createPool> | undefined;
  try {
    embedded = url
      ? undefined
      : await startEmbeddedDatabase({ dataDir: String(values['data-dir'] ?? DEFAULT_DATA_DIR) });
    pool = createPool({
      connectionString: url ?? embedded?.url ?? '',
      max: 1,
      statementTimeoutMs: 600_000,
      ...(url ? tlsFromEnv() : {}),
    });
    if (values['bootstrap'] === true || embedded) await bootstrapDatabase(pool);
    const result = await migrate(pool, {
      role: OWNER_ROLE,
      capability,
      onSync: (covered) => process.stderr.write(`migrate: synced ${covered} rows\n`),
      subgraphs: {
        ...(budget === undefined ? {} : { budgetBytes: budget }),
        onProgress: (m) => process.stderr.write(`migrate: ${m}\n`),
      },
    });
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return 0;
  } catch (err) {
    log.error('migrate failed', { error: err instanceof Error ? err.name : 'unknown' });
    const known = err instanceof MigrationDriftError || err instanceof MigratePrerequisiteError;
    const db = known ? undefined : databaseProblem(err, url);
    process.stderr.write(`migrate: ${known ? (err as Error).message : db ? db.message : 'failed'}\n`);
    return 1;
  } finally {
    await pool?.end().catch(() => {});
    await embedded?.close();
  }
}

/**
 * `sync [--database-url URL | --data-dir DIR]`: a full sync of the derived search data
 * (retrieval/db/migrate.ts, syncAll), as the login role: knowledge_ingestion or knowledge_owner. For
 * rows the origin's own writers changed; this project's `ingest` keeps its own rows in step.
 */
export async function syncCommand(argv: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        'database-url': { type: 'string' },
        'data-dir': { type: 'string' },
        'subgraph-budget': { type: 'string' },
      },
    }));
  } catch {
    process.stderr.write('sync: invalid arguments\n');
    return 2;
  }
  const budget = subgraphBudget(values['subgraph-budget']);
  if (budget === null) {
    process.stderr.write('sync: --subgraph-budget must be a whole number of MiB\n');
    return 2;
  }
  const url = (values['database-url'] as string | undefined) ?? process.env['DATABASE_URL'];
  let embedded: Awaited<ReturnType<typeof startEmbeddedDatabase>> | undefined;
  let pool: ReturnType<typeof createPool> | undefined;
  try {
    embedded = url
      ? undefined
      : await startEmbeddedDatabase({ dataDir: String(values['data-dir'] ?? DEFAULT_DATA_DIR) });
    pool = createPool({ connectionString: url ?? embedded?.url ?? '', max: 1, ...(url ? tlsFromEnv() : {}) });
    const client = await pool.connect();
    try {
      // The embedded superuser session syncs as the ingestion role; a login syncs as itself.
      const role = embedded
        ? INGESTION_ROLE
        : String((await client.query('SELECT current_user AS u')).rows[0]?.u);
      const synced = await syncAll(client, role, (covered) =>
        process.stderr.write(`sync: ${covered} rows\n`),
      );
      // The filtered subgraphs follow the new shares when this login owns the table (the index
      // builds need it); under the ingestion login they wait for the owner's next run.
      const owner = await client.query<{ rolname: string; may: boolean }>(
        `SELECT r.rolname, pg_has_role(current_user, r.oid, 'MEMBER') AS may
           FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner WHERE c.oid = 'fgentic.chunks'::regclass`,
      );
      const o = owner.rows[0];
      const subgraphs = o?.may
        ? await maintainSubgraphs(client, o.rolname, {
            ...(budget === undefined ? {} : { budgetBytes: budget }),
            onProgress: (m) => process.stderr.write(`sync: ${m}\n`),
          })
        : 'left to the table owner';
      process.stdout.write(`${JSON.stringify({ synced, subgraphs })}\n`);
    } finally {
      client.release();
    }
    return 0;
  } catch (err) {
    const db = databaseProblem(err, url);
    const code = (err as { code?: unknown } | undefined)?.code;
    log.error('sync failed', {
      error: err instanceof Error ? err.name : 'unknown',
      ...(typeof code === 'string' ? { code } : {}),
    });
    process.stderr.write(
      `sync: ${db ? db.message : code === '42501' ? 'this login may not sync (use knowledge_ingestion or knowledge_owner)' : 'failed'}\n`,
    );
    return 1;
  } finally {
    await pool?.end().catch(() => {});
    await embedded?.close();
  }
}

/** `--subgraph-budget` in MiB: undefined when absent, null when not a whole number. */
function subgraphBudget(v: string | boolean | undefined): number | undefined | null {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^[0-9]{1,7}$/.test(v)) return null;
  return Number(v) * 1024 * 1024;
}
