/**
 * Programmatic entry points: start the retrieval server (used by the CLI, the end-to-end stack and
 * tests) and seed a corpus.
 */
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { createLogger } from '../common/log.ts';
import type { AgentRef } from '../contract/index.ts';
import { type EmbeddedDatabase, startEmbeddedDatabase } from './db/embedded.ts';
import { migrate } from './db/migrate.ts';
import { createPool, type PoolOptions } from './db/pool.ts';
import { createLocalEmbedder } from './embeddings/local.ts';
import { ensureProfile } from './embeddings/profile.ts';
import type { Embedder } from './embeddings/types.ts';
import { createHttpServer } from './http.ts';
import { type IngestRecord, type IngestStats, ingestRecords } from './ingest/jsonl.ts';
import { createMetrics, type RetrievalMetrics } from './metrics.ts';
import { DEFAULT_PLANNER, type PlannerOptions } from './planner.ts';

const log = createLogger('retrieval');

export interface RetrievalServerOptions {
  readonly agents: readonly AgentRef[];
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
  /** Apply migrations at start (default true). */
  readonly migrate?: boolean;
  /** Clock override for tests, Unix seconds. */
  readonly now?: () => number;
  readonly metrics?: RetrievalMetrics;
}

export interface RetrievalServer {
  /** Base URL, e.g. http://127.0.0.1:8080 */
  readonly url: string;
  /** The MCP endpoint, `${url}/mcp`. */
  readonly mcpUrl: string;
  readonly pool: pg.Pool;
  /** The loopback URL of the embedded database (absent with an external DATABASE_URL): local tooling. */
  readonly embeddedDatabaseUrl?: string;
  readonly embedder: Embedder;
  readonly metrics: RetrievalMetrics;
  /** Whether the stored embedding profile matches the embedder. */
  readonly profileOk: boolean;
  seed(records: readonly IngestRecord[]): Promise<IngestStats>;
  close(): Promise<void>;
}

export async function startRetrievalServer(options: RetrievalServerOptions): Promise<RetrievalServer> {
  if (options.agents.length === 0) throw new Error('no agents configured');
  const embedder = options.embedder ?? createLocalEmbedder();
  let embedded: EmbeddedDatabase | undefined;
  let url = options.databaseUrl;
  if (url === undefined) {
    embedded = await startEmbeddedDatabase(
      options.dataDir !== undefined && options.dataDir !== 'memory' ? { dataDir: options.dataDir } : {},
    );
    url = embedded.url;
  }
  const pool = createPool({
    ...options.pool,
    connectionString: url,
    ...(embedded ? { max: embedded.poolSize } : {}),
  });
  try {
    if (options.migrate ?? true) await migrate(pool);
    const state = await ensureProfile(pool, embedder.profile, true);
    let profileOk = state.ok;
    if (!state.ok) log.error('embedding profile mismatch: refusing to serve', { reason: state.reason });
    const metrics = options.metrics ?? createMetrics();
    const checkReady = async () => {
      try {
        const s = await ensureProfile(pool, embedder.profile, false);
        profileOk = s.ok;
        return s.ok;
      } catch {
        return false;
      }
    };
    const http = createHttpServer({
      pool,
      embedder,
      agents: options.agents,
      allowedOrigins: options.allowedOrigins ?? [],
      metrics,
      planner: options.planner ?? DEFAULT_PLANNER,
      ready: () => profileOk,
      checkReady,
      ...(options.now ? { now: options.now } : {}),
    });
    const host = options.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => {
      http.once('error', reject);
      http.listen(options.port ?? 8080, host, () => resolve());
    });
    const addr = http.address() as AddressInfo;
    const base = `http://${host.includes(':') ? `[${host}]` : host}:${addr.port}`;
    log.info('retrieval server listening', { port: addr.port, embedded: embedded !== undefined });
    return {
      url: base,
      mcpUrl: `${base}/mcp`,
      pool,
      ...(embedded ? { embeddedDatabaseUrl: embedded.url } : {}),
      embedder,
      metrics,
      get profileOk() {
        return profileOk;
      },
      seed: (records) => ingestRecords(pool, embedder, records),
      async close() {
        await new Promise<void>((r) => {
          http.close(() => r());
          http.closeAllConnections();
        });
        await pool.end().catch(() => {});
        await embedded?.close();
      },
    };
  } catch (err) {
    await pool.end().catch(() => {});
    await embedded?.close();
    throw err;
  }
}

/** Seed a corpus into a database (URL) with the given embedder; records as in the JSONL format. */
export async function seedCorpus(
  databaseUrl: string,
  records: readonly IngestRecord[],
  embedder: Embedder = createLocalEmbedder(),
): Promise<IngestStats> {
  const pool = createPool({ connectionString: databaseUrl, max: 2 });
  try {
    await migrate(pool);
    const state = await ensureProfile(pool, embedder.profile, true);
    if (!state.ok) throw new Error(`embedding profile mismatch (${state.reason})`);
    return await ingestRecords(pool, embedder, records);
  } finally {
    await pool.end().catch(() => {});
  }
}

export { createLocalEmbedder, LOCAL_PROFILE } from './embeddings/local.ts';
export { BGE_M3_PROFILE, createOpenAIEmbedder } from './embeddings/openai.ts';
export type { Embedder } from './embeddings/types.ts';
export type { IngestRecord, IngestStats } from './ingest/jsonl.ts';
