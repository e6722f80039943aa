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
 * The API-server double runs in a process of its own (bench/double-child.ts): serving 100,000 rooms
 * must not take the event loop of the controller under measurement, which runs here with client-go's
 * leader-election timing (BENCH_LEASE_S / BENCH_RENEW_DEADLINE_S override it), beside the projector's
 * store. The event-loop delay of this process is reported, so a controller that blocks its own Lease
 * renewal shows.
 * Prints a table, writes bench/results/controller-<mode>.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { type ControllerHandle, startController } from '../controller/cli.ts';
import type { PartnerClient, RetrievalRoom } from '../controller/types.ts';
import type { ConfigState } from '../projector/config-store.ts';
import { type KubeConfigStore, kubeConfigStore } from '../projector/kube-store.ts';
import { serviceAccountUser } from '../testkit/controller/rbac.ts';
import { AGENTS, LATENCY, MODE, PARTNERS, ROOMS, RV, roomIdOf } from './controller-scale-cluster.ts';
import { RemoteDouble } from './double-process.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPEAT = Number(process.env['BENCH_REPEAT'] ?? 20);
const FAULT_MS = Number(process.env['BENCH_FAULT_S'] ?? 20) * 1000;
const CONTROLLER = serviceAccountUser('fgentic-system', 'fgentic-retrieval-controller');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const loads: number[] = [loadavg()[0] as number];
const sampleLoad = setInterval(() => loads.push(loadavg()[0] as number), 5000);
sampleLoad.unref();
/** This process's event-loop delay (the controller and the projector's store share it). */
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();
const loopMs = () => ({
  p99: Math.round(loopDelay.percentile(99) / 1e6),
  max: Math.round(loopDelay.max / 1e6),
});

interface Rig {
  api: RemoteDouble;
  ctl: ControllerHandle;
  store: KubeConfigStore;
  lost: { at?: number };
  stop(): Promise<void>;
}

async function rig(timing?: { leaseS: number; deadlineS: number }): Promise<Rig> {
  const t0 = Date.now();
  const api = await RemoteDouble.start();
  process.stderr.write(`double seeded and listening in ${Date.now() - t0} ms\n`);
  const store = kubeConfigStore({
    kubeConfig: await api.kubeConfig(serviceAccountUser('knowledge', 'fgentic-projector')),
    namespace: 'knowledge',
    maxHeartbeatAgeMs: 0,
  });
  const lost: { at?: number } = {};
  loopDelay.reset();
  const ctl = await startController({
    kubeConfig: await api.kubeConfig(CONTROLLER),
    port: 0,
    leaseNamespace: 'fgentic-system',
    identity: 'bench',
    // client-go's timing (15 s / 10 s) unless overridden: the double no longer shares this process.
    ...(timing || process.env['BENCH_LEASE_S']
      ? { leaseDurationSeconds: timing?.leaseS ?? Number(process.env['BENCH_LEASE_S']) }
      : {}),
    ...(timing || process.env['BENCH_RENEW_DEADLINE_S']
      ? { renewDeadlineMs: (timing?.deadlineS ?? Number(process.env['BENCH_RENEW_DEADLINE_S'])) * 1000 }
      : {}),
    onLostLeadership: () => {
      lost.at = Date.now();
      process.stderr.write(`term lost (event-loop delay so far: ${JSON.stringify(loopMs())} ms)\n`);
    },
  });
  await store.synced;
  return {
    api,
    ctl,
    store,
    lost,
    stop: async () => {
      store.close();
      await ctl.stop();
      await api.stop();
    },
  };
}

/** Idle and no write (leases and heartbeats aside) for `quietMs`. */
async function quiet(r: Rig, quietMs = 2000, maxMs = 900_000): Promise<void> {
  const end = Date.now() + maxMs;
  for (;;) {
    await r.ctl.idle();
    const last = await r.api.lastWriteAt();
    if (Date.now() - last >= quietMs) return;
    if (r.lost.at !== undefined) throw new Error('the term was lost');
    if (Date.now() > end) throw new Error('never quiet');
    await sleep(200);
  }
}

/** Resolves with the time the store first serves a state satisfying `pred`. */
function whenServed(r: Rig, pred: (s: ConfigState) => boolean, maxMs = 120_000, lostIsFatal = true): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const tick = () => {
      if (pred(r.store.current())) return resolve(Date.now());
      if (lostIsFatal && r.lost.at !== undefined) return reject(new Error('the term was lost'));
      if (Date.now() - start > maxMs) return reject(new Error('never served'));
      setTimeout(tick, 2);
    };
    tick();
  });
}

const roomClasses = (s: ConfigState, id: string) =>
  s.ready ? s.config.rooms.get(id)?.allowedClassifications.join(',') : undefined;
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
  doubleInOwnProcess: true,
};

function save(): void {
  results['loadAverage1m'] = { min: Math.min(...loads), max: Math.max(...loads) };
  results['eventLoopDelayMs'] = loopMs();
  mkdirSync(join(HERE, 'results'), { recursive: true });
  writeFileSync(join(HERE, 'results', `controller-${MODE}.json`), `${JSON.stringify(results, null, 2)}\n`);
}

const RESYNCS = Number(process.env['BENCH_RESYNCS'] ?? 5);

/** Every revocation uses a room and a partner of its own (rooms 2, 4, …; partners 0, 1, …). */
function checkCorpusSize(): void {
  const changes = 3 * (REPEAT + RESYNCS);
  const roomsNeeded = 2 * changes + 2;
  if (ROOMS < roomsNeeded || PARTNERS < changes)
    throw new Error(
      `BENCH_ROOMS must be ≥ ${roomsNeeded} and BENCH_PARTNERS ≥ ${changes} for ${REPEAT} repeats and ${RESYNCS} resyncs`,
    );
}

async function revocation(): Promise<void> {
  checkCorpusSize();
  process.stderr.write(`${AGENTS} agents, ${ROOMS} rooms, ${PARTNERS} partners\n`);
  const r = await rig();
  const t0 = Date.now();
  await whenServed(r, (s) => s.ready && s.config.rooms.size === ROOMS, 1_800_000);
  await quiet(r);
  results['startToQuietMs'] = Date.now() - t0;
  results['startEventLoopDelayMs'] = loopMs();
  process.stderr.write(`settled in ${Date.now() - t0} ms (event-loop delay ${JSON.stringify(loopMs())} ms)\n`);
  save();
  // No-op resync.
  const from = Date.now();
  r.ctl.resync();
  await quiet(r);
  const noop = await r.api.writes(from, Date.now());
  results['noopResync'] = {
    writes: noop.length,
    mirrors: noop.filter((x) => x.path.includes('/secrets/')).length,
    heartbeats: noop.filter((x) => x.path.includes('heartbeat')).length,
    ms: Date.now() - from,
  };
  process.stderr.write(`no-op resync: ${JSON.stringify(results['noopResync'])}\n`);
  save();
  const kinds = ['room downgrade', 'room removal', 'partner group removal'] as const;
  const samples: Record<string, { alone: number[]; resync: number[]; writes: number[] }> = {};
  let next = 0;
  for (const kind of kinds) samples[kind] = { alone: [], resync: [], writes: [] };
  /** One revocation of `kind`, timed from the API change until the store serves it. */
  const revoke = async (kind: (typeof kinds)[number], j: number): Promise<{ ms: number; at: number }> => {
    next += 2;
    const i = next; // even rooms carry approved_non_public
    let served: Promise<number>;
    let at: number;
    if (kind === 'room downgrade') {
      const room = (await r.api.get(RV, 'RetrievalRoom', undefined, `room-${i}`)) as RetrievalRoom;
      served = whenServed(r, (s) => roomClasses(s, roomIdOf(i)) === 'public');
      at = await r.api.put({
        ...room,
        spec: { roomId: room.spec.roomId, allowedClassifications: ['public'] },
      });
    } else if (kind === 'room removal') {
      served = whenServed(r, (s) => s.ready && !s.config.rooms.has(roomIdOf(i)));
      at = await r.api.remove(RV, 'RetrievalRoom', undefined, `room-${i}`);
    } else {
      const partner = (await r.api.get(RV, 'PartnerClient', undefined, `partner-${j}`)) as PartnerClient;
      served = whenServed(
        r,
        (s) => s.ready && s.config.partners.some((x) => x.azp === `org-${j}-a2a` && x.groups.length === 1),
      );
      at = await r.api.put({ ...partner, spec: { ...partner.spec, groups: [`partner/org-${j}/docs`] } });
    }
    const done = await served;
    if (process.env['BENCH_TRACE']) {
      const w = await r.api.writes(at, Date.now());
      process.stderr.write(
        `  trace: ${w
          .slice(0, 6)
          .map((x) => `${x.at - at}ms ${x.method} ${x.path.split('/').slice(-2).join('/')}`)
          .join(' | ')}\n`,
      );
    }
    // The change is made in the double's process; both processes read the machine's wall clock.
    return { ms: Math.max(0, done - at), at };
  };
  let partner = 0;
  for (let n = 0; n < REPEAT; n++)
    for (const kind of kinds) {
      const { ms, at } = await revoke(kind, partner++);
      samples[kind]!.alone.push(ms);
      await quiet(r, 500);
      samples[kind]!.writes.push(
        (await r.api.writes(at, Date.now())).filter((x) => !x.path.includes('heartbeat')).length,
      );
      process.stderr.write(`${kind}: ${ms} ms\n`);
    }
  // During a resync: each resync re-checks every object and room status and reads every MCP key
  // mirror again (about a minute of requests at the limiter's rate); changes land at different moments.
  for (let n = 0; n < RESYNCS; n++) {
    r.ctl.resync();
    for (const kind of kinds) {
      await sleep(300);
      const { ms } = await revoke(kind, partner++);
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
  results['termLost'] = r.lost.at !== undefined;
  await r.stop();
}

async function faults(): Promise<void> {
  const schedules: { name: string; fault: string }[] = [
    { name: '500 on every write', fault: '500-writes' },
    { name: '429 Retry-After: 1 on every write', fault: '429-writes' },
    { name: '429 on the registry ConfigMaps only', fault: '429-registry' },
    { name: 'Lease renewal fails', fault: 'lease-500' },
  ];
  const out: Record<string, unknown>[] = [];
  for (const sc of schedules) {
    // The Lease schedule must end the term with client-go's timing (15 s / 10 s).
    const lease = sc.fault === 'lease-500';
    const r = await rig(lease ? { leaseS: 15, deadlineS: 10 } : undefined);
    await whenServed(r, (s) => s.ready && s.config.rooms.size === ROOMS, 600_000);
    await quiet(r);
    const roomIdx = 2 * (out.length + 1);
    const start = Date.now();
    await r.api.setFault(sc.fault);
    const room = (await r.api.get(RV, 'RetrievalRoom', undefined, `room-${roomIdx}`)) as RetrievalRoom;
    const served = whenServed(r, (s) => roomClasses(s, roomIdOf(roomIdx)) === 'public', 600_000, false);
    await r.api.put({ ...room, spec: { roomId: room.spec.roomId, allowedClassifications: ['public'] } });
    await sleep(FAULT_MS);
    await r.api.setFault(undefined);
    const end = Date.now();
    const landedAt = lease ? undefined : await served;
    if (lease) served.catch(() => undefined);
    await quiet(r).catch(() => undefined);
    const during = await r.api.writes(start, end);
    const perSecond = new Map<number, number>();
    for (const w of during) {
      const sec = Math.floor((w.at - start) / 1000);
      perSecond.set(sec, (perSecond.get(sec) ?? 0) + 1);
    }
    const afterWrites = await r.api.writes(end, Date.now());
    const row = {
      schedule: sc.name,
      attemptsDuring: during.length,
      maxPerSecond: Math.max(0, ...perSecond.values()),
      statusAttemptsDuring: during.filter((w) => w.path.endsWith('/status')).length,
      statusTargetsDuring: new Set(during.filter((w) => w.path.endsWith('/status')).map((w) => w.path)).size,
      writesAfter: afterWrites.filter((w) => !w.path.includes('heartbeat')).length,
      landedAfterEndMs: landedAt === undefined ? undefined : landedAt - end,
      lostLeadershipAfterMs: r.lost.at === undefined ? undefined : r.lost.at - start,
      writesAfterLostTerm: r.lost.at === undefined ? undefined : (await r.api.writes(r.lost.at + 1, Date.now())).length,
    };
    out.push(row);
    process.stderr.write(`${JSON.stringify(row)}\n`);
    await r.stop();
  }
  results['faults'] = out;
}

try {
  if (MODE === 'faults') await faults();
  else await revocation();
} catch (e) {
  results['error'] = (e as Error).message;
  process.stderr.write(`run did not complete: ${(e as Error).message}\n`);
  process.exitCode = 1;
}
save();
printTable();
clearInterval(sampleLoad);

function printTable(): void {
  const rows: string[][] = [];
  if (MODE === 'revocation' && results['revocation']) {
    rows.push(['revocation', 'p50 / p99 / max ms', 'during a resync p50 / p99 / max ms', 'writes per change']);
    for (const [kind, v] of Object.entries(results['revocation'] as Record<string, Record<string, number>>))
      rows.push([
        kind,
        `${v['p50']} / ${v['p99']} / ${v['max']}`,
        `${v['duringResyncP50']} / ${v['duringResyncP99']} / ${v['duringResyncMax']}`,
        String(v['writesPerChange']),
      ]);
  }
  if (MODE === 'faults' && results['faults']) {
    rows.push(['schedule', 'attempts (max/s)', 'status attempts, objects', 'writes after', 'served after end ms']);
    for (const f of results['faults'] as Record<string, unknown>[])
      rows.push([
        String(f['schedule']),
        `${f['attemptsDuring']} (${f['maxPerSecond']})`,
        `${f['statusAttemptsDuring']}, ${f['statusTargetsDuring']}`,
        String(f['writesAfter']),
        f['landedAfterEndMs'] === undefined
          ? `term lost ${f['lostLeadershipAfterMs']} ms in`
          : String(f['landedAfterEndMs']),
      ]);
  }
  const load = results['loadAverage1m'] as { min: number; max: number };
  rows.push([`${AGENTS} / ${ROOMS} / ${PARTNERS}`, `load ${load.min.toFixed(1)}–${load.max.toFixed(1)}`, '', '']);
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  for (const r of rows)
    process.stdout.write(
      `${r
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd()}\n`,
    );
  process.stdout.write(`JSON: bench/results/controller-${MODE}.json\n`);
}
