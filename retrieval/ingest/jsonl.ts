/**
 * JSONL ingestion in the origin's final-chunk shape: one `{chunk_id?, content, metadata, embedding?}`
 * per line, or a tombstone `{"delete_source": "<source id>"}` (format: retrieval/README.md). Every
 * source named in the input is replaced as a whole (rows of that source absent from the input are
 * deleted), in one transaction. A row whose id, content and metadata are already stored is left
 * alone (`unchanged`); one whose id and content exist but whose metadata differs is an ACL-only
 * update that keeps its vector and costs no embedding call. Errors name a record number and a field
 * path, never content.
 */
import { readFileSync } from 'node:fs';
import type pg from 'pg';
import {
  type ChunkMetadata,
  isBoundedCleanText,
  jcs,
  parseStrictJson,
  validateChunkMetadata,
} from '../../contract/index.ts';
import { checkVector, EMBEDDING_DIMENSIONS, type Embedder } from '../embeddings/types.ts';
import { chunkId, normalizeContent, OccurrenceCounter } from './chunk-id.ts';
import { describeMetadataDenial, fileProblem, IngestError } from './errors.ts';
import type { Progress } from './progress.ts';
import { existingRows, type StoredChunk, type WriteOptions, type WriteStats, writeChunks } from './store.ts';

export { IngestError } from './errors.ts';

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
  /** Rows inserted or rewritten with a vector. */
  upserted: number;
  /** Rows whose metadata (ACL, provenance) changed; vector kept. */
  aclOnly: number;
  /** Rows already stored exactly as given: not written. */
  unchanged: number;
  /** Texts sent to the embedder. */
  embedded: number;
  deleted: number;
  /** How the rows were written (`bulk`: indexes rebuilt after the load; store.ts). */
  path: WriteStats['path'];
  /** After-write maintenance (GIN pending lists merged, ANALYZE): done, none needed, or not permitted. */
  maintenance: WriteStats['maintenance'];
}

const RECORD_FIELDS = ['chunk_id', 'content', 'metadata', 'embedding'];
const EMBED_BATCH = 64;

/** Parses JSONL text; record numbers are 1-based line numbers (blank lines count, as editors show). */
export function parseJsonl(text: string): IngestRecord[] {
  const out: IngestRecord[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    const parsed = parseStrictJson(line, { maxDepth: 16, maxLength: 1 << 22 });
    if (!parsed.ok)
      throw new IngestError(
        i + 1,
        parsed.error === 'duplicate_name'
          ? 'not strict JSON: a member name appears twice'
          : `not valid JSON (at column ${parsed.offset + 1})`,
      );
    out.push(parsed.value as unknown as IngestRecord);
  });
  return out;
}

/** Reads and parses a JSONL file; a missing or unreadable file is an IngestError naming the path. */
export function readJsonlFile(file: string): IngestRecord[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw fileProblem('file', file, err);
  }
  return parseJsonl(text);
}

interface Prepared {
  readonly chunk_id: string;
  readonly content: string;
  readonly metadata: ChunkMetadata;
  embedding?: readonly number[];
}

/** Field names are echoed only when they look like field names, never arbitrary input. */
const fieldName = (k: string) => (/^[A-Za-z_][A-Za-z0-9_]{0,31}$/.test(k) ? k : '(unprintable name)');

/** Validates every record (nothing is written when one is bad) and resolves chunk ids. */
export function prepareRecords(
  records: readonly IngestRecord[],
  profile: string,
  lineOf: (index: number) => number = (i) => i + 1,
): { prepared: Prepared[]; tombstones: Map<string, number>; sources: Set<string>; records: number } {
  const prepared: Prepared[] = [];
  const tombstones = new Map<string, number>();
  const sources = new Map<string, number>();
  const ids = new Map<string, number>();
  const occurrences = new OccurrenceCounter();
  records.forEach((r, i) => {
    const n = lineOf(i);
    if (typeof r !== 'object' || r === null || Array.isArray(r))
      throw new IngestError(n, 'a record must be a JSON object');
    if ('delete_source' in r) {
      if (Object.keys(r).length !== 1) throw new IngestError(n, 'delete_source: a tombstone has no other field');
      if (!isBoundedCleanText(r.delete_source, 512))
        throw new IngestError(n, 'delete_source: must be clean text of at most 512 bytes');
      tombstones.set(r.delete_source, n);
      return;
    }
    for (const k of Object.keys(r))
      if (!RECORD_FIELDS.includes(k))
        throw new IngestError(n, `${fieldName(k)}: unknown field (allowed: ${RECORD_FIELDS.join(', ')})`);
    if (!Object.hasOwn(r, 'content')) throw new IngestError(n, 'content: required');
    if (!Object.hasOwn(r, 'metadata')) throw new IngestError(n, 'metadata: required');
    const content = typeof r.content === 'string' ? normalizeContent(r.content) : undefined;
    if (content === undefined)
      throw new IngestError(
        n,
        'content: must be text of 1 byte to 64 KiB after trimming, without control characters other than newline and tab',
      );
    const meta = validateChunkMetadata(r.metadata);
    if (!meta.ok) throw new IngestError(n, describeMetadataDenial(meta.reason, meta.path, 'metadata'));
    const sourceId = meta.value.source.id;
    const occurrence = occurrences.next(sourceId, content);
    let id = r.chunk_id;
    if (id === undefined) id = chunkId(profile, sourceId, content, occurrence);
    else if (!isBoundedCleanText(id, 512))
      throw new IngestError(n, 'chunk_id: must be clean text of at most 512 bytes');
    const first = ids.get(id);
    if (first !== undefined) throw new IngestError(n, `chunk_id: same id as record ${first}`);
    ids.set(id, n);
    if (r.embedding !== undefined && !checkVector(r.embedding))
      throw new IngestError(
        n,
        `embedding: must be ${EMBEDDING_DIMENSIONS} numbers finite as float4, not all zero (or omitted)`,
      );
    if (!sources.has(sourceId)) sources.set(sourceId, n);
    prepared.push({
      chunk_id: id,
      content,
      metadata: meta.value,
      ...(r.embedding ? { embedding: r.embedding } : {}),
    });
  });
  for (const [s, n] of tombstones) {
    const w = sources.get(s);
    if (w !== undefined) throw new IngestError(n, `delete_source: names the source that record ${w} writes`);
  }
  return { prepared, tombstones, sources: new Set(sources.keys()), records: records.length };
}

export async function ingestRecords(
  pool: pg.Pool,
  embedder: Embedder,
  records: readonly IngestRecord[],
  progress?: Progress,
  scope: { readonly replacePrefix?: string; readonly replaceSources?: readonly string[] } = {},
  write: Pick<WriteOptions, 'path' | 'maintain' | 'onCommit'> = {},
): Promise<IngestStats> {
  return ingestPrepared(pool, embedder, prepareRecords(records, embedder.profile), progress, scope, write);
}

/** ingestRecords for records already validated by prepareRecords (the CLI validates before it opens a database). */
export async function ingestPrepared(
  pool: pg.Pool,
  embedder: Embedder,
  input: ReturnType<typeof prepareRecords>,
  progress?: Progress,
  scope: { readonly replacePrefix?: string; readonly replaceSources?: readonly string[] } = {},
  write: Pick<WriteOptions, 'path' | 'maintain' | 'onCommit'> = {},
): Promise<IngestStats> {
  const { prepared, tombstones, sources, records } = input;

  const existing = await existingRows(
    pool,
    prepared.map((p) => p.chunk_id),
  );
  const unchanged: string[] = [];
  const aclOnly: Prepared[] = [];
  const full: Prepared[] = [];
  for (const p of prepared) {
    const row = existing.get(p.chunk_id);
    if (row === undefined || row.content !== p.content) full.push(p);
    else if (p.embedding !== undefined)
      full.push(p); // the store skips it if nothing differs
    else if (row.metadata === jcs(p.metadata)) unchanged.push(p.chunk_id);
    else aclOnly.push(p);
  }
  const toEmbed = full.filter((p) => p.embedding === undefined);
  progress?.start('embedding', toEmbed.length);
  for (let i = 0; i < toEmbed.length; i += EMBED_BATCH) {
    const batch = toEmbed.slice(i, i + EMBED_BATCH);
    const vectors = await embedder.embed(batch.map((p) => p.content));
    if (vectors.length !== batch.length) throw new IngestError(0, 'embedder returned the wrong number of vectors');
    batch.forEach((p, k) => {
      const v = vectors[k];
      if (!checkVector(v)) throw new IngestError(0, 'embedder returned an invalid vector');
      p.embedding = v;
    });
    progress?.update(Math.min(i + EMBED_BATCH, toEmbed.length));
  }
  progress?.done();
  const chunks: StoredChunk[] = [...full, ...aclOnly].map((p) => ({
    chunk_id: p.chunk_id,
    content: p.content,
    metadata: p.metadata,
    ...(p.embedding ? { embedding: p.embedding } : {}),
  }));
  progress?.start('writing', chunks.length);
  const stats = await writeChunks(
    pool,
    {
      chunks,
      keep: unchanged,
      deleteSources: [...tombstones.keys()],
      replaceSources: [...new Set([...sources, ...(scope.replaceSources ?? [])])],
      ...(scope.replacePrefix !== undefined ? { replacePrefix: scope.replacePrefix } : {}),
    },
    (d) => progress?.update(d),
    {
      ...write,
      onPhase: (label, total) => {
        progress?.done();
        progress?.start(label, total);
      },
    },
  );
  progress?.done();
  return {
    records,
    upserted: stats.upserted,
    aclOnly: stats.aclOnly,
    unchanged: unchanged.length + stats.unchanged,
    embedded: toEmbed.length,
    deleted: stats.deleted,
    path: stats.path,
    maintenance: stats.maintenance,
  };
}

export async function ingestJsonlFile(
  pool: pg.Pool,
  embedder: Embedder,
  file: string,
  progress?: Progress,
): Promise<IngestStats> {
  return ingestRecords(pool, embedder, readJsonlFile(file), progress);
}
