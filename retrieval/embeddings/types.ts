import type { ErrorFields } from '../../common/error-fields.ts';

/** What the server and ingestion need from an embedding model. */
export const EMBEDDING_DIMENSIONS = 1024;

export interface Embedder {
  /** Profile id recorded in the database, e.g. `bge-m3-1024-v1`. */
  readonly profile: string;
  embed(texts: readonly string[], signal?: AbortSignal): Promise<number[][]>;
}

/**
 * Embedding failures carry only a reason code, never input text; `cause` is what was thrown on the
 * way (class and errno or Node code only), for the log.
 */
export class EmbeddingError extends Error {
  constructor(
    readonly reason: 'embedding_unavailable' | 'embedding_invalid',
    override readonly cause?: ErrorFields,
  ) {
    super(reason);
    this.name = 'EmbeddingError';
  }
}

/**
 * A usable embedding as the database will store it: pgvector keeps float4 components
 * (retrieval/db/pool.ts, toVectorBinary), so each must be finite once rounded to float4 and the
 * rounded vector must not be all zero. Checked here, where the vector arrives (a supplied record or an
 * embedder's answer), so a bad one is reported as such and never reaches the database.
 */
export function checkVector(v: unknown): v is number[] {
  if (!Array.isArray(v) || v.length !== EMBEDDING_DIMENSIONS) return false;
  let nonZero = false;
  for (const x of v) {
    if (typeof x !== 'number') return false;
    const f = Math.fround(x);
    if (!Number.isFinite(f)) return false;
    if (f !== 0) nonZero = true;
  }
  return nonZero;
}
