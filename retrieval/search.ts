/**
 * Runs one authorized search as one call of the search function for the projection's kind
 * (migration 0006) in one read-only transaction (one statement where the connection's transactions are
 * read-only by default): the function counts authorized rows (bounded),
 * picks the plan, ranks under the predicate and, for hybrid, adds keyword candidates under the same
 * predicate; this module only fuses the two lists. Never post-filters: every row that leaves the
 * database already satisfied the predicate, and the retrieval role can read rows no other way.
 */
import type pg from 'pg';
import type { Projection } from '../contract/index.ts';
import { toVectorBinary } from './db/pool.ts';
import { sessionState } from './db/roles.ts';
import { EMBEDDING_DIMENSIONS } from './embeddings/types.ts';
import { type CapabilityProof, runUnderCheck } from './ledger.ts';
import { DEFAULT_PLANNER, type Plan, type PlannerOptions, searchStatement } from './planner.ts';
import { searchArguments } from './predicate.ts';

export type SearchMode = 'vector' | 'hybrid';

export interface SearchRequest {
  readonly projection: Projection;
  readonly embedding: readonly number[];
  readonly maxResults: number;
  readonly mode?: SearchMode;
  /** Needed for hybrid mode. */
  readonly queryText?: string;
  /** Ledger mode: checked in the search's own statement (retrieval/ledger.ts). */
  readonly capability?: CapabilityProof;
}

export interface SearchHit {
  readonly chunk_id: string;
  readonly content: string;
  readonly metadata: {
    readonly source: { readonly id: string; readonly [k: string]: string };
    readonly classification: string;
  };
  readonly distance: number;
}

export interface SearchResult {
  readonly hits: SearchHit[];
  readonly plan: Plan;
}

export const MAX_RESULTS = 20;
const RRF_K = 60;

function toHit(row: Record<string, unknown>): SearchHit {
  return {
    chunk_id: String(row['chunk_id']),
    content: String(row['content']),
    metadata: row['metadata'] as SearchHit['metadata'],
    distance: Number(row['distance']),
  };
}

/** Reciprocal-rank fusion of two authorized candidate lists. */
export function fuse(vectorHits: readonly SearchHit[], keywordHits: readonly SearchHit[], k: number): SearchHit[] {
  const score = new Map<string, { hit: SearchHit; s: number }>();
  const add = (list: readonly SearchHit[]) =>
    list.forEach((hit, i) => {
      const e = score.get(hit.chunk_id) ?? { hit, s: 0 };
      e.s += 1 / (RRF_K + i + 1);
      score.set(hit.chunk_id, e);
    });
  add(vectorHits);
  add(keywordHits);
  return [...score.values()]
    .sort(
      (a, b) =>
        b.s - a.s ||
        a.hit.distance - b.hit.distance ||
        (a.hit.chunk_id < b.hit.chunk_id ? -1 : a.hit.chunk_id > b.hit.chunk_id ? 1 : 0),
    )
    .slice(0, k)
    .map((e) => e.hit);
}

export async function searchKnowledge(
  pool: pg.Pool,
  req: SearchRequest,
  planner: PlannerOptions = DEFAULT_PLANNER,
): Promise<SearchResult> {
  if (!Number.isSafeInteger(req.maxResults) || req.maxResults < 1 || req.maxResults > MAX_RESULTS)
    throw new RangeError('max_results out of range');
  if (req.embedding.length !== EMBEDDING_DIMENSIONS) throw new RangeError('embedding dimension');
  const args = searchArguments(req.projection);
  const vector = toVectorBinary(req.embedding);
  const hybrid = req.mode === 'hybrid' && req.queryText !== undefined && req.queryText.trim() !== '';
  const statement = searchStatement(args, vector, req.maxResults, hybrid ? (req.queryText ?? null) : null, planner);
  const client = await pool.connect();
  // A connection whose every transaction is read-only (it started so: retrieval/db/pool.ts,
  // PoolOptions.session) runs the statement on its own, in a read-only transaction of its own: one
  // round trip. Any other (unknown included) opens one explicitly.
  const ownTransaction = sessionState(client)?.readOnly !== true;
  let rows: Record<string, unknown>[];
  try {
    if (ownTransaction) await client.query('BEGIN READ ONLY');
    // On the one-statement path the statement is prepared once per connection: the server skips
    // parsing and planning the call at every search (docs/filtered-search.md, "How it works").
    rows = await runUnderCheck(client, statement, req.capability, !ownTransaction);
  } catch (err) {
    if (ownTransaction) await client.query('ROLLBACK').catch(() => {});
    // A connection that failed mid-transaction is discarded rather than reused.
    client.release(true);
    throw err;
  }
  if (ownTransaction)
    // The rows are complete, read under one snapshot, and passed every check in the statement; the
    // transaction only read, so its COMMIT decides nothing and the caller does not wait for it (one
    // round trip less on the embedded database). The connection goes back to the pool only once the
    // COMMIT is done, and is discarded if it fails.
    client.query('COMMIT').then(
      () => client.release(),
      () => client.release(true),
    );
  else client.release();
  // Rows arrive ordered by list ('vector' first) and position in it.
  const vectorHits = rows.filter((r) => r['list'] === 'vector').map(toHit);
  const keywordHits = rows.filter((r) => r['list'] === 'keyword').map(toHit);
  // No authorized row: the function's bounded count was 0, which selects the exact plan.
  const plan = (rows[0]?.['plan'] as Plan | undefined) ?? planner.force ?? 'exact';
  const hits = hybrid ? fuse(vectorHits, keywordHits, req.maxResults) : vectorHits.slice(0, req.maxResults);
  return { hits, plan };
}
