/**
 * The derived table's indexes around a write (retrieval/ingest/store.ts): the bulk path drops the
 * rebuildable ones inside the write transaction and re-creates them before the commit, except the
 * vector indexes, whose definitions are recorded in fgentic.deferred_indexes and built after the
 * commit once the table is large enough; after a write that changed rows, the GIN pending lists are
 * merged and the planner statistics refreshed. All of it needs the owner's rights; a session that
 * may not act as the owner leaves it to a later owner session or to autovacuum.
 */
import type pg from 'pg';
import { onConnection } from '../../common/transaction.ts';
import { OWNER_ROLE } from '../db/roles.ts';
import { DEFAULT_PLANNER } from '../planner.ts';

/**
 * The bulk path re-creates an HNSW index only when the table then holds more rows than this; below,
 * it records the index's definition in fgentic.deferred_indexes instead, and the first
 * write that takes the table past it (as a session that may act as the owner) builds the index.
 * The bound is the search planner's default exact threshold: an audience of at most that many rows
 * is always ranked exactly, so on a table this small no default search uses the graph, and an
 * operator-lowered threshold gets an exact scan in its place (recall 1.0, the same rows). The graph
 * build was the largest cost of a fresh row on the bulk path of the embedded database; from twice
 * this size on, the graph walk is clearly faster than the exact scan, and the graph is always built
 * there (`npm run bench:ingest`, search table).
 */
export const VECTOR_INDEX_MIN_ROWS = DEFAULT_PLANNER.exactThreshold;
const VECTOR_INDEX_METHODS: ReadonlySet<string> = new Set(['hnsw', 'ivfflat']);

/** Whether a vector index (by access method) waits on a table of `rows` rows. */
export function vectorIndexWaits(am: string, rows: number): boolean {
  return VECTOR_INDEX_METHODS.has(am) && rows <= VECTOR_INDEX_MIN_ROWS;
}

/** How long the bulk path waits for readers to leave the table before it writes row by row. */
const BULK_LOCK_TIMEOUT = '5s';
/** Memory per row for an in-memory index build (a 1024-d vector is 4 KiB, plus its graph links). */
const BUILD_BYTES_PER_ROW = 8 * 1024;
const BUILD_MEMORY_MIN_MB = 64;
const BUILD_MEMORY_MAX_MB = 1024;

/** maintenance_work_mem (MB) for re-creating the indexes of a table of `rows` rows. */
export function buildMemoryMb(rows: number): number {
  const mb = Math.ceil((rows * BUILD_BYTES_PER_ROW) / (1024 * 1024));
  return Math.min(BUILD_MEMORY_MAX_MB, Math.max(BUILD_MEMORY_MIN_MB, mb));
}

/**
 * Runs `work` on one connection of `pool` after BEGIN; `work` ends the transaction itself (COMMIT,
 * or ROLLBACK on a path that changes nothing). A failure rolls back and discards the connection.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return onConnection(
    () => pool.connect(),
    async (client) => {
      await client.query('BEGIN');
      return work(client);
    },
  );
}

/**
 * Acts as the table owner for the rest of the transaction; false, after rolling the transaction
 * back, when this session may not (42501).
 */
async function becomeOwner(client: pg.PoolClient): Promise<boolean> {
  try {
    await client.query("SELECT set_config('role', $1, true)", [OWNER_ROLE]);
    return true;
  } catch (err) {
    if ((err as { code?: unknown }).code !== '42501') throw err;
    await client.query('ROLLBACK');
    return false;
  }
}

export interface RecordedIndex {
  /** Schema-qualified, quoted as needed (regclass text under a pinned search_path). */
  readonly name: string;
  /** Access method (`hnsw`, `gin`, …). */
  readonly am: string;
  /** pg_get_indexdef, the text pg_indexes.indexdef shows. */
  readonly def: string;
  /** A ready-made COMMENT ON INDEX statement, when the index has a comment. */
  readonly comment: string | null;
}

/**
 * The search_path under which index definitions are read back and re-created: every name outside
 * pg_catalog is then printed schema-qualified and resolved the same way, and no temporary object
 * can stand in for one.
 */
const PINNED_PATH = "SELECT set_config('search_path', 'pg_catalog, pg_temp', true)";

/**
 * The indexes the bulk path rebuilds, on fgentic.chunks (its GIN index has fastupdate off, so a load
 * would maintain it entry by entry; subgraphs are vector indexes like the whole graph): valid, ready, backing
 * no constraint (a re-created index would not back it again; the primary keys stay, and serve the
 * upserts), in the default tablespace (pg_get_indexdef does not print one), without a statistics
 * target of its own (ALTER INDEX … SET STATISTICS is not part of the definition). Btree indexes are
 * rebuilt too: sorting once cost less than inserting each row into them (`npm run bench:ingest`).
 */
async function rebuildableIndexes(client: pg.PoolClient): Promise<RecordedIndex[]> {
  const r = await client.query(
    `SELECT i.indexrelid::regclass::text AS name, am.amname AS am, pg_get_indexdef(i.indexrelid) AS def,
            CASE WHEN obj_description(i.indexrelid, 'pg_class') IS NOT NULL
              THEN format('COMMENT ON INDEX %s IS %L', i.indexrelid::regclass, obj_description(i.indexrelid, 'pg_class'))
            END AS comment
       FROM pg_index i
       JOIN pg_class c ON c.oid = i.indexrelid
       JOIN pg_am am ON am.oid = c.relam
      WHERE i.indrelid = 'fgentic.chunks'::regclass
        AND i.indisvalid AND i.indisready AND i.indislive
        AND c.reltablespace = 0
        AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
        AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = i.indexrelid AND a.attstattarget >= 0)
      ORDER BY c.relname`,
  );
  return r.rows as RecordedIndex[];
}

/**
 * Runs `work` as the table owner under the pinned search_path, then puts back the role and path
 * the transaction had (the inserts resolve pgvector's type through the caller's path).
 */
async function asOwner<T>(client: pg.PoolClient, work: () => Promise<T>): Promise<T> {
  const r = await client.query("SELECT current_setting('role') AS role, current_setting('search_path') AS path");
  const { role, path } = r.rows[0] as { role: string; path: string };
  await client.query("SELECT set_config('role', $1, true)", [OWNER_ROLE]);
  await client.query(PINNED_PATH);
  const out = await work();
  await client.query("SELECT set_config('search_path', $1, true), set_config('role', $2, true)", [path, role]);
  return out;
}

/**
 * Inside the write transaction: take the table for a bulk load and drop its rebuildable indexes;
 * or change nothing and return undefined when this session may not act as the owner, or readers
 * hold the table longer than BULK_LOCK_TIMEOUT.
 */
export async function beginBulk(client: pg.PoolClient): Promise<RecordedIndex[] | undefined> {
  await client.query('SAVEPOINT fgentic_bulk');
  try {
    return await asOwner(client, async () => {
      const before = await client.query("SELECT current_setting('lock_timeout') AS t");
      await client.query("SELECT set_config('lock_timeout', $1, true)", [BULK_LOCK_TIMEOUT]);
      // Searches wait for the commit; the origin's table is not locked.
      await client.query('LOCK TABLE fgentic.chunks IN ACCESS EXCLUSIVE MODE');
      await client.query("SELECT set_config('lock_timeout', $1, true)", [String(before.rows[0]?.t)]);
      const indexes = await rebuildableIndexes(client);
      // Names are the catalog's own regclass text, already quoted: never input.
      for (const ix of indexes) await client.query(`DROP INDEX ${ix.name}`);
      return indexes;
    });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    // 42501: this login may not act as the owner; 55P03: the lock was not granted in time;
    // 40P01: a deadlock with another session's locks, found while waiting for ours.
    if (code !== '42501' && code !== '55P03' && code !== '40P01') throw err;
    // Undoes the role, the settings and the lock taken since the savepoint.
    await client.query('ROLLBACK TO SAVEPOINT fgentic_bulk');
    return undefined;
  }
}

/** Deferred index definitions whose index does not exist; entries for an index that exists again are removed. */
async function deferredIndexes(client: pg.PoolClient): Promise<RecordedIndex[]> {
  await client.query('DELETE FROM fgentic.deferred_indexes WHERE pg_catalog.to_regclass(name) IS NOT NULL');
  const r = await client.query('SELECT name, am, def, comment FROM fgentic.deferred_indexes ORDER BY name');
  return r.rows as RecordedIndex[];
}

/** Rows of the derived table (as the owner), or of the origin's table (as the writer, who may read it). */
export async function tableRows(
  client: pg.PoolClient,
  table: 'fgentic.chunks' | 'knowledge.chunks' = 'fgentic.chunks',
) {
  return Number((await client.query(`SELECT count(*) AS n FROM ${table}`)).rows[0]?.n ?? 0);
}

/**
 * As the owner: builds `build` (each from its recorded definition and comment) and records `defer`
 * for later; a built index leaves the deferred list.
 */
async function buildIndexes(
  client: pg.PoolClient,
  build: readonly RecordedIndex[],
  defer: readonly RecordedIndex[],
  rows: number,
  onProgress?: (done: number) => void,
): Promise<void> {
  for (const ix of defer)
    await client.query(
      `INSERT INTO fgentic.deferred_indexes (name, am, def, comment) VALUES ($1, $2, $3, $4)
       ON CONFLICT (name) DO UPDATE SET am = EXCLUDED.am, def = EXCLUDED.def, comment = EXCLUDED.comment`,
      [ix.name, ix.am, ix.def, ix.comment],
    );
  if (build.length === 0) return;
  // pgvector builds the graph in memory when it fits in maintenance_work_mem, far faster than on
  // disk. Only ever raised; like every setting here it reverts with the transaction.
  await client.query(
    `SELECT set_config('maintenance_work_mem', $1, true)
      WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes($1)`,
    [`${buildMemoryMb(rows)}MB`],
  );
  // A build of a large table may outlast the per-statement limit meant for single writes; the
  // lease and the transaction bound it instead.
  const timeout = String((await client.query("SELECT current_setting('statement_timeout') AS t")).rows[0]?.t);
  await client.query("SELECT set_config('statement_timeout', '0', true)");
  let done = 0;
  for (const ix of build) {
    // Definitions are the catalog's own text (recorded by this code as the owner), never input.
    await client.query(ix.def);
    if (ix.comment !== null) await client.query(ix.comment);
    await client.query('DELETE FROM fgentic.deferred_indexes WHERE name = $1', [ix.name]);
    done += 1;
    onProgress?.(done);
  }
  await client.query("SELECT set_config('statement_timeout', $1, true)", [timeout]);
}

/**
 * Before the commit: re-creates the dropped indexes other than vector indexes, each from its
 * recorded definition, and records every dropped vector index for the build after the commit.
 * Returns how many were built.
 */
export async function finishBulk(
  client: pg.PoolClient,
  indexes: readonly RecordedIndex[],
  onPhase?: (label: string, total: number) => void,
  onProgress?: (done: number) => void,
): Promise<number> {
  return asOwner(client, async () => {
    const rows = await tableRows(client);
    const build = indexes.filter((ix) => !VECTOR_INDEX_METHODS.has(ix.am));
    const defer = indexes.filter((ix) => VECTOR_INDEX_METHODS.has(ix.am));
    onPhase?.('indexing', build.length);
    await buildIndexes(client, build, defer, rows, onProgress);
    return build.length;
  });
}

/**
 * After a commit, in a transaction of its own: builds every recorded index the table is now large
 * enough for and reports how many were built and how many still wait. A session that may not act
 * as the owner leaves them recorded (searches stay exact) for a later owner session. Any other
 * failure rolls this transaction back, leaving the definitions recorded, and is thrown.
 */
export async function buildWaitingIndexes(
  pool: pg.Pool,
  onPhase?: (label: string, total: number) => void,
  onProgress?: (done: number) => void,
): Promise<{ built: number; waiting: number } | 'not-owner'> {
  return inTransaction(pool, async (client) => {
    if (!(await becomeOwner(client))) return 'not-owner';
    await client.query(PINNED_PATH);
    const pending = await deferredIndexes(client);
    const rows = pending.length > 0 ? await tableRows(client) : 0;
    const build = pending.filter((ix) => !vectorIndexWaits(ix.am, rows));
    if (build.length > 0) onPhase?.('indexing', build.length);
    await buildIndexes(client, build, [], rows, onProgress);
    await client.query('COMMIT');
    return { built: build.length, waiting: pending.length - build.length };
  });
}

/**
 * After a write: merge every GIN pending list into its index (a search would otherwise scan the
 * unsorted list on every lookup until autovacuum gets to it) and ANALYZE the table so the planner
 * and the search functions' plan choice see the new row counts. Both need the owner's rights (or
 * MAINTAIN on PostgreSQL 17+); a session that lacks them leaves the work to autovacuum
 * (retrieval/README.md, "Autovacuum"). VACUUM itself cannot run inside a transaction, and every
 * statement of the ingestion pool runs in one.
 */
export async function maintainAfterWrite(pool: pg.Pool): Promise<'done' | 'not-owner'> {
  return inTransaction(pool, async (client) => {
    await client.query('SAVEPOINT fgentic_maintain');
    if (!(await becomeOwner(client))) return 'not-owner';
    await client.query(
      `SELECT pg_catalog.gin_clean_pending_list(i.indexrelid)
         FROM pg_catalog.pg_index i
         JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
         JOIN pg_catalog.pg_am am ON am.oid = c.relam
        WHERE i.indrelid = 'fgentic.chunks'::regclass AND am.amname = 'gin' AND i.indisvalid`,
    );
    // The derived rows the searches plan on.
    await client.query('ANALYZE fgentic.chunks');
    await client.query('COMMIT');
    return 'done' as const;
  });
}
