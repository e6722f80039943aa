/**
 * Transactional writes to knowledge.chunks, shared by JSONL and bundle ingestion and corpus seeding.
 * One call = one transaction: tombstoned sources are deleted, rows upserted in multi-row statements,
 * ACL-only rows updated in batches without touching their vectors, and rows of each replaced source
 * that are neither written nor kept are removed.
 */
import type pg from 'pg';
import { type ChunkMetadata, jcs } from '../../contract/index.ts';
import { toVectorParam } from '../db/pool.ts';

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

export interface WriteStats {
  upserted: number;
  aclOnly: number;
  /** Rows given with a vector that matched the stored row exactly, so Postgres skipped them. */
  unchanged: number;
  deleted: number;
}

/**
 * Rows per INSERT. A 1024-d vector is ~20 KB of text, so 200 rows keep one statement near 4 MB while
 * amortizing the round trip and planning; the 65,535-parameter limit allows 16,383 rows of 4.
 */
export const INSERT_BATCH = 200;
const UPDATE_BATCH = 1000;
const LOOKUP_BATCH = 1000;

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

export async function writeChunks(
  pool: pg.Pool,
  plan: WritePlan,
  onProgress?: (done: number) => void,
  options: { readonly insertBatch?: number; readonly updateBatch?: number } = {},
): Promise<WriteStats> {
  const stats: WriteStats = { upserted: 0, aclOnly: 0, unchanged: 0, deleted: 0 };
  const insertBatch = options.insertBatch ?? INSERT_BATCH;
  const updateBatch = options.updateBatch ?? UPDATE_BATCH;
  const client = await pool.connect();
  let failed = false;
  try {
    await client.query('BEGIN');
    if (plan.deleteSources?.length) {
      const r = await client.query(
        "DELETE FROM knowledge.chunks WHERE (metadata #>> '{source,id}') = ANY($1::text[])",
        [[...plan.deleteSources]],
      );
      stats.deleted += r.rowCount ?? 0;
    }
    const full = plan.chunks.filter((c) => c.embedding !== undefined);
    const aclOnly = plan.chunks.filter((c) => c.embedding === undefined);
    let done = 0;
    for (let i = 0; i < full.length; i += insertBatch) {
      const batch = full.slice(i, i + insertBatch);
      const values: unknown[] = [];
      const tuples = batch.map((c, k) => {
        values.push(c.chunk_id, c.content, toVectorParam(c.embedding ?? []), JSON.stringify(c.metadata));
        const b = k * 4;
        return `($${b + 1}, $${b + 2}, $${b + 3}::vector, $${b + 4}::jsonb)`;
      });
      // The WHERE makes an identical row a no-op: no new tuple version, no index maintenance.
      const r = await client.query(
        `INSERT INTO knowledge.chunks AS c (chunk_id, content, embedding, metadata) VALUES ${tuples.join(', ')} ` +
          'ON CONFLICT (chunk_id) DO UPDATE SET content = EXCLUDED.content, embedding = EXCLUDED.embedding, ' +
          'metadata = EXCLUDED.metadata WHERE (c.content, c.embedding, c.metadata) IS DISTINCT FROM ' +
          '(EXCLUDED.content, EXCLUDED.embedding, EXCLUDED.metadata)',
        values,
      );
      stats.upserted += r.rowCount ?? 0;
      stats.unchanged += batch.length - (r.rowCount ?? 0);
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
      stats.aclOnly += batch.length;
      done += batch.length;
      onProgress?.(done);
    }
    if (plan.replaceSources?.length) {
      const keep = [...plan.chunks.map((c) => c.chunk_id), ...(plan.keep ?? [])];
      const r = await client.query(
        "DELETE FROM knowledge.chunks WHERE (metadata #>> '{source,id}') = ANY($1::text[]) AND NOT (chunk_id = ANY($2::text[]))",
        [[...plan.replaceSources], keep],
      );
      stats.deleted += r.rowCount ?? 0;
    }
    if (plan.replacePrefix !== undefined) {
      const r = await client.query(
        "DELETE FROM knowledge.chunks WHERE starts_with(metadata #>> '{source,id}', $1) AND NOT ((metadata #>> '{source,id}') = ANY($2::text[]))",
        [plan.replacePrefix, [...(plan.replaceSources ?? [])]],
      );
      stats.deleted += r.rowCount ?? 0;
    }
    await client.query('COMMIT');
    return stats;
  } catch (err) {
    failed = true;
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release(failed ? true : undefined);
  }
}
