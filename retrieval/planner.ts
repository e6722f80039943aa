/**
 * How the authorized rows are ranked (docs/decisions.md#d8-ranking), and the one statement that asks the
 * database for them. Pure.
 *
 * - exact: materialize the authorized set (GIN-assisted), cosine-sort it, tie-break chunk_id.
 * - hnsw:  the HNSW index with the SAME WHERE and `hnsw.iterative_scan = strict_order`, set with
 *          set_config(..., is_local => true) so it lives only in this transaction (a pooled SET
 *          would leak to other sessions: docs/upstream.md#deps-pgvector-iterative-scan).
 * The choice itself runs inside the search functions of migration 0006 (so the faster path is also
 * the enforced path): a bounded count over authorized rows only (`LIMIT threshold + 1`), which never
 * counts unauthorized rows and never leaves the database. `choosePlan` is the same rule in
 * TypeScript, for tests and benchmarks. The threshold is measured in bench/retrieval.ts.
 */
import type { SearchArguments } from './predicate.ts';

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

export function choosePlan(boundedCount: number, options: PlannerOptions): Plan {
  if (options.force) return options.force;
  return boundedCount <= options.exactThreshold ? 'exact' : 'hnsw';
}

export interface Statement {
  readonly text: string;
  readonly values: readonly unknown[];
}

const COLUMNS = 'list, ord, plan, chunk_id, content, metadata, distance';
const knobs = (n: number) => `$${n}::text, $${n + 1}::integer, $${n + 2}::integer, $${n + 3}::integer`;

/**
 * The call of the search function for these arguments: typed parameters only. `queryText` (hybrid
 * mode) adds the keyword list; `null` asks for the vector list alone.
 */
export function searchStatement(
  args: SearchArguments,
  vector: string,
  maxResults: number,
  queryText: string | null,
  options: PlannerOptions,
): Statement {
  const tuning = [options.force ?? 'auto', options.exactThreshold, options.efSearch, options.maxScanTuples];
  if (args.kind === 'matrix') {
    return {
      text:
        `SELECT ${COLUMNS} FROM knowledge.fgentic_search_matrix_v1(` +
        `$1::vector, $2::text[], $3::jsonb, $4::integer, $5::text, ${knobs(6)}) ORDER BY list DESC, ord`,
      values: [vector, [...args.classifications], args.audience, maxResults, queryText, ...tuning],
    };
  }
  return {
    text:
      `SELECT ${COLUMNS} FROM knowledge.fgentic_search_groups_v1(` +
      `$1::vector, $2::text[], $3::text, $4::text[], $5::integer, $6::text, ${knobs(7)}) ORDER BY list DESC, ord`,
    values: [
      vector,
      [...args.classifications],
      args.policyId,
      [...args.groups],
      maxResults,
      queryText,
      ...tuning,
    ],
  };
}
