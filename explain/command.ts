/**
 * `fgentic-retrieval explain` — operator-side only (a CLI command; no server imports this folder):
 *
 *   explain (--room ROOM_ID [--snapshot FILE] | --partner POLICY_ID [--azp AZP])
 *           (--chunk ID | --source ID | --summary) [--summary] [--json] [--titles] [--limit N]
 *           [--config projector.json] [--database-url URL] [--data-dir DIR]
 *
 * The database is --database-url, else DATABASE_URL, else the embedded PGlite under --data-dir
 * (./data/pglite), as for `ingest`. It reads `knowledge.chunks` in one read-only transaction and
 * writes nothing. Exit 0 with a report, 1 when the report cannot be made, 2 for a usage error.
 */
import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { createLogger } from '../common/log.ts';
import { withTransaction } from '../common/transaction.ts';
import type { ProjectorConfig } from '../projector/config.ts';
import type { RoomStateReader } from '../projector/homeserver.ts';
import { dataDirTarget } from '../retrieval/data-dir.ts';
import { DatabaseInUseError, DEFAULT_DATA_DIR, type EmbeddedDatabase } from '../retrieval/db/embedded.ts';
import { createPool } from '../retrieval/db/pool.ts';
import {
  detailStatement,
  ExplainError,
  explainRows,
  type Scope,
  type Subject,
  summarize,
  summaryStatement,
} from './core.ts';
import { chunksJson, chunksTable, summaryJson, summaryTable } from './render.ts';
import {
  configuredReader,
  loadProjectorConfig,
  partnerSubject,
  roomFromHomeserver,
  roomFromSnapshotText,
} from './subject.ts';

const log = createLogger('explain');
export const DEFAULT_PROJECTOR_CONFIG = '/etc/fgentic/projector.json';
const DEFAULT_LIMIT = 1000;

export interface ExplainIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly readFile?: (path: string) => string;
  /** Homeserver reader override (tests); default: matrix-js-sdk per liveRoomCheck. */
  readonly reader?: (config: ProjectorConfig) => RoomStateReader;
  readonly env?: NodeJS.ProcessEnv;
}

const defaultIo: ExplainIo = {
  stdout: (t) => process.stdout.write(t),
  stderr: (t) => process.stderr.write(t),
};

interface Options {
  readonly room?: string;
  readonly partner?: string;
  readonly azp?: string;
  readonly snapshot?: string;
  readonly config: string;
  readonly scope: Scope;
  readonly summary: boolean;
  readonly json: boolean;
  readonly titles: boolean;
  readonly limit: number;
  readonly databaseUrl?: string;
  readonly dataDir: string;
}

function parse(argv: string[], env: NodeJS.ProcessEnv): Options | string {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        room: { type: 'string' },
        partner: { type: 'string' },
        azp: { type: 'string' },
        snapshot: { type: 'string' },
        config: { type: 'string' },
        chunk: { type: 'string' },
        source: { type: 'string' },
        summary: { type: 'boolean' },
        json: { type: 'boolean' },
        titles: { type: 'boolean' },
        limit: { type: 'string' },
        'database-url': { type: 'string' },
        'data-dir': { type: 'string' },
      },
    }));
  } catch {
    return 'invalid arguments';
  }
  const str = (k: string) => (typeof values[k] === 'string' ? (values[k] as string) : undefined);
  const room = str('room');
  const partner = str('partner');
  if ((room === undefined) === (partner === undefined)) return 'exactly one of --room ROOM_ID or --partner POLICY_ID';
  if (str('snapshot') !== undefined && room === undefined) return '--snapshot goes with --room';
  if (str('azp') !== undefined && partner === undefined) return '--azp goes with --partner';
  const chunk = str('chunk');
  const source = str('source');
  if (chunk !== undefined && source !== undefined) return 'at most one of --chunk ID or --source ID';
  const summary = values['summary'] === true;
  if (chunk === undefined && source === undefined && !summary) return 'one of --chunk ID, --source ID or --summary';
  let limit = DEFAULT_LIMIT;
  const limitText = str('limit');
  if (limitText !== undefined) {
    limit = Number(limitText);
    if (!/^[0-9]+$/.test(limitText) || !Number.isSafeInteger(limit) || limit < 1 || limit > 100_000)
      return '--limit must be an integer 1–100000';
  }
  const databaseUrl = str('database-url') ?? env['DATABASE_URL'];
  return {
    ...(room !== undefined ? { room } : {}),
    ...(partner !== undefined ? { partner } : {}),
    ...(str('azp') !== undefined ? { azp: str('azp') as string } : {}),
    ...(str('snapshot') !== undefined ? { snapshot: str('snapshot') as string } : {}),
    config: str('config') ?? DEFAULT_PROJECTOR_CONFIG,
    scope:
      chunk !== undefined
        ? { kind: 'chunk', id: chunk }
        : source !== undefined
          ? { kind: 'source', id: source }
          : { kind: 'all' },
    summary,
    json: values['json'] === true,
    titles: values['titles'] === true,
    limit,
    ...(databaseUrl ? { databaseUrl } : {}),
    dataDir: str('data-dir') ?? DEFAULT_DATA_DIR,
  };
}

async function resolveSubject(o: Options, io: ExplainIo): Promise<Subject> {
  const config = loadProjectorConfig(o.config);
  if (o.partner !== undefined) return partnerSubject(config, o.partner, o.azp);
  const roomId = o.room ?? '';
  if (o.snapshot !== undefined) {
    let text: string;
    try {
      text = io.readFile ? io.readFile(o.snapshot) : readFileSync(o.snapshot, 'utf8');
    } catch {
      throw new ExplainError('cannot read the snapshot file');
    }
    return roomFromSnapshotText(config, roomId, text);
  }
  const reader = io.reader ? io.reader(config) : configuredReader(config);
  return roomFromHomeserver(config, roomId, reader);
}

/** Run the report's statements in one read-only transaction. */
async function query(pool: pg.Pool, o: Options, subject: Subject): Promise<string> {
  const client = await pool.connect();
  let failed = false;
  try {
    return await withTransaction(client, (c) => report(c, o, subject), { readOnly: true });
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    // A connection whose transaction failed is not handed back to the pool.
    client.release(failed ? true : undefined);
  }
}

async function report(client: pg.PoolClient, o: Options, subject: Subject): Promise<string> {
  if (o.summary) {
    const s = summaryStatement(subject, o.scope);
    const rows = (await client.query(s.text, s.values as unknown[])).rows;
    const report = { subject, summary: summarize(subject, rows) };
    return o.json ? summaryJson(report) : summaryTable(report);
  }
  const s = detailStatement(subject, o.scope, { titles: o.titles, limit: o.limit });
  const rows = (await client.query(s.text, s.values as unknown[])).rows;
  const report = { subject, ...explainRows(subject, rows, o.limit) };
  return o.json ? chunksJson(report) : chunksTable(report);
}

function tlsFromEnv(env: NodeJS.ProcessEnv): { caFile?: string; requireTls?: boolean } {
  const ca = env['DATABASE_CA_FILE'];
  return {
    ...(ca ? { caFile: ca } : {}),
    ...(env['DATABASE_TLS'] === 'require' ? { requireTls: true } : {}),
  };
}

export async function explainCommand(argv: string[], io: ExplainIo = defaultIo): Promise<number> {
  const env = io.env ?? process.env;
  const o = parse(argv, env);
  if (typeof o === 'string') {
    io.stderr(`explain: ${o}\n`);
    return 2;
  }
  let subject: Subject;
  try {
    subject = await resolveSubject(o, io);
  } catch (err) {
    io.stderr(`explain: ${err instanceof ExplainError ? err.message : 'cannot resolve the audience'}\n`);
    return 1;
  }
  let embedded: EmbeddedDatabase | undefined;
  let pool: pg.Pool | undefined;
  try {
    let url = o.databaseUrl;
    if (url === undefined) {
      // Read-only: never create an empty data directory where none exists.
      if (!existsSync(o.dataDir)) throw new ExplainError('no embedded database in --data-dir; pass --database-url');
      // A directory the running stack holds is read through the stack's database, as ingest does.
      const target = await dataDirTarget('explain', 'reading', o.dataDir, io.stderr);
      url = target.url;
      embedded = target.embedded;
    }
    pool = createPool({
      connectionString: url,
      max: 1,
      statementTimeoutMs: 300_000,
      ...(o.databaseUrl ? tlsFromEnv(env) : {}),
    });
    io.stdout(await query(pool, o, subject));
    return 0;
  } catch (err) {
    const code = (err as { code?: unknown })?.code;
    if (err instanceof ExplainError || err instanceof DatabaseInUseError) io.stderr(`explain: ${err.message}\n`);
    else if (code === '42P01' || code === '3F000') io.stderr('explain: no knowledge store in this database\n');
    else {
      io.stderr('explain: database query failed\n');
      log.error('explain failed', { error: err instanceof Error ? err.name : 'unknown' });
    }
    return 1;
  } finally {
    await pool?.end().catch(() => {});
    await embedded?.close();
  }
}
