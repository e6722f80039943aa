/**
 * Registry benchmark: 100,000 rooms and 5,000 partner clients (BENCH_ROOMS / BENCH_PARTNERS).
 * Measures the render into shards, the projector's assembly of them, the projector's Matrix decision
 * over the full registry (p50/p99 against the same decision over the small example registry), and
 * the revocation latency: one room downgraded through the API-server double until the projector's
 * Kubernetes store serves the change. Prints a table and writes bench/results/registry.json.
 * Run: npm run bench:registry (node --expose-gc).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { render } from '../controller/render/index.ts';
import { CONFIGMAP_DATA_LIMIT, configMapBytes } from '../controller/render/server-config.ts';
import { loadResources } from '../controller/render-command.ts';
import type { K8sObject, PartnerClient, Resources, RetrievalRoom } from '../controller/types.ts';
import { kubeConfigStore } from '../projector/kube-store.ts';
import { decideMatrix } from '../projector/matrix.ts';
import { assembleConfig, REGISTRY_SHARD_PREFIX } from '../projector/registry.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { serviceAccountUser } from '../testkit/controller/rbac.ts';
import { config, localRequest, NOW, roomContext } from '../testkit/projector/fixtures.ts';

/** The projector's ServiceAccount: the double enforces the shipped RBAC (deploy/base/rbac-projector.yaml). */
const PROJECTOR = serviceAccountUser('knowledge', 'fgentic-projector');

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOMS = Number(process.env['BENCH_ROOMS'] ?? 100_000);
const PARTNERS = Number(process.env['BENCH_PARTNERS'] ?? 5_000);
const DECISIONS = Number(process.env['BENCH_DECISIONS'] ?? 20_000);
const REVOCATIONS = Number(process.env['BENCH_REVOCATIONS'] ?? 5);
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
const mib = (n: number) => Math.round((n / 1024 / 1024) * 10) / 10;
const roomId = (i: number) => `!r${i}abcdefghijklmnop:org-a.example`;

function corpus(): Resources {
  const base = loadResources([join(HERE, '../examples')]);
  const rooms: RetrievalRoom[] = [...base.rooms];
  for (let i = 0; i < ROOMS; i++) {
    const agreed = i % 5 === 0;
    rooms.push({
      apiVersion: 'retrieval.fgentic.dev/v1alpha1',
      kind: 'RetrievalRoom',
      metadata: { name: `room-${i}` },
      spec: {
        roomId: roomId(i),
        allowedClassifications: agreed ? ['approved_non_public', 'public'] : ['public'],
        ...(agreed ? { agreementRef: `agreement-${i}` } : {}),
      },
    });
  }
  const partners: PartnerClient[] = [...base.partners];
  const tpl = base.partners[0]!;
  for (let i = 0; i < PARTNERS; i++)
    partners.push({
      ...tpl,
      metadata: { name: `partner-${i}` },
      spec: {
        ...tpl.spec,
        azp: `org-${i}-a2a`,
        policyId: `org-${i}`,
        groups: [`partner/org-${i}/docs`, `partner/org-${i}/engineering`],
      },
    } as PartnerClient);
  return { ...base, rooms, partners };
}

function registryObjects(input: Resources): K8sObject[] {
  const r = render(input);
  if (r.conflicts.length) throw new Error(`render conflicts: ${r.conflicts.map((c) => c.reason).join(',')}`);
  return r.objects.filter((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('fgentic-projector-'));
}

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

const input = corpus();
registryObjects(input); // warm-up
gc();
const heap0 = process.memoryUsage().heapUsed;
const renderTimes: number[] = [];
let objects: K8sObject[] = [];
for (let r = 0; r < 3; r++) {
  const t0 = performance.now();
  objects = registryObjects(input);
  renderTimes.push(performance.now() - t0);
}
const renderHeap = process.memoryUsage().heapUsed - heap0;
const shards = objects.filter((o) => o.metadata.name.startsWith(REGISTRY_SHARD_PREFIX));
const maxShard = Math.max(...objects.map(configMapBytes));
const text = (o: K8sObject) => Object.values((o as unknown as { data: Record<string, string> }).data)[0]!;
const base = text(objects.find((o) => o.metadata.name === 'fgentic-projector-config')!);
const shardTexts = new Map(shards.map((o) => [o.metadata.name, text(o)]));

gc();
const heap1 = process.memoryUsage().heapUsed;
const assembleTimes: number[] = [];
let assembled = assembleConfig(base, shardTexts);
for (let r = 0; r < 3; r++) {
  const t0 = performance.now();
  assembled = assembleConfig(base, shardTexts);
  assembleTimes.push(performance.now() - t0);
}
if (!assembled.ok) throw new Error(`assembly failed: ${assembled.error}`);
const configHeap = process.memoryUsage().heapUsed - heap1;

// Decisions: the projector fixture's bridge and agents, with the big registry added to its rooms.
const small = config();
const big = config((c) => {
  for (let i = 0; i < ROOMS; i++) c['rooms'].push({ roomId: roomId(i), allowedClassifications: ['public'] });
});
const requests = Array.from({ length: 64 }, (_, k) =>
  localRequest({ ctx: roomContext({ roomId: roomId((k * 1_543) % ROOMS) }) }),
);
const smallRequest = localRequest();
function decisionLatencies(cfg: typeof small, pick: (i: number) => ReturnType<typeof localRequest>): number[] {
  const out: number[] = [];
  for (let i = 0; i < DECISIONS; i++) {
    const req = pick(i);
    const t0 = performance.now();
    const d = decideMatrix(req, cfg, { now: NOW });
    out.push(performance.now() - t0);
    if (!d.allow) throw new Error(`unexpected denial ${d.reason}`);
  }
  return out;
}
decisionLatencies(small, () => smallRequest); // warm-up
const bigLat = decisionLatencies(big, (i) => requests[i % requests.length]!);
const smallLat = decisionLatencies(small, () => smallRequest);

// Revocation through the API: the controller's writes (changed shard, then manifest) until the store
// serves the downgrade.
const api = await new ApiServerDouble().start();
for (const o of objects) api.put(o);
const store = kubeConfigStore({
  kubeConfig: api.kubeConfig(PROJECTOR),
  namespace: 'knowledge',
  maxHeartbeatAgeMs: 0,
});
await store.synced;
const revocations: number[] = [];
for (let r = 0; r < REVOCATIONS; r++) {
  const i = r * 5; // an agreed room: approved_non_public → public only
  const room = input.rooms.find((x) => x.metadata.name === `room-${i}`)!;
  room.spec = { roomId: room.spec.roomId, allowedClassifications: ['public'] };
  const next = registryObjects(input);
  const before = new Map(objects.map((o) => [o.metadata.name, JSON.stringify(o)]));
  const changed = next.filter((o) => before.get(o.metadata.name) !== JSON.stringify(o));
  const t0 = performance.now();
  for (const o of changed.filter((x) => x.metadata.name !== 'fgentic-projector-config')) api.put(o);
  for (const o of changed.filter((x) => x.metadata.name === 'fgentic-projector-config')) api.put(o);
  for (;;) {
    const s = store.current();
    if (s.ready && s.config.rooms.get(roomId(i))?.allowedClassifications.length === 1) break;
    await new Promise((res) => setTimeout(res, 2));
  }
  revocations.push(performance.now() - t0);
  objects = next;
}
store.close();
await api.stop();

const median = (xs: number[]) => quantile(xs, 0.5);
const rows: [string, string][] = [
  ['registry', `${ROOMS.toLocaleString()} rooms + ${PARTNERS.toLocaleString()} partners`],
  ['render (median of 3)', `${median(renderTimes).toFixed(0)} ms, heap +${mib(renderHeap)} MiB`],
  ['shards', `${shards.length}, largest ConfigMap ${maxShard} bytes (limit ${CONFIGMAP_DATA_LIMIT})`],
  ['projector assembly (median of 3)', `${median(assembleTimes).toFixed(0)} ms, config heap +${mib(configHeap)} MiB`],
  [
    'Matrix decision p50 / p99 (full registry)',
    `${(median(bigLat) * 1000).toFixed(1)} / ${(quantile(bigLat, 0.99) * 1000).toFixed(1)} µs`,
  ],
  [
    'Matrix decision p50 / p99 (example registry)',
    `${(median(smallLat) * 1000).toFixed(1)} / ${(quantile(smallLat, 0.99) * 1000).toFixed(1)} µs`,
  ],
  ['p99 ratio full ÷ example', (quantile(bigLat, 0.99) / quantile(smallLat, 0.99)).toFixed(2)],
  [
    `revocation through the API (${REVOCATIONS} runs)`,
    `median ${median(revocations).toFixed(0)} ms, max ${Math.max(...revocations).toFixed(0)} ms (goal < 2000 ms)`,
  ],
  ['RSS at end', `${mib(process.memoryUsage().rss)} MiB`],
];
const w = Math.max(...rows.map((r) => r[0].length));
for (const [k, v] of rows) process.stdout.write(`${k.padEnd(w)}  ${v}\n`);
mkdirSync(join(HERE, 'results'), { recursive: true });
writeFileSync(
  join(HERE, 'results', 'registry.json'),
  `${JSON.stringify(
    {
      rooms: ROOMS,
      partners: PARTNERS,
      renderMs: renderTimes,
      shards: shards.length,
      largestConfigMapBytes: maxShard,
      assembleMs: assembleTimes,
      decisionUs: {
        full: { p50: median(bigLat) * 1000, p99: quantile(bigLat, 0.99) * 1000 },
        example: { p50: median(smallLat) * 1000, p99: quantile(smallLat, 0.99) * 1000 },
      },
      revocationMs: revocations,
      loadAverage: (await import('node:os')).loadavg(),
    },
    null,
    2,
  )}\n`,
);
