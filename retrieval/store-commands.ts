/**
 * The commands that write to the knowledge store (wired by cli/main.ts):
 *   ingest --jsonl FILE | --bundle DIR [--database-url URL | --data-dir DIR] [--config FILE]
 *   migrate [--database-url URL] [--bootstrap] [--data-dir DIR] [--capability plain|ledger] [--subgraph-budget MIB]
 *   sync [--database-url URL | --data-dir DIR] [--subgraph-budget MIB]
 * The database is --database-url or DATABASE_URL (TLS via DATABASE_CA_FILE and DATABASE_TLS=require)
 * when set, else the embedded PGlite persisted under ./data/pglite. An embedded data directory belongs
 * to one process (db/embedded.ts); an ingest aimed at a directory another process holds writes through
 * that process's database.
 */
import { type ParseArgsConfig, parseArgs } from 'node:util';
import type pg from 'pg';
import { parseFlags, UsageError, usageError } from '../common/args.ts';
import { createLogger } from '../common/log.ts';
import { ConfigFileError, embedderFor, readConfig } from './config-file.ts';
import { dataDirTarget } from './data-dir.ts';
import { DatabaseInUseError, DEFAULT_DATA_DIR, type EmbeddedDatabase, startEmbeddedDatabase } from './db/embedded.ts';
import { MigratePrerequisiteError, MigrationDriftError, migrate, syncAll } from './db/migrate.ts';
import { createPool } from './db/pool.ts';
import { asRole, bootstrapDatabase, INGESTION_ROLE, OWNER_ROLE } from './db/roles.ts';
import { maintainSubgraphs } from './db/subgraphs.ts';
import { createLocalEmbedder } from './embeddings/local.ts';
import { ensureProfile } from './embeddings/profile.ts';
import type { Embedder } from './embeddings/types.ts';
import { bundleRecords } from './ingest/bundle.ts';
import { databaseProblem, IngestError } from './ingest/errors.ts';
import { type IngestStats, ingestPrepared, prepareRecords, readJsonlFile } from './ingest/jsonl.ts';
import { LeaseBusyError, withIngestionLease } from './ingest/lease.ts';
import { createProgress, type Progress } from './ingest/progress.ts';
import { StoreConflictError } from './ingest/store.ts';
import { tlsFromEnv } from './topology.ts';

const log = createLogger('retrieval');

export const INGEST_USAGE =
  'fgentic-retrieval ingest (--jsonl FILE | --bundle DIR) [--database-url URL | --data-dir DIR] [--config FILE]';

type IngestFlags = Record<string, string | undefined>;
type IngestTarget = { url: string; embedded?: EmbeddedDatabase };

/** The ingest flags; throws a UsageError for a bad combination. */
function parseIngestFlags(argv: string[]): IngestFlags {
  const values = parseFlags(argv, {
    jsonl: { type: 'string' },
    bundle: { type: 'string' },
    'database-url': { type: 'string' },
    config: { type: 'string' },
    'data-dir': { type: 'string' },
  }).values as IngestFlags;
  if ((values['jsonl'] === undefined) === (values['bundle'] === undefined))
    throw new UsageError('exactly one of --jsonl FILE or --bundle DIR');
  if (values['database-url'] !== undefined && values['data-dir'] !== undefined)
    throw new UsageError('--database-url and --data-dir exclude each other');
  return values;
}

/** The embedder --config names (the local one without it); undefined when the file is unusable, said on stderr. */
function ingestEmbedder(values: IngestFlags): Embedder | undefined {
  try {
    return values['config'] ? embedderFor(readConfig(values['config'], false).embeddings) : createLocalEmbedder();
  } catch (err) {
    process.stderr.write(`ingest: ${err instanceof ConfigFileError ? err.message : 'invalid config'}\n`);
    return undefined;
  }
}

/**
 * Reads and validates every input record now, before a database is opened or created, and returns
 * the write that loads them. A bundle replaces what its prefix held before.
 */
function prepareLoad(
  values: IngestFlags,
  embedder: Embedder,
  progress: Progress,
): (writer: pg.Pool) => Promise<IngestStats> {
  if (values['jsonl'] !== undefined) {
    const input = prepareRecords(readJsonlFile(values['jsonl']), embedder.profile);
    return (writer) => ingestPrepared(writer, embedder, input, progress);
  }
  const { records, prefix, sources } = bundleRecords(values['bundle'] ?? '');
  const input = prepareRecords(records, embedder.profile);
  return (writer) =>
    ingestPrepared(writer, embedder, input, progress, { replacePrefix: prefix, replaceSources: sources });
}

/**
 * Where an ingest writes: --database-url / DATABASE_URL; else the embedded data directory, through
 * the process that holds it when one does (its lock file names its URL), else opened here.
 */
async function ingestTarget(values: IngestFlags): Promise<IngestTarget> {
  const url = values['database-url'] ?? process.env['DATABASE_URL'];
  if (url) return { url };
  return dataDirTarget('ingest', 'writing', values['data-dir'] ?? DEFAULT_DATA_DIR, (l: string) =>
    process.stderr.write(l),
  );
}

/** Prepares the target when it is this process's own, checks the profile and loads under the lease. */
async function ingestInto(
  pool: pg.Pool,
  target: IngestTarget,
  embedder: Embedder,
  load: (writer: pg.Pool) => Promise<IngestStats>,
): Promise<number> {
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
}

/** An ingest failure on stderr: input and connection problems by their message, a fault by its name only. */
function reportIngestFailure(err: unknown, url: string | undefined): void {
  const db = databaseProblem(err, url);
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
}

export async function ingestCommand(argv: string[]): Promise<number> {
  let values: IngestFlags;
  try {
    values = parseIngestFlags(argv);
  } catch (err) {
    return usageError('ingest', INGEST_USAGE, err);
  }
  const embedder = ingestEmbedder(values);
  if (embedder === undefined) return 2;
  let pool: pg.Pool | undefined;
  let target: IngestTarget | undefined;
  const progress = createProgress();
  try {
    // Input first: a bad file fails in milliseconds, before any database is opened.
    const load = prepareLoad(values, embedder, progress);
    target = await ingestTarget(values);
    // An embedded database runs its queries on this process's thread, and a running stack's queues
    // connections behind an open transaction: a new connection may wait for a long statement.
    pool = createPool({
      connectionString: target.url,
      max: 2,
      statementTimeoutMs: 300_000,
      connectionTimeoutMs: 30_000,
    });
    return await ingestInto(pool, target, embedder, load);
  } catch (err) {
    reportIngestFailure(err, target?.url ?? values['database-url'] ?? process.env['DATABASE_URL']);
    return 1;
  } finally {
    await pool?.end().catch(() => {});
    await target?.embedded?.close();
  }
}

type MaintenanceFlags = Record<string, string | boolean | undefined>;
type ParseOptions = NonNullable<ParseArgsConfig['options']>;

/** `--subgraph-budget` in MiB: undefined when absent, null when not a whole number. */
function subgraphBudget(v: string | boolean | undefined): number | undefined | null {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || !/^[0-9]{1,7}$/.test(v)) return null;
  return Number(v) * 1024 * 1024;
}

/**
 * The flags migrate and sync share (--database-url, --data-dir, --subgraph-budget) and the command's
 * own, which `check` judges first; undefined after saying on stderr what is wrong.
 */
function parseMaintenanceFlags(
  command: 'migrate' | 'sync',
  argv: string[],
  own: ParseOptions,
  check: (values: MaintenanceFlags) => string | undefined = () => undefined,
): { values: MaintenanceFlags; budget: number | undefined } | undefined {
  let values: MaintenanceFlags;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        'database-url': { type: 'string' },
        'data-dir': { type: 'string' },
        ...own,
        'subgraph-budget': { type: 'string' },
      },
    }));
  } catch {
    process.stderr.write(`${command}: invalid arguments\n`);
    return undefined;
  }
  const problem = check(values);
  if (problem !== undefined) {
    process.stderr.write(`${command}: ${problem}\n`);
    return undefined;
  }
  const budget = subgraphBudget(values['subgraph-budget']);
  if (budget === null) {
    process.stderr.write(`${command}: --subgraph-budget must be a whole number of MiB\n`);
    return undefined;
  }
  return { values, budget };
}

/**
 * Runs `use` on a pool to `url` (TLS from the environment), or without a URL on the embedded
 * database in the data directory, opened here; closes both afterwards.
 */
async function withMaintenanceDatabase<T>(
  url: string | undefined,
  dataDir: string | boolean | undefined,
  poolOptions: { max: number; statementTimeoutMs?: number },
  use: (pool: pg.Pool, embedded: EmbeddedDatabase | undefined) => Promise<T>,
): Promise<T> {
  let embedded: EmbeddedDatabase | undefined;
  let pool: pg.Pool | undefined;
  try {
    embedded = url ? undefined : await startEmbeddedDatabase({ dataDir: String(dataDir ?? DEFAULT_DATA_DIR) });
    pool = createPool({
      connectionString: url ?? embedded?.url ?? '',
      ...poolOptions,
      ...(url ? tlsFromEnv() : {}),
    });
    return await use(pool, embedded);
  } finally {
    await pool?.end().catch(() => {});
    await embedded?.close();
  }
}

const isCapability = (v: unknown): v is 'plain' | 'ledger' => v === 'plain' || v === 'ledger';

/**
 * `migrate [--database-url URL] [--bootstrap] [--data-dir DIR] [--capability plain|ledger]`: apply
 * this project's migrations as knowledge_owner (the Job's login role, or a member of it), re-assert
 * the deployment's grants, and sync the derived search data (retrieval/db/migrate.ts).
 * `--bootstrap` first creates the roles and the vector extension and hands the database to
 * knowledge_owner, which needs a superuser; it is the database administrator's one step before the
 * first `migrate` (deploy/README.md, "Database"). Without a URL it migrates the embedded database.
 */
export async function migrateCommand(argv: string[]): Promise<number> {
  const flags = parseMaintenanceFlags(
    'migrate',
    argv,
    { bootstrap: { type: 'boolean' }, capability: { type: 'string' } },
    (v) => (isCapability(v['capability'] ?? 'plain') ? undefined : '--capability must be plain or ledger'),
  );
  if (flags === undefined) return 2;
  const { values, budget } = flags;
  const capability = values['capability'] ?? 'plain';
  if (!isCapability(capability)) return 2;
  const url = (values['database-url'] as string | undefined) ?? process.env['DATABASE_URL'];
  try {
    await withMaintenanceDatabase(
      url,
      values['data-dir'],
      { max: 1, statementTimeoutMs: 600_000 },
      async (pool, embedded) => {
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
      },
    );
    return 0;
  } catch (err) {
    log.error('migrate failed', { error: err instanceof Error ? err.name : 'unknown' });
    const known = err instanceof MigrationDriftError || err instanceof MigratePrerequisiteError;
    const db = known ? undefined : databaseProblem(err, url);
    process.stderr.write(`migrate: ${known ? (err as Error).message : db ? db.message : 'failed'}\n`);
    return 1;
  }
}

/**
 * The full sync on one connection, then the filtered subgraphs when this login owns the table; prints
 * what it did.
 */
async function syncOn(client: pg.PoolClient, embedded: boolean, budget: number | undefined): Promise<void> {
  // The embedded superuser session syncs as the ingestion role; a login syncs as itself.
  const role = embedded ? INGESTION_ROLE : String((await client.query('SELECT current_user AS u')).rows[0]?.u);
  const synced = await syncAll(client, role, (covered) => process.stderr.write(`sync: ${covered} rows\n`));
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
}

/**
 * `sync [--database-url URL | --data-dir DIR]`: a full sync of the derived search data
 * (retrieval/db/migrate.ts, syncAll), as the login role: knowledge_ingestion or knowledge_owner. For
 * rows the origin's own writers changed; this project's `ingest` keeps its own rows in step.
 */
export async function syncCommand(argv: string[]): Promise<number> {
  const flags = parseMaintenanceFlags('sync', argv, {});
  if (flags === undefined) return 2;
  const { values, budget } = flags;
  const url = (values['database-url'] as string | undefined) ?? process.env['DATABASE_URL'];
  try {
    await withMaintenanceDatabase(url, values['data-dir'], { max: 1 }, async (pool, embedded) => {
      const client = await pool.connect();
      try {
        await syncOn(client, embedded !== undefined, budget);
      } finally {
        client.release();
      }
    });
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
  }
}
