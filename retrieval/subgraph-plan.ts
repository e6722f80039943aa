/**
 * Which ACL ids get a filtered subgraph (a partial HNSW index over the rows carrying the id), given
 * how many rows carry each id and a storage budget. Pure; retrieval/db/subgraphs.ts applies it.
 *
 * An id is worth a graph when its rows are too many for the exact path (more than the exact
 * threshold and at least MIN_SHARE of the table) and few enough that a walk of the whole graph under
 * the filter would visit mostly rows it then drops (at most MAX_SHARE; above it the whole graph's
 * filtered walk is already close to the unfiltered one). Candidates are taken most selective first:
 * that is where the whole-graph walk loses most (docs/filtered-search.md), until the budget is spent.
 * A built graph is kept while its id stays within a wider band (KEEP_MIN_SHARE..KEEP_MAX_SHARE), so a
 * share moving around a limit does not build and drop the same index on every run.
 */

export const MIN_SHARE = 0.01;
export const MAX_SHARE = 0.2;
export const KEEP_MIN_SHARE = 0.005;
export const KEEP_MAX_SHARE = 0.3;
/** Index names are derived from the id, so a name never needs quoting (the migration's CHECK). */
export const SUBGRAPH_INDEX_PATTERN = /^chunks_sub_[0-9a-f]{8}$/;

export interface SubgraphInput {
  readonly tableRows: number;
  /** Rows per ACL id (fgentic.acl_counts). */
  readonly counts: ReadonlyMap<number, number>;
  /** Ids with a registered, valid graph. */
  readonly built: ReadonlySet<number>;
  /** Estimated bytes per indexed row (from the whole graph's size). */
  readonly bytesPerRow: number;
  /** What all subgraphs together may take. */
  readonly budgetBytes: number;
  /** The search's exact threshold: at or below it no walk runs. */
  readonly exactThreshold: number;
}

export interface SubgraphPlan {
  readonly keep: readonly number[];
  readonly build: readonly number[];
  readonly drop: readonly number[];
  /** Estimated bytes of the kept and built graphs. */
  readonly bytes: number;
}

export function subgraphIndexName(id: number): string {
  if (!Number.isInteger(id) || id < -2_147_483_648 || id > 2_147_483_647) throw new RangeError('ACL id');
  return `chunks_sub_${(id >>> 0).toString(16).padStart(8, '0')}`;
}

export function planSubgraphs(input: SubgraphInput): SubgraphPlan {
  const { tableRows, counts, built, exactThreshold } = input;
  const budget = Number.isFinite(input.budgetBytes) ? Math.max(0, input.budgetBytes) : 0;
  const perRow = Number.isFinite(input.bytesPerRow) && input.bytesPerRow > 0 ? input.bytesPerRow : 0;
  const share = (id: number) => (tableRows > 0 ? (counts.get(id) ?? 0) / tableRows : 0);
  const rows = (id: number) => counts.get(id) ?? 0;
  const within = (id: number, lo: number, hi: number) =>
    rows(id) > exactThreshold && share(id) >= lo && share(id) <= hi;
  const bySelectivity = (a: number, b: number) => rows(a) - rows(b) || a - b;

  let bytes = 0;
  const keep: number[] = [];
  const drop: number[] = [];
  // Built graphs first (they cost nothing more to keep), most selective first, within the budget.
  for (const id of [...built].sort(bySelectivity)) {
    const cost = rows(id) * perRow;
    if (within(id, KEEP_MIN_SHARE, KEEP_MAX_SHARE) && bytes + cost <= budget) {
      keep.push(id);
      bytes += cost;
    } else drop.push(id);
  }
  const build: number[] = [];
  const candidates = [...counts.keys()].filter((id) => !built.has(id) && within(id, MIN_SHARE, MAX_SHARE));
  for (const id of candidates.sort(bySelectivity)) {
    const cost = rows(id) * perRow;
    if (bytes + cost > budget) continue;
    build.push(id);
    bytes += cost;
  }
  return { keep, build, drop: drop.sort((a, b) => a - b), bytes };
}
