/**
 * bench:contract — decode + validate throughput and latency of X-Fgentic-Identity values.
 * Prints a table and writes bench/results/contract.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { decodeProjection } from '../contract/index.ts';
import { AGENT, encode, matrixExample, NOW, oauthExample } from '../testkit/contract/fixtures.ts';

function padAudience(n: number): Record<string, unknown> {
  const m = matrixExample();
  const audience = m['audience'] as object[];
  for (let k = 0; k < n; k++)
    audience.push({
      kind: 'matrix',
      principal: `@u${String(k).padStart(2, '0')}${'x'.repeat(40)}:org-a.example`,
    });
  return m;
}

const inputs: [string, string][] = [
  ['matrix (ADR example, 854 B)', encode(matrixExample())],
  ['matrix, 16-member audience', encode(padAudience(14))],
  ['oauth (ADR example, 534 B)', encode(oauthExample())],
  ['denied: non-canonical', encode(matrixExample()).replace(/^eyJ/, 'eyAi')],
];

const ITER = Number(process.env['BENCH_ITERATIONS'] ?? 50000);
const rows: Record<string, unknown>[] = [];
for (const [name, header] of inputs) {
  for (let k = 0; k < 2000; k++) decodeProjection(header, { now: NOW, agents: [AGENT] }); // warm-up
  const samples = new Float64Array(ITER);
  const start = process.hrtime.bigint();
  for (let k = 0; k < ITER; k++) {
    const t0 = process.hrtime.bigint();
    decodeProjection(header, { now: NOW, agents: [AGENT] });
    samples[k] = Number(process.hrtime.bigint() - t0) / 1000;
  }
  const totalS = Number(process.hrtime.bigint() - start) / 1e9;
  samples.sort();
  const q = (p: number) => samples[Math.min(ITER - 1, Math.floor(p * ITER))]!;
  rows.push({
    input: name,
    bytes: header.length,
    opsPerSec: Math.round(ITER / totalS),
    p50us: +q(0.5).toFixed(1),
    p99us: +q(0.99).toFixed(1),
  });
}
console.table(rows);
mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
writeFileSync(
  new URL('./results/contract.json', import.meta.url),
  `${JSON.stringify({ node: process.version, iterations: ITER, rows }, null, 2)}\n`,
);
