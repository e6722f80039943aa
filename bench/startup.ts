/**
 * CLI start-up: the TypeScript sources through tsx (how the image ran before) against the compiled
 * dist/ with plain Node (how it runs now), interleaved in one run. Each sample is a fresh process,
 * timed from spawn to exit. Prints a table and writes bench/results/startup.json.
 * Run: npm run bench:startup (BENCH_RUNS, default 15).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..');
const RUNS = Number(process.env['BENCH_RUNS'] ?? 15);
// Inside the checkout, so the compiled modules resolve the same node_modules as the sources.
mkdirSync(join(REPO, 'bench/results'), { recursive: true });
const out = mkdtempSync(join(REPO, 'bench/results/dist-'));
const build = spawnSync(process.execPath, [join(REPO, 'scripts/build.mjs'), '--out-dir', out], {
  encoding: 'utf8',
});
if (build.status !== 0) throw new Error(`build failed: ${build.stderr}`);

const snapshot = JSON.stringify(
  JSON.parse(readFileSync(join(REPO, 'contract/vectors/snapshot.json'), 'utf8')).cases[0].snapshot,
);
const commands: { name: string; args: string[]; input?: string }[] = [
  { name: '--help', args: ['--help'] },
  { name: 'snapshot digest', args: ['snapshot', 'digest'], input: snapshot },
  { name: 'render -f examples', args: ['render', '-f', join(REPO, 'examples')] },
];
const variants = {
  'tsx (sources)': ['--import', 'tsx', join(REPO, 'cli/main.ts')],
  'node (dist)': [join(out, 'cli/main.js')],
};
type Variant = keyof typeof variants;

/** One fresh process: milliseconds from spawn to exit. */
function sample(args: string[], input?: string): number {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, {
    cwd: REPO,
    input: input ?? '',
    encoding: 'utf8',
    maxBuffer: 64 << 20,
  });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`exit ${r.status}: ${r.stderr}`);
  return ms;
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] as number;
};

const samples: Record<string, Record<Variant, number[]>> = {};
for (const c of commands) {
  samples[c.name] = { 'tsx (sources)': [], 'node (dist)': [] };
  // Warm the file cache and tsx's transform cache once, so both sides are measured warm.
  for (const v of Object.keys(variants) as Variant[]) sample([...variants[v], ...c.args], c.input);
  for (let i = 0; i < RUNS; i++)
    for (const v of Object.keys(variants) as Variant[])
      samples[c.name]![v].push(sample([...variants[v], ...c.args], c.input));
}
rmSync(out, { recursive: true, force: true });

const rows = commands.map((c) => {
  const s = samples[c.name]!;
  const tsx50 = quantile(s['tsx (sources)'], 0.5);
  const dist50 = quantile(s['node (dist)'], 0.5);
  return {
    command: c.name,
    tsxP50ms: Math.round(tsx50),
    distP50ms: Math.round(dist50),
    tsxP90ms: Math.round(quantile(s['tsx (sources)'], 0.9)),
    distP90ms: Math.round(quantile(s['node (dist)'], 0.9)),
    ratioP50: Number((tsx50 / dist50).toFixed(2)),
  };
});
console.log(`CLI start-up, ${RUNS} fresh processes per cell (interleaved), wall time to exit`);
console.log('command              tsx p50  dist p50  tsx p90  dist p90  tsx/dist');
for (const r of rows)
  console.log(
    `${r.command.padEnd(20)} ${`${r.tsxP50ms} ms`.padStart(8)} ${`${r.distP50ms} ms`.padStart(9)} ${`${r.tsxP90ms} ms`.padStart(8)} ${`${r.distP90ms} ms`.padStart(9)} ${`${r.ratioP50}x`.padStart(9)}`,
  );
mkdirSync(join(REPO, 'bench/results'), { recursive: true });
writeFileSync(
  join(REPO, 'bench/results/startup.json'),
  `${JSON.stringify({ runs: RUNS, node: process.version, rows, samples }, null, 2)}\n`,
);
