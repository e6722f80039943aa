/**
 * Controller benchmark: API requests and latency of the reconciler at 1,000 agents / 10,000 rooms /
 * 1,000 partners (BENCH_AGENTS / BENCH_ROOMS / BENCH_PARTNERS) against the API-server double with a
 * per-request latency (BENCH_LATENCY_MS, default 2), as the controller's ServiceAccount under the
 * shipped RBAC (plus one name per agent in the two MCP-key Roles, as deploy/base/rbac-controller.yaml
 * asks).
 *
 * Arms (BENCH_ARMS, default `full,incremental`), each on a fresh double seeded with the same resources:
 *   full        — the shipped controller (startController: informers, hashes, pool of 8, backoff,
 *                 200 ms debounce) with `incremental: false`: every pass renders, hashes and compares
 *                 every object, as before the incremental render;
 *   incremental — the shipped controller as it runs by default.
 * Scenarios per arm: initial sync, no-op resync, one RetrievalRoom change, one RetrievalAgent change.
 * For each: writes (apply / status / delete / event), reads (get / list / discovery), watches opened,
 * the time from the API change until the rendered object that carries it was applied, where that
 * time went (watch delivery, debounce and queue, each stage of the pass), and peak memory (the
 * double runs in the same process, the same for every arm).
 * Prints a table and writes bench/results/controller.json. Run: npm run bench:controller.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type PassTiming, startController } from '../controller/cli.ts';
import { KubeClient, RENDERED_KINDS } from '../controller/kube/client.ts';
import { PASS_STAGES, type PassStage } from '../controller/reconcile.ts';
import { render } from '../controller/render/index.ts';
import { loadResources } from '../controller/render-command.ts';
import type { K8sObject, PartnerClient, Resources, RetrievalAgent, RetrievalRoom } from '../controller/types.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { kustomizeDocs, RbacAuthorizer } from '../testkit/controller/rbac.ts';
import { seedReconciled as seedCluster } from './controller-scale-cluster.ts';

// `--revocation` and `--faults`: the scale and fault schedules (bench/controller-scale.ts).
if (process.argv.includes('--revocation') || process.argv.includes('--faults')) {
  await import('./controller-scale.ts');
  process.exit(0);
}

const HERE = dirname(fileURLToPath(import.meta.url));
const AGENTS = Number(process.env['BENCH_AGENTS'] ?? 1000);
const ROOMS = Number(process.env['BENCH_ROOMS'] ?? 10_000);
const PARTNERS = Number(process.env['BENCH_PARTNERS'] ?? 1000);
const LATENCY = Number(process.env['BENCH_LATENCY_MS'] ?? 2);
const ARMS = (process.env['BENCH_ARMS'] ?? 'full,incremental').split(',');
for (const a of ARMS) if (!['full', 'incremental'].includes(a)) throw new Error(`unknown arm ${a}`);
const NS = 'kagent';
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
const mib = (n: number) => Math.round((n / 1024 / 1024) * 10) / 10;

const agentName = (i: number) => `retrieval-agent-${String(i).padStart(4, '0')}`;
const keySecret = (i: number) => `${agentName(i)}-mcp-credential`;
const roomIdOf = (i: number) => `!r${i}:org-a.example`;

/** Our four kinds at scale: every agent in `kagent` with its own MCP key Secret. */
function corpus(): Resources {
  const base = loadResources([join(HERE, '../examples')]);
  const tpl = base.agents[0] as RetrievalAgent;
  const agents: RetrievalAgent[] = [];
  for (let i = 0; i < AGENTS; i++)
    agents.push({
      ...tpl,
      metadata: { name: agentName(i), namespace: NS },
      spec: {
        ...tpl.spec,
        public: i % 2 === 0,
        rateLimit: { requestsPerMinute: 30 + (i % 90) },
        mcpApiKeySecretRef: { name: keySecret(i), key: 'authorization' },
      },
    });
  const rooms: RetrievalRoom[] = [];
  for (let i = 0; i < ROOMS; i++) {
    const agreed = i % 5 === 0;
    rooms.push({
      apiVersion: 'retrieval.fgentic.dev/v1alpha1',
      kind: 'RetrievalRoom',
      metadata: { name: `room-${i}` },
      spec: {
        roomId: roomIdOf(i),
        allowedClassifications: agreed ? ['approved_non_public', 'public'] : ['public'],
        ...(agreed ? { agreementRef: `agreement-${i}` } : {}),
      },
    });
  }
  const partners: PartnerClient[] = [];
  for (let i = 0; i < PARTNERS; i++)
    partners.push({
      apiVersion: 'retrieval.fgentic.dev/v1alpha1',
      kind: 'PartnerClient',
      metadata: { name: `partner-${i}` },
      spec: {
        issuer: 'https://issuer.example',
        audience: 'fgentic-a2a',
        azp: `org-${i}-a2a`,
        policyId: `org-${i}`,
        groups: [`partner/org-${i}/docs`],
        allowedClassifications: ['public'],
        agents: [0, 1, 2].map((k) => ({ namespace: NS, name: agentName((i * 3 + k) % AGENTS) })),
      },
    });
  return { platforms: base.platforms, agents, rooms, partners };
}

/**
 * The shipped RBAC, with every agent's MCP key Secret named in the key Role and every agent's mirror
 * in the mirror Role (one name per agent in each, as deploy/base/rbac-controller.yaml asks).
 */
function rbac(): RbacAuthorizer {
  const names: Record<string, string[]> = {
    'fgentic-retrieval-controller-mcp-keys': Array.from({ length: AGENTS }, (_, i) => keySecret(i)),
    'fgentic-retrieval-controller-mcp-key-mirrors': Array.from(
      { length: AGENTS },
      (_, i) => `fgentic-mcp-key.${NS}.${agentName(i)}`,
    ),
  };
  const docs = kustomizeDocs(join(HERE, '../deploy/base')).map((d) => {
    const extra = d['kind'] === 'Role' ? names[d['metadata']?.name] : undefined;
    if (!extra) return d;
    return {
      ...d,
      rules: (d['rules'] as { resourceNames?: string[] }[]).map((r) => ({ ...r, resourceNames: extra })),
    };
  });
  return new RbacAuthorizer(docs);
}

interface Counts {
  writes: number;
  applies: number;
  statusWrites: number;
  deletes: number;
  events: number;
  reads: number;
  discovery: number;
  watches: number;
}

/** Classifies the double's request log (leader election excluded: it is the same for both arms). */
function count(requests: string[]): Counts {
  const c: Counts = {
    writes: 0,
    applies: 0,
    statusWrites: 0,
    deletes: 0,
    events: 0,
    reads: 0,
    discovery: 0,
    watches: 0,
  };
  for (const r of requests) {
    const [method, url = ''] = r.split(' ');
    const path = url.split('?')[0] ?? '';
    if (path.includes('/leases')) continue;
    const parts = path.split('/').filter(Boolean);
    const isDiscovery =
      parts[0] === 'openapi' || (parts[0] === 'api' && parts.length <= 2) || (parts[0] === 'apis' && parts.length <= 3);
    if (method === 'GET') {
      if (/[?&]watch=(true|1)/.test(url)) c.watches++;
      else if (isDiscovery) c.discovery++;
      else c.reads++;
      continue;
    }
    c.writes++;
    if (path.includes('/events')) c.events++;
    else if (method === 'DELETE') c.deletes++;
    else if (path.endsWith('/status')) c.statusWrites++;
    else c.applies++;
  }
  return c;
}

/** Records when the first applied object satisfying `pred` came back from the API server. */
class Stopwatch {
  private pred: ((o: K8sObject) => boolean) | undefined;
  private resolve: ((t: number) => void) | undefined;
  arm(pred: (o: K8sObject) => boolean): Promise<number> {
    this.pred = pred;
    return new Promise((r) => {
      this.resolve = r;
    });
  }
  seen(o: K8sObject): void {
    if (this.pred?.(o)) {
      this.pred = undefined;
      this.resolve?.(performance.now());
    }
  }
}

/** A KubeClient whose applies report to the stopwatch. */
function watchedClient(api: ApiServerDouble, sw: Stopwatch): KubeClient {
  const client = new KubeClient(api.kubeConfig());
  const apply = client.apply.bind(client);
  client.apply = async (o: K8sObject) => {
    const stored = await apply(o);
    sw.seen(o);
    return stored;
  };
  return client;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until the double has seen no request but leader election for `quietMs`. */
async function quiet(api: ApiServerDouble, quietMs = 1500, maxMs = 900_000): Promise<void> {
  const end = Date.now() + maxMs;
  let n = api.requests.length;
  let since = Date.now();
  while (Date.now() < end) {
    await sleep(100);
    const fresh = api.requests.slice(n).filter((r) => !r.includes('/leases'));
    n = api.requests.length;
    if (fresh.length > 0) since = Date.now();
    else if (Date.now() - since >= quietMs) return;
  }
  throw new Error('the controller never went quiet');
}

interface Scenario {
  name: string;
  counts: Counts;
  /** ms from the API change until the object carrying it was applied (change scenarios only). */
  latencyMs?: number;
  /** ms until the API server saw no more requests (the whole pass or passes). */
  durationMs: number;
  /** CPU time of the process meanwhile (controller and double together). */
  cpuMs: number;
  /** Writes to objects other than the changed resource's own rendered objects and status. */
  foreignWrites?: number;
  /** Where the change → applied time went (controller arms, change scenarios). */
  breakdown?: Breakdown;
}

/** ms from the API change: watch delivery, then debounce and queue, then the pass's stages. */
type Breakdown = { delivery: number; wait: number; agentsRendered: number } & Record<PassStage, number>;

interface Arm {
  arm: string;
  scenarios: Scenario[];
  peakRssMiB: number;
  peakHeapMiB: number;
}

/** The paths a write to one of these objects (or a status write of the changed resource) uses. */
function ownPaths(objects: K8sObject[], status: string): Set<string> {
  const out = new Set<string>([status]);
  for (const o of objects) {
    const plural = RENDERED_KINDS.find((k) => k.kind === o.kind)?.plural ?? `${o.kind.toLowerCase()}s`;
    out.add(`${o.metadata.namespace ?? ''}/${plural}/${o.metadata.name}`);
  }
  return out;
}

function foreign(requests: string[], own: Set<string>): number {
  let n = 0;
  for (const r of requests) {
    const [method, url = ''] = r.split(' ');
    if (method === 'GET') continue;
    const path = url.split('?')[0] ?? '';
    if (path.includes('/leases') || path.includes('/events')) continue;
    const m = /\/namespaces\/([^/]+)\/([^/]+)\/([^/]+)/.exec(path) ?? /\/()([^/]+)\/([^/]+)\/status$/.exec(path);
    const key = m ? `${m[1]}/${m[2]}/${m[3]}` : path;
    if (!own.has(key)) n++;
  }
  return n;
}

/** Objects whose rendered content differs between two inputs (what a change must rewrite). */
function renderedDiff(before: Resources, after: Resources): K8sObject[] {
  const a = new Map(
    render(before).objects.map((o) => [`${o.kind}/${o.metadata.namespace}/${o.metadata.name}`, JSON.stringify(o)]),
  );
  return render(after).objects.filter(
    (o) => a.get(`${o.kind}/${o.metadata.namespace}/${o.metadata.name}`) !== JSON.stringify(o),
  );
}

/**
 * Puts the cluster in the state a reconcile leaves behind (every rendered object, every status), as
 * storage writes that bypass the API: an initial sync of 12,000 objects through the double would take
 * most of the run on a loaded machine and is not what the scenarios measure. The state is what the
 * current reconciler computes (in memory), so the rendered objects carry their desired-hash annotation.
 * The MCP key mirrors are left out (their owner reference names the uid the API server gives their
 * policy): the first pass writes them, and a resync reads them and writes none.
 */
async function seedReconciled(api: ApiServerDouble): Promise<void> {
  const { objects, result } = await seedCluster(api);
  process.stderr.write(
    `seeded ${objects} objects, ${result.statusWrites} statuses, ${result.errors.length} errors, unsupported ${result.unsupported !== undefined}\n`,
  );
}

async function runArm(arm: string, input: Resources): Promise<Arm> {
  gc();
  const api = await new ApiServerDouble({ latencyMs: LATENCY, rbac: rbac() }).start();
  // Compaction as etcd's default window would allow; the seed alone exceeds the double's default.
  api.historyLimit = 100_000;
  for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners]) api.put(r);
  for (let i = 0; i < AGENTS; i++)
    api.put({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: keySecret(i), namespace: NS },
      type: 'Opaque',
      data: {
        authorization: Buffer.from(`Bearer mcp-key-${String(i).padStart(16, '0')}`).toString('base64'),
      },
    });
  await seedReconciled(api);
  let peakRss = 0;
  let peakHeap = 0;
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    peakRss = Math.max(peakRss, m.rss);
    peakHeap = Math.max(peakHeap, m.heapUsed);
  }, 50);
  const sw = new Stopwatch();
  const scenarios: Scenario[] = [];
  const measure = async (
    name: string,
    act: () => Promise<void>,
    marker?: (o: K8sObject) => boolean,
    own?: Set<string>,
  ) => {
    const n = api.requests.length;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const applied = marker ? sw.arm(marker) : undefined;
    const firstPass = passes.length;
    await act();
    const t1 = applied ? await applied : undefined;
    const slice = api.requests.slice(n);
    // The pass that applied the change: the first one asked for after it, that ended after the apply.
    const pass =
      t1 !== undefined ? passes.slice(firstPass).find((p) => p.requestedAt >= t0 && p.endedAt >= t1) : undefined;
    const breakdown: Breakdown | undefined = pass && {
      delivery: Math.round(pass.requestedAt - t0),
      wait: Math.round(pass.startedAt - pass.requestedAt),
      agentsRendered: pass.agentsRendered,
      ...(Object.fromEntries(PASS_STAGES.map((st) => [st, Math.round(pass.stages[st])])) as Record<PassStage, number>),
    };
    scenarios.push({
      name,
      counts: count(slice),
      durationMs: Math.round(performance.now() - t0),
      cpuMs: Math.round((process.cpuUsage(cpu0).user + process.cpuUsage(cpu0).system) / 1000),
      ...(t1 !== undefined ? { latencyMs: Math.round(t1 - t0) } : {}),
      ...(own ? { foreignWrites: foreign(slice, own) } : {}),
      ...(breakdown ? { breakdown } : {}),
    });
    process.stderr.write(`${arm}: ${name} done\n`);
    save([...done, { arm, scenarios, peakRssMiB: mib(peakRss), peakHeapMiB: mib(peakHeap) }]);
  };

  const client = watchedClient(api, sw);
  const passes: PassTiming[] = [];
  let handle: Awaited<ReturnType<typeof startController>> | undefined;
  // A pass can compute for seconds without a request: quiet alone could end a scenario early.
  const settle = async () => {
    for (let i = 0; i < 3; i++) {
      await handle?.idle();
      await quiet(api);
    }
  };
  const start = async () => {
    handle = await startController({
      kubeConfig: api.kubeConfig(),
      port: 0,
      leaseNamespace: 'fgentic-system',
      identity: 'bench',
      writer: () => client,
      incremental: arm === 'incremental',
      onPass: (p) => passes.push(p),
    });
    await new Promise((r) => setTimeout(r, 500)); // the lists and the first debounce
    await settle();
  };
  const stop = async () => handle?.stop();
  const resync = async () => {
    handle?.resync();
    await settle();
  };
  const shard = (id: string) => (o: K8sObject) =>
    o.kind === 'ConfigMap' &&
    Object.values((o as { data?: Record<string, string> }).data ?? {}).some((v) =>
      v.includes(`{"roomId":"${id}","allowedClassifications":["approved_non_public","public"]}`),
    );

  await measure('first pass (cluster already reconciled)', start);
  await measure('no-op resync', resync);

  // One RetrievalRoom upgraded (public → approved_non_public with an agreement).
  const roomIdx = 1;
  const room = api.get('retrieval.fgentic.dev/v1alpha1', 'RetrievalRoom', undefined, `room-${roomIdx}`) as K8sObject;
  const roomAfter = structuredClone(input);
  const r = roomAfter.rooms[roomIdx] as RetrievalRoom;
  r.spec = {
    ...r.spec,
    allowedClassifications: ['approved_non_public', 'public'],
    agreementRef: 'bench-agreement',
  };
  const roomOwn = ownPaths(renderedDiff(input, roomAfter), `/retrievalrooms/room-${roomIdx}`);
  await measure(
    'one RetrievalRoom change',
    async () => {
      api.put({ ...room, spec: r.spec });
      await settle();
    },
    shard(roomIdOf(roomIdx)),
    roomOwn,
  );

  // One RetrievalAgent's rate limit changed (its MCP route policy carries it).
  const agentIdx = 7;
  const agent = api.get('retrieval.fgentic.dev/v1alpha1', 'RetrievalAgent', NS, agentName(agentIdx)) as K8sObject;
  const agentAfter = structuredClone(roomAfter);
  const a = agentAfter.agents[agentIdx] as RetrievalAgent;
  a.spec = { ...a.spec, rateLimit: { requestsPerMinute: 999 } };
  const agentDiff = renderedDiff(roomAfter, agentAfter);
  const agentOwn = ownPaths(agentDiff, `${NS}/retrievalagents/${agentName(agentIdx)}`);
  await measure(
    'one RetrievalAgent change',
    async () => {
      api.put({ ...agent, spec: a.spec });
      await settle();
    },
    (o) => o.kind === 'AgentgatewayPolicy' && o.metadata.name === `fgentic-mcp.${NS}.${agentName(agentIdx)}`,
    agentOwn,
  );
  await stop();
  clearInterval(sampler);
  await api.stop();
  process.stderr.write(
    `${arm}: the agent change renders ${agentDiff.length} object(s) differently: ${agentDiff.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}\n`,
  );
  return { arm, scenarios, peakRssMiB: mib(peakRss), peakHeapMiB: mib(peakHeap) };
}

const done: Arm[] = [];
/** Written after every scenario, so a run cut short still leaves its measurements. */
function save(arms: Arm[]): void {
  mkdirSync(join(HERE, 'results'), { recursive: true });
  writeFileSync(
    join(HERE, 'results/controller.json'),
    `${JSON.stringify(
      {
        benchmark: 'controller',
        date: new Date().toISOString(),
        node: process.version,
        input: { agents: AGENTS, rooms: ROOMS, partners: PARTNERS, objects: objectCount },
        apiLatencyMs: LATENCY,
        arms,
      },
      null,
      2,
    )}\n`,
  );
}

const input = corpus();
const objects = render(input);
const objectCount = objects.objects.length;
process.stderr.write(
  `${AGENTS} agents, ${ROOMS} rooms, ${PARTNERS} partners → ${objects.objects.length} objects, ${objects.conflicts.length} conflicts; API latency ${LATENCY} ms\n`,
);
const arms: Arm[] = done;
for (const arm of ARMS) arms.push(await runArm(arm, input));
save(arms);

const cell = (s: Scenario | undefined) =>
  s
    ? `${s.counts.writes} w (${s.counts.applies}a ${s.counts.statusWrites}s ${s.counts.deletes}d ${s.counts.events}e) / ${s.counts.reads + s.counts.discovery} r / ${s.latencyMs ?? '-'} ms`
    : '-';
const names = arms[0]?.scenarios.map((s) => s.name) ?? [];
const header = [
  'scenario',
  ...arms.map((a) => `${a.arm}: writes / reads / change→applied`),
  'ratio first/last arm: writes, change→applied',
];
const rows: string[][] = names.map((n) => {
  const cells = arms.map((a) => a.scenarios.find((s) => s.name === n));
  const p = cells[0];
  const c = cells.length > 1 ? cells[cells.length - 1] : undefined;
  const writes =
    p && c ? (c.counts.writes === 0 ? `${p.counts.writes}:0` : (p.counts.writes / c.counts.writes).toFixed(1)) : '-';
  const latency =
    p?.latencyMs !== undefined && c?.latencyMs !== undefined && c.latencyMs > 0
      ? `${(p.latencyMs / c.latencyMs).toFixed(1)}x`
      : '';
  return [n, ...cells.map(cell), latency ? `${writes}, ${latency}` : writes];
});
// Where the change → applied time went, per change scenario (controller arms only).
for (const n of names) {
  const cells = arms.map((a) => a.scenarios.find((s) => s.name === n)?.breakdown);
  if (cells.every((b) => b === undefined)) continue;
  rows.push([
    `${n}: ms delivery / wait / ${PASS_STAGES.join(' / ')} (agents rendered)`,
    ...cells.map((b) =>
      b ? `${b.delivery} / ${b.wait} / ${PASS_STAGES.map((st) => b[st]).join(' / ')} (${b.agentsRendered})` : '-',
    ),
    '',
  ]);
}
rows.push([
  'duration (s): first / no-op / room / agent',
  ...arms.map((a) => a.scenarios.map((s) => (s.durationMs / 1000).toFixed(1)).join(' / ')),
  '',
]);
rows.push([
  'process CPU (s, double included): first / no-op / room / agent',
  ...arms.map((a) => a.scenarios.map((s) => (s.cpuMs / 1000).toFixed(1)).join(' / ')),
  '',
]);
rows.push([
  'writes outside the changed resource: room / agent',
  ...arms.map((a) =>
    a.scenarios
      .filter((s) => s.foreignWrites !== undefined)
      .map((s) => s.foreignWrites)
      .join(' / '),
  ),
  '',
]);
rows.push(['peak RSS / heap (MiB, double in-process)', ...arms.map((a) => `${a.peakRssMiB} / ${a.peakHeapMiB}`), '']);
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
process.stdout.write(`${line(header)}\n${rows.map(line).join('\n')}\n`);
