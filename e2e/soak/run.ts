/**
 * The soak: bounded concurrent traffic through the gateway double for a fixed duration while a fault
 * schedule breaks the database socket, the homeserver, the configuration and the processes, with an
 * oracle judging every response. Returns a report; `main.ts` prints it and writes the JSON.
 *
 * Traffic (traffic.ts) is one operation per tick, spread over `concurrency` workers at `ratePerSec`
 * in total, so the MCP route's 600 requests/min limit is only hit by the fault that fills it; the
 * faults are in faults.ts, the report in report.ts.
 */
import { writeFileSync } from 'node:fs';
import type { MatrixPrincipal } from '../../contract/index.ts';
import { ALICE, BOB, ENGINEERING_ROOM, GENERAL_ROOM } from '../../local/helpers.ts';
import { type ProjectorConfig, parseConfig } from '../../projector/config.ts';
import { prng } from '../../testkit/retrieval.ts';
import type { SoakEngine } from './database.ts';
import { type FaultContext, faultSchedule, sleep } from './faults.ts';
import { MembershipHistory, type Registry, RegistryHistory } from './oracle.ts';
import { buildReport, type FaultWindow, type MemorySample, type SoakReport } from './report.ts';
import { type SoakStack, startSoakStack } from './stack.ts';
import { matrixOp, mcpOp, type Op, partnerOp, type TrafficContext } from './traffic.ts';

export type { FaultReport, MemorySample, PhaseStats, SoakReport } from './report.ts';
export { formatReport, HEAP_GROWTH_BOUND_BYTES } from './report.ts';

export interface SoakOptions {
  readonly durationMs: number;
  readonly concurrency?: number;
  readonly ratePerSec?: number;
  readonly seed?: number;
  readonly progress?: (line: string) => void;
  /** The database engine (default PGlite); PostgreSQL adds a server restart and terminated connections. */
  readonly engine?: SoakEngine;
}

function registryFromConfig(c: Record<string, any>): Registry {
  return {
    rooms: new Map((c['rooms'] as any[]).map((r) => [r.roomId, r.allowedClassifications])),
    partners: new Map(
      (c['partners'] as any[]).map((p) => [p.azp, { groups: p.groups, classes: p.allowedClassifications }]),
    ),
  };
}

const AGENT_GHOST = '@agent-docs:org-a.example';
const MEMBERSHIPS: Record<string, readonly (readonly MatrixPrincipal[])[]> = {
  [GENERAL_ROOM]: [[ALICE, BOB], [ALICE]],
  [ENGINEERING_ROOM]: [[ALICE], [ALICE, BOB]],
};

/** Seed a registered room on the homeserver double: invite-only, joined history, local members. */
function seedRoom(s: SoakStack, roomId: string, members: readonly MatrixPrincipal[]): void {
  const hs = s.homeserver;
  const room = hs.rooms.get(roomId);
  if (room) room.clear();
  const state = (type: string, content: Record<string, unknown>, id: string) =>
    hs.setState(roomId, {
      type,
      state_key: '',
      content,
      event_id: `$${id}-${roomId}`,
      sender: ALICE.principal,
    });
  state('m.room.create', { room_version: '11', creator: ALICE.principal, 'm.federate': false }, 'create');
  state('m.room.join_rules', { join_rule: 'invite' }, 'join');
  state('m.room.history_visibility', { history_visibility: 'joined' }, 'history');
  hs.join(roomId, AGENT_GHOST);
  for (const m of members) hs.join(roomId, m.principal);
}

function memorySample(s: SoakStack): MemorySample {
  const m = process.memoryUsage();
  return {
    parentRss: m.rss,
    parentHeapUsed: m.heapUsed,
    projectorRss: s.projector.rss(),
    retrievalRss: s.retrieval.rss(),
  };
}

/** After a GC where the process allows one (`--expose-gc`), so heap growth is what stays. */
function settledSample(s: SoakStack): MemorySample {
  (globalThis as { gc?: () => void }).gc?.();
  return memorySample(s);
}

/**
 * The registry as the soak knows it: the projector's configuration (what it last wrote), the
 * oracle's history of it and the bridge double's parsed view.
 */
class SoakRegistry {
  config: Record<string, any>;
  bridge: ProjectorConfig;
  readonly history: RegistryHistory;
  constructor(
    private readonly s: SoakStack,
    t0: number,
  ) {
    this.config = structuredClone(s.projectorConfig);
    this.history = new RegistryHistory(registryFromConfig(this.config), t0);
    this.bridge = this.parsed();
  }

  /** The oracle records the change before the projector can read it, so a check in flight is judged against both states. */
  change(next: Record<string, any>): void {
    this.config = next;
    this.history.change(registryFromConfig(next), Date.now());
    writeFileSync(this.s.projectorConfigFile, JSON.stringify(next));
    this.bridge = this.parsed();
  }

  private parsed(): ProjectorConfig {
    const p = parseConfig(JSON.stringify(this.config));
    if (!p.ok) throw new Error('soak projector config invalid');
    return p.config;
  }
}

/** Membership changes: every 7 s one registered room switches its reader set. */
function startChurn(s: SoakStack, rand: () => number, membership: MembershipHistory): NodeJS.Timeout {
  const memberIndex = new Map(Object.keys(MEMBERSHIPS).map((r) => [r, 0]));
  return setInterval(() => {
    const roomId = rand() < 0.5 ? GENERAL_ROOM : ENGINEERING_ROOM;
    const variants = MEMBERSHIPS[roomId]!;
    const i = ((memberIndex.get(roomId) ?? 0) + 1) % variants.length;
    memberIndex.set(roomId, i);
    membership.record(roomId, Date.now());
    const now = variants[i]!;
    if (now.some((m) => m.principal === BOB.principal)) s.homeserver.join(roomId, BOB.principal);
    else
      s.homeserver.setState(roomId, {
        type: 'm.room.member',
        state_key: BOB.principal,
        content: { membership: 'leave' },
        sender: BOB.principal,
      });
    membership.record(roomId, Date.now());
  }, 7_000);
}

/** The traffic of one run: workers take ticks at the total rate until the time is up and the schedule done. */
class Traffic {
  readonly ops: Op[] = [];
  harnessErrors = 0;
  scheduleDone = false;
  private next = Date.now();

  constructor(
    private readonly c: TrafficContext,
    private readonly stopAt: number,
    private readonly intervalMs: number,
    private readonly say: (line: string) => void,
  ) {}

  async worker(): Promise<void> {
    while (Date.now() < this.stopAt || !this.scheduleDone) {
      const at = this.next;
      this.next = Math.max(this.next + this.intervalMs, Date.now());
      await sleep(at - Date.now());
      const r = this.c.rand();
      try {
        this.ops.push(await (r < 0.4 ? matrixOp(this.c) : r < 0.65 ? partnerOp(this.c) : mcpOp(this.c)));
      } catch (e) {
        this.harnessErrors++;
        this.say(`operation failed in the soak itself: ${(e as Error).message}`);
      }
    }
  }
}

/** Runs each fault in its slot of the duration; leaves an after-window behind the last. */
async function runFaults(
  c: FaultContext,
  t0: number,
  durationMs: number,
  say: (line: string) => void,
): Promise<{ windows: FaultWindow[]; slotMs: number }> {
  const schedule = faultSchedule(c);
  const slotMs = durationMs / (schedule.length + 1);
  const windows: FaultWindow[] = [];
  for (let i = 0; i < schedule.length; i++) {
    await sleep(t0 + (i + 0.6) * slotMs - Date.now());
    const f = schedule[i]!;
    say(`fault ${i + 1}/${schedule.length}: ${f.name}`);
    const start = Date.now();
    const note = await f.run();
    windows.push({ name: f.name, start, end: Date.now(), ...(note ? { note } : {}) });
  }
  await sleep(Math.min(slotMs / 2, 15_000));
  return { windows, slotMs };
}

export async function runSoak(options: SoakOptions): Promise<SoakReport> {
  const say = options.progress ?? (() => {});
  const concurrency = options.concurrency ?? 4;
  const rate = options.ratePerSec ?? 3;
  const rand = prng(options.seed ?? 11);
  const engine = options.engine ?? 'pglite';
  say(
    `starting the stack (${engine === 'pglite' ? 'embedded database' : 'PostgreSQL cluster'}, homeserver double, projector and retrieval processes)`,
  );
  const s = await startSoakStack({ engine });
  try {
    for (const [roomId, variants] of Object.entries(MEMBERSHIPS)) seedRoom(s, roomId, variants[0]!);
    const membership = new MembershipHistory();
    const t0 = Date.now();
    const registry = new SoakRegistry(s, t0);
    const memStart = settledSample(s);
    const traffic = new Traffic(
      { s, rand, registry: registry.history, membership, bridgeConfig: () => registry.bridge },
      t0 + options.durationMs,
      1000 / rate,
      say,
    );
    const churnTimer = startChurn(s, rand, membership);
    const holdScale = Math.max(0.25, Math.min(1, options.durationMs / 600_000));
    const faults: FaultContext = {
      s,
      hold: (ms) => sleep(ms * holdScale),
      projectorConfig: () => registry.config,
      revoke: (next) => registry.change(next),
    };
    const schedule = runFaults(faults, t0, options.durationMs, say).finally(() => {
      traffic.scheduleDone = true;
    });
    say(`traffic: ${concurrency} workers, ${rate} operations/s, ${Math.round(options.durationMs / 1000)} s`);
    const [{ windows, slotMs }] = await Promise.all([
      schedule,
      ...Array.from({ length: concurrency }, () => traffic.worker()),
    ]);
    clearInterval(churnTimer);
    const tEnd = Date.now();
    return buildReport({
      ops: traffic.ops,
      faults: windows,
      t0,
      tEnd,
      slotMs,
      harnessErrors: traffic.harnessErrors,
      memory: { start: memStart, end: settledSample(s) },
    });
  } finally {
    await s.close();
  }
}
