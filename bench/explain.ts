/**
 * What `explain` costs on the embedded database, side by side with the search's own question: for a
 * room of 1, 4 and 16 readers, the unbounded count of authorized rows under the search predicate
 * (one pass over the table with the same WHERE; the reference), `explain --summary` (every rule per
 * row, grouped), and `explain --source` (one source's rows, every rule per row).
 *
 * Rows carry random ACLs over a pool of 40 principals (each listed with probability 0.9, so larger
 * rooms see less), 70 % public, 20 % approved_non_public, 10 % restricted, 100 sources. The HNSW
 * index is dropped: explain never ranks, and inserts are faster without it.
 *
 * Env: BENCH_ROWS (20000), BENCH_REPEATS (7), BENCH_OUT (bench/results/explain.json).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import type { ChunkMetadata, MatrixPrincipal } from '../contract/index.ts';
import { detailStatement, type Subject, subjectProjection, summarize, summaryStatement } from '../explain/core.ts';
import { startEmbeddedDatabase } from '../retrieval/db/embedded.ts';
import { migrate } from '../retrieval/db/migrate.ts';
import { createPool } from '../retrieval/db/pool.ts';
import { writeChunks } from '../retrieval/ingest/store.ts';
import { buildPredicate } from '../retrieval/predicate.ts';
import { prng } from '../testkit/retrieval.ts';

const N = Number(process.env['BENCH_ROWS'] ?? 20_000);
const R = Number(process.env['BENCH_REPEATS'] ?? 7);
const OUT = process.env['BENCH_OUT'] ?? 'bench/results/explain.json';
const rand = prng(18_180_018);
const POOL: MatrixPrincipal[] = Array.from({ length: 40 }, (_, i) => ({
  kind: 'matrix',
  principal: `@reader-${i}:bench.example`,
}));
const VECTOR = Array.from({ length: 1024 }, (_, i) => (i === 0 ? 1 : 0));

function metadata(i: number): ChunkMetadata {
  const r = rand();
  const classification = r < 0.7 ? 'public' : r < 0.9 ? 'approved_non_public' : 'restricted';
  const principals = POOL.filter(() => rand() < 0.9);
  return {
    source: { id: `bench/source-${i % 100}` },
    classification,
    allowed_principals: principals.length > 0 ? principals : [POOL[0]!],
    allowed_groups: [],
  };
}

function room(size: number): Subject {
  return {
    kind: 'room',
    roomId: '!bench:bench.example',
    audience: POOL.slice(0, size),
    ceiling: ['approved_non_public', 'public'],
    notes: [],
  };
}

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

async function main() {
  const db = await startEmbeddedDatabase();
  const pool = createPool({ connectionString: db.url, max: 1, statementTimeoutMs: 600_000 });
  try {
    await migrate(pool);
    await pool.query('DROP INDEX fgentic.chunks_embedding_hnsw_idx');
    const started = Date.now();
    for (let i = 0; i < N; i += 1000) {
      const chunks = Array.from({ length: Math.min(1000, N - i) }, (_, k) => ({
        chunk_id: `chunk-${i + k}`,
        content: `bench row ${i + k}`,
        metadata: metadata(i + k),
        embedding: VECTOR,
      }));
      await writeChunks(pool, { chunks });
    }
    process.stderr.write(`loaded ${N} rows in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
    await pool.query('ANALYZE knowledge.chunks');

    const results: Record<string, unknown>[] = [];
    for (const size of [1, 4, 16]) {
      const s = room(size);
      const pred = buildPredicate(subjectProjection(s));
      const count = {
        text: `SELECT count(*)::int AS n FROM knowledge.chunks c WHERE ${pred.sql}`,
        values: pred.params,
      };
      const summary = summaryStatement(s, { kind: 'all' });
      const detail = detailStatement(s, { kind: 'source', id: 'bench/source-7' }, { titles: false, limit: 1000 });
      const times: Record<'count' | 'summary' | 'detail', number[]> = { count: [], summary: [], detail: [] };
      let visible = 0;
      // Interleaved so that load on the machine hits every arm alike.
      for (let k = 0; k < R; k++) {
        for (const [arm, st] of [
          ['count', count],
          ['summary', summary],
          ['detail', detail],
        ] as const) {
          const t0 = performance.now();
          const res = await pool.query(st.text, st.values as unknown[]);
          times[arm].push(performance.now() - t0);
          // The summary's retrievable count is the search predicate's count, or the bench is wrong.
          if (arm === 'count') visible = res.rows[0].n;
          if (arm === 'summary' && summarize(s, res.rows).visible !== visible) throw new Error('counts differ');
        }
      }
      const row = {
        readers: size,
        visible,
        count_p50_ms: p50(times.count),
        summary_p50_ms: p50(times.summary),
        detail_source_p50_ms: p50(times.detail),
        summary_over_count: p50(times.summary) / p50(times.count),
      };
      results.push(row);
    }
    const fmt = (x: unknown) => (typeof x === 'number' && !Number.isInteger(x) ? x.toFixed(2) : String(x));
    const head = ['readers', 'visible', 'count p50 ms', 'summary p50 ms', 'detail(source) p50 ms', 'summary ÷ count'];
    const keys = ['readers', 'visible', 'count_p50_ms', 'summary_p50_ms', 'detail_source_p50_ms', 'summary_over_count'];
    console.log(`explain on ${N} rows (PGlite via pg), ${R} repeats, p50`);
    console.log(head.join(' | '));
    for (const r of results) console.log(keys.map((k) => fmt(r[k])).join(' | '));
    mkdirSync('bench/results', { recursive: true });
    writeFileSync(OUT, `${JSON.stringify({ rows: N, repeats: R, results }, null, 2)}\n`);
  } finally {
    await pool.end().catch(() => {});
    await db.close();
  }
}

main().catch((e) => {
  console.error(`bench failed: ${(e as Error).message}`);
  process.exitCode = 1;
});
