/**
 * Ingest benchmark on the embedded database (PGlite + pgvector, persisted to a temporary directory)
 * with the local embedder, through the production entry point (ingestion role, single-writer lease).
 * Four arms side by side in one run, each on its own fresh database, the arms alternating workload by
 * workload so a change in machine load hits all of them alike:
 *   rows       today's write path held to row-by-row writes (`path: 'rows'`: every index maintained per
 *              row; an ACL change updated in place with the graph kept)
 *   bulk       held to the bulk path (`path: 'bulk'`: indexes dropped and rebuilt for any write, an
 *              ACL change of part of the table included), the other side of the threshold
 *   after      as the CLI runs it (`auto`), on a database without filtered subgraphs
 *   after+sub  the same, with the filtered subgraphs present: before each workload
 *              `maintainSubgraphs` runs as `migrate` runs it (exact threshold BENCH_EXACT_THRESHOLD,
 *              default 50, so that ids of a few percent of a 5,000-row table get one), untimed
 * Two rates per run: committed (the rows and their ACL indexes are committed and searchable, exactly)
 * and ready (the call returned: vector indexes built, table maintained).
 * Workloads:
 *   fresh-N  N new chunks into an empty table (no subgraph can exist yet)
 *   same     the largest input again, unchanged
 *   acl      the largest input with every chunk's ACL changed (its principal; the groups stay)
 *   acl-2/3  then two thirds of those chunks with their ACL changed again (below the threshold)
 *   grow     a fifth of the largest size in new chunks of new sources (row by row on `auto`: the
 *            whole graph and every subgraph a row's ids select take an insertion per row)
 * Corpus ACL: every chunk one Matrix principal, a third the group partner/org-b/docs, and five groups
 * partner/org-c/share-K carried by 2, 4, 6, 8 and 10 % of the chunks (the subgraphs' ids).
 * After each workload of after+sub the valid subgraph indexes are counted: a bulk write drops them
 * with the whole graph and builds them again after its commit (fgentic.deferred_indexes).
 * Then the search table (BENCH_SEARCH=0 skips it). Prints tables, writes bench/results/ingest.json.
 * BENCH_CHUNKS (default "1000,5000") lists the fresh sizes.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { migrate } from '../retrieval/db/migrate.ts';
import { createPool } from '../retrieval/db/pool.ts';
import { asRole, bootstrapDatabase, INGESTION_ROLE, OWNER_ROLE, RETRIEVAL_ROLE } from '../retrieval/db/roles.ts';
import { maintainSubgraphs, type SubgraphReport } from '../retrieval/db/subgraphs.ts';
import { createLocalEmbedder } from '../retrieval/embeddings/local.ts';
import { ensureProfile } from '../retrieval/embeddings/profile.ts';
import { type IngestRecord, ingestRecords, prepareRecords } from '../retrieval/ingest/jsonl.ts';
import { withIngestionLease } from '../retrieval/ingest/lease.ts';
import { VECTOR_INDEX_MIN_ROWS, writeChunks } from '../retrieval/ingest/store.ts';
import { DEFAULT_PLANNER } from '../retrieval/planner.ts';
import { searchKnowledge } from '../retrieval/search.ts';
import { decodeFixture, matrixHeader, P } from '../testkit/retrieval.ts';

const SIZES = (process.env['BENCH_CHUNKS'] ?? '1000,5000').split(',').map(Number);
const WORKLOADS = process.env['BENCH_WORKLOADS'] !== '0';
const SEARCH = process.env['BENCH_SEARCH'] !== '0';
const EXACT_THRESHOLD = Number(process.env['BENCH_EXACT_THRESHOLD'] ?? 50);
for (const n of [...SIZES, EXACT_THRESHOLD])
  if (!Number.isInteger(n) || n < 1) throw new Error('BENCH_CHUNKS and BENCH_EXACT_THRESHOLD: positive integers');
const embedder = createLocalEmbedder();

const WORDS =
  'policy travel expense handbook roadmap incident backup partner guide review quarter budget release'.split(' ');
/** Chunks out of every 50 that carry partner/org-c/share-K: 2, 4, 6, 8 and 10 %. */
const SHARES = [1, 2, 3, 4, 5];
function records(n: number, principal: string, from = 0, prefix = 'bench/doc'): IngestRecord[] {
  return Array.from({ length: n }, (_, k) => {
    const i = from + k;
    const groups = i % 3 === 0 ? ['partner/org-b/docs'] : [];
    SHARES.forEach((per50, g) => {
      if (i % 50 < per50) groups.push(`partner/org-c/share-${g}`);
    });
    return {
      content: `Section ${i}: the ${WORDS[i % WORDS.length]} notes for team ${i % 37} cover ${WORDS[(i * 7) % WORDS.length]} and ${WORDS[(i * 11) % WORDS.length]} in paragraph ${i}, with enough words to look like a real chunk of a handbook page.`,
      metadata: {
        source: { id: `${prefix}-${Math.floor(i / 20)}`, title: `Document ${Math.floor(i / 20)}` },
        classification: 'public',
        allowed_principals: [{ kind: 'matrix', principal }],
        allowed_groups: groups,
      },
    };
  });
}

const ARMS = ['rows', 'bulk', 'after', 'after+sub'] as const;
type Arm = (typeof ARMS)[number];
interface Run {
  workload: string;
  arm: Arm;
  chunks: number;
  /** Until the call returned: rows committed, vector indexes built, table maintained. */
  seconds: number;
  chunksPerSecond: number;
  /** Until the rows were committed and visible to searches. */
  committedSeconds: number;
  committedPerSecond: number;
  result: string;
  /** after+sub: maintainSubgraphs just before the workload (untimed in the rates), and what it did. */
  subgraphs?: {
    maintain: SubgraphReport;
    maintainSeconds: number;
    /** Valid, ready chunks_sub_% indexes before the write and after the call returned. */
    validBefore: number;
    validAfter: number;
    /** Rows of fgentic.subgraphs after the call returned. */
    registeredAfter: number;
  };
}

interface Target {
  readonly pool: pg.Pool;
  close(): Promise<void>;
}

/** A fresh persisted embedded database in a child process (bench/ingest-db.ts), as `npm start` runs it. */
async function open(): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'fgentic-bench-ingest-'));
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('./ingest-db.ts', import.meta.url)), join(dir, 'pglite')],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n')[0];
      if (out.includes('\n') && line !== undefined) resolve((JSON.parse(line) as { url: string }).url);
    });
    child.once('exit', (code) => reject(new Error(`embedded database exited with ${code}`)));
  });
  const pool = createPool({
    connectionString: url,
    max: 2,
    statementTimeoutMs: 600_000,
    connectionTimeoutMs: 120_000,
  });
  await bootstrapDatabase(pool);
  await migrate(pool);
  await ensureProfile(asRole(pool, INGESTION_ROLE), embedder.profile, true);
  return {
    pool,
    async close() {
      await pool.end().catch(() => {});
      child.stdin.end();
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Valid, ready subgraph indexes on fgentic.chunks, and the rows of fgentic.subgraphs. */
async function subgraphState(pool: pg.Pool): Promise<{ valid: number; registered: number }> {
  const r = await pool.query<{ valid: number; registered: number }>(
    `SELECT (SELECT count(*) FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
              WHERE i.indrelid = 'fgentic.chunks'::regclass AND x.relname LIKE 'chunks\\_sub\\_%'
                AND i.indisvalid AND i.indisready)::int AS valid,
            (SELECT count(*) FROM fgentic.subgraphs)::int AS registered`,
  );
  return r.rows[0] ?? { valid: 0, registered: 0 };
}

async function ingest(t: Target, arm: Arm, workload: string, input: IngestRecord[]): Promise<Run> {
  let subgraphs: Run['subgraphs'];
  if (arm === 'after+sub') {
    const client = await t.pool.connect();
    const s0 = performance.now();
    let maintain: SubgraphReport;
    try {
      maintain = await maintainSubgraphs(client, OWNER_ROLE, { exactThreshold: EXACT_THRESHOLD });
    } finally {
      client.release();
    }
    const maintainSeconds = (performance.now() - s0) / 1000;
    const validBefore = (await subgraphState(t.pool)).valid;
    subgraphs = { maintain, maintainSeconds, validBefore, validAfter: 0, registeredAfter: 0 };
  }
  const t0 = performance.now();
  let committed: number | undefined;
  const stats = await withIngestionLease(t.pool, (writer) =>
    ingestRecords(
      writer,
      embedder,
      input,
      undefined,
      {},
      {
        path: arm === 'rows' || arm === 'bulk' ? arm : 'auto',
        onCommit: () => {
          committed = performance.now();
        },
      },
    ),
  );
  const end = performance.now();
  if (subgraphs !== undefined) {
    const after = await subgraphState(t.pool);
    subgraphs.validAfter = after.valid;
    subgraphs.registeredAfter = after.registered;
  }
  const seconds = (end - t0) / 1000;
  const committedSeconds = ((committed ?? end) - t0) / 1000;
  return {
    workload,
    arm,
    chunks: input.length,
    seconds,
    chunksPerSecond: input.length / seconds,
    committedSeconds,
    committedPerSecond: input.length / committedSeconds,
    result: Object.entries(stats as unknown as Record<string, number | string>)
      .filter(([k, v]) => k !== 'records' && k !== 'embedded' && v !== 0 && v !== 'none')
      .map(([k, v]) => `${k} ${v}`)
      .join(', '),
    ...(subgraphs !== undefined ? { subgraphs } : {}),
  };
}

const runs: Run[] = [];
/** Keeps a run and shows it at once on stderr (a full run takes minutes on a loaded machine). */
function note(r: Run): void {
  runs.push(r);
  const g = r.subgraphs;
  process.stderr.write(
    `${r.workload} ${r.arm}: committed ${r.committedSeconds.toFixed(1)} s (${r.committedPerSecond.toFixed(0)}/s), ready ${r.seconds.toFixed(1)} s (${r.chunksPerSecond.toFixed(0)}/s)${g ? `; subgraphs ${g.validBefore} → ${g.validAfter} valid (maintain ${g.maintainSeconds.toFixed(1)} s: built ${g.maintain.built}, kept ${g.maintain.kept}${g.maintain.skipped ? `, ${g.maintain.skipped}` : ''})` : ''}\n`,
  );
}
const largest = Math.max(...SIZES);
for (const n of WORKLOADS ? SIZES : []) {
  const input = records(n, '@alice:org-a.example');
  // The subgraph arm differs from `after` only once a table exists: at the largest size.
  const arms = ARMS.filter((a) => a !== 'after+sub' || n === largest);
  const targets = new Map<Arm, Target>();
  try {
    for (const arm of arms) targets.set(arm, await open());
    const each = async (workload: string, batch: IngestRecord[]) => {
      for (const arm of arms) note(await ingest(targets.get(arm) as Target, arm, workload, batch));
    };
    await each(`fresh-${n}`, input);
    if (n === largest) {
      await each('same', input);
      const bob = records(n, '@bob:org-a.example');
      await each('acl', bob);
      // Two thirds of the rows change their ACL again: below the threshold (ACL_ONLY_WEIGHT), so
      // `after` updates in place as `rows` does, and `bulk` shows what the other choice costs.
      const carol = records(n, '@carol:org-a.example');
      await each(
        'acl-2/3',
        bob.map((r, i) => (i < Math.ceil((2 * n) / 3) ? carol[i] : r) as IngestRecord),
      );
      await each('grow', records(Math.ceil(n / 5), '@bob:org-a.example', n, 'bench/grow'));
    }
  } finally {
    for (const t of targets.values()) await t.close();
  }
}

const rate = (x: number) => x.toFixed(0);
const pair = (r: Run | undefined) => (r ? `${rate(r.committedPerSecond)}/${rate(r.chunksPerSecond)}` : '—');
const ratios: Record<
  string,
  { afterOverRows: number; afterOverBulk: number; subOverAfter?: { committed: number; ready: number } }
> = {};
if (runs.length > 0) {
  console.log(
    `ingest on the embedded database (PGlite persisted to disk), local embedder; load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
  console.log('chunks/s: committed (rows searchable) / ready (vector indexes built, table maintained)');
  console.log(
    `after+sub: subgraphs from maintainSubgraphs (exact threshold ${EXACT_THRESHOLD}) before each workload; sub÷after: time with subgraphs ÷ time without (> 1: slower)\n`,
  );
  console.log(
    'workload    chunks       rows/s       bulk/s      after/s  after+sub/s   rows÷after  bulk÷after  sub÷after c/r   subgraphs valid   after result',
  );
}
for (const w of [...new Set(runs.map((r) => r.workload))]) {
  const by = (a: Arm) => runs.find((r) => r.workload === w && r.arm === a);
  const [r, k, a, s] = [by('rows'), by('bulk'), by('after'), by('after+sub')];
  if (!r || !k || !a) continue;
  ratios[w] = {
    afterOverRows: r.seconds / a.seconds,
    afterOverBulk: k.seconds / a.seconds,
    ...(s
      ? { subOverAfter: { committed: s.committedSeconds / a.committedSeconds, ready: s.seconds / a.seconds } }
      : {}),
  };
  const sub = s ? `${(s.committedSeconds / a.committedSeconds).toFixed(2)}/${(s.seconds / a.seconds).toFixed(2)}` : '—';
  const valid = s?.subgraphs ? `${s.subgraphs.validBefore} → ${s.subgraphs.validAfter}` : '—';
  console.log(
    `${w.padEnd(10)} ${String(a.chunks).padStart(7)} ${pair(r).padStart(12)} ${pair(k).padStart(12)} ${pair(a).padStart(12)} ${pair(s).padStart(12)} ${`${(r.seconds / a.seconds).toFixed(2)}×`.padStart(12)} ${`${(k.seconds / a.seconds).toFixed(2)}×`.padStart(11)} ${sub.padStart(15)} ${valid.padStart(17)}   ${a.result}`,
  );
}

/**
 * Search latency around the vector-index bound: on tables of VECTOR_INDEX_MIN_ROWS and more rows that
 * one audience may read whole (the exact scan's worst case), p50 of the search entry point forced
 * to the exact plan and to the HNSW plan (the index built), queries alternating between the two.
 */
async function searchLatency(sizes: readonly number[], queries = 30) {
  const t = await open();
  const out: { rows: number; exactMs: number; hnswMs: number; indexAtLoad: string }[] = [];
  try {
    const retrieval = asRole(t.pool, RETRIEVAL_ROLE);
    const projection = decodeFixture(
      matrixHeader({ caller: P.alice, audience: [P.alice], classifications: ['public'] }),
    );
    const all = records(Math.max(...sizes), P.alice.principal);
    const { prepared } = prepareRecords(all, embedder.profile);
    const qs = await embedder.embed(
      Array.from(
        { length: queries },
        (_, i) => `${WORDS[i % WORDS.length]} ${WORDS[(i * 5) % WORDS.length]} team ${i}`,
      ),
    );
    let have = 0;
    for (const n of sizes) {
      const batch = prepared.slice(have, n);
      const vectors = await embedder.embed(batch.map((p) => p.content));
      const stats = await withIngestionLease(t.pool, (w) =>
        writeChunks(w, { chunks: batch.map((p, i) => ({ ...p, embedding: vectors[i] ?? [] })) }, undefined, {
          path: 'bulk',
        }),
      );
      have = n;
      const indexAtLoad = stats.deferredIndexes > 0 ? 'deferred' : 'built';
      // Build a deferred index here, so that both plans can be timed on the same table.
      const d = await t.pool.query('DELETE FROM fgentic.deferred_indexes RETURNING def');
      for (const row of d.rows) await t.pool.query(row.def);
      const times = { exact: [] as number[], hnsw: [] as number[] };
      for (const q of qs)
        for (const force of ['exact', 'hnsw'] as const) {
          const t0 = performance.now();
          await searchKnowledge(
            retrieval,
            { projection, embedding: q ?? [], maxResults: 10 },
            { ...DEFAULT_PLANNER, force },
          );
          times[force].push(performance.now() - t0);
        }
      out.push({ rows: n, exactMs: median(times.exact), hnswMs: median(times.hnsw), indexAtLoad });
    }
  } finally {
    await t.close();
  }
  return out;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
}

let search: Awaited<ReturnType<typeof searchLatency>> = [];
if (SEARCH) {
  search = await searchLatency([VECTOR_INDEX_MIN_ROWS, 2 * VECTOR_INDEX_MIN_ROWS, 5 * VECTOR_INDEX_MIN_ROWS]);
  console.log(
    `\nsearch p50 around the vector-index bound (${VECTOR_INDEX_MIN_ROWS} rows), one audience reading every row\n`,
  );
  console.log('rows    exact ms   hnsw ms   exact÷hnsw   index after a bulk load');
  for (const r of search)
    console.log(
      `${String(r.rows).padEnd(6)} ${r.exactMs.toFixed(1).padStart(9)} ${r.hnswMs.toFixed(1).padStart(9)} ${`${(r.exactMs / r.hnswMs).toFixed(2)}×`.padStart(12)}   ${r.indexAtLoad}`,
    );
}

const out = new URL('./results/', import.meta.url);
mkdirSync(out, { recursive: true });
writeFileSync(
  new URL('ingest.json', out),
  `${JSON.stringify({ sizes: SIZES, exactThreshold: EXACT_THRESHOLD, load: loadavg(), runs, ratios, search }, null, 2)}\n`,
);
