/**
 * bench:projector — ext-auth checks/s and p50/p99 latency on loopback at concurrency 1, 8, 32, 64,
 * side by side with a trivial allow-all server on the same node:http stack, in the same run.
 *
 * Each server runs in its own child process (pinned to CPU 1 with taskset when available, so "one
 * core" is literal); the load generator runs in this process (pinned to CPU 0) over keep-alive
 * connections, one connection per concurrent worker, bounded by time (BENCH_DURATION_MS per target and
 * level, split into BENCH_ROUNDS alternating rounds, each after a short warm-up). Loopback only.
 * The projector runs with its audit log silenced (FGENTIC_LOG_LEVEL=silent) unless BENCH_AUDIT=1.
 * Prints a table and writes bench/results/projector.json.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { IDENTITY_HEADER } from '../rules/index.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const CONCURRENCY = (process.env['BENCH_CONCURRENCY'] ?? '1,8,32,64').split(',').map(Number);
const DURATION_MS = Number(process.env['BENCH_DURATION_MS'] ?? 3000);
const WARMUP_MS = Number(process.env['BENCH_WARMUP_MS'] ?? 300);
/** Targets alternate in short rounds so that background load drifts affect them alike. */
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 4);

// ---- child mode: serve one target and print its port -------------------------------------------
async function serve(kind: string): Promise<void> {
  const fx = await import('../testkit/projector/fixtures.ts');
  let port: number;
  if (kind === 'allow-all') {
    // Same stack, same response shape (two identity headers, empty body), no decision at all.
    const id = 'e30'.repeat(300);
    const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
      req.resume();
      res.writeHead(200, {
        [IDENTITY_HEADER]: id,
        'x-user-id': fx.ALICE,
        'content-length': '0',
        'cache-control': 'no-store',
      });
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  } else {
    const { startProjector } = await import('../projector/index.ts');
    // A fixed clock keeps the fixture room context valid; the decision path is otherwise the real one.
    const p = await startProjector({ config: fx.config(), now: () => fx.NOW });
    port = Number(new URL(p.url).port);
  }
  process.stdout.write(`${port}\n`);
  await new Promise(() => {});
}

// ---- parent mode --------------------------------------------------------------------------------
interface Target {
  name: string;
  kind: 'allow-all' | 'projector';
  route: 'local' | 'public';
}

function hasTaskset(): boolean {
  return spawnSync('taskset', ['-c', '0', 'true']).status === 0;
}

async function startChild(kind: string, pin: boolean): Promise<{ child: ChildProcess; port: number }> {
  const args = ['--import', 'tsx', join(HERE, 'projector.ts'), '--serve', kind];
  const env = { ...process.env, FGENTIC_LOG_LEVEL: process.env['BENCH_AUDIT'] === '1' ? 'info' : 'silent' };
  const child = pin
    ? spawn('taskset', ['-c', '1', process.execPath, ...args], { stdio: ['ignore', 'pipe', 'ignore'], env })
    : spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'ignore'], env });
  const port = await new Promise<number>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (d) => {
      buf += d;
      const line = buf.split('\n')[0];
      if (buf.includes('\n') && line) resolve(Number(line));
    });
    child.once('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
  return { child, port };
}

interface Result {
  target: string;
  concurrency: number;
  requests: number;
  checks_per_s: number;
  p50_ms: number;
  p99_ms: number;
  non_2xx: number;
  errors: number;
}

async function load(
  port: number,
  req: { method: string; path: string; headers: Record<string, string> },
  concurrency: number,
  durationMs: number,
) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const one = () =>
    new Promise<number>((resolve, reject) => {
      const r = request(
        { host: '127.0.0.1', port, method: req.method, path: req.path, headers: req.headers, agent },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      r.on('error', reject);
      r.end();
    });
  const samples: number[] = [];
  let non2xx = 0;
  let errors = 0;
  let measuring = false;
  let stop = false;
  const worker = async () => {
    while (!stop) {
      const t0 = process.hrtime.bigint();
      try {
        const status = await one();
        if (measuring) {
          samples.push(Number(process.hrtime.bigint() - t0) / 1e6);
          if (status < 200 || status >= 300) non2xx += 1;
        }
      } catch {
        if (measuring) errors += 1;
      }
    }
  };
  const workers = Array.from({ length: concurrency }, worker);
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  measuring = true;
  const start = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, durationMs));
  measuring = false;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  stop = true;
  await Promise.all(workers);
  agent.destroy();
  return { samples, seconds, non2xx, errors };
}

function summarise(runs: Awaited<ReturnType<typeof load>>[]) {
  const samples = runs.flatMap((r) => r.samples).sort((a, b) => a - b);
  const seconds = runs.reduce((t, r) => t + r.seconds, 0);
  const q = (p: number) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))] ?? Number.NaN;
  return {
    requests: samples.length,
    rate: samples.length / seconds,
    p50: q(0.5),
    p99: q(0.99),
    non2xx: runs.reduce((t, r) => t + r.non2xx, 0),
    errors: runs.reduce((t, r) => t + r.errors, 0),
  };
}

/** In-process cost of the pure decision alone (no HTTP), to show where a check's time goes. */
async function decisionCost(): Promise<Record<string, number>> {
  const fx = await import('../testkit/projector/fixtures.ts');
  const { decide } = await import('../projector/decide.ts');
  const cfg = fx.config();
  const out: Record<string, number> = {};
  for (const [name, req] of [
    ['local', fx.localRequest()],
    ['public', fx.publicRequest()],
  ] as const) {
    const opts = { now: fx.NOW, randomBytes: fx.fixedRandom };
    for (let k = 0; k < 3000; k++) decide(req, cfg, opts);
    const n = 20000;
    const t0 = process.hrtime.bigint();
    for (let k = 0; k < n; k++) decide(req, cfg, opts);
    out[name] = Math.round(Number(process.hrtime.bigint() - t0) / n / 10) / 100;
  }
  return out;
}

async function main() {
  const fx = await import('../testkit/projector/fixtures.ts');
  const loadBefore = loadavg()[0]!;
  const pin = hasTaskset();
  if (pin) spawnSync('taskset', ['-cp', '0', String(process.pid)], { stdio: 'ignore' });
  const flat = (h: Record<string, readonly string[] | undefined>) => {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(h)) if (k !== 'host' && v?.[0] !== undefined) out[k] = v[0];
    return out;
  };
  const local = fx.localRequest();
  const pub = fx.publicRequest();
  const requests = {
    local: { method: local.method, path: local.path, headers: flat(local.headers) },
    public: { method: pub.method, path: pub.path, headers: flat(pub.headers) },
  };
  const targets: Target[] = [
    { name: 'allow-all (node:http)', kind: 'allow-all', route: 'local' },
    { name: 'projector local (Matrix)', kind: 'projector', route: 'local' },
    { name: 'projector public (OAuth)', kind: 'projector', route: 'public' },
  ];
  const servers = {
    'allow-all': await startChild('allow-all', pin),
    projector: await startChild('projector', pin),
  };
  const results: Result[] = [];
  try {
    for (const c of CONCURRENCY) {
      const runs = new Map<Target, Awaited<ReturnType<typeof load>>[]>(targets.map((t) => [t, []]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const t of targets) {
          runs.get(t)!.push(await load(servers[t.kind].port, requests[t.route], c, DURATION_MS / ROUNDS));
        }
      }
      for (const t of targets) {
        const r = summarise(runs.get(t)!);
        results.push({
          target: t.name,
          concurrency: c,
          requests: r.requests,
          checks_per_s: Math.round(r.rate),
          p50_ms: Math.round(r.p50 * 1000) / 1000,
          p99_ms: Math.round(r.p99 * 1000) / 1000,
          non_2xx: r.non2xx,
          errors: r.errors,
        });
      }
    }
  } finally {
    for (const s of Object.values(servers)) s.child.kill('SIGTERM');
  }

  const baseline = new Map(results.filter((r) => r.target.startsWith('allow-all')).map((r) => [r.concurrency, r]));
  const rows = results.map((r) => {
    const b = baseline.get(r.concurrency)!;
    return { ...r, p99_vs_allow_all: Math.round((r.p99_ms / b.p99_ms) * 100) / 100 };
  });
  const header = ['target', 'conc', 'checks/s', 'p50 ms', 'p99 ms', 'p99 ÷ allow-all', 'non-2xx', 'errors'];
  const lines = rows.map((r) => [
    r.target,
    String(r.concurrency),
    String(r.checks_per_s),
    r.p50_ms.toFixed(3),
    r.p99_ms.toFixed(3),
    r.p99_vs_allow_all.toFixed(2),
    String(r.non_2xx),
    String(r.errors),
  ]);
  const widths = header.map((h, k) => Math.max(h.length, ...lines.map((l) => l[k]!.length)));
  const fmt = (cols: string[]) =>
    cols.map((c, k) => (k === 0 ? c.padEnd(widths[k]!) : c.padStart(widths[k]!))).join('  ');
  console.log(fmt(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const l of lines) console.log(fmt(l));
  const projectorRows = rows.filter((r) => r.target.startsWith('projector'));
  const goals = {
    p99_within_1_3x_allow_all: projectorRows.every((r) => r.p99_vs_allow_all <= 1.3),
    at_least_5000_checks_per_s: projectorRows.some((r) => r.checks_per_s >= 5000),
  };
  console.log(
    `\ngoals: p99 ≤ 1.3× allow-all at every level: ${goals.p99_within_1_3x_allow_all}; ≥ 5,000 checks/s: ${goals.at_least_5000_checks_per_s}`,
  );
  const cost = await decisionCost();
  console.log(
    `pure decision in-process (µs/check, load generator core): local ${cost['local']}, public ${cost['public']}`,
  );
  const load1 = { before: Math.round(loadBefore * 100) / 100, after: Math.round(loadavg()[0]! * 100) / 100 };
  console.log(
    `1-min load average before/after: ${load1.before} / ${load1.after} (2 CPUs; other work on the machine skews both targets)`,
  );
  const out = join(HERE, 'results', 'projector.json');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(
    out,
    `${JSON.stringify(
      {
        benchmark: 'projector',
        node: process.version,
        pinned_server_cpu: pin ? 1 : null,
        audit_log: process.env['BENCH_AUDIT'] === '1',
        duration_ms_per_target_and_level: DURATION_MS,
        rounds: ROUNDS,
        warmup_ms_per_round: WARMUP_MS,
        results: rows,
        decision_us_in_process: cost,
        load_average_1m: load1,
        goals,
      },
      null,
      2,
    )}\n`,
  );
  console.log(`wrote ${out}`);
}

const serveIndex = process.argv.indexOf('--serve');
if (serveIndex >= 0) await serve(process.argv[serveIndex + 1] ?? '');
else await main();
