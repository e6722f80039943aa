/**
 * EXPERIMENTS — bench-only SQL that is NOT what the server runs. Each one is a candidate direction for
 * the filtered-search redesign (docs/filtered-search.md), measured by `bench:retrieval
 * --experiments NAME,...` side by side with the server's own path. Nothing here is imported by
 * production code; the authoritative predicate (retrieval/predicate.ts) is reused unchanged wherever
 * an experiment needs the typed ACL test.
 *
 *   guard-ef     server planner, then a relative-contrast check on the HNSW answer; a query whose
 *                k-th distance is close to the corpus-mean distance is re-run with a large ef_search
 *   guard-exact  the same check, falling back to the exact path
 *   int-exact    exact path driven by an intarray-encoded ACL (side table, GIN gin__int_ops) with the
 *                typed jsonb predicate as recheck
 *   relaxed      the server's statements with hnsw.iterative_scan = relaxed_order instead of strict_order
 *   bq-exact     int-exact, but pre-ranked by Hamming distance over a binary-quantized copy, then the
 *                top candidates re-ranked exactly by the full vector
 *   toasted      migration 0009's search functions over a copy of knowledge.chunks stored as before
 *                migration 0012 (vectors out of line: pgvector's STORAGE external, default TOAST
 *                threshold), with the same rows and indexes, their plan count reading that copy: what
 *                migrations 0012 and 0014 change together, measured in one run
 *   before       the search functions as migration 0006 defined them (jsonb prefilter, strict-order
 *                HNSW, exact up to 1,000 rows), installed under bench-only names: the design that
 *                migration 0007 replaced, measured in the same run
 *   floor-exact  the floor, not a design: the cheapest single statement over the same table and integer
 *   floor-hnsw   ACL index, timed like the one-statement reference (settings made before the clock,
 *                vector in binary, one round trip): the authorized rows ranked exactly, or the HNSW
 *                walk under the integer test (relaxed order, the server's ef_search). No count, no
 *                typed ACL test, no content: what any design over these indexes pays at least
 *   floor-copies the same kind of bare statement over another layout: a copy of every row's vector
 *                (halfvec) per ACL id it carries, in a btree on the id that includes the copy, so an
 *                audience's rows are read together by an index-only scan (bench.acl_copies)
 */
import { readFileSync } from 'node:fs';
import type pg from 'pg';
import type { ChunkMetadata, Projection } from '../contract/index.ts';
import { isMatrixProjection } from '../contract/index.ts';
import { toVectorBinary, toVectorParam } from '../retrieval/db/pool.ts';
import { RETRIEVAL_ROLE, sessionState } from '../retrieval/db/roles.ts';
import { preparedName } from '../retrieval/ledger.ts';
import { choosePlan, DEFAULT_PLANNER, searchStatement } from '../retrieval/planner.ts';
import { buildPredicate, searchArguments } from '../retrieval/predicate.ts';
import { searchKnowledge } from '../retrieval/search.ts';
import { wrappedQueryPool } from '../retrieval/testing.ts';
import {
  boundedCountStatement,
  exactStatement,
  hnswStatement,
  type ClientStatement as Statement,
} from './client-statements.ts';

/** One read-only transaction; a connection that failed inside it is discarded, not reused. */
async function readOnly<T>(pool: pg.Pool, f: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let failed = false;
  try {
    await client.query('BEGIN READ ONLY');
    const r = await f(client);
    await client.query('COMMIT');
    return r;
  } catch (err) {
    failed = true;
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release(failed ? true : undefined);
  }
}

export interface RankedIds {
  readonly ids: string[];
  readonly distances?: number[];
  readonly plan: string;
  /** The statement's own time, when the arm times itself (the floor arms); otherwise the call's. */
  readonly ms?: number;
}

export interface ExperimentContext {
  readonly rows: number;
  metadataFor(row: number): ChunkMetadata;
  /** The pool the server's own arms search through (the retrieval role's). */
  readonly serving: pg.Pool;
}

export interface Experiment {
  setup(pool: pg.Pool, ctx: ExperimentContext): Promise<void>;
  run(pool: pg.Pool, projection: Projection, embedding: number[], k: number): Promise<RankedIds>;
}

// ---------------------------------------------------------------------------------------------
// Out-of-distribution guard. Relative contrast (mean distance ÷ k-th neighbour distance; He, Kumar
// and Chang, ICML 2012) predicts how hard a nearest-neighbour query is for graph and hashing indexes:
// near 1 means every row is about equally far, so the greedy graph walk has no gradient to follow.
// With unit-norm rows the mean cosine distance to every row is exactly 1 − q·μ/|q| for the corpus
// mean μ, so the check costs one dot product against a vector maintained at ingest.
// ---------------------------------------------------------------------------------------------

let corpusMean: number[] = [];
const GUARD_CONTRAST = Number(process.env['BENCH_GUARD_CONTRAST'] ?? 1.5);
const GUARD_EF = Number(process.env['BENCH_GUARD_EF'] ?? 400);

async function loadMean(pool: pg.Pool): Promise<void> {
  const r = await pool.query('SELECT avg(embedding)::text AS m FROM knowledge.chunks');
  corpusMean = JSON.parse(String(r.rows[0]?.m)) as number[];
}

export function relativeContrast(q: readonly number[], kthDistance: number): number {
  let dot = 0;
  let nq = 0;
  for (let i = 0; i < q.length; i++) {
    dot += (q[i] ?? 0) * (corpusMean[i] ?? 0);
    nq += (q[i] ?? 0) ** 2;
  }
  const meanDistance = 1 - dot / Math.sqrt(nq);
  return meanDistance / Math.max(kthDistance, 1e-9);
}

function guard(fallback: 'ef' | 'exact'): Experiment {
  return {
    setup: loadMean,
    async run(pool, projection, embedding, k) {
      const first = await searchKnowledge(pool, { projection, embedding, maxResults: k }, DEFAULT_PLANNER);
      const last = first.hits[first.hits.length - 1];
      if (
        first.plan !== 'hnsw' ||
        last === undefined ||
        relativeContrast(embedding, last.distance) >= GUARD_CONTRAST
      )
        return { ids: first.hits.map((h) => h.chunk_id), plan: first.plan };
      const planner =
        fallback === 'ef'
          ? { ...DEFAULT_PLANNER, efSearch: GUARD_EF, maxScanTuples: 200_000, force: 'hnsw' as const }
          : { ...DEFAULT_PLANNER, force: 'exact' as const };
      const again = await searchKnowledge(pool, { projection, embedding, maxResults: k }, planner);
      return { ids: again.hits.map((h) => h.chunk_id), plan: `hnsw>${fallback}` };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Integer-encoded ACL in a narrow side table (chunk_id, acl int[], bq bit(1024)). Ids come from a
// dictionary table, so they are stable and collision-free; the typed jsonb predicate still runs on
// every row that reaches the result (the authoritative test). A real design would add the columns
// to knowledge.chunks; the side table keeps the server's table untouched for the other arms.
// ---------------------------------------------------------------------------------------------

const dict = new Map<string, number>();
const idOf = (key: string) => {
  let v = dict.get(key);
  if (v === undefined) {
    v = dict.size + 1;
    dict.set(key, v);
  }
  return v;
};
const principalKey = (p: { kind: string; network?: string; principal: string }) =>
  `p:${p.kind}:${p.network ?? ''}:${p.principal}`;

let sideReady = false;
async function setupSide(pool: pg.Pool, ctx: ExperimentContext): Promise<void> {
  if (sideReady) return;
  await pool.query('CREATE EXTENSION IF NOT EXISTS intarray');
  await pool.query('DROP TABLE IF EXISTS bench.side');
  await pool.query(
    'CREATE TABLE bench.side (chunk_id text PRIMARY KEY, acl int[] NOT NULL, bq bit(1024) NOT NULL)',
  );
  const BATCH = 1000;
  for (let i = 0; i < ctx.rows; i += BATCH) {
    const ids: string[] = [];
    const acls: string[] = [];
    for (let r = i; r < Math.min(ctx.rows, i + BATCH); r++) {
      const m = ctx.metadataFor(r);
      const acl = [
        idOf(`c:${m.classification}`),
        ...m.allowed_principals.map((p) => idOf(principalKey(p))),
        ...m.allowed_groups.map((g) => idOf(`g:${g}`)),
      ].sort((a, b) => a - b);
      ids.push(`bench-${String(r).padStart(7, '0')}`);
      acls.push(`{${acl.join(',')}}`);
    }
    await pool.query(
      `INSERT INTO bench.side (chunk_id, acl, bq)
       SELECT t.id, t.acl::int[], binary_quantize(c.embedding)::bit(1024)
       FROM unnest($1::text[], $2::text[]) AS t(id, acl) JOIN knowledge.chunks c ON c.chunk_id = t.id`,
      [ids, acls],
    );
  }
  await pool.query('CREATE INDEX side_acl_gin ON bench.side USING gin (acl gin__int_ops)');
  await pool.query('VACUUM ANALYZE bench.side');
  sideReady = true;
}

/** The integer prefilter for a projection: SQL over alias s, and its parameters from $first. */
function intFilter(p: Projection, first: number): { sql: string; params: unknown[] } | null {
  const cls = p.allowed_classifications.map((c) => dict.get(`c:${c}`)).filter((x) => x !== undefined);
  if (isMatrixProjection(p)) {
    const members = p.audience.map((a) => dict.get(principalKey(a)));
    // A member no row names cannot be in any row's ACL: nothing is authorized.
    if (members.some((x) => x === undefined) || cls.length === 0) return null;
    return { sql: `s.acl @> $${first}::int[] AND s.acl && $${first + 1}::int[]`, params: [members, cls] };
  }
  const groups = p.groups.map((g) => dict.get(`g:${g}`)).filter((x) => x !== undefined);
  if (groups.length === 0 || cls.length === 0) return null;
  return { sql: `s.acl && $${first}::int[] AND s.acl && $${first + 1}::int[]`, params: [groups, cls] };
}

function intExact(prerank: number | null): Experiment {
  return {
    setup: setupSide,
    async run(pool, projection, embedding, k) {
      const pred = buildPredicate(projection, 1, 'c');
      const n = pred.params.length;
      const f = intFilter(projection, n + 3);
      if (f === null) return { ids: [], plan: 'empty' };
      const vector = toVectorParam(embedding);
      const text =
        prerank === null
          ? // Exact: the integer filter picks the rows, the typed predicate rechecks them, all ranked.
            `SELECT c.chunk_id FROM bench.side s JOIN knowledge.chunks c ON c.chunk_id = s.chunk_id
             WHERE ${f.sql} AND ${pred.sql} ORDER BY c.embedding <=> $${n + 1}::vector, c.chunk_id LIMIT $${n + 2}`
          : // Binary pre-rank of the integer-authorized rows, exact re-rank of the best `prerank`.
            `WITH cand AS MATERIALIZED (
               SELECT s.chunk_id FROM bench.side s WHERE ${f.sql}
               ORDER BY s.bq <~> binary_quantize($${n + 1}::vector)::bit(1024), s.chunk_id LIMIT ${prerank})
             SELECT c.chunk_id FROM cand JOIN knowledge.chunks c ON c.chunk_id = cand.chunk_id
             WHERE ${pred.sql} ORDER BY c.embedding <=> $${n + 1}::vector, c.chunk_id LIMIT $${n + 2}`;
      const r = await readOnly(pool, async (client) => {
        await client.query("SELECT set_config('enable_seqscan', 'off', true)");
        return client.query(text, [...pred.params, vector, k, ...f.params]);
      });
      return {
        ids: r.rows.map((row) => String(row.chunk_id)),
        plan: prerank === null ? 'int-exact' : `bq${prerank}`,
      };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The server's own statements and plan choice, with the iterative scan in relaxed order (pgvector
// 0.8: results may come slightly out of order; the outer ORDER BY of the HNSW statement re-sorts the
// k rows it keeps).
// ---------------------------------------------------------------------------------------------

const relaxed: Experiment = {
  async setup() {},
  async run(pool, projection, embedding, k) {
    const pred = buildPredicate(projection);
    const vector = toVectorParam(embedding);
    const q = (c: pg.PoolClient, st: Statement) => c.query(st.text, st.values as unknown[]);
    return readOnly(pool, async (client) => {
      const n = Number((await q(client, boundedCountStatement(pred, DEFAULT_PLANNER))).rows[0]?.n ?? 0);
      const plan = choosePlan(n, DEFAULT_PLANNER);
      let rows: { chunk_id: string }[];
      if (plan === 'hnsw') {
        await client.query(
          "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $1, true), " +
            "set_config('hnsw.max_scan_tuples', $2, true), set_config('enable_seqscan', 'off', true), " +
            "set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true), " +
            "set_config('enable_incremental_sort', 'off', true)",
          [String(DEFAULT_PLANNER.efSearch), String(DEFAULT_PLANNER.maxScanTuples)],
        );
        rows = (await q(client, hnswStatement(pred, vector, k))).rows;
        if (rows.length < Math.min(k, n)) rows = (await q(client, exactStatement(pred, vector, k))).rows;
      } else {
        rows = (await q(client, exactStatement(pred, vector, k))).rows;
      }
      return { ids: rows.map((r) => String(r.chunk_id)), plan: plan === 'hnsw' ? 'relaxed' : plan };
    });
  },
};

// ---------------------------------------------------------------------------------------------
// The previous search functions (migration 0006), side by side with the current ones. Their SQL is
// read from the migration file and created under other names in the bench schema; the server's own
// statement is sent to them with the same arguments.
// ---------------------------------------------------------------------------------------------

/**
 * The server's search statement (text query vector, default planner) against search functions
 * installed under bench-only names `bench.<prefix>_search_matrix` and `bench.<prefix>_search_groups`.
 */
async function renamedSearch(
  pool: pg.Pool,
  projection: Projection,
  embedding: number[],
  k: number,
  prefix: string,
): Promise<RankedIds> {
  const st = searchStatement(searchArguments(projection), toVectorParam(embedding), k, null, DEFAULT_PLANNER);
  const text = st.text
    .replace('knowledge.fgentic_search_matrix_v1', `bench.${prefix}_search_matrix`)
    .replace('knowledge.fgentic_search_groups_v1', `bench.${prefix}_search_groups`);
  const r = await readOnly(pool, (client) => client.query(text, st.values as unknown[]));
  const vectorRows = r.rows.filter((row) => row.list === 'vector');
  return {
    ids: vectorRows.map((row) => String(row.chunk_id)),
    plan: `${prefix}:${String(vectorRows[0]?.plan ?? 'exact')}`,
  };
}

const BEFORE_SQL = new URL('../retrieval/db/migrations/0006_search_functions_v1.sql', import.meta.url);
const before: Experiment = {
  async setup(pool) {
    const sql = readFileSync(BEFORE_SQL, 'utf8');
    // Only the two CREATE FUNCTION statements; the grants at the end concern the real functions.
    const body = sql.slice(0, sql.indexOf('REVOKE ALL ON FUNCTION'));
    await pool.query('CREATE SCHEMA IF NOT EXISTS bench');
    await pool.query(
      body
        .replaceAll('knowledge.fgentic_search_matrix_v1', 'bench.before_search_matrix')
        .replaceAll('knowledge.fgentic_search_groups_v1', 'bench.before_search_groups'),
    );
  },
  async run(pool, projection, embedding, k) {
    const st = searchStatement(searchArguments(projection), toVectorParam(embedding), k, null, {
      ...DEFAULT_PLANNER,
      exactThreshold: 1_000,
    });
    const text = st.text
      .replace('knowledge.fgentic_search_matrix_v1', 'bench.before_search_matrix')
      .replace('knowledge.fgentic_search_groups_v1', 'bench.before_search_groups');
    const r = await readOnly(pool, (client) => client.query(text, st.values as unknown[]));
    const vectorRows = r.rows.filter((row) => row.list === 'vector');
    return {
      ids: vectorRows.map((row) => String(row.chunk_id)),
      plan: `before:${String(vectorRows[0]?.plan ?? 'exact')}`,
    };
  },
};

// The search functions as migration 0007 left them (HNSW ties widened from the walk alone), under
// bench-only names, so the cost of the exact tie lookup (migration 0009) is measured side by side.
const V0007_SQL = new URL('../retrieval/db/migrations/0007_integer_acl_search.sql', import.meta.url);
const v0007: Experiment = {
  async setup(pool) {
    const sql = readFileSync(V0007_SQL, 'utf8');
    const from = sql.indexOf('CREATE OR REPLACE FUNCTION knowledge.fgentic_rank_v1(');
    const to = sql.indexOf('-- Executable by every role');
    const body = sql
      .slice(from, to)
      .replace(/^REVOKE ALL ON FUNCTION[^;]*;$/gm, '')
      .replaceAll('knowledge.fgentic_rank_v1', 'bench.v0007_rank')
      .replaceAll('knowledge.fgentic_search_matrix_v1', 'bench.v0007_search_matrix')
      .replaceAll('knowledge.fgentic_search_groups_v1', 'bench.v0007_search_groups');
    await pool.query('CREATE SCHEMA IF NOT EXISTS bench');
    await pool.query(body);
  },
  run: (pool, projection, embedding, k) => renamedSearch(pool, projection, embedding, k, 'v0007'),
};

/**
 * Installs a previous ranking core (the last `fgentic_rank_v1` of the given migration file) with
 * migration 0007's wrappers under bench-only names `bench.<prefix>_…`, optionally over another table.
 */
async function installPrevious(pool: pg.Pool, rankFile: URL, prefix: string, table?: string): Promise<void> {
  const v7 = readFileSync(V0007_SQL, 'utf8');
  const sql = readFileSync(rankFile, 'utf8');
  const rankFrom = sql.indexOf('CREATE OR REPLACE FUNCTION knowledge.fgentic_rank_v1(');
  const rank = sql.slice(rankFrom, sql.indexOf('$function$;', rankFrom) + '$function$;'.length);
  const wrappers = v7.slice(
    v7.indexOf('CREATE OR REPLACE FUNCTION knowledge.fgentic_search_matrix_v1('),
    v7.indexOf('-- Executable by every role'),
  );
  const rename = (text: string) => {
    const renamed = text
      .replace(/^REVOKE ALL ON FUNCTION[^;]*;$/gm, '')
      .replaceAll('knowledge.fgentic_rank_v1', `bench.${prefix}_rank`)
      .replaceAll('knowledge.fgentic_search_matrix_v1', `bench.${prefix}_search_matrix`)
      .replaceAll('knowledge.fgentic_search_groups_v1', `bench.${prefix}_search_groups`);
    return table ? renamed.replace(/knowledge\.chunks\b/g, table) : renamed;
  };
  await pool.query('CREATE SCHEMA IF NOT EXISTS bench');
  await pool.query(rename(rank));
  await pool.query(rename(wrappers));
}

// The ranking core of migration 0014 (the typed test on every authorized row of the exact path,
// every statement planned at each call) with migration 0007's wrappers as that migration planned
// them, under bench-only names over the same table: the per-call costs of migration 0015 side by side.
const V0014_SQL = new URL('../retrieval/db/migrations/0014_acl_count_rows.sql', import.meta.url);
const v0014: Experiment = {
  async setup(pool) {
    await installPrevious(pool, V0014_SQL, 'v0014');
  },
  run: (pool, projection, embedding, k) => renamedSearch(pool, projection, embedding, k, 'v0014'),
};

// Migration 0009's search functions over a copy of the table stored as before migration 0012: the
// vector out of line (pgvector's STORAGE external, default TOAST threshold), the plan's count over
// that copy rather than the narrow ACL copy of migration 0014, JIT as the server configures it. Same
// rows, same index definitions (read back from the catalog), same planner arguments.
const V0009_SQL = new URL('../retrieval/db/migrations/0009_exact_ties.sql', import.meta.url);
const TOASTED = 'bench.chunks_toasted';
const toasted: Experiment = {
  async setup(pool) {
    const rows = await pool.query<{ n: string }>('SELECT count(*) AS n FROM knowledge.chunks');
    const key = `rows=${rows.rows[0]?.n}`;
    await pool.query('CREATE SCHEMA IF NOT EXISTS bench');
    await pool.query('CREATE TABLE IF NOT EXISTS bench.meta (key text PRIMARY KEY, value text NOT NULL)');
    const done = await pool.query("SELECT value FROM bench.meta WHERE key = 'toasted'");
    // Rebuilt whenever the bench reloads knowledge.chunks (the fingerprint row is rewritten then).
    const loaded = await pool.query("SELECT value FROM bench.meta WHERE key = 'fingerprint'");
    const want = `${key};${loaded.rows[0]?.value ?? ''}`;
    if (done.rows[0]?.value !== want) {
      await pool.query(`DROP TABLE IF EXISTS ${TOASTED}`);
      await pool.query(
        `CREATE TABLE ${TOASTED} (LIKE knowledge.chunks INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)`,
      );
      // What every table had before migration 0012.
      await pool.query(`ALTER TABLE ${TOASTED} ALTER COLUMN embedding SET STORAGE EXTERNAL`);
      await pool.query(`ALTER TABLE ${TOASTED} SET (autovacuum_enabled = false)`);
      await pool.query(
        `INSERT INTO ${TOASTED} (chunk_id, content, embedding, metadata) SELECT chunk_id, content, embedding, metadata FROM knowledge.chunks`,
      );
      const defs = await pool.query<{ def: string }>(
        "SELECT pg_get_indexdef(i.indexrelid) AS def FROM pg_index i WHERE i.indrelid = 'knowledge.chunks'::regclass",
      );
      const client = await pool.connect();
      try {
        await client.query("SET maintenance_work_mem = '1GB'");
        await client.query('SET statement_timeout = 0');
        for (const { def } of defs.rows)
          await client.query(
            def
              .replace(
                /^CREATE (UNIQUE )?INDEX (\S+) ON knowledge\.chunks /,
                `CREATE $1INDEX toasted_$2 ON ${TOASTED} `,
              )
              .replace(
                /^CREATE (UNIQUE )?INDEX (\S+) ON ONLY knowledge\.chunks /,
                `CREATE $1INDEX toasted_$2 ON ${TOASTED} `,
              ),
          );
      } finally {
        client.release();
      }
      await pool.query(`VACUUM ANALYZE ${TOASTED}`);
      await pool.query(
        "INSERT INTO bench.meta VALUES ('toasted', $1) ON CONFLICT (key) DO UPDATE SET value = $1",
        [want],
      );
    }
    await installPrevious(pool, V0009_SQL, 'toasted', TOASTED);
  },
  run: (pool, projection, embedding, k) => renamedSearch(pool, projection, embedding, k, 'toasted'),
};

// The search functions as migrations 0015-0017 left them (ids from a query over SQL functions, the
// whole metadata returned), under bench-only names over the same table. What migration 0018 changes,
// side by side, through the server's own search path (searchKnowledge on the retrieval role's pool).
const V0015_SQL = new URL('../retrieval/db/migrations/0015_exact_typed_last.sql', import.meta.url);
let v0017Serving: pg.Pool;
const v0017: Experiment = {
  async setup(pool, ctx) {
    const sql = readFileSync(V0015_SQL, 'utf8');
    const rankFrom = sql.indexOf('CREATE OR REPLACE FUNCTION knowledge.fgentic_rank_v1(');
    const rank = sql.slice(rankFrom, sql.indexOf('$function$;', rankFrom) + '$function$;'.length);
    const wrappers = sql.slice(sql.indexOf('CREATE OR REPLACE FUNCTION knowledge.fgentic_search_matrix_v1('));
    // 0007's SQL level_id, which 0015's wrappers called (0018 re-created it as PL/pgSQL).
    const v7 = readFileSync(V0007_SQL, 'utf8');
    const levelFrom = v7.indexOf('CREATE OR REPLACE FUNCTION fgentic_ids.level_id(');
    const level = v7.slice(levelFrom, v7.indexOf('$$;', v7.indexOf('$$', levelFrom) + 2) + 3);
    const rename = (text: string) =>
      text
        .replaceAll('knowledge.fgentic_rank_v1', 'bench.v0017_rank')
        .replaceAll('knowledge.fgentic_search_matrix_v1', 'bench.v0017_search_matrix')
        .replaceAll('knowledge.fgentic_search_groups_v1', 'bench.v0017_search_groups')
        .replaceAll('fgentic_ids.level_id(', 'bench.v0017_level_id(');
    await pool.query('CREATE SCHEMA IF NOT EXISTS bench');
    await pool.query(rename(level));
    await pool.query(rename(rank));
    await pool.query(rename(wrappers));
    // The functions run as their owner (SECURITY DEFINER); the retrieval role only needs to reach them.
    await pool.query(`GRANT USAGE ON SCHEMA bench TO ${RETRIEVAL_ROLE}`);
    // A prepared statement is renamed with its text (one name, one text per connection).
    v0017Serving = wrappedQueryPool(
      ctx.serving,
      (query) => (text, values, name) =>
        query(rename(text), values, name === undefined ? undefined : preparedName(rename(text))),
    );
  },
  run: async (_pool, projection, embedding, k) => {
    const r = await searchKnowledge(v0017Serving, { projection, embedding, maxResults: k }, DEFAULT_PLANNER);
    return { ids: r.hits.map((h) => h.chunk_id), plan: `v0017:${r.plan}` };
  },
};

// The server's search as it handled its own transaction before this version: on a connection whose
// transactions are not read-only by default (the embedded database, PgBouncer), BEGIN READ ONLY, the
// statement, and the caller waited for the COMMIT too. Same statement, same pool, sent unnamed: on a
// real PostgreSQL, where the serving pool needs no transaction, that is the search without its
// prepared statement.
let awaitedServing: pg.Pool;
const commitAwaited: Experiment = {
  async setup(_pool, ctx) {
    awaitedServing = ctx.serving;
  },
  async run(_pool, projection, embedding, k) {
    const st = searchStatement(
      searchArguments(projection),
      toVectorBinary(embedding),
      k,
      null,
      DEFAULT_PLANNER,
    );
    const client = await awaitedServing.connect();
    const own = sessionState(client)?.readOnly !== true;
    let failed = false;
    try {
      if (own) await client.query('BEGIN READ ONLY');
      const r = await client.query(st.text, st.values as unknown[]);
      if (own) await client.query('COMMIT');
      const vectorRows = r.rows.filter((row) => row.list === 'vector');
      return {
        ids: vectorRows.map((row) => String(row.chunk_id)),
        plan: `awaited:${String(vectorRows[0]?.plan ?? 'exact')}`,
      };
    } catch (err) {
      failed = true;
      if (own) await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release(failed ? true : undefined);
    }
  },
};

/**
 * One statement timed alone, as the one-statement references and the floor arms are: `settings` are
 * made for the session before the clock starts and reset after it stops, whatever happens (the
 * embedded database serves every connection from one session, so nothing may outlive the call; the
 * names are this directory's literals, never input). A connection that could not be reset is
 * discarded.
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

// The floor (docs/filtered-search.md, "The floor"): the cheapest statements that could answer over
// the indexes the server's search uses, timed exactly like the one-statement reference, so a cell's
// ratio says how close any design over pgvector's HNSW and intarray's GIN can come to the goal. They
// skip what makes the server's answer safe and complete (the typed ACL test, the count that chooses
// the plan, ties, the recall guard, content), so they are right only where ids do not collide, as in
// the benchmark's corpus; their recall is reported like every arm's.
const floorIds = new WeakMap<Projection, { all: number[]; any: number[] | null }>();
async function idsOf(
  pool: pg.Pool,
  projection: Projection,
): Promise<{ all: number[]; any: number[] | null }> {
  let ids = floorIds.get(projection);
  if (ids === undefined) {
    const args = searchArguments(projection);
    const classes = [...args.classifications];
    const r =
      args.kind === 'matrix'
        ? await pool.query<{ all: number[]; any: null }>(
            'SELECT fgentic_ids.audience_ids($1::jsonb, $2::text[]) AS all, NULL::integer[] AS any',
            [args.audience, classes],
          )
        : await pool.query<{ all: number[]; any: number[] }>(
            'SELECT ARRAY[fgentic_ids.level_id($1::text[])] AS all, fgentic_ids.group_ids($2::text[]) AS any',
            [classes, [...args.groups]],
          );
    const row = r.rows[0] as { all: number[]; any: number[] | null };
    ids = { all: row.all, any: row.any };
    floorIds.set(projection, ids);
  }
  return ids;
}

function floor(kind: 'exact' | 'hnsw'): Experiment {
  const settings: Record<string, string> =
    kind === 'hnsw'
      ? {
          jit: 'off',
          'hnsw.iterative_scan': 'relaxed_order',
          'hnsw.ef_search': String(DEFAULT_PLANNER.efSearch),
          'hnsw.max_scan_tuples': String(DEFAULT_PLANNER.maxScanTuples),
          enable_seqscan: 'off',
          enable_bitmapscan: 'off',
          enable_sort: 'off',
        }
      : { jit: 'off' };
  return {
    async setup() {},
    async run(pool, projection, embedding, k) {
      const ids = await idsOf(pool, projection);
      const where =
        'c.fgentic_acl OPERATOR(public.@>) $2::integer[]' +
        (ids.any === null ? '' : ' AND c.fgentic_acl OPERATOR(public.&&) $4::integer[]');
      // The exact form keeps the ranking off the HNSW index (OFFSET 0 fences the subquery), as the
      // server's exact path does with its materialized CTE.
      const text =
        kind === 'hnsw'
          ? `SELECT c.chunk_id FROM knowledge.chunks c WHERE ${where} ORDER BY c.embedding OPERATOR(public.<=>) $1::vector LIMIT $3`
          : `SELECT chunk_id FROM (SELECT c.chunk_id, c.embedding OPERATOR(public.<=>) $1::vector AS d FROM knowledge.chunks c WHERE ${where} OFFSET 0) s ORDER BY d, chunk_id LIMIT $3`;
      const values: unknown[] = [
        toVectorBinary(embedding),
        ids.all,
        k,
        ...(ids.any === null ? [] : [ids.any]),
      ];
      const { rows, ms } = await timedStatement(pool, settings, text, values);
      return { ids: rows.map((row) => String(row.chunk_id)), plan: `floor-${kind}`, ms };
    },
  };
}

// Another layout under the same bare statement (docs/filtered-search.md, "The floor"): one copy of
// each row's vector per principal or group id it carries (level ids left out: nearly every row has
// one), as halfvec so that a copy fits in a btree tuple, in an index on the id that includes the
// copy and the row's ids. An audience's rows are then contiguous leaf pages read by an index-only
// scan, instead of one heap page each. The ranking is by the halfvec distance (an exact answer would
// re-rank the candidates within its rounding error by the full vectors; not measured).
const COPIES = 'bench.acl_copies';
const copyIds = new WeakMap<Projection, { ids: number[]; all: number[]; matrix: boolean }>();
const floorCopies: Experiment = {
  async setup(pool) {
    await pool.query('CREATE SCHEMA IF NOT EXISTS bench');
    await pool.query('CREATE TABLE IF NOT EXISTS bench.meta (key text PRIMARY KEY, value text NOT NULL)');
    const loaded = await pool.query("SELECT value FROM bench.meta WHERE key = 'fingerprint'");
    const want = String(loaded.rows[0]?.value ?? '');
    const done = await pool.query("SELECT value FROM bench.meta WHERE key = 'copies'");
    if (done.rows[0]?.value === want) return;
    await pool.query(`DROP TABLE IF EXISTS ${COPIES}`);
    await pool.query(
      `CREATE TABLE ${COPIES} (acl_id integer NOT NULL, chunk_id text NOT NULL, acl integer[] NOT NULL, v public.halfvec(1024) NOT NULL)`,
    );
    await pool.query(`ALTER TABLE ${COPIES} ALTER COLUMN v SET STORAGE PLAIN`);
    await pool.query(`ALTER TABLE ${COPIES} SET (autovacuum_enabled = false)`);
    await pool.query(
      `INSERT INTO ${COPIES} SELECT i, c.chunk_id, c.fgentic_acl, c.embedding::public.halfvec(1024)
       FROM knowledge.chunks c, unnest(c.fgentic_acl) AS u(i)
       WHERE i NOT IN (fgentic_ids.level_id(ARRAY['public']), fgentic_ids.level_id(ARRAY['approved_non_public', 'public']))
       ORDER BY i, c.chunk_id`,
    );
    await pool.query(`CREATE INDEX acl_copies_ios ON ${COPIES} (acl_id) INCLUDE (chunk_id, acl, v)`);
    // The visibility map is what lets the scan skip the heap.
    await pool.query(`VACUUM ANALYZE ${COPIES}`);
    await pool.query(
      "INSERT INTO bench.meta VALUES ('copies', $1) ON CONFLICT (key) DO UPDATE SET value = $1",
      [want],
    );
  },
  async run(pool, projection, embedding, k) {
    let ids = copyIds.get(projection);
    if (ids === undefined) {
      const { all, any } = await idsOf(pool, projection);
      if (any === null) {
        // A Matrix audience: the member id with the fewest copies drives the scan; the rest of the
        // audience and the level are tested on the included ids.
        const r = await pool.query<{ id: number }>(
          `SELECT acl_id AS id FROM ${COPIES} WHERE acl_id = ANY ($1::integer[]) GROUP BY acl_id ORDER BY count(*), acl_id LIMIT 1`,
          [all],
        );
        ids = { ids: r.rows.map((row) => row.id), all, matrix: true };
      } else ids = { ids: any, all, matrix: false };
      copyIds.set(projection, ids);
    }
    // No copy of the driving id: no row is authorized.
    if (ids.ids.length === 0) return { ids: [], plan: 'floor-copies', ms: 0 };
    const text = ids.matrix
      ? `SELECT chunk_id FROM (SELECT a.chunk_id, a.v OPERATOR(public.<=>) $1::public.vector::public.halfvec AS d FROM ${COPIES} a WHERE a.acl_id = $2 AND a.acl OPERATOR(public.@>) $3::integer[] OFFSET 0) s ORDER BY d, chunk_id LIMIT $4`
      : `SELECT chunk_id FROM (SELECT DISTINCT a.chunk_id, a.v OPERATOR(public.<=>) $1::public.vector::public.halfvec AS d FROM ${COPIES} a WHERE a.acl_id = ANY ($2::integer[]) AND a.acl OPERATOR(public.@>) $3::integer[]) s ORDER BY d, chunk_id LIMIT $4`;
    const values = [toVectorBinary(embedding), ids.matrix ? ids.ids[0] : ids.ids, ids.all, k];
    const settings: Record<string, string> = { jit: 'off', enable_seqscan: 'off', enable_bitmapscan: 'off' };
    const { rows, ms } = await timedStatement(pool, settings, text, values);
    return { ids: rows.map((row) => String(row.chunk_id)), plan: 'floor-copies', ms };
  },
};

export const EXPERIMENTS: Record<string, Experiment> = {
  v0007,
  v0017,
  'commit-awaited': commitAwaited,
  v0014,
  toasted,
  before,
  relaxed,
  'guard-ef': guard('ef'),
  'guard-exact': guard('exact'),
  'int-exact': intExact(null),
  'bq-exact': intExact(Number(process.env['BENCH_BQ_PRERANK'] ?? 50)),
  'floor-exact': floor('exact'),
  'floor-hnsw': floor('hnsw'),
  'floor-copies': floorCopies,
};
