/**
 * CLI entry points (wired by cli/main.ts):
 *   serve retrieval [--config FILE] [--port N] [--host H] [--data-dir DIR] [--no-migrate]
 *   ingest --jsonl FILE | --bundle DIR [--database-url URL] [--config FILE] [--data-dir DIR]
 *   migrate [--database-url URL] [--bootstrap] [--data-dir DIR]
 * The database is DATABASE_URL (or --database-url for ingest; TLS via DATABASE_CA_FILE and
 * DATABASE_TLS=require) when set, else the embedded PGlite
 * persisted under ./data/pglite. An embedded data directory can be opened by one process at a time:
 * ingest before serving, or ingest through a running server's DATABASE_URL.
 */
import { parseArgs } from 'node:util';
import { createLogger } from '../common/log.ts';
import { ConfigError, loadConfig, type RetrievalConfig } from './config.ts';
import { DEFAULT_DATA_DIR, startEmbeddedDatabase } from './db/embedded.ts';
import { migrate } from './db/migrate.ts';
import { createPool } from './db/pool.ts';
import { asRole, bootstrapDatabase, INGESTION_ROLE, OWNER_ROLE } from './db/roles.ts';
import { createLocalEmbedder, LOCAL_PROFILE } from './embeddings/local.ts';
import { createOpenAIEmbedder } from './embeddings/openai.ts';
import { ensureProfile } from './embeddings/profile.ts';
import type { Embedder } from './embeddings/types.ts';
import { startRetrievalServer } from './index.ts';
import { ingestBundle } from './ingest/bundle.ts';
import { IngestError, ingestJsonlFile } from './ingest/jsonl.ts';
import { LeaseBusyError, withIngestionLease } from './ingest/lease.ts';
import { createProgress } from './ingest/progress.ts';

const log = createLogger('retrieval');
const DEFAULT_CONFIG = '/etc/fgentic/retrieval.json';

export function embedderFor(config: RetrievalConfig['embeddings']): Embedder {
  if (config.profile === LOCAL_PROFILE) return createLocalEmbedder();
  if (config.url === undefined || config.model === undefined) throw new ConfigError('$.embeddings');
  return createOpenAIEmbedder({
    url: config.url,
    model: config.model,
    profile: config.profile,
    ...(config.tokenFile !== undefined ? { tokenFile: config.tokenFile } : {}),
  });
}

/**
 * TLS for DATABASE_URL: `sslmode`/`sslrootcert` in the URL work as usual; DATABASE_CA_FILE adds a CA
 * bundle and DATABASE_TLS=require forces verified TLS (the origin cluster rejects non-TLS: §1.1).
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
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new ConfigError('--port');
  return n;
}

export async function serveRetrieval(argv: string[]): Promise<number> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        config: { type: 'string' },
        port: { type: 'string' },
        host: { type: 'string' },
        'data-dir': { type: 'string' },
        'no-migrate': { type: 'boolean' },
      },
    }));
  } catch {
    process.stderr.write('serve retrieval: invalid arguments\n');
    return 2;
  }
  let config: RetrievalConfig;
  try {
    config = loadConfig(String(values['config'] ?? DEFAULT_CONFIG));
  } catch (err) {
    // Invalid configuration: refuse to start (the path names the field, never a value).
    process.stderr.write(
      `serve retrieval: ${err instanceof ConfigError ? err.message : 'cannot read config'}\n`,
    );
    return 2;
  }
  const databaseUrl = process.env['DATABASE_URL'];
  try {
    const server = await startRetrievalServer({
      agents: config.agents,
      embedder: embedderFor(config.embeddings),
      allowedOrigins: config.allowedOrigins,
      ...(databaseUrl
        ? { databaseUrl, pool: tlsFromEnv() }
        : { dataDir: String(values['data-dir'] ?? DEFAULT_DATA_DIR) }),
      host: String(values['host'] ?? (databaseUrl ? '0.0.0.0' : '127.0.0.1')),
      port: port(values['port'] as string | undefined, 8080),
      migrate: values['no-migrate'] !== true,
    });
    if (!server.profileOk) log.error('serving /readyz=false until the embedding profile matches');
    process.stdout.write(`retrieval listening on ${server.mcpUrl}\n`);
    await new Promise<void>((resolve) => {
      const stop = () => resolve();
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    await server.close();
    return 0;
  } catch (err) {
    log.error('retrieval server failed to start', { error: err instanceof Error ? err.name : 'unknown' });
    process.stderr.write(
      `serve retrieval: ${err instanceof ConfigError ? err.message : 'failed to start'}\n`,
    );
    return 1;
  }
}

export async function ingestCommand(argv: string[]): Promise<number> {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        jsonl: { type: 'string' },
        bundle: { type: 'string' },
        'database-url': { type: 'string' },
        config: { type: 'string' },
        'data-dir': { type: 'string' },
      },
    }) as { values: Record<string, string | undefined> });
  } catch {
    process.stderr.write('ingest: invalid arguments\n');
    return 2;
  }
  if ((values['jsonl'] === undefined) === (values['bundle'] === undefined)) {
    process.stderr.write('ingest: exactly one of --jsonl FILE or --bundle DIR\n');
    return 2;
  }
  let embedder: Embedder;
  try {
    embedder = values['config']
      ? embedderFor(loadConfig(values['config']).embeddings)
      : createLocalEmbedder();
  } catch (err) {
    process.stderr.write(`ingest: ${err instanceof ConfigError ? err.message : 'invalid config'}\n`);
    return 2;
  }
  const url = values['database-url'] ?? process.env['DATABASE_URL'];
  const embedded = url
    ? undefined
    : await startEmbeddedDatabase({ dataDir: values['data-dir'] ?? DEFAULT_DATA_DIR });
  const pool = createPool({
    connectionString: url ?? embedded?.url ?? '',
    max: 2,
    statementTimeoutMs: 300_000,
  });
  try {
    // The embedded database is this process's own: prepare it as its owner. An external database is
    // migrated by the `migrate` Job; ingest writes there as the ingestion role only.
    if (embedded) {
      await bootstrapDatabase(pool);
      await migrate(pool);
    }
    const state = await ensureProfile(asRole(pool, INGESTION_ROLE), embedder.profile, true);
    if (!state.ok) {
      process.stderr.write(`ingest: embedding profile mismatch (${state.reason}); refusing to write\n`);
      return 1;
    }
    const progress = createProgress();
    const stats = await withIngestionLease(pool, (writer) =>
      values['jsonl']
        ? ingestJsonlFile(writer, embedder, values['jsonl'], progress)
        : ingestBundle(writer, embedder, values['bundle'] ?? '', progress),
    );
    process.stdout.write(`${JSON.stringify(stats)}\n`);
    return 0;
  } catch (err) {
    const known = err instanceof IngestError || err instanceof LeaseBusyError;
    process.stderr.write(`ingest: ${known ? err.message : 'failed'}\n`);
    if (!known) log.error('ingest failed', { error: err instanceof Error ? err.name : 'unknown' });
    return 1;
  } finally {
    await pool.end().catch(() => {});
    await embedded?.close();
  }
}

/**
 * `migrate [--database-url URL] [--bootstrap] [--data-dir DIR]`: apply this project's migrations as
 * knowledge_owner (the Job's login role, or a member of it). `--bootstrap` first creates the roles and
 * the vector extension and hands the database to knowledge_owner, which needs a superuser and is for
 * databases the origin's cluster did not prepare. Without a URL it migrates the embedded database.
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
      },
    }));
  } catch {
    process.stderr.write('migrate: invalid arguments\n');
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
    const result = await migrate(pool, { role: OWNER_ROLE });
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return 0;
  } catch (err) {
    log.error('migrate failed', { error: err instanceof Error ? err.name : 'unknown' });
    process.stderr.write(
      `migrate: ${err instanceof Error && err.name === 'MigrationDriftError' ? err.message : 'failed'}\n`,
    );
    return 1;
  } finally {
    await pool?.end().catch(() => {});
    await embedded?.close();
  }
}
