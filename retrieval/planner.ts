/**
 * Chooses how to rank the authorized rows (DESIGN.md decision 8) and builds the statements. Pure.
 *
 * - exact: materialize the authorized set (GIN-assisted), cosine-sort it, tie-break chunk_id.
 * - hnsw:  the HNSW index with the SAME WHERE and `hnsw.iterative_scan = strict_order`, set with
 *          set_config(..., is_local => true) so it lives only in this transaction (a pooled SET
 *          would leak to other sessions: research/anchors.md §2.1).
 * The choice uses a bounded count over authorized rows only (`LIMIT threshold + 1`): it never
 * counts unauthorized rows and never leaves the server process. The threshold is measured in
 * bench/retrieval.ts.
 */
import type { Predicate } from './predicate.ts';

export type Plan = 'exact' | 'hnsw';

export interface PlannerOptions {
  /** Authorized-row count at or below which exact ranking is used. */
  readonly exactThreshold: number;
  /** hnsw.ef_search for the approximate path. */
  readonly efSearch: number;
  /** hnsw.max_scan_tuples for the iterative scan. */
  readonly maxScanTuples: number;
  /** Tests and benchmarks only: pin the plan. */
  readonly force?: Plan;
}

// Measured on the embedded database (bench/retrieval.ts, 20k rows, ef_search 100): HNSW under the
// WHERE reaches recall@10 0.99 only from ~1,000 authorized rows (0.88–0.92 at 200, 0.94–0.96 at 400,
// 0.97 at 600; asking the index for more rows does not help); above that it is 2–10x faster than
// exact. So exact up to 1,000 authorized rows, HNSW beyond — recall first.
export const DEFAULT_PLANNER: PlannerOptions = {
  exactThreshold: 1_000,
  efSearch: 100,
  maxScanTuples: 50_000,
};

export interface Statement {
  readonly text: string;
  readonly values: readonly unknown[];
}

export function choosePlan(boundedCount: number, options: PlannerOptions): Plan {
  if (options.force) return options.force;
  return boundedCount <= options.exactThreshold ? 'exact' : 'hnsw';
}

const SELECT_COLS = 'c.chunk_id, c.content, c.metadata';

/** `count(*)` of at most threshold+1 authorized rows. */
export function boundedCountStatement(pred: Predicate, options: PlannerOptions): Statement {
  const n = pred.params.length;
  return {
    text: `SELECT count(*)::int AS n FROM (SELECT 1 FROM knowledge.chunks c WHERE ${pred.sql} LIMIT $${n + 1}) s`,
    values: [...pred.params, options.exactThreshold + 1],
  };
}

export function exactStatement(pred: Predicate, vector: string, limit: number): Statement {
  const n = pred.params.length;
  return {
    text:
      `WITH authorized AS MATERIALIZED (SELECT ${SELECT_COLS}, c.embedding FROM knowledge.chunks c WHERE ${pred.sql}) ` +
      `SELECT chunk_id, content, metadata, embedding <=> $${n + 1}::vector AS distance FROM authorized ` +
      `ORDER BY distance, chunk_id LIMIT $${n + 2}`,
    values: [...pred.params, vector, limit],
  };
}

/** Transaction-local settings for the approximate path, as parameterized set_config calls. */
export function hnswSettings(options: PlannerOptions): Statement {
  return {
    text:
      "SELECT set_config('hnsw.iterative_scan', 'strict_order', true), " +
      "set_config('hnsw.ef_search', $1, true), set_config('hnsw.max_scan_tuples', $2, true), " +
      // Keep the planner on the HNSW index: jsonb containment estimates are crude and would otherwise
      // pick a bitmap scan + full sort for broad audiences.
      "set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), " +
      // ...and off a btree scan + sort, which small tables would otherwise prefer.
      "set_config('enable_sort', 'off', true), set_config('enable_incremental_sort', 'off', true)",
    values: [String(options.efSearch), String(options.maxScanTuples)],
  };
}

export function hnswStatement(pred: Predicate, vector: string, limit: number): Statement {
  const n = pred.params.length;
  return {
    text:
      `SELECT chunk_id, content, metadata, distance FROM (` +
      `SELECT ${SELECT_COLS}, c.embedding <=> $${n + 1}::vector AS distance FROM knowledge.chunks c ` +
      `WHERE ${pred.sql} ORDER BY c.embedding <=> $${n + 1}::vector LIMIT $${n + 2}) ranked ` +
      `ORDER BY distance, chunk_id`,
    values: [...pred.params, vector, limit],
  };
}

/** Keyword candidates (Postgres full text, 'simple' config) under the same predicate. */
export function keywordStatement(
  pred: Predicate,
  vector: string,
  queryText: string,
  limit: number,
): Statement {
  const n = pred.params.length;
  return {
    text:
      `SELECT ${SELECT_COLS}, c.embedding <=> $${n + 1}::vector AS distance, ` +
      `ts_rank_cd(to_tsvector('simple', c.content), q) AS rank ` +
      `FROM knowledge.chunks c, websearch_to_tsquery('simple', $${n + 2}) q ` +
      `WHERE ${pred.sql} AND to_tsvector('simple', c.content) @@ q ` +
      `ORDER BY rank DESC, c.chunk_id LIMIT $${n + 3}`,
    values: [...pred.params, vector, queryText, limit],
  };
}
