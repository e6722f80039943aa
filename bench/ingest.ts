/**
 * Ingest benchmark on the embedded database (PGlite + pgvector, persisted to a temporary directory)
 * with the local embedder: the previous write path (bench/ingest-baseline.ts) and the current one
 * side by side, each on its own fresh database, for three workloads an operator repeats:
 *   fresh    N new chunks (embedding + insert, HNSW and GIN maintenance included)
 *   same     the same input again (before: every row rewritten as ACL-only; now: `unchanged`)
 *   acl      every chunk's ACL changed (before: one UPDATE per row; now: batched)
 * Prints a table and writes bench/results/ingest.json. BENCH_CHUNKS (default 2000) sets N.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedDatabase } from '../retrieval/db/embedded.ts';
import { migrate } from '../retrieval/db/migrate.ts';
import { createPool } from '../retrieval/db/pool.ts';
import { createLocalEmbedder } from '../retrieval/embeddings/local.ts';
import { ensureProfile } from '../retrieval/embeddings/profile.ts';
import { type IngestRecord, ingestRecords } from '../retrieval/ingest/jsonl.ts';
import { baselineIngest } from './ingest-baseline.ts';

const N = Number(process.env['BENCH_CHUNKS'] ?? 2000);
const embedder = createLocalEmbedder();

const WORDS =
  'policy travel expense handbook roadmap incident backup partner guide review quarter budget release'.split(
    ' ',
  );
function records(principal: string): IngestRecord[] {
  return Array.from({ length: N }, (_, i) => ({
    content: `Section ${i}: the ${WORDS[i % WORDS.length]} notes for team ${i % 37} cover ${WORDS[(i * 7) % WORDS.length]} and ${WORDS[(i * 11) % WORDS.length]} in paragraph ${i}, with enough words to look like a real chunk of a handbook page.`,
    metadata: {
      source: { id: `bench/doc-${Math.floor(i / 20)}`, title: `Document ${Math.floor(i / 20)}` },
      classification: 'public',
      allowed_principals: [{ kind: 'matrix', principal }],
      allowed_groups: i % 3 === 0 ? ['partner/org-b/docs'] : [],
    },
  }));
}

type Path = 'before' | 'after';
interface Row {
  workload: string;
  path: Path;
  seconds: number;
  chunksPerSecond: number;
  result: string;
}

interface Target {
  readonly path: Path;
  readonly pool: ReturnType<typeof createPool>;
  close(): Promise<void>;
}

async function open(path: Path): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), `fgentic-bench-ingest-${path}-`));
  const db = await startEmbeddedDatabase({ dataDir: join(dir, 'pglite') });
  // PGlite runs on this thread: a long statement can delay another connection's handshake.
  const pool = createPool({
    connectionString: db.url,
    max: 2,
    statementTimeoutMs: 600_000,
    connectionTimeoutMs: 120_000,
  });
  await migrate(pool);
  await ensureProfile(pool, embedder.profile, true);
  return {
    path,
    pool,
    async close() {
      await pool.end().catch(() => {});
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function run(t: Target, workload: string, input: IngestRecord[]): Promise<Row> {
  const t0 = performance.now();
  const stats =
    t.path === 'before'
      ? await baselineIngest(t.pool, embedder, input)
      : await ingestRecords(t.pool, embedder, input);
  const seconds = (performance.now() - t0) / 1000;
  return {
    workload,
    path: t.path,
    seconds,
    chunksPerSecond: N / seconds,
    result: Object.entries(stats as unknown as Record<string, number>)
      .filter(([k, v]) => k !== 'records' && v > 0)
      .map(([k, v]) => `${k} ${v}`)
      .join(', '),
  };
}

// Both databases stay open and the two paths alternate workload by workload, so a change in machine
// load (the benchmark machine is shared) affects both sides of each ratio alike.
const targets = [await open('before'), await open('after')];
const before: Row[] = [];
const after: Row[] = [];
try {
  const alice = records('@alice:org-a.example');
  const bob = records('@bob:org-a.example');
  for (const [workload, input] of [
    ['fresh', alice],
    ['same', alice],
    ['acl', bob],
  ] as const) {
    before.push(await run(targets[0]!, workload, input));
    after.push(await run(targets[1]!, workload, input));
  }
} finally {
  for (const t of targets) await t.close();
}
console.log(`ingest of ${N} chunks, embedded PGlite persisted to disk, local embedder\n`);
console.log('workload   before s   before/s   after s    after/s    speed-up   after result');
for (const b of before) {
  const a = after.find((x) => x.workload === b.workload)!;
  console.log(
    `${b.workload.padEnd(10)} ${b.seconds.toFixed(2).padStart(8)}   ${b.chunksPerSecond.toFixed(0).padStart(8)}   ${a.seconds.toFixed(2).padStart(8)}   ${a.chunksPerSecond.toFixed(0).padStart(8)}   ${(b.seconds / a.seconds).toFixed(1).padStart(7)}×   ${a.result}`,
  );
}
const out = new URL('./results/', import.meta.url);
mkdirSync(out, { recursive: true });
writeFileSync(new URL('ingest.json', out), `${JSON.stringify({ chunks: N, before, after }, null, 2)}\n`);
