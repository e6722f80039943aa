/**
 * How the authorized rows are ranked (docs/filtered-search.md), and the one statement that asks the
 * database for them. Pure.
 *
 * - exact:    every row passing the integer ACL prefilter and the typed jsonb test, cosine-sorted,
 *             tie-break chunk_id.
 * - subgraph: the partial HNSW index of one ACL id that every authorized row carries.
 * - hnsw:     the whole HNSW index under the same filter.
 * A walk uses `hnsw.iterative_scan = relaxed_order`, set with set_config(..., is_local => true) so it
 * lives only in this transaction (a pooled SET would leak to other sessions:
 * docs/upstream.md#deps-pgvector-iterative-scan), and re-sorts by (distance, chunk_id) with the tie
 * group taken from an exact lookup. The choice runs inside the search functions
 * (retrieval/db/migrations/0004_content_in_ranking.sql, rank_v2), so the faster path is also the
 * enforced path: it reads the per-id row counts kept at write time, and after a walk two checks send the
 * query to the exact path (too few rows found; relative contrast below the corpus threshold: the
 * recall guard). `choosePlan` is the count rule in TypeScript, for tests and benchmarks.
 */
import type { SearchArguments } from './predicate.ts';

export type Plan = 'exact' | 'hnsw' | 'subgraph';

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

// A walk of the whole graph under a filter reaches recall@10 0.99 only from a few percent selectivity
// and ~1,000 rows (docs/filtered-search.md), so without a subgraph: exact at or below max(1,000 rows,
// 3 % of the table), the whole graph beyond — recall first. The 3 % share is fixed in the search
// functions (EXACT_SHARE mirrors it).
export const DEFAULT_PLANNER: PlannerOptions = {
  exactThreshold: 1_000,
  efSearch: 100,
  maxScanTuples: 50_000,
};

/** Share of the table at or below which the exact path answers when no subgraph bounds the audience. */
export const EXACT_SHARE = 0.03;

/** Without a subgraph: exact at or below this many authorized rows. */
export function exactBound(options: PlannerOptions, tableRows = 0): number {
  return Math.max(options.exactThreshold, Math.ceil(Math.max(tableRows, 0) * EXACT_SHARE));
}

/**
 * The count rule (before the completeness check and the recall guard, which need the answer):
 * `bound` is the count's upper bound of the authorized rows; `subgraph` whether a built graph bounds
 * the audience.
 */
export function choosePlan(bound: number, options: PlannerOptions, tableRows = 0, subgraph = false): Plan {
  if (options.force) return options.force;
  if (bound <= options.exactThreshold) return 'exact';
  if (subgraph) return 'subgraph';
  return bound <= exactBound(options, tableRows) ? 'exact' : 'hnsw';
}

export interface Statement {
  readonly text: string;
  readonly values: readonly unknown[];
}

const COLUMNS = 'list, ord, plan, chunk_id, content, metadata, distance';
const knobs = (n: number) => `$${n}::text, $${n + 1}::integer, $${n + 2}::integer, $${n + 3}::integer`;

/**
 * The call of the search function for these arguments: typed parameters only. `queryText` (hybrid
 * mode) adds the keyword list; `null` asks for the vector list alone. The vector's type comes from
 * the function's signature, not from a cast: the serving role need not see the schema pgvector
 * lives in (the origin revokes `public` from PUBLIC).
 */
export function searchStatement(
  args: SearchArguments,
  /** pgvector's text form, or its binary form (retrieval/db/pool.ts, toVectorBinary). */
  vector: string | Uint8Array,
  maxResults: number,
  queryText: string | null,
  options: PlannerOptions,
): Statement {
  const tuning = [options.force ?? 'auto', options.exactThreshold, options.efSearch, options.maxScanTuples];
  if (args.kind === 'matrix') {
    return {
      text:
        `SELECT ${COLUMNS} FROM fgentic.search_matrix_v1(` +
        `$1, $2::text[], $3::jsonb, $4::integer, $5::text, ${knobs(6)}) ORDER BY list DESC, ord`,
      values: [vector, [...args.classifications], args.audience, maxResults, queryText, ...tuning],
    };
  }
  return {
    text:
      `SELECT ${COLUMNS} FROM fgentic.search_groups_v1(` +
      `$1, $2::text[], $3::text, $4::text[], $5::integer, $6::text, ${knobs(7)}) ORDER BY list DESC, ord`,
    values: [vector, [...args.classifications], args.policyId, [...args.groups], maxResults, queryText, ...tuning],
  };
}
