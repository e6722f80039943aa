/**
 * `npm run bench:controller -- --revocation | --faults`: the controller at scale and under faults,
 * against the API-server double (every request answered after BENCH_LATENCY_MS, default 2; the
 * shipped RBAC) with the projector's Kubernetes store reading the registry it writes.
 *
 * --revocation (BENCH_AGENTS/ROOMS/PARTNERS, default 1,000 / 100,000 / 1,000): revocations — a room
 *   downgraded, a room removed, a partner group removed — timed from the API change until the
 *   projector's store serves the changed entry (its decisions read the store synchronously), each
 *   repeated BENCH_REPEAT times (default 20) alone and right after a resync started; writes per change
 *   and on a no-op resync.
 * --faults (default 1,000 / 10,000 / 1,000): 20 s schedules (BENCH_FAULT_S): 500 on every write,
 *   429 with Retry-After: 1 on every write, 429 on the registry ConfigMaps only, a Lease that cannot
 *   be renewed; each with one room change pending: write attempts per second (max), status writes,
 *   writes after the fault, and the time from the fault's end until the change reaches the projector.
 * Prints a table, writes bench/results/controller-scale.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ControllerHandle, startController } from '../controller/cli.ts';
import { readUpstream } from '../controller/kube/discovery.ts';
import { type ClusterState, type ClusterWriter, Reconciler } from '../controller/reconcile.ts';
import { render } from '../controller/render/index.ts';
import { loadResources } from '../controller/render-command.ts';
import type {
  K8sObject,
  OwnResource,
  PartnerClient,
  Resources,
  RetrievalAgent,
  RetrievalRoom,
} from '../controller/types.ts';
import type { ConfigState } from '../projector/config-store.ts';
import { type KubeConfigStore, kubeConfigStore } from '../projector/kube-store.ts';
import { ApiServerDouble, type RequestInfo } from '../testkit/controller/apiserver.ts';
import { kustomizeDocs, RbacAuthorizer, serviceAccountUser } from '../testkit/controller/rbac.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const MODE = process.argv.includes('--faults') ? 'faults' : 'revocation';
const AGENTS = Number(process.env['BENCH_AGENTS'] ?? 1000);
const ROOMS = Number(process.env['BENCH_ROOMS'] ?? (MODE === 'faults' ? 10_000 : 100_000));
const PARTNERS = Number(process.env['BENCH_PARTNERS'] ?? 1000);
const LATENCY = Number(process.env['BENCH_LATENCY_MS'] ?? 2);
const REPEAT = Number(process.env['BENCH_REPEAT'] ?? 20);
const FAULT_MS = Number(process.env['BENCH_FAULT_S'] ?? 20) * 1000;
const NS = 'kagent';
const RV = 'retrieval.fgentic.dev/v1alpha1';
const agentName = (i: number) => `retrieval-agent-${String(i).padStart(4, '0')}`;
const keySecret = (i: number) => `${agentName(i)}-mcp-credential`;
const roomIdOf = (i: number) => `!r${i}:org-a.example`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const loads: number[] = [];
const sampleLoad = setInterval(() => loads.push(loadavg()[0] as number), 5000);
sampleLoad.unref();

function corpus(): Resources {
  const base = loadResources([join(HERE, '../examples')]);
  const tpl = base.agents[0] as RetrievalAgent;
  const agents: RetrievalAgent[] = Array.from({ length: AGENTS }, (_, i) => ({
    ...tpl,
    metadata: { name: agentName(i), namespace: NS },
    spec: {
      ...tpl.spec,
      public: i % 2 === 0,
      rateLimit: { requestsPerMinute: 30 + (i % 90) },
      mcpApiKeySecretRef: { name: keySecret(i), key: 'authorization' },
    },
  }));
  const rooms: RetrievalRoom[] = Array.from({ length: ROOMS }, (_, i) => ({
    apiVersion: RV,
    kind: 'RetrievalRoom',
    metadata: { name: `room-${i}` },
    spec: {
      roomId: roomIdOf(i),
      allowedClassifications: i % 2 === 0 ? ['approved_non_public', 'public'] : ['public'],
      ...(i % 2 === 0 ? { agreementRef: `agreement-${i}` } : {}),
    },
  }));
  const partners: PartnerClient[] = Array.from({ length: PARTNERS }, (_, i) => ({
    apiVersion: RV,
    kind: 'PartnerClient',
    metadata: { name: `partner-${i}` },
    spec: {
      issuer: 'https://issuer.example',
      audience: 'fgentic-a2a',
      azp: `org-${i}-a2a`,
      policyId: `org-${i}`,
      groups: [`partner/org-${i}/docs`, `partner/org-${i}/wiki`],
      allowedClassifications: ['public'],
      agents: [0, 1, 2].map((k) => ({ namespace: NS, name: agentName((i * 3 + k) % AGENTS) })),
    },
  }));
  return { platforms: base.platforms, agents, rooms, partners };
}

function rbac(): RbacAuthorizer {
  // The shipped Roles, with one name per agent in each of the two MCP-key Roles.
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

/** The state a finished reconcile leaves, written to storage (as bench/controller.ts does). */
async function seed(api: ApiServerDouble, input: Resources): Promise<void> {
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
  const own = {
    platforms: api.list(RV, 'RetrievalPlatform'),
    agents: api.list(RV, 'RetrievalAgent'),
    rooms: api.list(RV, 'RetrievalRoom'),
    partners: api.list(RV, 'PartnerClient'),
  } as unknown as Resources;
  const byKind: Record<string, OwnResource[]> = {
    RetrievalPlatform: own.platforms,
    RetrievalAgent: own.agents,
    RetrievalRoom: own.rooms,
    PartnerClient: own.partners,
  };
  const objects = new Map<string, K8sObject>();
  const k = (o: K8sObject) => `${o.apiVersion}|${o.kind}|${o.metadata.namespace ?? ''}|${o.metadata.name}`;
  let uid = 0;
  const memory: ClusterWriter & ClusterState = {
    own: <T extends OwnResource>(kind: string) => (byKind[kind] ?? []) as T[],
    rendered: (apiVersion, kind) =>
      [...objects.values()].filter((o) => o.apiVersion === apiVersion && o.kind === kind),
    live: (apiVersion, kind, namespace, name) =>
      objects.get(`${apiVersion}|${kind}|${namespace ?? ''}|${name}`),
    apply: async (o) => {
      const stored = { ...o, metadata: { ...o.metadata, uid: `seed-${uid++}` } };
      objects.set(k(o), stored);
      return stored;
    },
    delete: async (o) => objects.delete(k(o)),
    patchStatus: async (res, status) => {
      res.status = { ...(res.status ?? {}), ...status };
      return undefined;
    },
    event: async () => undefined,
    readSecretKey: async (namespace, name, key) => {
      const s = api.get('v1', 'Secret', namespace, name) as { data?: Record<string, string> } | undefined;
      const v = s?.data?.[key];
      return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
    },
    readMirror: async () => undefined,
    upstream: () => readUpstream(api.kubeConfig()),
  };
  await new Reconciler(memory).pass(memory);
  for (const o of objects.values()) {
    if (o.kind === 'Secret') continue;
    const { uid: _u, ...metadata } = o.metadata;
    api.put({ ...o, metadata });
  }
  for (const r of Object.values(byKind).flat()) api.put(r);
}

interface Req {
  at: number;
  method: string;
  path: string;
}

interface Rig {
  api: ApiServerDouble;
  ctl: ControllerHandle;
  store: KubeConfigStore;
  log: Req[];
  /** The fault in force (undefined: none); the recorder sees every request first. */
  setFault: (f: ApiServerDouble['fault']) => void;
  lost: { at?: number };
  stop(): Promise<void>;
}

async function rig(input: Resources, timing?: { leaseS: number; deadlineS: number }): Promise<Rig> {
  const api = await new ApiServerDouble({ latencyMs: LATENCY, rbac: rbac() }).start();
  api.historyLimit = 1_000_000;
  await seed(api, input);
  // Forget the seeding's history (as etcd compaction would): 200,000 object versions held in this
  // process would cost the controller and the double their heap.
  api.compact();
  api.historyLimit = 100_000;
  const log: Req[] = [];
  let fault: ApiServerDouble['fault'];
  api.fault = (r: RequestInfo) => {
    log.push({ at: Date.now(), method: r.method, path: r.path });
    return fault?.(r);
  };
  const store = kubeConfigStore({
    kubeConfig: api.kubeConfig(serviceAccountUser('knowledge', 'fgentic-projector')),
    namespace: 'knowledge',
    maxHeartbeatAgeMs: 0,
  });
  const lost: { at?: number } = {};
  const ctl = await startController({
    kubeConfig: api.kubeConfig(),
    port: 0,
    leaseNamespace: 'fgentic-system',
    identity: 'bench',
    // The double shares this process and the machine is shared: a Lease renewal can wait for the CPU
    // behind the double serving 100,000 rooms. Longer than client-go's timing, so the run measures
    // the controller, not the double; every loss is still reported (lostLeadershipAfterMs).
    leaseDurationSeconds: timing?.leaseS ?? Number(process.env['BENCH_LEASE_S'] ?? 300),
    renewDeadlineMs: (timing?.deadlineS ?? Number(process.env['BENCH_RENEW_DEADLINE_S'] ?? 200)) * 1000,
    onLostLeadership: () => {
      lost.at = Date.now();
    },
  });
  await store.synced;
  return {
    api,
    ctl,
    store,
    log,
    lost,
    setFault: (f) => {
      fault = f;
    },
    stop: async () => {
      store.close();
      await ctl.stop();
      await api.stop();
    },
  };
}

/** Idle and no write (leases aside) for `quietMs`. */
async function quiet(r: Rig, quietMs = 2000, maxMs = 900_000): Promise<void> {
  const end = Date.now() + maxMs;
  for (;;) {
    await r.ctl.idle();
    const last =
      r.log
        .filter((x) => x.method !== 'GET' && !x.path.includes('/leases') && !x.path.includes('heartbeat'))
        .at(-1)?.at ?? 0;
    if (Date.now() - last >= quietMs) return;
    if (Date.now() > end) throw new Error('never quiet');
    await sleep(200);
  }
}

/** Resolves with the time the store first serves a state satisfying `pred`. */
function whenServed(
  store: KubeConfigStore,
  pred: (s: ConfigState) => boolean,
  maxMs = 120_000,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const tick = () => {
      if (pred(store.current())) return resolve(Date.now());
      if (Date.now() - start > maxMs) return reject(new Error('never served'));
      setTimeout(tick, 2);
    };
    tick();
  });
}

const roomClasses = (s: ConfigState, id: string) =>
  s.ready ? s.config.rooms.get(id)?.allowedClassifications.join(',') : undefined;
const writesIn = (log: Req[], from: number, to: number) =>
  log.filter((x) => x.method !== 'GET' && !x.path.includes('/leases') && x.at >= from && x.at < to);
const p = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] ?? Number.NaN;
};

export const results: Record<string, unknown> = {
  mode: MODE,
  agents: AGENTS,
  rooms: ROOMS,
  partners: PARTNERS,
  latencyMs: LATENCY,
};

async function revocation(): Promise<void> {
  const input = corpus();
  process.stderr.write(
    `${AGENTS} agents, ${ROOMS} rooms, ${PARTNERS} partners → ${render({ ...input, rooms: input.rooms.slice(0, 10) }).objects.length}+ objects\n`,
  );
  const r = await rig(input);
  const t0 = Date.now();
  await whenServed(r.store, (s) => s.ready && s.config.rooms.size === ROOMS);
  await quiet(r);
  results['startToQuietMs'] = Date.now() - t0;
  process.stderr.write(`settled in ${Date.now() - t0} ms\n`);
  // No-op resync.
  const from = Date.now();
  r.ctl.resync();
  await quiet(r);
  const noop = writesIn(r.log, from, Date.now());
  results['noopResync'] = {
    writes: noop.length,
    mirrors: noop.filter((x) => x.path.includes('/secrets/')).length,
    heartbeats: noop.filter((x) => x.path.includes('heartbeat')).length,
  };
  const kinds = ['room downgrade', 'room removal', 'partner group removal'] as const;
  const samples: Record<string, { alone: number[]; resync: number[]; writes: number[] }> = {};
  let next = 0;
  for (const kind of kinds) samples[kind] = { alone: [], resync: [], writes: [] };
  /** One revocation of `kind`, timed from the API change until the store serves it. */
  const revoke = async (kind: (typeof kinds)[number], j: number): Promise<number> => {
    next += 2;
    const i = next; // even rooms carry approved_non_public
    const t = Date.now();
    let served: Promise<number>;
    if (kind === 'room downgrade') {
      const room = r.api.get(RV, 'RetrievalRoom', undefined, `room-${i}`) as RetrievalRoom;
      served = whenServed(r.store, (s) => roomClasses(s, roomIdOf(i)) === 'public');
      r.api.put({ ...room, spec: { roomId: room.spec.roomId, allowedClassifications: ['public'] } });
    } else if (kind === 'room removal') {
      served = whenServed(r.store, (s) => s.ready && !s.config.rooms.has(roomIdOf(i)));
      r.api.remove(RV, 'RetrievalRoom', undefined, `room-${i}`);
    } else {
      const partner = r.api.get(RV, 'PartnerClient', undefined, `partner-${j}`) as PartnerClient;
      served = whenServed(
        r.store,
        (s) => s.ready && s.config.partners.some((x) => x.azp === `org-${j}-a2a` && x.groups.length === 1),
      );
      r.api.put({ ...partner, spec: { ...partner.spec, groups: [`partner/org-${j}/docs`] } });
    }
    const done = await served;
    if (process.env['BENCH_TRACE']) {
      const w = r.log.filter((x) => x.at >= t && x.method !== 'GET' && !x.path.includes('/leases'));
      process.stderr.write(
        `  trace: ${w
          .slice(0, 6)
          .map((x) => `${x.at - t}ms ${x.method} ${x.path.split('/').slice(-2).join('/')}`)
          .join(' | ')}\n`,
      );
    }
    return done - t;
  };
  let partner = 0;
  for (let n = 0; n < REPEAT; n++)
    for (const kind of kinds) {
      const t = Date.now();
      const ms = await revoke(kind, partner++);
      samples[kind]!.alone.push(ms);
      await quiet(r, 500);
      samples[kind]!.writes.push(
        writesIn(r.log, t, Date.now()).filter((x) => !x.path.includes('heartbeat')).length,
      );
      process.stderr.write(`${kind}: ${ms} ms\n`);
    }
  // During a resync: each resync re-checks every object and room status and re-asserts every MCP
  // key mirror (about a minute of writes at the limiter's rate); changes land at different moments.
  for (let n = 0; n < Number(process.env['BENCH_RESYNCS'] ?? 5); n++) {
    r.ctl.resync();
    for (const kind of kinds) {
      await sleep(300);
      const ms = await revoke(kind, partner++);
      samples[kind]!.resync.push(ms);
      process.stderr.write(`${kind} during resync: ${ms} ms\n`);
    }
    await quiet(r);
  }
  results['revocation'] = Object.fromEntries(
    kinds.map((k) => [
      k,
      {
        p50: p(samples[k]!.alone, 0.5),
        p99: p(samples[k]!.alone, 0.99),
        max: Math.max(...samples[k]!.alone),
        duringResyncP50: p(samples[k]!.resync, 0.5),
        duringResyncP99: p(samples[k]!.resync, 0.99),
        duringResyncMax: Math.max(...samples[k]!.resync),
        writesPerChange: Math.max(...samples[k]!.writes),
        samples: samples[k],
      },
    ]),
  );
  await r.stop();
}

async function faults(): Promise<void> {
  const input = corpus();
  const schedules: { name: string; fault: ApiServerDouble['fault'] }[] = [
    {
      name: '500 on every write',
      fault: (q) =>
        q.method !== 'GET' && !q.path.includes('/leases')
          ? { status: 500, reason: 'InternalError' }
          : undefined,
    },
    {
      name: '429 Retry-After: 1 on every write',
      fault: (q) =>
        q.method !== 'GET' && !q.path.includes('/leases')
          ? { status: 429, reason: 'TooManyRequests', retryAfterSeconds: 1 }
          : undefined,
    },
    {
      name: '429 on the registry ConfigMaps only',
      fault: (q) =>
        q.method !== 'GET' && /\/configmaps\/fgentic-projector-/.test(q.path)
          ? { status: 429, reason: 'TooManyRequests', retryAfterSeconds: 1 }
          : undefined,
    },
    {
      name: 'Lease renewal fails',
      fault: (q) => (q.path.includes('/leases') ? { status: 500, reason: 'InternalError' } : undefined),
    },
  ];
  const out: Record<string, unknown>[] = [];
  for (const sc of schedules) {
    // The Lease schedule runs with client-go's timing (15 s / 10 s): the fault must end the term.
    const r = await rig(input, sc.name.startsWith('Lease') ? { leaseS: 15, deadlineS: 10 } : undefined);
    await whenServed(r.store, (s) => s.ready && s.config.rooms.size === ROOMS);
    await quiet(r);
    const roomIdx = 2 * (out.length + 1);
    const start = Date.now();
    r.setFault(sc.fault);
    const room = r.api.get(RV, 'RetrievalRoom', undefined, `room-${roomIdx}`) as RetrievalRoom;
    const served = whenServed(r.store, (s) => roomClasses(s, roomIdOf(roomIdx)) === 'public', 600_000);
    r.api.put({ ...room, spec: { roomId: room.spec.roomId, allowedClassifications: ['public'] } });
    await sleep(FAULT_MS);
    r.setFault(undefined);
    const end = Date.now();
    const landedAt = sc.name.startsWith('Lease') ? undefined : await served;
    await quiet(r).catch(() => undefined);
    const during = writesIn(r.log, start, end);
    const perSecond = new Map<number, number>();
    for (const w of during)
      perSecond.set(
        Math.floor((w.at - start) / 1000),
        (perSecond.get(Math.floor((w.at - start) / 1000)) ?? 0) + 1,
      );
    const afterWrites = writesIn(r.log, end, Date.now());
    const row = {
      schedule: sc.name,
      attemptsDuring: during.length,
      maxPerSecond: Math.max(0, ...perSecond.values()),
      statusAttemptsDuring: during.filter((w) => w.path.endsWith('/status')).length,
      statusTargetsDuring: new Set(during.filter((w) => w.path.endsWith('/status')).map((w) => w.path)).size,
      writesAfter: afterWrites.filter((w) => !w.path.includes('heartbeat')).length,
      landedAfterEndMs: landedAt === undefined ? undefined : landedAt - end,
      lostLeadershipAfterMs: r.lost.at === undefined ? undefined : r.lost.at - start,
      writesAfterLostTerm:
        r.lost.at === undefined ? undefined : writesIn(r.log, r.lost.at + 1, Date.now()).length,
    };
    out.push(row);
    process.stderr.write(`${JSON.stringify(row)}\n`);
    await r.stop();
  }
  results['faults'] = out;
}

if (MODE === 'faults') await faults();
else await revocation();
results['loadAverage1m'] = { min: Math.min(...loads), max: Math.max(...loads) };
mkdirSync(join(HERE, 'results'), { recursive: true });
writeFileSync(join(HERE, 'results', `controller-${MODE}.json`), `${JSON.stringify(results, null, 2)}\n`);
process.stdout.write(`${JSON.stringify(results, (k, v) => (k === 'samples' ? undefined : v), 2)}\n`);
clearInterval(sampleLoad);
