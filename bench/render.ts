/**
 * Render benchmark: 1,000 retrieval Agents, 10,000 rooms, 1,000 partner clients through the pure
 * render (and YAML serialisation). Prints a table and writes bench/results/render.json.
 * Run: npm run bench:render (node --expose-gc).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { analyse } from '../controller/render/conflicts.ts';
import { render } from '../controller/render/index.ts';
import type { Model } from '../controller/render/model.ts';
import { projectorConfig } from '../controller/render/server-config.ts';
import { loadResources, toYaml } from '../controller/render-command.ts';
import type { PartnerClient, Resources, RetrievalAgent, RetrievalRoom } from '../controller/types.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const AGENTS = Number(process.env['BENCH_AGENTS'] ?? 1000);
const ROOMS = Number(process.env['BENCH_ROOMS'] ?? 10000);
const PARTNERS = Number(process.env['BENCH_PARTNERS'] ?? 1000);
const RUNS = Number(process.env['BENCH_RUNS'] ?? 5);
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);

function b64url43(i: number): string {
  const s = Buffer.from(`room-${i}-${'x'.repeat(40)}`).toString('base64url');
  return s.slice(0, 43);
}

function corpus(): Resources {
  const base = loadResources([join(HERE, '../examples')]);
  const agentTpl = base.agents[0] as RetrievalAgent;
  const agents: RetrievalAgent[] = [];
  for (let i = 0; i < AGENTS; i++) {
    const ns = `team-${String(i % 20).padStart(2, '0')}`;
    agents.push({
      ...agentTpl,
      metadata: {
        name: `retrieval-agent-${String(i).padStart(4, '0')}`,
        namespace: ns,
        uid: `uid-agent-${i}`,
        generation: 1,
      },
      spec: { ...agentTpl.spec, public: i % 2 === 0, rateLimit: { requestsPerMinute: 30 + (i % 90) } },
    });
  }
  const rooms: RetrievalRoom[] = [];
  for (let i = 0; i < ROOMS; i++) {
    const agreed = i % 5 === 0;
    rooms.push({
      apiVersion: 'retrieval.fgentic.dev/v1alpha1',
      kind: 'RetrievalRoom',
      metadata: { name: `room-${i}` },
      spec: {
        roomId: i % 3 === 0 ? `!${b64url43(i)}` : `!r${i}:org-a.example`,
        allowedClassifications: agreed ? ['approved_non_public', 'public'] : ['public'],
        ...(agreed ? { agreementRef: `agreement-${i}` } : {}),
      },
    });
  }
  const partners: PartnerClient[] = [];
  for (let i = 0; i < PARTNERS; i++) {
    const policy = `org-${i}`;
    partners.push({
      apiVersion: 'retrieval.fgentic.dev/v1alpha1',
      kind: 'PartnerClient',
      metadata: { name: `partner-${i}` },
      spec: {
        issuer: 'https://issuer.example',
        audience: 'fgentic-a2a',
        azp: `${policy}-a2a`,
        policyId: policy,
        groups: [`partner/${policy}/docs`, `partner/${policy}/engineering`],
        allowedClassifications: ['public'],
        agents: [0, 1, 2].map((k) => {
          const j = (i * 3 + k) % AGENTS;
          return {
            namespace: `team-${String(j % 20).padStart(2, '0')}`,
            name: `retrieval-agent-${String(j).padStart(4, '0')}`,
          };
        }),
      },
    });
  }
  return { platforms: base.platforms, agents, rooms, partners };
}

function mib(n: number): number {
  return Math.round((n / 1024 / 1024) * 10) / 10;
}

const input = corpus();
render(input); // warm-up (JIT)
const times: number[] = [];
const yamlTimes: number[] = [];
let objects = 0;
let conflicts = 0;
let yamlBytes = 0;
let peakHeapDelta = 0;
let peakRenderHeapDelta = 0;
let conflictDetail: string[] = [];
let registryBytes = 0;
let peakRss = 0;
for (let r = 0; r < RUNS; r++) {
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  const t0 = performance.now();
  const out = render(input);
  const t1 = performance.now();
  peakRenderHeapDelta = Math.max(peakRenderHeapDelta, process.memoryUsage().heapUsed - heap0);
  const yaml = toYaml(out.objects);
  const t2 = performance.now();
  const mem = process.memoryUsage();
  peakHeapDelta = Math.max(peakHeapDelta, mem.heapUsed - heap0);
  peakRss = Math.max(peakRss, mem.rss);
  times.push(t1 - t0);
  yamlTimes.push(t2 - t1);
  objects = out.objects.length;
  conflicts = out.conflicts.length;
  if (r === 0) {
    conflictDetail = out.conflicts.map((c) => `${c.reason}: ${c.message}`);
    registryBytes = Buffer.byteLength(JSON.stringify(projectorConfig(analyse(input).model as Model)));
  }
  yamlBytes = Buffer.byteLength(yaml);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
const result = {
  benchmark: 'render',
  date: new Date().toISOString(),
  node: process.version,
  input: { agents: AGENTS, rooms: ROOMS, partners: PARTNERS },
  runs: RUNS,
  renderMs: {
    median: Math.round(median(times)),
    min: Math.round(Math.min(...times)),
    max: Math.round(Math.max(...times)),
  },
  yamlMs: { median: Math.round(median(yamlTimes)) },
  objects,
  conflicts,
  conflictDetail,
  projectorJsonBytes: registryBytes,
  yamlMiB: mib(yamlBytes),
  peakRenderHeapDeltaMiB: mib(peakRenderHeapDelta),
  peakHeapDeltaMiB: mib(peakHeapDelta),
  peakRssMiB: mib(Math.max(peakRss, process.resourceUsage().maxRSS * 1024)),
  gcExposed: typeof (globalThis as { gc?: unknown }).gc === 'function',
};

const rows: [string, string][] = [
  ['input', `${AGENTS} agents, ${ROOMS} rooms, ${PARTNERS} partners`],
  ['rendered objects', String(objects)],
  ['conflicts', conflicts ? `${conflicts} (${conflictDetail.join('; ')})` : '0'],
  ['projector.json size', `${registryBytes} bytes (ConfigMap data limit 1048576)`],
  [
    'render (median of runs)',
    `${result.renderMs.median} ms (min ${result.renderMs.min}, max ${result.renderMs.max}, ${RUNS} runs)`,
  ],
  ['YAML serialisation (median)', `${result.yamlMs.median} ms, ${result.yamlMiB} MiB`],
  ['heap growth after render (retained output)', `${result.peakRenderHeapDeltaMiB} MiB`],
  ['peak heap growth during render+YAML', `${result.peakHeapDeltaMiB} MiB`],
  ['peak RSS (process)', `${result.peakRssMiB} MiB`],
];
const w = Math.max(...rows.map((r) => r[0].length));
process.stdout.write(`${rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`).join('\n')}\n`);
mkdirSync(join(HERE, 'results'), { recursive: true });
writeFileSync(join(HERE, 'results/render.json'), `${JSON.stringify(result, null, 2)}\n`);
