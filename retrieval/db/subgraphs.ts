/**
 * Builds and drops the filtered subgraphs that retrieval/subgraph-plan.ts chooses, on the project's
 * own table only. Each index is built and dropped CONCURRENTLY, so writers and searches go on
 * meanwhile; the search chooses a graph only while its row is registered in fgentic.subgraphs and
 * its index is valid (retrieval/db/migrations/0004_content_in_ranking.sql, rank_v2). A build
 * registers its row after the index is valid; a drop removes the row before the index. Runs as the
 * table's owner (`migrate`, or `sync` under the owner's login); one run at a time (an advisory
 * lock).
 */
import type pg from 'pg';
import { DEFAULT_PLANNER } from '../planner.ts';
import { planSubgraphs, SUBGRAPH_INDEX_PATTERN, subgraphIndexName } from '../subgraph-plan.ts';

const WHOLE_GRAPH = 'fgentic.chunks_embedding_hnsw_idx';
// Every run takes the same advisory lock (hashtext of this key).
const LOCK_KEY = 'fgentic.subgraphs';

export interface SubgraphOptions {
  /** What all subgraphs together may take; default: the whole graph's own size. 0 drops them all. */
  readonly budgetBytes?: number;
  readonly exactThreshold?: number;
  readonly onProgress?: (message: string) => void;
}

export interface SubgraphReport {
  readonly skipped?: 'no_vector_index' | 'busy';
  readonly kept: number;
  readonly built: number;
  readonly dropped: number;
  readonly bytes: number;
}

export async function maintainSubgraphs(
  client: pg.PoolClient,
  owner: string,
  options: SubgraphOptions = {},
): Promise<SubgraphReport> {
  const none = { kept: 0, built: 0, dropped: 0, bytes: 0 };
  await client.query("SELECT set_config('role', $1, false)", [owner]);
  const locked = await client.query('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [LOCK_KEY]);
  if (locked.rows[0]?.ok !== true) {
    await client.query('RESET ROLE');
    return { ...none, skipped: 'busy' };
  }
  try {
    // Index builds outlast the pool's per-statement limit, which is sized for searches.
    await client.query("SELECT set_config('statement_timeout', '0', false)");
    const whole = await client.query<{ bytes: string; options: string[] | null }>(
      `SELECT pg_relation_size(c.oid)::text AS bytes, c.reloptions AS options
         FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid AND i.indisvalid
        WHERE c.oid = to_regclass($1)`,
      [WHOLE_GRAPH],
    );
    const wholeRow = whole.rows[0];
    const strays = await dropStrays(client);
    if (!wholeRow) return { ...none, dropped: strays, skipped: 'no_vector_index' };

    const stats = await client.query<{ n: string }>(
      'SELECT coalesce((SELECT row_count FROM fgentic.search_stats), 0)::text AS n',
    );
    const tableRows = Number(stats.rows[0]?.n ?? 0);
    const exactThreshold = options.exactThreshold ?? DEFAULT_PLANNER.exactThreshold;
    const counts = await client.query<{ id: number; rows: string }>(
      'SELECT id, rows::text AS rows FROM fgentic.acl_counts WHERE rows > $1',
      [exactThreshold],
    );
    const built = await client.query<{ id: number }>(
      `SELECT g.id FROM fgentic.subgraphs g
         JOIN pg_class x ON x.relname = g.index_name AND x.relnamespace = 'fgentic'::regnamespace
         JOIN pg_index i ON i.indexrelid = x.oid AND i.indisvalid AND i.indisready`,
    );
    const wholeBytes = Number(wholeRow.bytes);
    const plan = planSubgraphs({
      tableRows,
      counts: new Map(counts.rows.map((r) => [r.id, Number(r.rows)])),
      built: new Set(built.rows.map((r) => r.id)),
      bytesPerRow: tableRows > 0 ? wholeBytes / tableRows : 0,
      budgetBytes: options.budgetBytes ?? wholeBytes,
      exactThreshold,
    });

    for (const id of plan.drop) {
      await client.query('DELETE FROM fgentic.subgraphs WHERE id = $1', [id]);
      await client.query(`DROP INDEX CONCURRENTLY IF EXISTS fgentic.${subgraphIndexName(id)}`);
      options.onProgress?.(`subgraph ${id}: dropped`);
    }
    const withClause = graphOptions(wholeRow.options);
    for (const id of plan.build) {
      const name = subgraphIndexName(id);
      options.onProgress?.(`subgraph ${id}: building`);
      await client.query(
        `CREATE INDEX CONCURRENTLY ${name} ON fgentic.chunks USING hnsw (embedding public.vector_cosine_ops)${withClause} WHERE acl @> '{${id}}'::integer[]`,
      );
      const rows = await client.query<{ n: string }>('SELECT rows::text AS n FROM fgentic.acl_counts WHERE id = $1', [
        id,
      ]);
      await client.query(
        `INSERT INTO fgentic.subgraphs (id, index_name, built_rows) VALUES ($1, $2, $3)
         ON CONFLICT (id) DO UPDATE SET index_name = EXCLUDED.index_name, built_rows = EXCLUDED.built_rows,
           built_at = statement_timestamp()`,
        [id, name, rows.rows[0]?.n ?? '0'],
      );
    }
    return {
      kept: plan.keep.length,
      built: plan.build.length,
      dropped: plan.drop.length + strays,
      bytes: Math.round(plan.bytes),
    };
  } finally {
    await client.query('RESET statement_timeout').catch(() => {});
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [LOCK_KEY]).catch(() => {});
    await client.query('RESET ROLE').catch(() => {});
  }
}

/**
 * Registered rows whose index is gone or invalid, and subgraph indexes no row registers (a build
 * that failed half-way leaves an invalid index): removed, rows first.
 */
async function dropStrays(client: pg.PoolClient): Promise<number> {
  const rows = await client.query<{ id: number; index_name: string }>(
    `SELECT g.id, g.index_name FROM fgentic.subgraphs g
      WHERE NOT EXISTS (
        SELECT 1 FROM pg_class x JOIN pg_index i ON i.indexrelid = x.oid AND i.indisvalid AND i.indisready
         WHERE x.relname = g.index_name AND x.relnamespace = 'fgentic'::regnamespace)`,
  );
  for (const r of rows.rows) await client.query('DELETE FROM fgentic.subgraphs WHERE id = $1', [r.id]);
  const orphans = await client.query<{ name: string }>(
    `SELECT x.relname AS name FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
      WHERE i.indrelid = 'fgentic.chunks'::regclass AND x.relname LIKE 'chunks\\_sub\\_%'
        AND NOT EXISTS (SELECT 1 FROM fgentic.subgraphs g WHERE g.index_name = x.relname)`,
  );
  let dropped = 0;
  for (const o of [...rows.rows.map((r) => r.index_name), ...orphans.rows.map((r) => r.name)]) {
    if (!SUBGRAPH_INDEX_PATTERN.test(o)) continue;
    await client.query(`DROP INDEX CONCURRENTLY IF EXISTS fgentic.${o}`);
    dropped++;
  }
  return dropped;
}

/** The whole graph's build options (m, ef_construction), so every subgraph is built alike. */
function graphOptions(reloptions: string[] | null): string {
  const parts = (reloptions ?? [])
    .map((o) => /^(m|ef_construction)=([0-9]{1,4})$/.exec(o))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => `${m[1]} = ${m[2]}`);
  return parts.length > 0 ? ` WITH (${parts.join(', ')})` : '';
}
