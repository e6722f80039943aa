/**
 * The bare statements bench/retrieval.ts times next to the server (docs/filtered-search.md,
 * "Figures"): the query a pgvector user writes (the peer), and the floor — the cheapest statements
 * over the indexes the server's search uses. None of them is what the server runs: they skip what
 * makes its answer safe and complete (the typed ACL test on the origin row, ties at the cut-off, the
 * recall guard, the content), and they are right only where ACL ids do not collide, as in the
 * benchmark's corpus. Their recall is measured like the server's.
 */
import type pg from 'pg';
import type { Projection } from '../contract/index.ts';
import { toVectorBinary } from '../retrieval/db/pool.ts';
import { DEFAULT_PLANNER } from '../retrieval/planner.ts';
import { searchArguments } from '../retrieval/predicate.ts';

export interface RankedIds {
  ids: string[];
  distances?: number[];
  plan: string;
  /** The statement's own time, when the arm measured it without its setup. */
  ms?: number;
}

/**
 * One statement on one connection: `settings` are made for the session before the clock starts and
 * reset after it stops, and the vector goes in binary, so the time is one round trip and the query
 * alone — the cheapest form an application tuned this way can send.
 */
export async function timedStatement(
  pool: pg.Pool,
  settings: Readonly<Record<string, string>>,
  text: string,
  values: readonly unknown[],
): Promise<{ rows: Record<string, unknown>[]; ms: number }> {
  const client = await pool.connect();
  const names = Object.keys(settings);
  let clean = true;
  try {
    for (const n of names) await client.query('SELECT set_config($1, $2, false)', [n, settings[n]]);
    const t0 = process.hrtime.bigint();
    const r = await client.query(text, values as unknown[]);
    return { rows: r.rows, ms: Number(process.hrtime.bigint() - t0) / 1e6 };
  } finally {
    for (const n of names)
      await client.query(`RESET ${n}`).catch(() => {
        clean = false;
      });
    client.release(clean ? undefined : true);
  }
}

interface Ids {
  all: number[];
  any: number[] | null;
  /** The subgraph that bounds the audience, if one is built (its id). */
  subgraph: number | null;
}
const known = new WeakMap<Projection, Ids>();

/** The audience's integer ids as the search functions compute them (the database's own functions). */
async function idsOf(pool: pg.Pool, projection: Projection): Promise<Ids> {
  const cached = known.get(projection);
  if (cached) return cached;
  const args = searchArguments(projection);
  const classes = [...args.classifications];
  const r =
    args.kind === 'matrix'
      ? await pool.query<{ all: number[]; any: null }>(
          'SELECT fgentic.audience_ids($1::jsonb, $2::text[]) AS all, NULL::integer[] AS any',
          [args.audience, classes],
        )
      : await pool.query<{ all: number[]; any: number[] }>(
          'SELECT ARRAY[fgentic.level_id($1::text[])] AS all, fgentic.group_ids($2::text[]) AS any',
          [classes, [...args.groups]],
        );
  const row = r.rows[0] as { all: number[]; any: number[] | null };
  const bounding = row.any === null ? row.all : row.any.length === 1 ? [...row.any, ...row.all] : row.all;
  const g = await pool.query<{ id: number }>(
    `SELECT g.id FROM fgentic.subgraphs g JOIN fgentic.acl_counts c ON c.id = g.id
      WHERE g.id = ANY ($1::integer[]) ORDER BY c.rows, g.id LIMIT 1`,
    [bounding],
  );
  const ids = { all: row.all, any: row.any, subgraph: g.rows[0]?.id ?? null };
  known.set(projection, ids);
  return ids;
}

export type BareArm = (pool: pg.Pool, projection: Projection, embedding: number[], k: number) => Promise<RankedIds>;

const where = (ids: Ids) => 'd.acl @> $2::integer[]' + (ids.any === null ? '' : ' AND d.acl && $4::integer[]');
const values = (ids: Ids, embedding: number[], k: number) => [
  toVectorBinary(embedding),
  ids.all,
  k,
  ...(ids.any === null ? [] : [ids.any]),
];

/**
 * The peer: the filtered query pgvector's README shows, over the same integer ACL column and GIN
 * index — iterative scan in relaxed order at the README's ef_search 40, the planner left free.
 */
export const peer: BareArm = async (pool, projection, embedding, k) => {
  const ids = await idsOf(pool, projection);
  const { rows, ms } = await timedStatement(
    pool,
    { 'hnsw.iterative_scan': 'relaxed_order', 'hnsw.ef_search': '40' },
    `SELECT d.chunk_id FROM fgentic.chunks d WHERE ${where(ids)} ORDER BY d.embedding <=> $1::vector LIMIT $3`,
    values(ids, embedding, k),
  );
  return { ids: rows.map((r) => String(r.chunk_id)), plan: 'peer', ms };
};

const walkSettings = {
  jit: 'off',
  'hnsw.iterative_scan': 'relaxed_order',
  'hnsw.ef_search': String(DEFAULT_PLANNER.efSearch),
  'hnsw.max_scan_tuples': String(DEFAULT_PLANNER.maxScanTuples),
  enable_seqscan: 'off',
  enable_bitmapscan: 'off',
  enable_sort: 'off',
};

/** Floor: the whole graph's filtered walk at the server's ef_search, then re-sorted. */
export const floorHnsw: BareArm = async (pool, projection, embedding, k) => {
  const ids = await idsOf(pool, projection);
  const { rows, ms } = await timedStatement(
    pool,
    walkSettings,
    `SELECT d.chunk_id FROM fgentic.chunks d WHERE ${where(ids)} ORDER BY d.embedding <=> $1::vector LIMIT $3`,
    values(ids, embedding, k),
  );
  return { ids: rows.map((r) => String(r.chunk_id)), plan: 'floor-hnsw', ms };
};

/** Floor: the walk of the audience's subgraph (its id a literal, so the partial index is provable). */
export const floorSubgraph: BareArm = async (pool, projection, embedding, k) => {
  const ids = await idsOf(pool, projection);
  if (ids.subgraph === null) return { ids: [], plan: 'floor-subgraph:none', ms: Number.NaN };
  const { rows, ms } = await timedStatement(
    pool,
    walkSettings,
    `SELECT d.chunk_id FROM fgentic.chunks d WHERE d.acl @> '{${ids.subgraph}}'::integer[] AND ${where(ids)}
      ORDER BY d.embedding <=> $1::vector LIMIT $3`,
    values(ids, embedding, k),
  );
  return { ids: rows.map((r) => String(r.chunk_id)), plan: 'floor-subgraph', ms };
};

/** Floor: the exact ranking of the integer-authorized rows from a bitmap of the ACL index. */
export const floorExact: BareArm = async (pool, projection, embedding, k) => {
  const ids = await idsOf(pool, projection);
  const { rows, ms } = await timedStatement(
    pool,
    { jit: 'off', enable_seqscan: 'off', enable_indexscan: 'off' },
    `SELECT chunk_id FROM (SELECT d.chunk_id, d.embedding <=> $1::vector AS dist FROM fgentic.chunks d
      WHERE ${where(ids)} OFFSET 0) s ORDER BY dist, chunk_id LIMIT $3`,
    values(ids, embedding, k),
  );
  return { ids: rows.map((r) => String(r.chunk_id)), plan: 'floor-exact', ms };
};

export const BARE_ARMS: Record<string, BareArm> = {
  peer,
  'floor-exact': floorExact,
  'floor-hnsw': floorHnsw,
  'floor-subgraph': floorSubgraph,
};
