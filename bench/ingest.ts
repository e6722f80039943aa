/**
 * Ingest benchmark on the embedded database (PGlite + pgvector, persisted to a temporary directory)
 * with the local embedder, through the production entry point (ingestion role, single-writer lease).
 * Four write paths side by side in one run, each workload on its own fresh database, the paths
 * alternating workload by workload so a change in machine load hits all of them alike:
 *   before  the write path before this work (bench/ingest-baseline.ts), on a table whose metadata
 *           CHECK is still 0001's function tree (migration 0011 undone for this arm)
 *   rows    today's code held to row-by-row writes (batched upserts, every index maintained per row;
 *           an ACL change updated in place with the graph kept)
 *   bulk    today's code held to the bulk path (`path: 'bulk'`: indexes dropped and rebuilt for any
 *           write, an ACL change of part of the table included), the other side of the threshold
 *   after   today's code as it runs (`auto`: the bulk load when the write is large for the table,
 *           an ACL change of the whole table included)
 * Two rates per run: committed (the rows and their ACL indexes are committed and searchable, exactly)
 * and ready (the vector index is built and the table maintained: the call returned). The before arm
 * builds everything in its one transaction, so both of its rates are the same.
 * Workloads:
 *   fresh-N  N new chunks into an empty table (embedding, insert, index maintenance or rebuild)
 *   same     the largest input again, unchanged
 *   acl      the largest input with every chunk's ACL changed
 *   acl-2/3  then two thirds of those chunks with their ACL changed again (below the threshold)
 * Then a profile of where a fresh row's milliseconds go (BENCH_PROFILE=0 skips it): the embedder,
 * validation, the INSERT into a copy of the table without indexes, each index's incremental upkeep,
 * an ACL-only UPDATE of every row with every index, without the graph and with the btree indexes
 * only, and each index's build from scratch. Prints tables and writes bench/results/ingest.json.
 * BENCH_CHUNKS (default "1000,5000") lists the fresh sizes.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { migrate } from '../retrieval/db/migrate.ts';
import { createPool, toVectorBinary, toVectorParam } from '../retrieval/db/pool.ts';
import { asRole, bootstrapDatabase, INGESTION_ROLE, RETRIEVAL_ROLE } from '../retrieval/db/roles.ts';
import { createLocalEmbedder } from '../retrieval/embeddings/local.ts';
import { ensureProfile } from '../retrieval/embeddings/profile.ts';
import { type IngestRecord, ingestRecords, prepareRecords } from '../retrieval/ingest/jsonl.ts';
import { withIngestionLease } from '../retrieval/ingest/lease.ts';
import { VECTOR_INDEX_MIN_ROWS, writeChunks } from '../retrieval/ingest/store.ts';
import { DEFAULT_PLANNER } from '../retrieval/planner.ts';
import { searchKnowledge } from '../retrieval/search.ts';
import { decodeFixture, matrixHeader, P } from '../retrieval/testing.ts';
import { baselineIngest } from './ingest-baseline.ts';

const SIZES = (process.env['BENCH_CHUNKS'] ?? '1000,5000').split(',').map(Number);
const PROFILE = process.env['BENCH_PROFILE'] !== '0';
const WORKLOADS = process.env['BENCH_WORKLOADS'] !== '0';
const SEARCH = process.env['BENCH_SEARCH'] !== '0';
const embedder = createLocalEmbedder();

const WORDS =
  'policy travel expense handbook roadmap incident backup partner guide review quarter budget release'.split(
    ' ',
  );
function records(n: number, principal: string): IngestRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    content: `Section ${i}: the ${WORDS[i % WORDS.length]} notes for team ${i % 37} cover ${WORDS[(i * 7) % WORDS.length]} and ${WORDS[(i * 11) % WORDS.length]} in paragraph ${i}, with enough words to look like a real chunk of a handbook page.`,
    metadata: {
      source: { id: `bench/doc-${Math.floor(i / 20)}`, title: `Document ${Math.floor(i / 20)}` },
      classification: 'public',
      allowed_principals: [{ kind: 'matrix', principal }],
      allowed_groups: i % 3 === 0 ? ['partner/org-b/docs'] : [],
    },
  }));
}

const PATHS = ['before', 'rows', 'bulk', 'after'] as const;
type Path = (typeof PATHS)[number];
interface Run {
  workload: string;
  path: Path;
  chunks: number;
  /** Until the call returned: rows committed, vector index built, table maintained. */
  seconds: number;
  chunksPerSecond: number;
  /** Until the rows were committed and visible to searches. */
  committedSeconds: number;
  committedPerSecond: number;
  result: string;
}

interface Target {
  readonly pool: pg.Pool;
  close(): Promise<void>;
}

/** 0001's metadata CHECK, as every table had it before migration 0011. */
const ORIGINAL_CHECK =
  'DROP CONSTRAINT chunks_metadata_valid, ADD CONSTRAINT chunks_metadata_valid CHECK (knowledge.is_valid_metadata(metadata))';

/** A fresh persisted embedded database in a child process (bench/ingest-db.ts), as `npm start` runs it. */
async function open(path?: Path): Promise<Target> {
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
  if (path === 'before') await pool.query(`ALTER TABLE knowledge.chunks ${ORIGINAL_CHECK}`);
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

async function ingest(t: Target, path: Path, workload: string, input: IngestRecord[]): Promise<Run> {
  const t0 = performance.now();
  let committed: number | undefined;
  const stats = await withIngestionLease(t.pool, (writer) =>
    path === 'before'
      ? baselineIngest(writer, embedder, input)
      : ingestRecords(
          writer,
          embedder,
          input,
          undefined,
          {},
          {
            path: path === 'after' ? 'auto' : path,
            onCommit: () => {
              committed = performance.now();
            },
          },
        ),
  );
  const end = performance.now();
  const seconds = (end - t0) / 1000;
  const committedSeconds = ((committed ?? end) - t0) / 1000;
  return {
    workload,
    path,
    chunks: input.length,
    seconds,
    chunksPerSecond: input.length / seconds,
    committedSeconds,
    committedPerSecond: input.length / committedSeconds,
    result: Object.entries(stats as unknown as Record<string, number | string>)
      .filter(([k, v]) => k !== 'records' && k !== 'embedded' && v !== 0 && v !== 'none')
      .map(([k, v]) => `${k} ${v}`)
      .join(', '),
  };
}

const runs: Run[] = [];
/** Keeps a run and shows it at once on stderr (a full run takes minutes on a loaded machine). */
function note(r: Run): void {
  runs.push(r);
  process.stderr.write(
    `${r.workload} ${r.path}: committed ${r.committedSeconds.toFixed(1)} s (${r.committedPerSecond.toFixed(0)}/s), ready ${r.seconds.toFixed(1)} s (${r.chunksPerSecond.toFixed(0)}/s)\n`,
  );
}
const largest = Math.max(...SIZES);
for (const n of WORKLOADS ? SIZES : []) {
  const input = records(n, '@alice:org-a.example');
  for (const path of PATHS) {
    const t = await open(path);
    try {
      note(await ingest(t, path, `fresh-${n}`, input));
      if (n === largest) {
        note(await ingest(t, path, 'same', input));
        const bob = records(n, '@bob:org-a.example');
        note(await ingest(t, path, 'acl', bob));
        // Two thirds of the rows change their ACL again: below the threshold (ACL_ONLY_WEIGHT), so
        // `after` updates in place as `rows` does, and `bulk` shows what the other choice costs.
        const carol = records(n, '@carol:org-a.example');
        note(
          await ingest(
            t,
            path,
            'acl-2/3',
            bob.map((r, i) => (i < Math.ceil((2 * n) / 3) ? carol[i] : r) as IngestRecord),
          ),
        );
      }
    } finally {
      await t.close();
    }
  }
}

if (runs.length > 0) {
  console.log(
    `ingest on the embedded database (PGlite persisted to disk), local embedder; load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}\n`,
  );
  console.log('chunks/s: committed (rows searchable) / ready (vector index built, table maintained)\n');
  console.log(
    'workload     chunks     before/s        rows/s        bulk/s     after/s committed   ready   after÷before committed   ready   ready ÷rows   ready ÷bulk   after result',
  );
}
const workloads = [...new Set(runs.map((r) => r.workload))];
const ratios: Record<
  string,
  {
    afterOverBefore: number;
    afterOverRows: number;
    afterOverBulk: number;
    committedAfterOverBefore: number;
  }
> = {};
const rate = (x: number) => x.toFixed(0);
for (const w of workloads) {
  const by = (p: Path) => runs.find((r) => r.workload === w && r.path === p) as Run;
  const [b, r, k, a] = [by('before'), by('rows'), by('bulk'), by('after')];
  ratios[w] = {
    afterOverBefore: b.seconds / a.seconds,
    afterOverRows: r.seconds / a.seconds,
    afterOverBulk: k.seconds / a.seconds,
    committedAfterOverBefore: b.seconds / a.committedSeconds,
  };
  console.log(
    `${w.padEnd(11)} ${String(a.chunks).padStart(7)}   ${rate(b.chunksPerSecond).padStart(8)}   ${`${rate(r.committedPerSecond)}/${rate(r.chunksPerSecond)}`.padStart(11)}   ${`${rate(k.committedPerSecond)}/${rate(k.chunksPerSecond)}`.padStart(11)}   ${rate(a.committedPerSecond).padStart(16)}   ${rate(a.chunksPerSecond).padStart(5)}   ${`${(b.seconds / a.committedSeconds).toFixed(1)}×`.padStart(21)}   ${`${(b.seconds / a.seconds).toFixed(1)}×`.padStart(5)}   ${`${(r.seconds / a.seconds).toFixed(2)}×`.padStart(11)}   ${`${(k.seconds / a.seconds).toFixed(2)}×`.padStart(11)}   ${a.result}`,
  );
}

/** Milliseconds per row for each step a fresh row goes through. */
async function profile(n: number) {
  const t = await open();
  const out: { step: string; msPerRow: number }[] = [];
  const step = (name: string, ms: number) => out.push({ step: name, msPerRow: ms / n });
  try {
    const input = records(n, '@alice:org-a.example');
    let t0 = performance.now();
    const { prepared } = prepareRecords(input, embedder.profile);
    step('validate records', performance.now() - t0);
    t0 = performance.now();
    const vectors = await embedder.embed(prepared.map((p) => p.content));
    step('local embedder', performance.now() - t0);
    const defs = (
      await t.pool.query(
        `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def, am.amname AS am
           FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
          WHERE i.indrelid = 'knowledge.chunks'::regclass ORDER BY c.relname`,
      )
    ).rows as { name: string; def: string; am: string }[];
    await t.pool.query('CREATE SCHEMA bench');
    let k = 0;
    // A copy of the table with its CHECK constraints and generated ACL ids and no index; `indexes`
    // are added before the load. Vectors go as the store sends them (binary) unless `text` is set.
    const load = async (
      indexes: readonly string[],
      settings: readonly string[] = [],
      encode: (v: readonly number[]) => unknown = toVectorBinary,
      alter?: string,
    ) => {
      const table = `bench.t${k++}`;
      await t.pool.query(
        `CREATE TABLE ${table} (LIKE knowledge.chunks INCLUDING CONSTRAINTS INCLUDING GENERATED)`,
      );
      if (alter !== undefined) await t.pool.query(`ALTER TABLE ${table} ${alter}`);
      for (const d of indexes) await t.pool.query(retarget(d, table));
      const client = await t.pool.connect();
      try {
        for (const s of settings) await client.query(s);
        const started = performance.now();
        for (let i = 0; i < n; i += 200) {
          const values: unknown[] = [];
          const tuples = prepared.slice(i, i + 200).map((c, j) => {
            values.push(c.chunk_id, c.content, encode(vectors[i + j] ?? []), JSON.stringify(c.metadata));
            return `($${j * 4 + 1}, $${j * 4 + 2}, $${j * 4 + 3}::vector, $${j * 4 + 4}::jsonb)`;
          });
          await client.query(
            `INSERT INTO ${table} (chunk_id, content, embedding, metadata) VALUES ${tuples.join(', ')}`,
            values,
          );
        }
        for (const s of settings) await client.query(`RESET ${s.replace(/^SET (\w+).*/, '$1')}`);
        return { table, ms: performance.now() - started };
      } finally {
        client.release();
      }
    };
    // A first load compiles the CHECK functions and warms the caches; it is not counted.
    await load([]);
    const bare = await load([]);
    step('INSERT: heap, TOAST, CHECKs, ACL ids (no index)', bare.ms);
    step('  the same with vectors as decimal text (previous)', (await load([], [], toVectorParam)).ms);
    step(
      "  the same with 0001's metadata CHECK (previous)",
      (await load([], [], toVectorBinary, ORIGINAL_CHECK)).ms,
    );
    step(
      '  the same without the metadata CHECK',
      (await load([], [], toVectorBinary, 'DROP CONSTRAINT chunks_metadata_valid')).ms,
    );
    for (const d of defs) step(`  + upkeep of ${d.name} (${d.am})`, (await load([d.def])).ms - bare.ms);
    const all = defs.map((d) => d.def);
    const withAll = await load(all);
    step('INSERT with every index (the rows path)', withAll.ms);
    // An ACL change of every row, in one UPDATE: with the graph in place, and on a copy without it.
    const aclUpdate = async (table: string) => {
      const started = performance.now();
      await t.pool.query(
        `UPDATE ${table} SET metadata = jsonb_set(metadata, '{allowed_principals}', '[{"kind":"matrix","principal":"@bob:org-a.example"}]')`,
      );
      return performance.now() - started;
    };
    step('ACL-only UPDATE with every index (graph walked per row)', await aclUpdate(withAll.table));
    const noGraph = await load(defs.filter((d) => !VECTOR_INDEX_AMS.has(d.am)).map((d) => d.def));
    step('ACL-only UPDATE with every index but the vector index', await aclUpdate(noGraph.table));
    const btreeOnly = await load(defs.filter((d) => d.am === 'btree').map((d) => d.def));
    step('ACL-only UPDATE with the btree indexes only (the bulk path)', await aclUpdate(btreeOnly.table));
    step(
      'INSERT with every index, synchronous_commit off',
      (await load(all, ['SET synchronous_commit = off'])).ms,
    );
    await t.pool.query("SET maintenance_work_mem = '256MB'");
    for (const d of defs) {
      t0 = performance.now();
      await t.pool.query(retarget(d.def, bare.table));
      step(`  build of ${d.name} after the load`, performance.now() - t0);
    }
  } finally {
    await t.close();
  }
  return out;
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

const VECTOR_INDEX_AMS: ReadonlySet<string> = new Set(['hnsw', 'ivfflat']);
let copies = 0;
/** An index definition moved onto a copy of the table, under a name no other copy uses. */
function retarget(def: string, table: string): string {
  copies += 1;
  return def.replace(/ ON knowledge\.chunks /, ` ON ${table} `).replace(/INDEX (\S+)/, `INDEX $1_c${copies}`);
}

let breakdown: { step: string; msPerRow: number }[] = [];
if (PROFILE) {
  const n = Math.min(...SIZES);
  breakdown = await profile(n);
  console.log(`\nwhere a fresh row's time goes (${n} rows, ms per row)\n`);
  for (const s of breakdown) console.log(`${s.step.padEnd(58)} ${s.msPerRow.toFixed(3).padStart(7)}`);
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
  `${JSON.stringify({ sizes: SIZES, load: loadavg(), runs, ratios, profile: breakdown, search }, null, 2)}\n`,
);
