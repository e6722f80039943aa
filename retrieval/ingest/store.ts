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
 * builds it. The threshold: retrieval/README.md, "Large writes"; figures: bench/README.md.
 * After a commit that changed rows, `maintainAfterWrite` merges the GIN pending lists and refreshes
 * the planner statistics of the derived tables, so searches start from indexes in their fast state.
 */
import type pg from 'pg';
import { type ChunkMetadata, jcs } from '../../contract/index.ts';
import { toVectorBinary } from '../db/pool.ts';
import {
  beginBulk,
  buildWaitingIndexes,
  finishBulk,
  inTransaction,
  maintainAfterWrite,
  type RecordedIndex,
  tableRows,
} from './indexes.ts';

export {
  buildMemoryMb,
  buildWaitingIndexes,
  maintainAfterWrite,
  VECTOR_INDEX_MIN_ROWS,
  vectorIndexWaits,
} from './indexes.ts';

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

function emptyStats(): WriteStats {
  return {
    upserted: 0,
    aclOnly: 0,
    unchanged: 0,
    deleted: 0,
    path: 'rows',
    rebuiltIndexes: 0,
    deferredIndexes: 0,
    maintenance: 'none',
  };
}

/** One write transaction's rows: those with a new vector and the ACL-only ones, and what it touched. */
interface WriteScope {
  readonly client: pg.PoolClient;
  readonly plan: WritePlan;
  readonly full: readonly StoredChunk[];
  readonly aclOnly: readonly StoredChunk[];
  readonly stats: WriteStats;
  /** Every origin row this transaction writes or deletes; its derived row follows before COMMIT. */
  readonly touched: string[];
  readonly onProgress: ((done: number) => void) | undefined;
  done: number;
}

/**
 * Whether this write takes the bulk path: when it does, the table is taken and its rebuildable
 * indexes dropped (beginBulk), and those indexes are returned.
 */
async function chooseBulk(w: WriteScope, mode: 'auto' | WritePath): Promise<RecordedIndex[] | undefined> {
  // An ACL-only row counts too: its UPDATE keeps the vector but still walks the graph
  // (retrieval/README.md, "Large writes"). The table is counted only when the write could pay.
  const weighted = bulkWeight(w.full.length, w.aclOnly.length);
  if (w.plan.chunks.length === 0 || !(mode === 'bulk' || (mode === 'auto' && weighted >= BULK_MIN_ROWS)))
    return undefined;
  const n = await tableRows(w.client, 'knowledge.chunks');
  if (mode === 'bulk' || bulkPays(w.full.length, n, w.aclOnly.length)) return beginBulk(w.client);
  return undefined;
}

/** Runs a DELETE … RETURNING chunk_id and counts what it removed. */
async function deleteRows(w: WriteScope, sql: string, params: unknown[]): Promise<void> {
  const r = await w.client.query(sql, params);
  for (const row of r.rows as { chunk_id: string }[]) w.touched.push(row.chunk_id);
  w.stats.deleted += r.rowCount ?? 0;
}

/** ACL-only rows: the metadata changes, the vector stays. */
async function updateAcls(w: WriteScope, batch: readonly StoredChunk[]): Promise<void> {
  const r = await w.client.query(
    'UPDATE knowledge.chunks AS c SET metadata = v.metadata FROM ' +
      'unnest($1::text[], $2::jsonb[], $3::text[]) AS v(chunk_id, metadata, content) ' +
      'WHERE c.chunk_id = v.chunk_id AND c.content = v.content',
    [batch.map((c) => c.chunk_id), batch.map((c) => JSON.stringify(c.metadata)), batch.map((c) => c.content)],
  );
  // The caller saw each row stored with this content; if one vanished or changed since, abort
  // rather than leave a row with a stale ACL.
  if (r.rowCount !== batch.length) throw new StoreConflictError();
  for (const c of batch) w.touched.push(c.chunk_id);
  w.stats.aclOnly += batch.length;
}

/** Writes `rows` in batches of `size`, reporting progress after each. */
async function inBatches(
  w: WriteScope,
  rows: readonly StoredChunk[],
  size: number,
  write: (batch: readonly StoredChunk[]) => Promise<void>,
): Promise<void> {
  for (let i = 0; i < rows.length; i += size) {
    const batch = rows.slice(i, i + size);
    await write(batch);
    w.done += batch.length;
    w.onProgress?.(w.done);
  }
}

/** Every row of a tombstoned source. */
async function deleteTombstoned(w: WriteScope): Promise<void> {
  const sources = w.plan.deleteSources;
  if (sources?.length)
    await deleteRows(
      w,
      "DELETE FROM knowledge.chunks WHERE (metadata #>> '{source,id}') = ANY($1::text[]) RETURNING chunk_id",
      [[...sources]],
    );
}

/** The rows of replaced sources (and of the replaced prefix) that are neither written nor kept. */
async function deleteReplaced(w: WriteScope): Promise<void> {
  const { plan } = w;
  if (plan.replaceSources?.length) {
    const keep = [...plan.chunks.map((c) => c.chunk_id), ...(plan.keep ?? [])];
    await deleteRows(
      w,
      "DELETE FROM knowledge.chunks WHERE (metadata #>> '{source,id}') = ANY($1::text[]) AND NOT (chunk_id = ANY($2::text[])) RETURNING chunk_id",
      [[...plan.replaceSources], keep],
    );
  }
  if (plan.replacePrefix !== undefined)
    await deleteRows(
      w,
      "DELETE FROM knowledge.chunks WHERE starts_with(metadata #>> '{source,id}', $1) AND NOT ((metadata #>> '{source,id}') = ANY($2::text[])) RETURNING chunk_id",
      [plan.replacePrefix, [...(plan.replaceSources ?? [])]],
    );
}

/** The write transaction, up to and including COMMIT. */
async function writeTransaction(w: WriteScope, options: WriteOptions): Promise<void> {
  const rebuild = await chooseBulk(w, options.path ?? 'auto');
  await deleteTombstoned(w);
  await inBatches(w, w.full, options.insertBatch ?? INSERT_BATCH, (batch) =>
    insertRows(w.client, batch, w.stats, w.touched),
  );
  await inBatches(w, w.aclOnly, options.updateBatch ?? UPDATE_BATCH, (batch) => updateAcls(w, batch));
  await deleteReplaced(w);
  await syncDerived(w.client, w.touched);
  if (rebuild !== undefined) {
    w.stats.path = 'bulk';
    w.stats.rebuiltIndexes = await finishBulk(w.client, rebuild, options.onPhase, w.onProgress);
  }
  await w.client.query('COMMIT');
}

/**
 * After the commit: the waiting vector indexes and the table's maintenance. The rows are committed,
 * so a failure here is reported in the stats, not as a failed ingest, and searches stay exact until
 * a later owner write builds what is still recorded.
 */
async function afterCommit(
  pool: pg.Pool,
  plan: WritePlan,
  stats: WriteStats,
  options: WriteOptions,
  onProgress: ((done: number) => void) | undefined,
): Promise<void> {
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
}

export async function writeChunks(
  pool: pg.Pool,
  plan: WritePlan,
  onProgress?: (done: number) => void,
  options: WriteOptions = {},
): Promise<WriteStats> {
  const stats = emptyStats();
  const full = plan.chunks.filter((c) => c.embedding !== undefined);
  const aclOnly = plan.chunks.filter((c) => c.embedding === undefined);
  await inTransaction(pool, (client) =>
    writeTransaction({ client, plan, full, aclOnly, stats, touched: [], onProgress, done: 0 }, options),
  );
  let callback: { readonly error: unknown } | undefined;
  try {
    await options.onCommit?.();
  } catch (error) {
    callback = { error };
  }
  await afterCommit(pool, plan, stats, options, onProgress);
  if (callback !== undefined) throw new CommitCallbackError(stats, { cause: callback.error });
  return stats;
}
