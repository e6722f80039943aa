/**
 * Bench-only: the search statements as a client with read access to `knowledge.chunks` sends them —
 * the shape the SECURITY DEFINER search functions run inside the database (retrieval/db/migrations).
 * The experiments in retrieval-experiments.ts vary them side by side; the server never imports this.
 */
import type { Predicate } from '../retrieval/predicate.ts';

export interface ClientStatement {
  readonly text: string;
  readonly values: readonly unknown[];
}

const COLUMNS = 'c.chunk_id, c.content, c.metadata';

/** How many authorized rows exist, counted only up to `cap` (the planner needs no more). */
export function boundedCountStatement(pred: Predicate, options: { exactThreshold: number }): ClientStatement {
  const k = pred.params.length;
  return {
    text: `SELECT count(*)::int AS n FROM (SELECT 1 FROM knowledge.chunks c WHERE ${pred.sql} LIMIT $${k + 1}) s`,
    values: [...pred.params, options.exactThreshold + 1],
  };
}

/** Exact ranking of the materialized authorized set by (distance, chunk_id). */
export function exactStatement(pred: Predicate, vector: string, limit: number): ClientStatement {
  const k = pred.params.length;
  return {
    text:
      `WITH authorized AS MATERIALIZED (SELECT ${COLUMNS}, c.embedding FROM knowledge.chunks c WHERE ${pred.sql}) ` +
      `SELECT chunk_id, content, metadata, embedding <=> $${k + 1}::vector AS distance FROM authorized ` +
      `ORDER BY distance, chunk_id LIMIT $${k + 2}`,
    values: [...pred.params, vector, limit],
  };
}

/** The HNSW index under the same WHERE (iterative scan settings are set separately), then re-sorted. */
export function hnswStatement(pred: Predicate, vector: string, limit: number): ClientStatement {
  const k = pred.params.length;
  return {
    text:
      `SELECT chunk_id, content, metadata, distance FROM (` +
      `SELECT ${COLUMNS}, c.embedding <=> $${k + 1}::vector AS distance FROM knowledge.chunks c ` +
      `WHERE ${pred.sql} ORDER BY c.embedding <=> $${k + 1}::vector LIMIT $${k + 2}) ranked ` +
      `ORDER BY distance, chunk_id`,
    values: [...pred.params, vector, limit],
  };
}
