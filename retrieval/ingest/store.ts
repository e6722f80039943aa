/**
 * Transactional writes to knowledge.chunks, shared by JSONL and bundle ingestion and corpus seeding.
 * One call = one transaction: tombstoned sources are deleted, rows upserted in multi-row statements,
 * ACL-only rows updated in batches without touching their vectors, and rows of each replaced source
 * that are neither written nor kept are removed. Before the commit, the derived search rows of every
 * origin row written or deleted are rewritten from those rows (fgentic.sync_rows), so searches see
 * the write whole or not at all.
 *
 * Two ways to write the derived rows, same result:
 * - rows: each insert maintains every index of the derived table as it goes. An HNSW insertion of
 *   a 1024-d vector costs several times what building the graph from scratch costs per row, so this
 *   path pays for many rows only when the table is much larger than the write.
 * - bulk: the derived tables are locked (ACCESS EXCLUSIVE; the origin's table is never locked or
 *   altered, and its own indexes are maintained by its inserts as for any writer), their indexes
 *   that back no constraint (HNSW, GIN, …) dropped, the rows loaded, and each index other than a
 *   vector index re-created from the definition the catalog recorded for it, all inside the one
 *   write transaction; a vector index's definition is recorded in fgentic.deferred_indexes in that
 *   transaction too. Searches wait for the commit and then see the new rows with their ACL indexes;
 *   a failure rolls back the drops as well. Dropping and creating indexes needs the owner's rights,
 *   so this path is taken only when the session may act as knowledge_owner (the embedded database,
 *   or a login that is a member of it); otherwise the rows path runs.
 * After the commit, in a transaction of its own, every recorded vector index is built, unless the
 * table is at or below VECTOR_INDEX_MIN_ROWS rows (then it waits for a write that takes the table
 * past the bound). Until then a search finds no graph and ranks by an exact scan: the same rows,
 * recall 1.0, only slower on a large table. A failed build leaves the definition recorded, is
 * reported as `maintenance: failed`, and the next write by a session that may act as the owner
 * builds it. Threshold and measurements: retrieval/README.md, "Large writes".
 * After a commit that changed rows, `maintainAfterWrite` merges the GIN pending lists and refreshes
 * the planner statistics of the derived tables, so searches start from indexes in their fast state.
 */
import type pg from 'pg';
import { type ChunkMetadata, jcs } from '../../contract/index.ts';
import { toVectorBinary } from '../db/pool.ts';
import { OWNER_ROLE } from '../db/roles.ts';
import { DEFAULT_PLANNER } from '../planner.ts';

export interface StoredChunk {
  readonly chunk_id: string;
  readonly content: string;
  readonly metadata: ChunkMetadata;
  /** Absent: the row must exist with identical content; only its metadata changes. */
  readonly embedding?: readonly number[];
}

export interface WritePlan {
  readonly chunks: readonly StoredChunk[];
  /** Ids of rows the input holds unchanged: not written, but not deleted as absent either. */
  readonly keep?: readonly string[];
  /** Sources whose rows are all deleted (tombstones). */
  readonly deleteSources?: readonly string[];
  /** Sources whose rows not present in `chunks` or `keep` are deleted (full replacement). */
  readonly replaceSources?: readonly string[];
  /** Delete every row whose source id starts with this prefix and is not in replaceSources. */
  readonly replacePrefix?: string;
}

export type WritePath = 'rows' | 'bulk';

export interface WriteStats {
  upserted: number;
  aclOnly: number;
  /** Rows given with a vector that matched the stored row exactly, so Postgres skipped them. */
  unchanged: number;
  deleted: number;
  /** How the new rows were written. */
  path: WritePath;
  /** Indexes built in this write: re-created by the bulk path, or vector indexes built after the commit. */
  rebuiltIndexes: number;
  /** Vector indexes left unbuilt after this write, the table being at or below VECTOR_INDEX_MIN_ROWS (recorded, built later). */
  deferredIndexes: number;
  /**
   * After-write work: done; none (nothing changed, or not asked for); not-owner (this session may
   * not act as the table owner: autovacuum does it); failed (the vector index build or the
   * maintenance failed; the rows are committed regardless and searches stay exact).
   */
  maintenance: 'done' | 'none' | 'not-owner' | 'failed';
}

export interface WriteOptions {
  readonly insertBatch?: number;
  readonly updateBatch?: number;
  /** `auto` (default) chooses by the threshold below; `rows` never bulk-loads; `bulk` always tries. */
  readonly path?: 'auto' | WritePath;
  /** A new phase of the write begins (e.g. `indexing`, with the number of indexes to build). */
  readonly onPhase?: (label: string, total: number) => void;
  /** Merge GIN pending lists and ANALYZE after a commit that changed rows (default true). */
  readonly maintain?: boolean;
  /**
   * The rows are committed and visible to searches; awaited before the vector index is built. If it
   * throws, the write still builds the index and maintains the table, then rejects with a
   * CommitCallbackError that carries the stats and the callback's error as its cause.
   */
  readonly onCommit?: () => void | Promise<void>;
}

/**
 * Rows per INSERT. A 1024-d vector is ~20 KB of text, so 200 rows keep one statement near 4 MB while
 * amortizing the round trip and planning; the 65,535-parameter limit allows 16,383 rows of 4.
 */
export const INSERT_BATCH = 200;
const UPDATE_BATCH = 1000;
const LOOKUP_BATCH = 1000;

/**
 * Bulk-load threshold: at least BULK_MIN_ROWS new row versions, and at most BULK_TABLE_RATIO rows
 * already in the table per new row. Rebuilding re-inserts every existing row into the graph, at
 * roughly a third of the cost of an incremental insertion, so up to about 2 existing rows per new
 * row the rebuild is still cheaper; below 500 rows the fixed cost of the lock and of re-creating
 * every index is not worth it.
 */
export const BULK_MIN_ROWS = 500;
export const BULK_TABLE_RATIO = 2;
/**
 * An ACL-only row counted in new vectors for the threshold. Its UPDATE keeps the vector, but pgvector
 * still walks the graph for the new row version, so in place it costs several times the same UPDATE
 * with the graph and the GIN indexes dropped; but rebuilding them costs a fixed amount per row of the
 * table, and the walk is cheaper on a small graph. Measured end to end (ready), bulk against in
 * place: an ACL change of every row 1.40–1.45× sooner on 5,000 rows, 1.00–1.19× on 2,000, 0.95–1.62×
 * on 1,000; of two thirds of the rows 1.01–1.14× on 5,000 but 0.85–0.89× on 2,000. At 0.5 an ACL
 * change alone takes the bulk path only when it covers the whole table, from 1,000 rows on; anything
 * less keeps the graph, since the bulk path also blocks readers for the whole write and leaves
 * searches exact until the graph is back (`npm run bench:ingest`, workloads acl and acl-2/3, arms
 * rows, bulk and after).
 */
export const ACL_ONLY_WEIGHT = 0.5;
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

/**
 * The onCommit callback failed after the rows were committed. The write finished regardless (vector
 * index built, table maintained): `stats` is what it did, `cause` what the callback threw. Without
 * this, a rejected write would look like nothing was written, and the graph would wait for the next
 * owner write.
 */
export class CommitCallbackError extends Error {
  constructor(
    readonly stats: WriteStats,
    options: { readonly cause: unknown },
  ) {
    super('the rows are committed, but the onCommit callback failed', options);
    this.name = 'CommitCallbackError';
  }
}

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

export interface ExistingRow {
  readonly content: string;
  /** The stored metadata in JCS form, for an exact comparison with the input's. */
  readonly metadata: string;
}

/** Existing rows (chunk_id → content, canonical metadata) for the given ids. */
export async function existingRows(pool: pg.Pool, ids: readonly string[]): Promise<Map<string, ExistingRow>> {
  const out = new Map<string, ExistingRow>();
  for (let i = 0; i < ids.length; i += LOOKUP_BATCH) {
    const r = await pool.query(
      'SELECT chunk_id, content, metadata FROM knowledge.chunks WHERE chunk_id = ANY($1::text[])',
      [ids.slice(i, i + LOOKUP_BATCH)],
    );
    for (const row of r.rows) out.set(row.chunk_id, { content: row.content, metadata: jcs(row.metadata) });
  }
  return out;
}

export class StoreConflictError extends Error {
  constructor() {
    super('a row changed while the ingest ran; nothing was written, run the ingest again');
    this.name = 'StoreConflictError';
  }
}

/** New vectors count fully towards a bulk load, ACL-only rows by ACL_ONLY_WEIGHT. */
export function bulkWeight(rows: number, aclOnly: number): number {
  return rows + aclOnly * ACL_ONLY_WEIGHT;
}

/**
 * Whether writing `rows` new vectors (new rows or new content) and `aclOnly` metadata-only updates
 * into a table of `tableRows` rows is bulk-loaded.
 */
export function bulkPays(rows: number, tableRows: number, aclOnly = 0): boolean {
  const weighted = bulkWeight(rows, aclOnly);
  return weighted >= BULK_MIN_ROWS && tableRows <= weighted * BULK_TABLE_RATIO;
}

/** maintenance_work_mem (MB) for re-creating the indexes of a table of `rows` rows. */
export function buildMemoryMb(rows: number): number {
  const mb = Math.ceil((rows * BUILD_BYTES_PER_ROW) / (1024 * 1024));
  return Math.min(BUILD_MEMORY_MAX_MB, Math.max(BUILD_MEMORY_MIN_MB, mb));
}

interface RecordedIndex {
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
  const r = await client.query(
    "SELECT current_setting('role') AS role, current_setting('search_path') AS path",
  );
  const { role, path } = r.rows[0] as { role: string; path: string };
  await client.query("SELECT set_config('role', $1, true)", [OWNER_ROLE]);
  await client.query(PINNED_PATH);
  const out = await work();
  await client.query("SELECT set_config('search_path', $1, true), set_config('role', $2, true)", [
    path,
    role,
  ]);
  return out;
}

/**
 * Inside the write transaction: take the table for a bulk load and drop its rebuildable indexes;
 * or change nothing and return undefined when this session may not act as the owner, or readers
 * hold the table longer than BULK_LOCK_TIMEOUT.
 */
async function beginBulk(client: pg.PoolClient): Promise<RecordedIndex[] | undefined> {
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
async function tableRows(
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
async function finishBulk(
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
  const client = await pool.connect();
  let failed = false;
  try {
    await client.query('BEGIN');
    try {
      await client.query("SELECT set_config('role', $1, true)", [OWNER_ROLE]);
    } catch (err) {
      if ((err as { code?: unknown }).code !== '42501') throw err;
      await client.query('ROLLBACK');
      return 'not-owner';
    }
    await client.query(PINNED_PATH);
    const pending = await deferredIndexes(client);
    const rows = pending.length > 0 ? await tableRows(client) : 0;
    const build = pending.filter((ix) => !vectorIndexWaits(ix.am, rows));
    if (build.length > 0) onPhase?.('indexing', build.length);
    await buildIndexes(client, build, [], rows, onProgress);
    await client.query('COMMIT');
    return { built: build.length, waiting: pending.length - build.length };
  } catch (err) {
    failed = true;
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release(failed ? true : undefined);
  }
}

async function insertRows(
  client: pg.PoolClient,
  rows: readonly StoredChunk[],
  stats: WriteStats,
  touched: string[],
): Promise<void> {
  const values: unknown[] = [];
  const tuples = rows.map((c, k) => {
    values.push(c.chunk_id, c.content, toVectorBinary(c.embedding ?? []), JSON.stringify(c.metadata));
    const b = k * 4;
    return `($${b + 1}, $${b + 2}, $${b + 3}::vector, $${b + 4}::jsonb)`;
  });
  // The WHERE makes an identical row a no-op: no new tuple version, no index maintenance.
  const r = await client.query(
    `INSERT INTO knowledge.chunks AS c (chunk_id, content, embedding, metadata) VALUES ${tuples.join(', ')} ` +
      'ON CONFLICT (chunk_id) DO UPDATE SET content = EXCLUDED.content, embedding = EXCLUDED.embedding, ' +
      'metadata = EXCLUDED.metadata WHERE (c.content, c.embedding, c.metadata) IS DISTINCT FROM ' +
      '(EXCLUDED.content, EXCLUDED.embedding, EXCLUDED.metadata) RETURNING c.chunk_id',
    values,
  );
  for (const row of r.rows as { chunk_id: string }[]) touched.push(row.chunk_id);
  stats.upserted += r.rowCount ?? 0;
  stats.unchanged += rows.length - (r.rowCount ?? 0);
}

/** Rows per fgentic.sync_rows call. */
const SYNC_BATCH = 1_000;

/**
 * The derived search rows of `ids`, rewritten from the origin rows as this transaction sees them
 * (fgentic.sync_rows, SECURITY DEFINER: it computes them itself). In the write transaction, so a
 * search never sees an origin row of this write without its derived row, or the reverse.
 */
async function syncDerived(client: pg.PoolClient, ids: readonly string[]): Promise<void> {
  const unique = [...new Set(ids)];
  for (let i = 0; i < unique.length; i += SYNC_BATCH)
    await client.query('SELECT fgentic.sync_rows($1::text[])', [unique.slice(i, i + SYNC_BATCH)]);
}

export async function writeChunks(
  pool: pg.Pool,
  plan: WritePlan,
  onProgress?: (done: number) => void,
  options: WriteOptions = {},
): Promise<WriteStats> {
  const stats: WriteStats = {
    upserted: 0,
    aclOnly: 0,
    unchanged: 0,
    deleted: 0,
    path: 'rows',
    rebuiltIndexes: 0,
    deferredIndexes: 0,
    maintenance: 'none',
  };
  const insertBatch = options.insertBatch ?? INSERT_BATCH;
  const updateBatch = options.updateBatch ?? UPDATE_BATCH;
  const full = plan.chunks.filter((c) => c.embedding !== undefined);
  const aclOnly = plan.chunks.filter((c) => c.embedding === undefined);
  const client = await pool.connect();
  let failed = false;
  try {
    await client.query('BEGIN');
    let rebuild: RecordedIndex[] | undefined;
    const mode = options.path ?? 'auto';
    // An ACL-only row counts too: its UPDATE keeps the vector but still walks the graph
    // (retrieval/README.md, "Large writes"). The table is counted only when the write could pay.
    const weighted = bulkWeight(full.length, aclOnly.length);
    if (plan.chunks.length > 0 && (mode === 'bulk' || (mode === 'auto' && weighted >= BULK_MIN_ROWS))) {
      const n = await tableRows(client, 'knowledge.chunks');
      if (mode === 'bulk' || bulkPays(full.length, n, aclOnly.length)) rebuild = await beginBulk(client);
    }
    // Every origin row this transaction writes or deletes; its derived row follows before COMMIT.
    const touched: string[] = [];
    const deleted = (r: pg.QueryResult) => {
      for (const row of r.rows as { chunk_id: string }[]) touched.push(row.chunk_id);
      stats.deleted += r.rowCount ?? 0;
    };
    if (plan.deleteSources?.length) {
      deleted(
        await client.query(
          "DELETE FROM knowledge.chunks WHERE (metadata #>> '{source,id}') = ANY($1::text[]) RETURNING chunk_id",
          [[...plan.deleteSources]],
        ),
      );
    }
    let done = 0;
    for (let i = 0; i < full.length; i += insertBatch) {
      const batch = full.slice(i, i + insertBatch);
      await insertRows(client, batch, stats, touched);
      done += batch.length;
      onProgress?.(done);
    }
    for (let i = 0; i < aclOnly.length; i += updateBatch) {
      const batch = aclOnly.slice(i, i + updateBatch);
      const r = await client.query(
        'UPDATE knowledge.chunks AS c SET metadata = v.metadata FROM ' +
          'unnest($1::text[], $2::jsonb[], $3::text[]) AS v(chunk_id, metadata, content) ' +
          'WHERE c.chunk_id = v.chunk_id AND c.content = v.content',
        [
          batch.map((c) => c.chunk_id),
          batch.map((c) => JSON.stringify(c.metadata)),
          batch.map((c) => c.content),
        ],
      );
      // The caller saw each row stored with this content; if one vanished or changed since, abort
      // rather than leave a row with a stale ACL.
      if (r.rowCount !== batch.length) throw new StoreConflictError();
      for (const c of batch) touched.push(c.chunk_id);
      stats.aclOnly += batch.length;
      done += batch.length;
      onProgress?.(done);
    }
    if (plan.replaceSources?.length) {
      const keep = [...plan.chunks.map((c) => c.chunk_id), ...(plan.keep ?? [])];
      deleted(
        await client.query(
          "DELETE FROM knowledge.chunks WHERE (metadata #>> '{source,id}') = ANY($1::text[]) AND NOT (chunk_id = ANY($2::text[])) RETURNING chunk_id",
          [[...plan.replaceSources], keep],
        ),
      );
    }
    if (plan.replacePrefix !== undefined) {
      deleted(
        await client.query(
          "DELETE FROM knowledge.chunks WHERE starts_with(metadata #>> '{source,id}', $1) AND NOT ((metadata #>> '{source,id}') = ANY($2::text[])) RETURNING chunk_id",
          [plan.replacePrefix, [...(plan.replaceSources ?? [])]],
        ),
      );
    }
    await syncDerived(client, touched);
    if (rebuild !== undefined) {
      stats.path = 'bulk';
      stats.rebuiltIndexes = await finishBulk(client, rebuild, options.onPhase, onProgress);
    }
    await client.query('COMMIT');
  } catch (err) {
    failed = true;
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release(failed ? true : undefined);
  }
  let callback: { readonly error: unknown } | undefined;
  try {
    await options.onCommit?.();
  } catch (error) {
    callback = { error };
  }
  // The rows are committed: from here on a failure is reported in the stats, not as a failed
  // ingest, and searches stay exact until a later owner write builds what is still recorded.
  let graphFailed = false;
  if (stats.path === 'bulk' || plan.chunks.length > 0) {
    const graph = await buildWaitingIndexes(pool, options.onPhase, onProgress).catch(() => 'failed' as const);
    if (graph === 'failed') graphFailed = true;
    else if (graph !== 'not-owner') {
      stats.rebuiltIndexes += graph.built;
      stats.deferredIndexes = graph.waiting;
    }
  }
  if ((options.maintain ?? true) && stats.upserted + stats.aclOnly + stats.deleted > 0) {
    options.onPhase?.('analyzing', 1);
    stats.maintenance = await maintainAfterWrite(pool).catch(() => 'failed' as const);
    onProgress?.(1);
  }
  if (graphFailed) stats.maintenance = 'failed';
  if (callback !== undefined) throw new CommitCallbackError(stats, { cause: callback.error });
  return stats;
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
  const client = await pool.connect();
  let failed = false;
  try {
    await client.query('BEGIN');
    await client.query('SAVEPOINT fgentic_maintain');
    try {
      await client.query("SELECT set_config('role', $1, true)", [OWNER_ROLE]);
    } catch (err) {
      if ((err as { code?: unknown }).code !== '42501') throw err;
      await client.query('ROLLBACK');
      return 'not-owner';
    }
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
    return 'done';
  } catch (err) {
    failed = true;
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release(failed ? true : undefined);
  }
}
