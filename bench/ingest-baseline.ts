/**
 * The ingest write path as it was before unchanged detection and batched ACL updates, kept only so
 * bench/ingest.ts can measure both side by side on the same machine in one run: embeddings in
 * batches of 8, 50-row upserts that rewrite every row, one UPDATE per ACL-only row, and a re-ingest
 * of unchanged input treated as ACL-only. Validation is shared with the current path.
 */
import type pg from 'pg';
import type { ChunkMetadata } from '../contract/index.ts';
import { toVectorParam } from '../retrieval/db/pool.ts';
import type { Embedder } from '../retrieval/embeddings/types.ts';
import { type IngestRecord, prepareRecords } from '../retrieval/ingest/jsonl.ts';

interface Row {
  chunk_id: string;
  content: string;
  metadata: ChunkMetadata;
  embedding?: readonly number[];
}

export async function baselineIngest(
  pool: pg.Pool,
  embedder: Embedder,
  records: readonly IngestRecord[],
): Promise<{ upserted: number; aclOnly: number }> {
  const { prepared, sources } = prepareRecords(records, embedder.profile);
  const rows: Row[] = prepared.map((p) => ({ ...p }));
  const existing = new Map<string, string>();
  const ids = rows.map((r) => r.chunk_id);
  for (let i = 0; i < ids.length; i += 500) {
    const r = await pool.query(
      'SELECT chunk_id, content FROM knowledge.chunks WHERE chunk_id = ANY($1::text[])',
      [ids.slice(i, i + 500)],
    );
    for (const row of r.rows) existing.set(row.chunk_id, row.content);
  }
  const toEmbed = rows.filter((p) => !p.embedding && existing.get(p.chunk_id) !== p.content);
  for (let i = 0; i < toEmbed.length; i += 8) {
    const batch = toEmbed.slice(i, i + 8);
    const vectors = await embedder.embed(batch.map((p) => p.content));
    batch.forEach((p, k) => {
      p.embedding = vectors[k];
    });
  }
  const stats = { upserted: 0, aclOnly: 0 };
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const full = rows.filter((c) => c.embedding !== undefined);
    for (let i = 0; i < full.length; i += 50) {
      const batch = full.slice(i, i + 50);
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
    }
    for (const c of rows.filter((r) => r.embedding === undefined)) {
      await client.query(
        'UPDATE knowledge.chunks SET metadata = $2::jsonb WHERE chunk_id = $1 AND content = $3',
        [c.chunk_id, JSON.stringify(c.metadata), c.content],
      );
      stats.aclOnly += 1;
    }
    await client.query(
      "DELETE FROM knowledge.chunks WHERE (metadata #>> '{source,id}') = ANY($1::text[]) AND NOT (chunk_id = ANY($2::text[]))",
      [[...sources], ids],
    );
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
  return stats;
}
