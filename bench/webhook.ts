/**
 * bench:webhook — AdmissionReviews/s and p50/p99 latency at concurrency 1, 8, 32 for the admission
 * webhook, side by side with a trivial allow-all webhook on the same HTTPS stack (webhook/server.ts:
 * node:https, the same body handling and metrics) in the same run. Goal: webhook p99 ≤ 1.3× allow-all.
 *
 * Each server runs in its own child process (pinned with taskset when available); the load generator
 * runs here over keep-alive TLS connections, one per concurrent worker, bounded by time. Loopback only.
 * The request mix is a fixed rotation of real AdmissionReview v1 bodies (ordinary Agent, rendered
 * retrieval Agent by the controller, a denied Agent, a v1alpha1 Agent, an UPDATE, a room and a partner).
 * Prints a table and writes bench/results/webhook.json.
 */

import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeSelfSignedCert } from '../common/dev-tls.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const CONCURRENCY = (process.env['BENCH_CONCURRENCY'] ?? '1,8,32').split(',').map(Number);
const DURATION_MS = Number(process.env['BENCH_DURATION_MS'] ?? 4000);
const WARMUP_MS = Number(process.env['BENCH_WARMUP_MS'] ?? 700);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 16);
const TARGETS = ['allow-all', 'webhook'] as const;

// ---- child mode: serve one target and print its port -------------------------------------------
async function serve(kind: string, certDir: string): Promise<void> {
  const { startWebhookServer } = await import('../webhook/server.ts');
  const { handleReview } = await import('../webhook/main.ts');
  const { DEFAULT_RULES_CONFIG } = await import('../webhook/rules/types.ts');
  const { StaticClusterView } = await import('../webhook/view.ts');
  const fx = await import('../testkit/webhook.ts');
  const rooms = Array.from({ length: 200 }, (_, i) => fx.room(`room-${i}`, `!r${i}:org-a.example`));
  const partners = Array.from({ length: 50 }, (_, i) =>
    fx.partner(`p-${i}`, { azp: `azp-${i}`, policyId: `org-${i}`, groups: [`partner/org-${i}/docs`] }),
  );
  const view = new StaticClusterView([fx.platform(), fx.retrievalAgentCr(), ...rooms, ...partners]);
  const handler =
    kind === 'allow-all'
      ? (body: Buffer) => {
          // The least a real webhook must do: decode the review and echo its uid.
          let uid = '';
          try {
            uid = String(JSON.parse(body.toString('utf8'))?.request?.uid ?? '');
          } catch {}
          return {
            review: {
              apiVersion: 'admission.k8s.io/v1' as const,
              kind: 'AdmissionReview' as const,
              response: { uid, allowed: true },
            },
            kind: 'other',
            verdict: 'allowed' as const,
            reason: 'ok',
            namespace: '',
            name: '',
          };
        }
      : (body: Buffer) => handleReview(body, view, DEFAULT_RULES_CONFIG, () => true);
  const srv = await startWebhookServer({ certDir, port: 0, host: '127.0.0.1', handler });
  process.stdout.write(`${JSON.stringify({ port: srv.port })}\n`);
}

// ---- parent mode ---------------------------------------------------------------------------------
async function bodies(): Promise<Buffer[]> {
  const fx = await import('../testkit/webhook.ts');
  const denied = fx.plainAgent('denied', 'team-a');
  (((denied['spec'] as never)['declarative'] as never)['tools'] as Record<string, Record<string, unknown>>[])[0]![
    'mcpServer'
  ]!['allowedHeaders'] = ['Authorization', 'x-tenant'];
  const changed = fx.retrievalAgent();
  return [
    fx.admissionReview(fx.plainAgent()),
    fx.admissionReview(fx.retrievalAgent(), { user: fx.CONTROLLER }),
    fx.admissionReview(denied),
    fx.admissionReview(fx.v1alpha1Agent()),
    fx.admissionReview(changed, { operation: 'UPDATE', oldObject: fx.retrievalAgent(), user: fx.CONTROLLER }),
    fx.admissionReview(fx.room('new-room', '!new:org-a.example')),
    fx.admissionReview(fx.partner('new-partner', { azp: 'new', policyId: 'new', groups: ['partner/new/docs'] })),
  ].map((b) => Buffer.from(JSON.stringify(b)));
}

function startChild(
  target: string,
  certDir: string,
  cpu: string | undefined,
): Promise<{ child: ChildProcess; port: number }> {
  const args = [...process.execArgv, fileURLToPath(import.meta.url), '--serve', target, certDir];
  const useTaskset = cpu !== undefined && spawnSync('taskset', ['--version']).status === 0;
  const child = useTaskset
    ? spawn('taskset', ['-c', cpu, process.execPath, ...args], {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, FGENTIC_LOG_LEVEL: 'silent' },
      })
    : spawn(process.execPath, args, {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, FGENTIC_LOG_LEVEL: 'silent' },
      });
  return new Promise((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (c: Buffer) => {
      buf += c.toString();
      const nl = buf.indexOf('\n');
      if (nl >= 0) resolve({ child, port: JSON.parse(buf.slice(0, nl)).port });
    });
    child.once('exit', (code) => reject(new Error(`${target} exited ${code}`)));
  });
}

interface Row {
  target: string;
  concurrency: number;
  requests: number;
  reviewsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  serverCpuUsPerReview: number;
  errors: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

interface Slice {
  latencies: number[];
  errors: number;
  seconds: number;
  /** Server process CPU seconds spent during the slice (Linux /proc; NaN elsewhere). */
  cpuSeconds: number;
}

/** utime+stime of a process in seconds, from /proc (the usual 100 Hz clock tick). */
function processCpuSeconds(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

async function load(
  port: number,
  ca: string,
  concurrency: number,
  payloads: Buffer[],
  ms: number,
  pid?: number,
): Promise<Slice> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency, ca, servername: 'localhost' });
  const latencies: number[] = [];
  let errors = 0;
  let next = 0;
  const deadline = performance.now() + ms;
  const one = (body: Buffer) =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/validate',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': body.length },
        },
        (res) => {
          let n = 0;
          res.on('data', (c: Buffer) => {
            n += c.length;
          });
          res.on('end', () => {
            if (res.statusCode === 200 && n > 0) latencies.push(performance.now() - t0);
            else errors++;
            resolve();
          });
        },
      );
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(body);
    });
  // Open the connections first so TLS handshakes are not part of the measured slice.
  await Promise.all(Array.from({ length: concurrency }, () => one(payloads[0]!)));
  latencies.length = 0;
  const cpu0 = processCpuSeconds(pid);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) await one(payloads[next++ % payloads.length]!);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpuSeconds = processCpuSeconds(pid) - cpu0;
  agent.destroy();
  return { latencies, errors, seconds, cpuSeconds };
}

function summarise(target: string, concurrency: number, slices: Slice[]): Row {
  const all = slices.flatMap((s) => s.latencies).sort((a, b) => a - b);
  const seconds = slices.reduce((n, s) => n + s.seconds, 0);
  return {
    target,
    concurrency,
    requests: all.length,
    reviewsPerSecond: Math.round(all.length / seconds),
    p50Ms: Number(percentile(all, 50).toFixed(3)),
    p99Ms: Number(percentile(all, 99).toFixed(3)),
    serverCpuUsPerReview: Number(((slices.reduce((n, s) => n + s.cpuSeconds, 0) / all.length) * 1e6).toFixed(1)),
    errors: slices.reduce((n, s) => n + s.errors, 0),
  };
}

async function main(): Promise<void> {
  if (spawnSync('openssl', ['version']).status !== 0) {
    process.stderr.write('bench:webhook needs the openssl CLI to make a loopback certificate\n');
    process.exit(1);
  }
  const dir = mkdtempSync(join(tmpdir(), 'fgentic-bench-webhook-'));
  makeSelfSignedCert(dir);
  const ca = readFileSync(join(dir, 'tls.crt'), 'utf8');
  // Load generator on CPU 0, servers on CPU 1 (when taskset exists), so the two never share a core.
  if (spawnSync('taskset', ['-c', '0', 'true']).status === 0)
    spawnSync('taskset', ['-cp', '0', String(process.pid)], { stdio: 'ignore' });
  const payloads = await bodies();
  const children: ChildProcess[] = [];
  const rows: Row[] = [];
  try {
    const ports: Record<string, number> = {};
    const pids: Record<string, number | undefined> = {};
    for (const t of TARGETS) {
      const { child, port } = await startChild(t, dir, '1');
      children.push(child);
      ports[t] = port;
      pids[t] = child.pid;
    }
    // Interleave short slices of both targets (alternating which goes first) and merge the samples,
    // so background load on a shared machine hits both sides alike.
    for (const c of CONCURRENCY) {
      for (const t of TARGETS) await load(ports[t]!, ca, c, payloads, WARMUP_MS);
      const slices: Record<string, Slice[]> = { 'allow-all': [], webhook: [] };
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 === 0 ? TARGETS : [...TARGETS].reverse();
        for (const t of order) slices[t]!.push(await load(ports[t]!, ca, c, payloads, DURATION_MS / ROUNDS, pids[t]));
      }
      for (const t of TARGETS) rows.push(summarise(t, c, slices[t]!));
    }
  } finally {
    for (const c of children) c.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
  const table = [
    [
      'concurrency',
      'allow-all rev/s',
      'allow-all p99 ms',
      'webhook rev/s',
      'webhook p50 ms',
      'webhook p99 ms',
      'p99 ratio',
      'cpu us/rev (allow/webhook)',
      'errors',
    ],
  ];
  const summary = CONCURRENCY.map((c) => {
    const a = rows.find((r) => r.target === 'allow-all' && r.concurrency === c)!;
    const w = rows.find((r) => r.target === 'webhook' && r.concurrency === c)!;
    const ratio = Number((w.p99Ms / a.p99Ms).toFixed(2));
    table.push([
      String(c),
      String(a.reviewsPerSecond),
      a.p99Ms.toFixed(3),
      String(w.reviewsPerSecond),
      w.p50Ms.toFixed(3),
      w.p99Ms.toFixed(3),
      ratio.toFixed(2),
      `${a.serverCpuUsPerReview} / ${w.serverCpuUsPerReview}`,
      String(a.errors + w.errors),
    ]);
    return { concurrency: c, p99Ratio: ratio, withinGoal: ratio <= 1.3 };
  });
  const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)));
  for (const r of table) process.stdout.write(`${r.map((v, i) => v.padStart(widths[i]!)).join('  ')}\n`);
  process.stdout.write(
    `goal: webhook p99 <= 1.3x allow-all p99 -> ${summary.every((s) => s.withinGoal) ? 'met' : 'NOT met'}\n`,
  );
  mkdirSync(join(HERE, 'results'), { recursive: true });
  writeFileSync(
    join(HERE, 'results', 'webhook.json'),
    `${JSON.stringify({ bench: 'webhook', node: process.version, durationMs: DURATION_MS, rounds: ROUNDS, mix: payloads.length, rows, summary }, null, 2)}\n`,
  );
}

if (process.argv[2] === '--serve') {
  serve(process.argv[3] ?? '', process.argv[4] ?? '').catch((err) => {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(1);
  });
} else {
  main().catch((err) => {
    process.stderr.write(`${(err as Error).stack}\n`);
    process.exit(1);
  });
}
