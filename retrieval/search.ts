/**
 * Runs one authorized search in one read-only transaction: bounded authorized count → plan →
 * ranked query under the predicate (→ keyword candidates under the same predicate for hybrid).
 * Never post-filters: every row that leaves the database already satisfied the predicate.
 */
import type pg from 'pg';
import type { Projection } from '../contract/index.ts';
import { toVectorParam } from './db/pool.ts';
import {
  boundedCountStatement,
  choosePlan,
  DEFAULT_PLANNER,
  exactStatement,
  hnswSettings,
  hnswStatement,
  keywordStatement,
  type Plan,
  type PlannerOptions,
  type Statement,
} from './planner.ts';
import { buildPredicate } from './predicate.ts';

export type SearchMode = 'vector' | 'hybrid';

export interface SearchRequest {
  readonly projection: Projection;
  readonly embedding: readonly number[];
  readonly maxResults: number;
  readonly mode?: SearchMode;
  /** Needed for hybrid mode. */
  readonly queryText?: string;
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

function run(client: pg.PoolClient, s: Statement): Promise<pg.QueryResult> {
  return client.query(s.text, s.values as unknown[]);
}

function toHit(row: Record<string, unknown>): SearchHit {
  return {
    chunk_id: String(row['chunk_id']),
    content: String(row['content']),
    metadata: row['metadata'] as SearchHit['metadata'],
    distance: Number(row['distance']),
  };
}

/** Reciprocal-rank fusion of two authorized candidate lists. */
export function fuse(
  vectorHits: readonly SearchHit[],
  keywordHits: readonly SearchHit[],
  k: number,
): SearchHit[] {
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
  if (req.embedding.length !== 1024) throw new RangeError('embedding dimension');
  const pred = buildPredicate(req.projection);
  const vector = toVectorParam(req.embedding);
  const hybrid = req.mode === 'hybrid' && req.queryText !== undefined && req.queryText.trim() !== '';
  const depth = hybrid ? Math.max(req.maxResults * 3, 30) : req.maxResults;
  const client = await pool.connect();
  let failed = false;
  try {
    await client.query('BEGIN READ ONLY');
    const counted = await run(client, boundedCountStatement(pred, planner));
    const authorized = Number(counted.rows[0]?.n ?? 0);
    const plan = choosePlan(authorized, planner);
    let rows: Record<string, unknown>[];
    if (plan === 'hnsw') {
      await run(client, hnswSettings(planner));
      rows = (await run(client, hnswStatement(pred, vector, depth))).rows;
      // The iterative scan can stop early (max_scan_tuples); never answer with fewer rows than exist.
      if (rows.length < Math.min(depth, authorized))
        rows = (await run(client, exactStatement(pred, vector, depth))).rows;
    } else {
      rows = (await run(client, exactStatement(pred, vector, depth))).rows;
    }
    let hits = rows.map(toHit);
    if (hybrid) {
      const kw = (await run(client, keywordStatement(pred, vector, req.queryText ?? '', depth))).rows.map(
        toHit,
      );
      hits = fuse(hits, kw, req.maxResults);
    } else {
      hits = hits.slice(0, req.maxResults);
    }
    await client.query('COMMIT');
    return { hits, plan };
  } catch (err) {
    failed = true;
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    // A connection that failed mid-transaction is discarded rather than reused.
    client.release(failed ? true : undefined);
  }
}
