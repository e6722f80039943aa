/**
 * Transactional writes to knowledge.chunks, shared by JSONL and bundle ingestion and corpus seeding.
 * One call = one transaction: tombstoned sources are deleted, rows upserted, ACL-only rows updated
 * without touching their vectors, and rows of each replaced source that are not in the new set removed.
 */
import type pg from 'pg';
import type { ChunkMetadata } from '../../contract/index.ts';
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
  /** Sources whose rows are all deleted (tombstones). */
  readonly deleteSources?: readonly string[];
  /** Sources whose rows not present in `chunks` are deleted (full replacement). */
  readonly replaceSources?: readonly string[];
  /** Delete every row whose source id starts with this prefix and is not in replaceSources. */
  readonly replacePrefix?: string;
}

export interface WriteStats {
  upserted: number;
  aclOnly: number;
  deleted: number;
}

const BATCH = 50;

/** Existing (chunk_id → content) for the given ids. */
export async function existingContent(pool: pg.Pool, ids: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (let i = 0; i < ids.length; i += 500) {
    const r = await pool.query(
      'SELECT chunk_id, content FROM knowledge.chunks WHERE chunk_id = ANY($1::text[])',
      [ids.slice(i, i + 500)],
    );
    for (const row of r.rows) out.set(row.chunk_id, row.content);
  }
  return out;
}

export async function writeChunks(
  pool: pg.Pool,
  plan: WritePlan,
  onProgress?: (done: number) => void,
): Promise<WriteStats> {
  const stats: WriteStats = { upserted: 0, aclOnly: 0, deleted: 0 };
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
    for (let i = 0; i < full.length; i += BATCH) {
      const batch = full.slice(i, i + BATCH);
      const values: unknown[] = [];
      const tuples = batch.map((c, k) => {
        values.push(c.chunk_id, c.content, toVectorParam(c.embedding ?? []), JSON.stringify(c.metadata));
        const b = k * 4;
        return `($${b + 1}, $${b + 2}, $${b + 3}::vector, $${b + 4}::jsonb)`;
      });
      await client.query(
        `INSERT INTO knowledge.chunks (chunk_id, content, embedding, metadata) VALUES ${tuples.join(', ')} ` +
          'ON CONFLICT (chunk_id) DO UPDATE SET content = EXCLUDED.content, embedding = EXCLUDED.embedding, ' +
          'metadata = EXCLUDED.metadata',
        values,
      );
      stats.upserted += batch.length;
      onProgress?.(stats.upserted);
    }
    for (const c of aclOnly) {
      const r = await client.query(
        'UPDATE knowledge.chunks SET metadata = $2::jsonb WHERE chunk_id = $1 AND content = $3',
        [c.chunk_id, JSON.stringify(c.metadata), c.content],
      );
      // The caller decided this row exists unchanged; if not, abort rather than leave it stale.
      if (r.rowCount !== 1) throw new Error('acl-only update target missing');
      stats.aclOnly += 1;
      onProgress?.(stats.upserted + stats.aclOnly);
    }
    if (plan.replaceSources?.length) {
      const keep = plan.chunks.map((c) => c.chunk_id);
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
