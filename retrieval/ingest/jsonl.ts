/**
 * JSONL ingestion in the origin's final-chunk shape: one `{chunk_id?, content, metadata, embedding?}`
 * per line, or a tombstone `{"delete_source": "<source id>"}`. Every source named in the input is
 * replaced as a whole (rows of that source absent from the input are deleted), in one transaction.
 * Rows whose id and content already exist and carry no new embedding keep their vector: an ACL-only
 * change costs no embedding call. Errors name a line number, never content.
 */
import { readFileSync } from 'node:fs';
import type pg from 'pg';
import {
  type ChunkMetadata,
  isBoundedCleanText,
  parseStrictJson,
  validateChunkMetadata,
} from '../../contract/index.ts';
import { checkVector, type Embedder } from '../embeddings/types.ts';
import { chunkId, normalizeContent, OccurrenceCounter } from './chunk-id.ts';
import type { Progress } from './progress.ts';
import { existingContent, type StoredChunk, writeChunks } from './store.ts';

export type IngestRecord =
  | {
      readonly chunk_id?: string;
      readonly content: string;
      readonly metadata: unknown;
      readonly embedding?: readonly number[];
    }
  | { readonly delete_source: string };

export interface IngestStats {
  records: number;
  upserted: number;
  aclOnly: number;
  embedded: number;
  deleted: number;
}

export class IngestError extends Error {
  constructor(
    readonly line: number,
    readonly reason: string,
  ) {
    super(`record ${line}: ${reason}`);
    this.name = 'IngestError';
  }
}

export function parseJsonl(text: string): IngestRecord[] {
  const out: IngestRecord[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    const parsed = parseStrictJson(line, { maxDepth: 16, maxLength: 1 << 22 });
    if (!parsed.ok) throw new IngestError(i + 1, 'invalid JSON');
    out.push(parsed.value as unknown as IngestRecord);
  });
  return out;
}

interface Prepared {
  readonly chunk_id: string;
  readonly content: string;
  readonly metadata: ChunkMetadata;
  embedding?: readonly number[];
}

export async function ingestRecords(
  pool: pg.Pool,
  embedder: Embedder,
  records: readonly IngestRecord[],
  progress?: Progress,
  scope: { readonly replacePrefix?: string; readonly replaceSources?: readonly string[] } = {},
): Promise<IngestStats> {
  const prepared: Prepared[] = [];
  const tombstones = new Set<string>();
  const sources = new Set<string>();
  const ids = new Set<string>();
  const occurrences = new OccurrenceCounter();
  records.forEach((r, i) => {
    const n = i + 1;
    if (typeof r !== 'object' || r === null || Array.isArray(r)) throw new IngestError(n, 'not an object');
    if ('delete_source' in r) {
      if (Object.keys(r).length !== 1 || !isBoundedCleanText(r.delete_source, 512))
        throw new IngestError(n, 'invalid tombstone');
      tombstones.add(r.delete_source);
      return;
    }
    for (const k of Object.keys(r))
      if (!['chunk_id', 'content', 'metadata', 'embedding'].includes(k))
        throw new IngestError(n, `unknown field ${k}`);
    if (typeof r.content !== 'string') throw new IngestError(n, 'content');
    const content = normalizeContent(r.content);
    if (content === undefined) throw new IngestError(n, 'content');
    const meta = validateChunkMetadata(r.metadata);
    if (!meta.ok) throw new IngestError(n, `metadata ${meta.reason} at ${meta.path ?? '$'}`);
    const sourceId = meta.value.source.id;
    const occurrence = occurrences.next(sourceId, content);
    let id = r.chunk_id;
    if (id === undefined) id = chunkId(embedder.profile, sourceId, content, occurrence);
    else if (!isBoundedCleanText(id, 512)) throw new IngestError(n, 'chunk_id');
    if (ids.has(id)) throw new IngestError(n, 'duplicate chunk_id');
    ids.add(id);
    if (r.embedding !== undefined && !checkVector(r.embedding)) throw new IngestError(n, 'embedding');
    sources.add(sourceId);
    prepared.push({
      chunk_id: id,
      content,
      metadata: meta.value,
      ...(r.embedding ? { embedding: r.embedding } : {}),
    });
  });
  for (const s of tombstones) if (sources.has(s)) throw new IngestError(0, 'source both written and deleted');

  const existing = await existingContent(pool, [...ids]);
  const toEmbed = prepared.filter((p) => !p.embedding && existing.get(p.chunk_id) !== p.content);
  progress?.start('embedding', toEmbed.length);
  for (let i = 0; i < toEmbed.length; i += 8) {
    const batch = toEmbed.slice(i, i + 8);
    const vectors = await embedder.embed(batch.map((p) => p.content));
    batch.forEach((p, k) => {
      const v = vectors[k];
      if (!checkVector(v)) throw new IngestError(0, 'embedder returned an invalid vector');
      p.embedding = v;
    });
    progress?.update(Math.min(i + 8, toEmbed.length));
  }
  progress?.done();
  progress?.start('writing', prepared.length);
  const chunks: StoredChunk[] = prepared.map((p) => ({
    chunk_id: p.chunk_id,
    content: p.content,
    metadata: p.metadata,
    ...(p.embedding ? { embedding: p.embedding } : {}),
  }));
  const stats = await writeChunks(
    pool,
    {
      chunks,
      deleteSources: [...tombstones],
      replaceSources: [...new Set([...sources, ...(scope.replaceSources ?? [])])],
      ...(scope.replacePrefix !== undefined ? { replacePrefix: scope.replacePrefix } : {}),
    },
    (d) => progress?.update(d),
  );
  progress?.done();
  return {
    records: records.length,
    upserted: stats.upserted,
    aclOnly: stats.aclOnly,
    embedded: toEmbed.length,
    deleted: stats.deleted,
  };
}

export async function ingestJsonlFile(
  pool: pg.Pool,
  embedder: Embedder,
  file: string,
  progress?: Progress,
): Promise<IngestStats> {
  return ingestRecords(pool, embedder, parseJsonl(readFileSync(file, 'utf8')), progress);
}
