/**
 * bench:ledger — the added cost of ledger mode (docs/ledger.md), side by side with plain mode in one
 * run on the embedded database (PGlite through `pg`, as `npm start` runs it):
 *
 * - projector: one gateway-shaped local-route check at a time against projectors in this process,
 *   one plain and one per ledger experiment; p50/p99 and the p99 added to plain (goal ≤ 0.5 ms);
 * - retrieval: the authorized search transaction (`searchKnowledge`) without and with the ledger
 *   check for the same queries and projection, over a ledger pre-filled with BENCH_LEDGER_ENTRIES
 *   live entries (600 s of minting at the given rate); p50 ratio to plain (goal ≤ 1.10).
 *
 * Experiments (`--experiments a,b`, default both):
 * - `sync`: the earlier path — the projector records before it answers, the retrieval server runs
 *   the check as its own statement before the search;
 * - `deferred`: the projector answers once the record is queued (batched), the retrieval server
 *   folds the check into the search statement;
 * - `worker`: as `deferred`, with the batching and the database connection on the writer thread
 *   (projector/ledger-worker.ts, what `serve projector` runs); the retrieval side is `deferred`'s.
 *
 * The embedded database runs in a child process, as a database server would, so that its work does
 * not run on the measured servers' event loop; all arms talk to it through `pg` over loopback.
 * Arms alternate in BENCH_ROUNDS rounds so that background load drifts affect all alike. Prints a
 * table and writes bench/results/ledger.json. BENCH_ROWS (default 300) chunks are seeded with the
 * local embedder; BENCH_SAMPLES (default 400) samples per arm and part.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { startEmbeddedDatabase } from '../retrieval/db/embedded.ts';
import { migrate } from '../retrieval/db/migrate.ts';
import { createPool } from '../retrieval/db/pool.ts';
import { asRole, bootstrapDatabase, INGESTION_ROLE, PROJECTOR_ROLE, RETRIEVAL_ROLE } from '../retrieval/db/roles.ts';
import { createLocalEmbedder } from '../retrieval/embeddings/local.ts';
import { ensureProfile } from '../retrieval/embeddings/profile.ts';
import { ingestRecords } from '../retrieval/ingest/jsonl.ts';
import { withIngestionLease } from '../retrieval/ingest/lease.ts';
import { agentKey, capabilityDigest } from '../retrieval/ledger.ts';
import { searchKnowledge } from '../retrieval/search.ts';
import { AGENT, matrixHeader, meta, NOW, P } from '../testkit/retrieval.ts';

const ROWS = Number(process.env['BENCH_ROWS'] ?? 300);
const SAMPLES = Number(process.env['BENCH_SAMPLES'] ?? 400);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 4);
const ENTRIES = Number(process.env['BENCH_LEDGER_ENTRIES'] ?? 20_000);
type Experiment = 'sync' | 'deferred' | 'worker';
const KNOWN: readonly Experiment[] = ['sync', 'deferred', 'worker'];
const EXPERIMENTS: Experiment[] = (() => {
  const i = process.argv.indexOf('--experiments');
  const list = i >= 0 ? (process.argv[i + 1] ?? '') : KNOWN.join(',');
  const out = list.split(',').filter((x) => x !== '');
  for (const x of out)
    if (!KNOWN.includes(x as Experiment)) throw new Error(`unknown experiment ${x} (${KNOWN.join(', ')})`);
  return out as Experiment[];
})();

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};
const ms = (ns: bigint) => Number(ns) / 1e6;

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = process.hrtime.bigint();
  await fn();
  return ms(process.hrtime.bigint() - t);
}

/** Per arm: main-thread CPU, whole-process CPU and the database's CPU, per sample (ms). */
interface ArmCost {
  mainCpuMs: number;
  processCpuMs: number;
  databaseCpuMs: number;
  samples: number;
}

/**
 * CPU time of one thread from /proc (Linux; nanoseconds in schedstat's first field), ms; NaN where
 * /proc is not available. `task` = `pid` is a process's main thread.
 */
function threadCpuMs(pid: number | undefined, task = pid): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return Number.NaN;
  }
}

/** Run all arms in alternating rounds; returns each arm's samples (ms) and what each arm cost. */
async function alternate(arms: Record<string, () => Promise<unknown>>, samples: number, databasePid?: number) {
  const out: Record<string, number[]> = {};
  const cost: Record<string, ArmCost> = {};
  for (const name of Object.keys(arms)) {
    out[name] = [];
    cost[name] = { mainCpuMs: 0, processCpuMs: 0, databaseCpuMs: 0, samples: 0 };
  }
  const per = Math.ceil(samples / ROUNDS);
  for (let round = 0; round < ROUNDS; round++)
    for (const [name, fn] of Object.entries(arms)) {
      for (let i = 0; i < 10; i++) await fn(); // warm-up
      const main = threadCpuMs(process.pid);
      const cpu = process.cpuUsage();
      const db = threadCpuMs(databasePid);
      for (let i = 0; i < per; i++) out[name]!.push(await timed(fn));
      const c = cost[name]!;
      c.mainCpuMs += threadCpuMs(process.pid) - main;
      const used = process.cpuUsage(cpu);
      c.processCpuMs += (used.user + used.system) / 1000;
      c.databaseCpuMs += threadCpuMs(databasePid) - db;
      c.samples += per;
    }
  return { samples: out, cost };
}

// Child mode: serve the embedded database, prepared as `npm start` prepares it, and print its URL.
if (process.argv.includes('--serve-db')) {
  const db = await startEmbeddedDatabase();
  const admin = createPool({ connectionString: db.url, max: 2, connectionTimeoutMs: 60_000 });
  await bootstrapDatabase(admin);
  await migrate(admin);
  await admin.end();
  process.stdout.write(`${db.url} ${db.poolSize}\n`);
  await new Promise(() => {});
}

// The projectors' audit lines would dominate the measurement (bench:projector silences them too).
process.env['FGENTIC_LOG_LEVEL'] = process.env['BENCH_AUDIT'] === '1' ? 'info' : 'silent';
const child = spawn(process.execPath, ['--import', 'tsx', new URL(import.meta.url).pathname, '--serve-db'], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
const [url, size] = await new Promise<[string, number]>((resolve, reject) => {
  let buf = '';
  child.stdout.on('data', (d) => {
    buf += d;
    const line = buf.split('\n')[0];
    if (buf.includes('\n') && line) {
      const [u, n] = line.split(' ');
      resolve([u!, Number(n)]);
    }
  });
  child.once('exit', (code) => reject(new Error(`database process exited ${code}`)));
});
const db = { close: async () => void child.kill() };
const pool = createPool({ connectionString: url, max: size, connectionTimeoutMs: 60_000 });
const results: Record<string, unknown> = { rows: ROWS, samples: SAMPLES, ledgerEntries: ENTRIES };
try {
  process.stderr.write(`seeding ${ROWS} chunks and ${ENTRIES} ledger entries…\n`);
  const embedder = createLocalEmbedder();
  await ensureProfile(asRole(pool, INGESTION_ROLE), embedder.profile, true);
  const records = Array.from({ length: ROWS }, (_, i) => ({
    content: `document ${i} about topic ${i % 17} and subject ${i % 5}`,
    metadata: meta({ source: `docs/${i}.md`, principals: i % 2 === 0 ? [P.alice] : [P.bob] }),
  }));
  await withIngestionLease(pool, (writer) => ingestRecords(writer, embedder, records));
  // Live entries of other delegations, as 600 s of minting leaves them (exp far ahead of the DB clock).
  await pool.query(
    `INSERT INTO fgentic_ledger.capabilities (digest, agent, exp)
     SELECT sha256(convert_to('bench-' || i, 'UTF8')), 'kagent/knowledge-agent', extract(epoch FROM now())::bigint + 600
     FROM generate_series(1, $1::int) AS i`,
    [ENTRIES],
  );
  await pool.query('ANALYZE fgentic_ledger.capabilities');

  // ---- retrieval: the search transaction with and without the ledger check ----------------------
  const serving = asRole(pool, RETRIEVAL_ROLE);
  const header = matrixHeader({ caller: P.alice, audience: [P.alice] });
  const { decodeProjection } = await import('../contract/index.ts');
  const decoded = decodeProjection(header, { now: NOW, agents: [AGENT] });
  if (!decoded.ok) throw new Error('fixture projection invalid');
  const projection = decoded.value;
  await asRole(pool, PROJECTOR_ROLE).query('SELECT fgentic_ledger.record_v1($1::bytea, $2::text, $3::bigint)', [
    capabilityDigest(header),
    agentKey(projection.agent),
    NOW + 600,
  ]);
  const queries = await embedder.embed(Array.from({ length: 16 }, (_, i) => `topic ${i} subject ${i % 5}`));
  let q = 0;
  const proof = { digest: capabilityDigest(header), agent: agentKey(projection.agent), now: NOW };
  const searchArm = (experiment?: Experiment) => () =>
    searchKnowledge(serving, {
      projection,
      embedding: queries[q++ % queries.length]!,
      maxResults: 5,
      ...(experiment
        ? {
            capability: {
              ...proof,
              placement: experiment === 'sync' ? ('separate' as const) : ('folded' as const),
            },
          }
        : {}),
    });
  // Sanity: each ledger arm must really pass the check (a denial would be an exception).
  for (const e of EXPERIMENTS) await searchArm(e)();
  const arms = <T>(make: (e?: Experiment) => T): Record<string, T> => {
    const out: Record<string, T> = { plain: make() };
    for (const e of EXPERIMENTS) out[`ledger ${e}`] = make(e);
    return out;
  };
  process.stderr.write('measuring retrieval…\n');
  const search = (await alternate(arms(searchArm), SAMPLES)).samples;

  // ---- projector: plain vs ledger on the same HTTP stack, in this process -----------------------
  const fx = await import('../testkit/projector/fixtures.ts');
  const { sendCheck } = await import('../testkit/projector/client.ts');
  const { startProjector } = await import('../projector/index.ts');
  const { createLedger } = await import('../projector/ledger.ts');
  const { createWorkerLedger } = await import('../projector/ledger-worker.ts');
  const ledgers = EXPERIMENTS.map((e) =>
    e === 'worker'
      ? createWorkerLedger({ database: { connectionString: url, max: 2 }, purgeIntervalMs: 3_600_000 })
      : createLedger({ pool, confirm: e, purgeIntervalMs: 3_600_000 }),
  );
  let writeErrors = 0;
  for (const l of ledgers)
    l.onWrite((result, n) => {
      if (result === 'error') writeErrors += n;
    });
  for (const l of ledgers) {
    for (let i = 0; i < 200 && !l.healthy(); i++) await new Promise((r) => setTimeout(r, 50));
    if (!l.healthy()) throw new Error('ledger not reachable');
  }
  const projectors = arms((e) =>
    e === undefined
      ? startProjector({ config: fx.config(), now: () => fx.NOW })
      : startProjector({
          config: fx.config((c) => (c['capability'] = 'ledger')),
          now: () => fx.NOW,
          ledger: ledgers[EXPERIMENTS.indexOf(e)]!,
        }),
  );
  const running = Object.fromEntries(
    await Promise.all(Object.entries(projectors).map(async ([k, p]) => [k, await p] as const)),
  );
  const checkArm = (url: string) => async () => {
    const r = await sendCheck(url, fx.localRequest());
    if (r.status !== 200) throw new Error(`check denied (${r.body})`);
  };
  process.stderr.write('measuring projector…\n');
  const measured = await alternate(
    Object.fromEntries(Object.entries(running).map(([k, p]) => [k, checkArm(p.url)])),
    SAMPLES,
    child.pid,
  );
  const checks = measured.samples;
  for (const l of ledgers) await l.flush();
  // Every value a ledger arm answered must have been recorded, or the comparison is void.
  if (writeErrors > 0) throw new Error(`${writeErrors} ledger records failed`);
  for (const p of Object.values(running)) await p.close();

  const rows = (part: string, samples: Record<string, number[]>) => {
    const p = samples['plain']!;
    return Object.entries(samples).map(([arm, xs]) => ({
      part,
      arm,
      p50_ms: pct(xs, 50),
      p99_ms: pct(xs, 99),
      p50_ratio: pct(xs, 50) / pct(p, 50),
      p99_added_ms: pct(xs, 99) - pct(p, 99),
    }));
  };
  const table = [...rows('retrieval search transaction', search), ...rows('projector local check (HTTP)', checks)];
  const goals = EXPERIMENTS.flatMap((e) => {
    const r = table.find((x) => x.part.startsWith('retrieval') && x.arm === `ledger ${e}`)!;
    const pr = table.find((x) => x.part.startsWith('projector') && x.arm === `ledger ${e}`)!;
    return [
      { goal: 'retrieval p50 ratio ≤ 1.10', arm: `ledger ${e}`, value: r.p50_ratio, met: r.p50_ratio <= 1.1 },
      {
        goal: 'projector p99 added ≤ 0.5 ms',
        arm: `ledger ${e}`,
        value: pr.p99_added_ms,
        met: pr.p99_added_ms <= 0.5,
      },
    ];
  });
  // Where each projector arm's CPU goes, per check: the answering event loop (this process's main
  // thread, which also runs the benchmark's client), all of this process's threads, the database
  // process's main thread (PGlite runs there).
  const costs = Object.entries(measured.cost).map(([arm, c]) => ({
    arm,
    main_cpu_ms: c.mainCpuMs / c.samples,
    process_cpu_ms: c.processCpuMs / c.samples,
    database_cpu_ms: c.databaseCpuMs / c.samples,
  }));
  results['experiments'] = EXPERIMENTS;
  results['table'] = table;
  results['projectorCost'] = costs;
  results['goals'] = goals;
  results['loadavg'] = loadavg();
  const f = (x: number) => x.toFixed(3);
  process.stdout.write(
    `\nledger vs plain, embedded PGlite, ${ROWS} chunks, ${ENTRIES} live ledger entries, ${SAMPLES} samples per arm (load average ${loadavg()[0]!.toFixed(1)})\n`,
  );
  process.stdout.write('| part | arm | p50 ms | p99 ms | p50 ratio to plain | p99 added to plain ms |\n');
  process.stdout.write('|---|---|---|---|---|---|\n');
  for (const r of table)
    process.stdout.write(
      `| ${r.part} | ${r.arm} | ${f(r.p50_ms)} | ${f(r.p99_ms)} | ${r.p50_ratio.toFixed(2)} | ${f(r.p99_added_ms)} |\n`,
    );
  process.stdout.write(
    '\n| projector arm | main thread CPU ms/check | process CPU ms/check | database CPU ms/check |\n|---|---|---|---|\n',
  );
  for (const c of costs)
    process.stdout.write(
      `| ${c.arm} | ${f(c.main_cpu_ms)} | ${f(c.process_cpu_ms)} | ${Number.isNaN(c.database_cpu_ms) ? 'n/a' : f(c.database_cpu_ms)} |\n`,
    );
  process.stdout.write('\n| goal | arm | value | met |\n|---|---|---|---|\n');
  for (const g of goals)
    process.stdout.write(`| ${g.goal} | ${g.arm} | ${g.value.toFixed(3)} | ${g.met ? 'yes' : 'no'} |\n`);
  for (const l of ledgers) await l.close();
} finally {
  await pool.end().catch(() => {});
  await db.close();
}
mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
writeFileSync(new URL('./results/ledger.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
process.stdout.write('wrote bench/results/ledger.json\n');
