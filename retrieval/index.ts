/**
 * Programmatic entry points: start the retrieval server (used by the CLI, the end-to-end stack and
 * tests) and seed a corpus.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { errorFields } from '../common/error-fields.ts';
import { createLogger } from '../common/log.ts';
import { drainHttpServer, type ShutdownTiming, sleep } from '../common/shutdown.ts';
import type { AgentRef } from '../contract/index.ts';
import { configMetrics, type RetrievalConfigStore } from './config-store.ts';
import { type EmbeddedDatabase, startEmbeddedDatabase } from './db/embedded.ts';
import { migrate } from './db/migrate.ts';
import { createPool, type PoolOptions, statementTimeoutMs } from './db/pool.ts';
import {
  asRole,
  assertServingPrivileges,
  bootstrapDatabase,
  INGESTION_ROLE,
  RETRIEVAL_ROLE,
  type RoleOptions,
} from './db/roles.ts';
import { createLocalEmbedder } from './embeddings/local.ts';
import { ensureProfile } from './embeddings/profile.ts';
import type { Embedder } from './embeddings/types.ts';
import { createHttpServer, type HttpContext } from './http.ts';
import { type IngestRecord, type IngestStats, ingestRecords } from './ingest/jsonl.ts';
import { withIngestionLease } from './ingest/lease.ts';
import { type CapabilityMode, ledgerReachable } from './ledger.ts';
import { createMetrics, type RetrievalMetrics } from './metrics.ts';
import { DEFAULT_PLANNER, type PlannerOptions } from './planner.ts';
import { createReplicaSet, type ReplicaEndpoint, type ReplicaSet } from './replica-set.ts';
import { replicaTiming } from './replicas.ts';

const log = createLogger('retrieval');

export interface RetrievalServerOptions {
  /** The agents served, fixed for the server's life (unless `config` is given). */
  readonly agents?: readonly AgentRef[];
  /**
   * The live configuration (retrieval/config-store.ts): agents and allowed origins are read from it
   * on every request, readiness requires it, and `agents`/`allowedOrigins` are ignored.
   */
  readonly config?: RetrievalConfigStore;
  /** Defaults to the local deterministic embedder (not semantic quality). */
  readonly embedder?: Embedder;
  /** External Postgres; when absent an embedded PGlite is started. */
  readonly databaseUrl?: string;
  readonly pool?: Omit<PoolOptions, 'connectionString'>;
  /** Embedded database directory; absent or 'memory' → in-memory. */
  readonly dataDir?: string;
  readonly host?: string;
  /** 0 picks a free port. */
  readonly port?: number;
  readonly allowedOrigins?: readonly string[];
  readonly planner?: PlannerOptions;
  /**
   * Embedded database only: run the migration step as the owner before serving (default true). With
   * an external database the server never migrates: the `migrate` command (a Job) does, as the owner.
   */
  readonly migrate?: boolean;
  /** Clock override for tests, Unix seconds. */
  readonly now?: () => number;
  readonly metrics?: RetrievalMetrics;
  /** `ledger`: searches require the capability ledger entry of their projection (docs/ledger.md). */
  readonly capability?: CapabilityMode;
  /** Ledger mode: the mint window, ms (default LEDGER_WAIT_MS, retrieval/ledger.ts). */
  readonly ledgerWaitMs?: number;
  /**
   * Read replicas of `databaseUrl` (hot standbys, or a service in front of them): searches go to a
   * fresh one, everything else to the primary (retrieval/replica-set.ts). Needs `databaseUrl`.
   */
  readonly replicaUrls?: readonly string[];
  /** The revocation bound on replicas, ms (default DEFAULT_MAX_REPLICA_LAG_MS, retrieval/replicas.ts). */
  readonly maxReplicaLagMs?: number;
  /**
   * `transaction`: every database URL points at a pooler in transaction mode (PgBouncer): no startup
   * options, the role, read-only mode and statement timeout set in each transaction.
   */
  readonly pooler?: 'transaction';
}

export interface RetrievalServer {
  /** Base URL, e.g. http://127.0.0.1:8080 */
  readonly url: string;
  /** The MCP endpoint, `${url}/mcp`. */
  readonly mcpUrl: string;
  /** The underlying pool (on the embedded database: its superuser session, for tests and tools). */
  readonly pool: pg.Pool;
  /** What the server searches with: every transaction runs as knowledge_retrieval. */
  readonly servingPool: pg.Pool;
  /** The loopback URL of the embedded database (absent with an external DATABASE_URL): local tooling. */
  readonly embeddedDatabaseUrl?: string;
  readonly embedder: Embedder;
  readonly metrics: RetrievalMetrics;
  /** The read replicas searches are routed to (absent without replicaUrls). */
  readonly replicas?: ReplicaSet;
  /** Whether the stored embedding profile matches the embedder. */
  readonly profileOk: boolean;
  seed(records: readonly IngestRecord[]): Promise<IngestStats>;
  close(): Promise<void>;
  /** SIGTERM path: not ready, keep serving for delayMs, drain in-flight calls, then close the pool. */
  shutdown(timing: ShutdownTiming): Promise<{ forced: boolean }>;
}

/** The database a server runs on: the external primary, or an embedded PGlite started here. */
async function openDatabase(
  options: RetrievalServerOptions,
): Promise<{ url: string; embedded: EmbeddedDatabase | undefined }> {
  if (options.databaseUrl !== undefined) return { url: options.databaseUrl, embedded: undefined };
  const embedded = await startEmbeddedDatabase(
    options.dataDir !== undefined && options.dataDir !== 'memory' ? { dataDir: options.dataDir } : {},
  );
  if ((options.replicaUrls ?? []).length > 0) {
    await embedded.close();
    throw new Error('read replicas need an external primary (DATABASE_URL)');
  }
  return { url: embedded.url, embedded };
}

interface Pools {
  /** On the embedded database its superuser session; else a session as the retrieval role. */
  readonly pool: pg.Pool;
  /** Every transaction as knowledge_retrieval. */
  readonly servingPool: pg.Pool;
  readonly roleOptions: RoleOptions | undefined;
  readonly pooler: 'transaction' | undefined;
}

/** The primary's pool and the serving role on it. */
function primaryPools(options: RetrievalServerOptions, url: string, embedded: EmbeddedDatabase | undefined): Pools {
  const pooler = embedded ? undefined : options.pooler;
  // Behind a pooler in transaction mode nothing is kept per session: every search is an explicit
  // read-only transaction that sets the role and the statement timeout itself.
  const roleOptions: RoleOptions | undefined = pooler
    ? { transactionPooler: { statementTimeoutMs: statementTimeoutMs(options.pool ?? {}), readOnly: true } }
    : undefined;
  const pool = createPool({
    ...options.pool,
    connectionString: url,
    ...(pooler ? { pooler } : {}),
    // PGlite runs its queries on this process's thread, so a connection handshake can wait behind a
    // long statement (a migration, a bulk ingest through the socket) on a busy machine.
    ...(embedded
      ? { max: embedded.poolSize, connectionTimeoutMs: options.pool?.connectionTimeoutMs ?? 60_000 }
      : // Every connection starts as the retrieval role with read-only transactions, so a search is
        // one statement (retrieval/db/pool.ts, PoolOptions.session). The embedded database's one
        // session also runs migrations and ingestion, and would drop the options anyway.
        { session: { role: RETRIEVAL_ROLE, readOnly: true } }),
  });
  // Serves as the retrieval role only: it can call the search functions and read the profile, nothing
  // else. On the embedded database this process is also the database's administrator, so it prepares
  // the schema first, as the owner, and records the profile as the ingestion role.
  const servingPool = asRole(pool, RETRIEVAL_ROLE, undefined, roleOptions);
  return { pool, servingPool, roleOptions, pooler };
}

/** Prepares an embedded database, checks the serving role's privileges; whether the profile matches. */
async function prepareDatabase(
  options: RetrievalServerOptions,
  pools: Pools,
  embedded: EmbeddedDatabase | undefined,
  embedder: Embedder,
): Promise<boolean> {
  if (embedded) {
    await bootstrapDatabase(pools.pool);
    if (options.migrate ?? true)
      await migrate(pools.pool, { capability: options.capability === 'ledger' ? 'ledger' : 'plain' });
    await ensureProfile(asRole(pools.pool, INGESTION_ROLE), embedder.profile, true);
  }
  await assertServingPrivileges(pools.servingPool);
  const state = await ensureProfile(pools.servingPool, embedder.profile, false);
  if (!state.ok) log.error('embedding profile mismatch: refusing to serve', { reason: state.reason });
  return state.ok;
}

/**
 * The read replicas searches are routed to. Each endpoint is pushed to `endpoints` as it is made, so
 * a failure part-way still closes those made before it.
 */
function startReplicas(
  options: RetrievalServerOptions,
  url: string,
  pools: Pools,
  registry: RetrievalMetrics['registry'],
  endpoints: ReplicaEndpoint[],
): ReplicaSet {
  const { pooler } = pools;
  const timing = replicaTiming(options.maxReplicaLagMs);
  // A replica's serving pool: as the primary's, on its own URL.
  const replicaPool = (connectionString: string) =>
    createPool({
      ...options.pool,
      connectionString,
      session: { role: RETRIEVAL_ROLE, readOnly: true },
      ...(pooler ? { pooler } : {}),
    });
  // The checks have connections of their own, so a busy serving pool never delays one; a check
  // that takes longer than the bound proves nothing in time anyway.
  const checkPool = (u: string) =>
    createPool({
      ...options.pool,
      connectionString: u,
      max: 1,
      connectionTimeoutMs: timing.maxLagMs,
      statementTimeoutMs: timing.maxLagMs,
      ...(pooler ? { pooler } : {}),
    });
  for (const u of options.replicaUrls ?? [])
    endpoints.push({
      serving: asRole(replicaPool(u), RETRIEVAL_ROLE, undefined, pools.roleOptions),
      check: checkPool(u),
    });
  return createReplicaSet({
    primary: pools.servingPool,
    primaryCheck: checkPool(url),
    replicas: endpoints,
    timing,
    registry,
  });
}

/** What readiness and serving read from the server as it runs. */
interface LiveState {
  profileOk: boolean;
  draining: boolean;
}

/**
 * The readiness probe: the configuration is ready, the profile matches and what a search needs is
 * there. Records the profile's state in `live`.
 */
function readinessProbe(
  config: RetrievalConfigStore | undefined,
  servingPool: pg.Pool,
  embedder: Embedder,
  ledger: boolean,
  live: LiveState,
): () => Promise<boolean> {
  return async () => {
    // A missing or stale configuration serves no agent: not ready, whatever the database says.
    if (config && !config.current().ready) return false;
    try {
      const s = await ensureProfile(servingPool, embedder.profile, false);
      live.profileOk = s.ok;
      // Ready only while what a search needs is there: the search functions, executable by the
      // serving role (and still no table access), and in ledger mode the check each search folds
      // in, run for real (a missing function, grant or table fails every search).
      await assertServingPrivileges(servingPool);
      return s.ok && (!ledger || (await ledgerReachable(servingPool)));
    } catch (err) {
      // Not ready; the SQLSTATE or errno says whether the database is down or refusing us.
      log.warn('readiness probe failed', errorFields(err));
      return false;
    }
  };
}

/** The agents and origins served, and the readiness detail, read from the live configuration. */
function liveConfigOptions(config: RetrievalConfigStore): Pick<HttpContext, 'liveConfig' | 'readyDetail'> {
  return {
    liveConfig: () => {
      const s = config.current();
      return s.ready ? { agents: s.config.agents, allowedOrigins: s.config.allowedOrigins } : undefined;
    },
    readyDetail: () => {
      const s = config.current();
      return s.ready ? (s.rejected ? 'newest configuration rejected; serving the previous one' : undefined) : s.error;
    },
  };
}

/** The HTTP server's context: what it serves, from where, and how readiness reads. */
function httpContext(
  options: RetrievalServerOptions,
  parts: {
    servingPool: pg.Pool;
    embedder: Embedder;
    metrics: RetrievalMetrics;
    checkReady: () => Promise<boolean>;
    live: LiveState;
    ledger: boolean;
    replicas: ReplicaSet | undefined;
  },
): HttpContext {
  const { servingPool, embedder, metrics, checkReady, live, ledger, replicas } = parts;
  const config = options.config;
  return {
    pool: servingPool,
    embedder,
    agents: options.agents ?? [],
    allowedOrigins: options.allowedOrigins ?? [],
    ...(config ? liveConfigOptions(config) : {}),
    metrics,
    planner: options.planner ?? DEFAULT_PLANNER,
    ready: () => live.profileOk,
    checkReady,
    draining: () => live.draining,
    ...(options.now ? { now: options.now } : {}),
    ...(ledger ? { capability: 'ledger' as const } : {}),
    ...(options.ledgerWaitMs !== undefined ? { ledgerWaitMs: options.ledgerWaitMs } : {}),
    ...(replicas ? { replicas } : {}),
  };
}

/** Listens on host:port; the base URL it answers on. */
async function listen(http: Server, port: number, host: string): Promise<{ base: string; port: number }> {
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(port, host, () => resolve());
  });
  const addr = http.address() as AddressInfo;
  return { base: `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}`, port: addr.port };
}

/**
 * The ingestion path: record the profile if the store has none, then write under the lease. On an
 * external database the serving connections are read-only, so the write goes through a pool of its
 * own on the same URL (whose login must be able to act as the ingestion role).
 */
async function seedThrough(
  url: string,
  embedded: EmbeddedDatabase | undefined,
  pools: Pools,
  embedder: Embedder,
  live: LiveState,
  records: readonly IngestRecord[],
): Promise<IngestStats> {
  const { pool, servingPool } = pools;
  const writable = embedded ? pool : createPool({ connectionString: url, max: 2 });
  try {
    const claimed = await ensureProfile(asRole(writable, INGESTION_ROLE), embedder.profile, true);
    if (!claimed.ok) throw new Error(`embedding profile mismatch (${claimed.reason})`);
    live.profileOk = (await ensureProfile(servingPool, embedder.profile, false)).ok;
    return await withIngestionLease(writable, (writer) => ingestRecords(writer, embedder, records));
  } finally {
    if (writable !== pool) await writable.end().catch(() => {});
  }
}

export async function startRetrievalServer(options: RetrievalServerOptions): Promise<RetrievalServer> {
  if (options.config === undefined && (options.agents?.length ?? 0) === 0) throw new Error('no agents configured');
  const config = options.config;
  const embedder = options.embedder ?? createLocalEmbedder();
  const { url, embedded } = await openDatabase(options);
  const pools = primaryPools(options, url, embedded);
  const { pool, servingPool, pooler } = pools;
  const replicaUrls = options.replicaUrls ?? [];
  const replicaPools: ReplicaEndpoint[] = [];
  let replicas: ReplicaSet | undefined;
  const closeDatabases = async () => {
    await replicas?.close();
    for (const r of replicaPools) await r.serving.end().catch(() => {});
    await pool.end().catch(() => {});
    await embedded?.close();
  };
  try {
    const live: LiveState = {
      profileOk: await prepareDatabase(options, pools, embedded, embedder),
      draining: false,
    };
    const metrics = options.metrics ?? createMetrics();
    if (config) configMetrics(metrics.registry, config);
    if (replicaUrls.length > 0) replicas = startReplicas(options, url, pools, metrics.registry, replicaPools);
    const ledger = options.capability === 'ledger';
    const checkReady = readinessProbe(config, servingPool, embedder, ledger, live);
    metrics.setReadinessProbe(checkReady);
    const http = createHttpServer(
      httpContext(options, { servingPool, embedder, metrics, checkReady, live, ledger, replicas }),
    );
    const listening = await listen(http, options.port ?? 8080, options.host ?? '127.0.0.1');
    log.info('retrieval server listening', {
      port: listening.port,
      embedded: embedded !== undefined,
      capability: ledger ? 'ledger' : 'plain',
      replicas: replicaUrls.length,
      ...(replicas ? { max_replica_lag_ms: replicaTiming(options.maxReplicaLagMs).maxLagMs } : {}),
      ...(pooler ? { pooler } : {}),
    });
    return {
      url: listening.base,
      mcpUrl: `${listening.base}/mcp`,
      pool,
      servingPool,
      ...(embedded ? { embeddedDatabaseUrl: embedded.url } : {}),
      embedder,
      metrics,
      ...(replicas ? { replicas } : {}),
      get profileOk() {
        return live.profileOk;
      },
      seed: (records) => seedThrough(url, embedded, pools, embedder, live, records),
      async close() {
        await new Promise<void>((r) => {
          http.close(() => r());
          http.closeAllConnections();
        });
        await closeDatabases();
      },
      async shutdown(timing) {
        live.draining = true;
        log.info('shutting down: not ready, draining', {
          delay_ms: timing.delayMs,
          timeout_ms: timing.timeoutMs,
        });
        await sleep(timing.delayMs);
        const result = await drainHttpServer(http, timing.timeoutMs);
        await closeDatabases();
        log.info('stopped', { forced: result.forced });
        return result;
      },
    };
  } catch (err) {
    await closeDatabases();
    throw err;
  }
}

/**
 * Seed a corpus into a migrated database (URL) with the given embedder, as the ingestion role under
 * the ingestion lease; records as in the JSONL format.
 */
export async function seedCorpus(
  databaseUrl: string,
  records: readonly IngestRecord[],
  embedder: Embedder = createLocalEmbedder(),
): Promise<IngestStats> {
  const pool = createPool({ connectionString: databaseUrl, max: 2 });
  try {
    const state = await ensureProfile(asRole(pool, INGESTION_ROLE), embedder.profile, true);
    if (!state.ok) throw new Error(`embedding profile mismatch (${state.reason})`);
    return await withIngestionLease(pool, (writer) => ingestRecords(writer, embedder, records));
  } finally {
    await pool.end().catch(() => {});
  }
}

export { createLocalEmbedder, LOCAL_PROFILE } from './embeddings/local.ts';
export { BGE_M3_PROFILE, createOpenAIEmbedder } from './embeddings/openai.ts';
export type { Embedder } from './embeddings/types.ts';
export type { IngestRecord, IngestStats } from './ingest/jsonl.ts';
