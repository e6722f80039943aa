/**
 * The soak: bounded concurrent traffic through the gateway double for a fixed duration while a fault
 * schedule breaks the database socket, the homeserver, the configuration and the processes, with an
 * oracle judging every response. Returns a report; `main.ts` prints it and writes the JSON.
 *
 * Traffic (one operation per tick, spread over `concurrency` workers at `ratePerSec` in total, so the
 * MCP route's 600 requests/min limit is only hit by the fault that fills it):
 * - Matrix delegations on the local route: the bridge double reads the room's current state from the
 *   homeserver double and sends a fresh room context; some are for an unregistered room or carry a
 *   stale audience (both must be denied).
 * - Partner delegations on the public route with a fresh JWT: org B, org D, and an unknown azp
 *   (must be denied; org D must be denied once the revocation is in force).
 * - Direct MCP searches on the MCP route as the agent pod makes them, with a projection of a random
 *   identity, vector or hybrid; some with an expired projection (must be denied).
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { MatrixPrincipal, RoomSnapshot } from '../../contract/index.ts';
import { encodeRoomContext, roomContextFromSnapshot } from '../../contract/index.ts';
import { parseConfig } from '../../projector/config.ts';
import { snapshotFromState } from '../../projector/homeserver.ts';
import { RETRIEVAL_ROLE } from '../../retrieval/db/roles.ts';
import { matrixHeader, oauthHeader } from '../../retrieval/testing.ts';
import { IDENTITY_HEADER, RETRIEVAL_TOOL } from '../../rules/index.ts';
import { ALICE, BOB, ENGINEERING_ROOM, GENERAL_ROOM, roomSnapshot, sendParams } from '../helpers.ts';
import { ChildServer } from './child-server.ts';
import type { SoakEngine } from './database.ts';
import {
  type Classification,
  MembershipHistory,
  matrixMayRead,
  partnerMayRead,
  type Registry,
  RegistryHistory,
} from './oracle.ts';
import { type SoakStack, startSoakStack } from './stack.ts';

export interface SoakOptions {
  readonly durationMs: number;
  readonly concurrency?: number;
  readonly ratePerSec?: number;
  readonly seed?: number;
  readonly progress?: (line: string) => void;
  /** The database engine (default PGlite); PostgreSQL adds a server restart and terminated connections. */
  readonly engine?: SoakEngine;
}

type OpKind = 'matrix' | 'partner' | 'mcp';

interface Op {
  readonly kind: OpKind;
  readonly start: number;
  readonly end: number;
  /** Correct and served (or correctly refused); false = an availability error. Undefined: ambiguous. */
  readonly ok: boolean | undefined;
  readonly wrongAllow: boolean;
  readonly leaked: number;
  readonly stale: boolean;
}

interface FaultWindow {
  readonly name: string;
  readonly start: number;
  readonly end: number;
  readonly note?: string;
}

export interface PhaseStats {
  readonly ops: number;
  readonly errorRate: number | null;
  readonly p50Ms: number | null;
  readonly p99Ms: number | null;
}

export interface FaultReport {
  readonly fault: string;
  readonly startS: number;
  readonly durationS: number;
  readonly note?: string;
  readonly before: PhaseStats;
  readonly during: PhaseStats;
  readonly after: PhaseStats;
  /** From the end of the fault to the first of three consecutive good operations; null: never. */
  readonly recoverMs: number | null;
}

export interface MemorySample {
  readonly parentRss: number;
  readonly parentHeapUsed: number;
  readonly projectorRss: number | undefined;
  readonly retrievalRss: number | undefined;
}

export interface SoakReport {
  readonly durationS: number;
  readonly operations: number;
  readonly byKind: Record<OpKind, number>;
  readonly wrongAllows: number;
  readonly leakedRows: number;
  readonly staleDecisions: number;
  readonly ambiguous: number;
  /** Operations the soak itself could not prepare (never a server response); not in the counts. */
  readonly harnessErrors: number;
  readonly overall: PhaseStats;
  readonly faults: FaultReport[];
  readonly memory: { readonly start: MemorySample; readonly end: MemorySample };
  /** Parent heap growth (after GC when available) must stay under this. */
  readonly heapGrowthBoundBytes: number;
  readonly heapGrowthBytes: number;
}

export const HEAP_GROWTH_BOUND_BYTES = 64 * 1024 * 1024;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

/** mulberry32: a seeded PRNG so a run's traffic mix is reproducible. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const QUERIES = [
  'onboarding handbook',
  'travel policy',
  'roadmap',
  'on-call notes',
  'integration guide',
  'architecture notes',
  'salary bands',
  '"retrieval service" -salary',
  'gateway OR projector',
  'notes: (org & B) | !x',
];

/** Every `results` entry of a search (MCP structured content or an agent's data part), anywhere. */
function resultRows(value: unknown): { sourceId: string; classification: string }[] {
  const out: { sourceId: string; classification: string }[] = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) {
      v.forEach(walk);
      return;
    }
    if (typeof v !== 'object' || v === null) return;
    const o = v as Record<string, unknown>;
    if (typeof o['chunk_id'] === 'string' && typeof o['source'] === 'object' && o['source'] !== null) {
      out.push({
        sourceId: String((o['source'] as Record<string, unknown>)['id']),
        classification: String(o['classification']),
      });
      return;
    }
    for (const x of Object.values(o)) walk(x);
  };
  walk(value);
  return out;
}

/** A body that is not JSON is still searched (as a string it holds no rows, so nothing is missed). */
function parseOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function phase(ops: Op[]): PhaseStats {
  const judged = ops.filter((o) => o.ok !== undefined);
  const lat = ops.map((o) => o.end - o.start).sort((a, b) => a - b);
  return {
    ops: ops.length,
    errorRate: judged.length === 0 ? null : judged.filter((o) => o.ok === false).length / judged.length,
    p50Ms: percentile(lat, 50),
    p99Ms: percentile(lat, 99),
  };
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
  hs.setState(roomId, {
    type: 'm.room.create',
    state_key: '',
    content: { room_version: '11', creator: ALICE.principal, 'm.federate': false },
    event_id: `$create-${roomId}`,
    sender: ALICE.principal,
  });
  hs.setState(roomId, {
    type: 'm.room.join_rules',
    state_key: '',
    content: { join_rule: 'invite' },
    event_id: `$join-${roomId}`,
    sender: ALICE.principal,
  });
  hs.setState(roomId, {
    type: 'm.room.history_visibility',
    state_key: '',
    content: { history_visibility: 'joined' },
    event_id: `$history-${roomId}`,
    sender: ALICE.principal,
  });
  hs.join(roomId, AGENT_GHOST);
  for (const m of members) hs.join(roomId, m.principal);
}

/** The homeserver's current state as its client-server API returns it (what the bridge reads). */
function readState(s: SoakStack, roomId: string): { events: unknown[]; joined: string[] } {
  const events = [...(s.homeserver.rooms.get(roomId)?.values() ?? [])].map((e) => ({
    ...e,
    room_id: roomId,
  }));
  const joined = events
    .filter((e) => e.type === 'm.room.member' && e.content['membership'] === 'join')
    .map((e) => e.state_key);
  return { events, joined };
}

function audienceOf(snapshot: RoomSnapshot): MatrixPrincipal[] {
  const out: MatrixPrincipal[] = [];
  for (const m of snapshot.joined) {
    if (m.kind === 'matrix') out.push({ kind: 'matrix', principal: m.principal });
    else if (m.kind === 'bridged_matrix' && m.network !== undefined)
      out.push({ kind: 'bridged_matrix', network: m.network, principal: m.principal });
  }
  return out;
}

async function postJson(url: string, headers: Record<string, string>, body: unknown) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, text: await res.text() };
}

/** Faults only a real database server has: a restart of the server, and its connections ended. */
function postgresFaults(
  s: SoakStack,
  hold: (ms: number) => Promise<void>,
): { name: string; run: () => Promise<string | undefined> }[] {
  const cluster = s.db.cluster!;
  return [
    {
      name: 'serving connections terminated (pg_terminate_backend)',
      run: async () => {
        const ended = await s.db.terminateServing!();
        await hold(2_000);
        const again = await s.db.terminateServing!();
        return `${ended} then ${again} connections ended`;
      },
    },
    {
      name: 'PostgreSQL server stopped (fast shutdown), then started',
      run: async () => {
        cluster.stopServer();
        await hold(10_000);
        cluster.startServer();
        return undefined;
      },
    },
  ];
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
  const ops: Op[] = [];
  const faults: FaultWindow[] = [];
  try {
    for (const [roomId, variants] of Object.entries(MEMBERSHIPS)) seedRoom(s, roomId, variants[0]!);
    const memberIndex = new Map(Object.keys(MEMBERSHIPS).map((r) => [r, 0]));
    const membership = new MembershipHistory();
    let projectorConfig = structuredClone(s.projectorConfig);
    const t0 = Date.now();
    const registry = new RegistryHistory(registryFromConfig(projectorConfig), t0);
    const parsedConfig = () => {
      const p = parseConfig(JSON.stringify(projectorConfig));
      if (!p.ok) throw new Error('soak projector config invalid');
      return p.config;
    };
    let bridgeConfig = parsedConfig();

    const sample = (): MemorySample => {
      const m = process.memoryUsage();
      return {
        parentRss: m.rss,
        parentHeapUsed: m.heapUsed,
        projectorRss: s.projector.rss(),
        retrievalRss: s.retrieval.rss(),
      };
    };
    (globalThis as { gc?: () => void }).gc?.();
    const memStart = sample();

    // ---- operations ---------------------------------------------------------------------------
    const matrixOp = async (): Promise<Op> => {
      const r = rand();
      const variant = r < 0.1 ? 'unregistered' : r < 0.2 ? 'stale' : 'current';
      const roomId =
        variant === 'unregistered'
          ? '!unregistered:org-a.example'
          : rand() < 0.5
            ? GENERAL_ROOM
            : ENGINEERING_ROOM;
      let snapshot: RoomSnapshot;
      if (variant === 'unregistered') {
        snapshot = roomSnapshot(roomId, [ALICE]);
      } else {
        const raw = readState(s, roomId);
        if (variant === 'stale') {
          // The bridge's view is missing a reader who is joined, or has one who left.
          const hasBob = raw.joined.includes(BOB.principal);
          if (hasBob) {
            raw.events = raw.events.filter((e: any) => e.state_key !== BOB.principal);
            raw.joined = raw.joined.filter((j) => j !== BOB.principal);
          } else {
            // Replace Bob's leave event (if any) with a join the homeserver never saw.
            raw.events = raw.events.filter((e: any) => e.state_key !== BOB.principal);
            raw.events.push({
              type: 'm.room.member',
              state_key: BOB.principal,
              content: { membership: 'join' },
              event_id: `$stale-${randomUUID()}`,
              sender: BOB.principal,
              room_id: roomId,
            });
            raw.joined.push(BOB.principal);
          }
        }
        const entry = bridgeConfig.rooms.get(roomId);
        const snap = entry ? snapshotFromState(raw, bridgeConfig, entry) : undefined;
        if (!snap) throw new Error('bridge double could not build a snapshot');
        snapshot = snap;
      }
      const ctx = roomContextFromSnapshot(snapshot, {
        caller: ALICE,
        delegationId: randomUUID().replaceAll('-', '').padEnd(64, '0'),
        eventId: `$ev-${randomUUID()}`,
      });
      if (!ctx.ok) throw new Error(`room context: ${ctx.reason}`);
      const encoded = encodeRoomContext(ctx.value);
      if (!encoded.ok) throw new Error('room context encoding');
      const audience = audienceOf(snapshot);
      const start = Date.now();
      let status = 0;
      let text = '';
      try {
        ({ status, text } = await postJson(
          s.localRouteUrl,
          {
            authorization: `Bearer ${s.bridgeApiKey}`,
            'x-user-id': ALICE.principal,
            'x-fgentic-room-context': encoded.value,
            'a2a-version': '1.0',
          },
          { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: sendParams(pick(QUERIES)) },
        ));
      } catch {
        status = 0;
      }
      const end = Date.now();
      const states = registry.admissible(start, end);
      const membershipMoved = variant !== 'unregistered' && membership.changedDuring(roomId, start, end);
      const mustDeny = variant === 'unregistered' || (variant === 'stale' && !membershipMoved);
      const allowed = status === 200 && /grounded answer|retrieval denied|retrieval unavailable/.test(text);
      const rows = allowed ? resultRows(parseOrText(text)) : [];
      let leaked = 0;
      let stale = false;
      for (const row of rows) {
        const okAny = states.some((g) => matrixMayRead(row.sourceId, audience, g.rooms.get(roomId) ?? []));
        if (!okAny) leaked++;
        const okNow = matrixMayRead(row.sourceId, audience, registry.current.rooms.get(roomId) ?? []);
        if (okAny && !okNow && states.length === 1) stale = true;
      }
      const wrongAllow = allowed && mustDeny;
      let ok: boolean | undefined;
      if (mustDeny) ok = status === 401 || status === 403;
      else if (membershipMoved) ok = undefined;
      else ok = status === 200 && text.includes('grounded answer');
      return { kind: 'matrix', start, end, ok, wrongAllow, leaked, stale };
    };

    const partnerOp = async (): Promise<Op> => {
      const r = rand();
      const azp = r < 0.1 ? 'org-x-a2a' : r < 0.55 ? 'org-b-a2a' : 'org-d-a2a';
      const token = await s.issueToken(azp);
      const start = Date.now();
      let status = 0;
      let text = '';
      try {
        ({ status, text } = await postJson(
          s.publicRouteUrl,
          { authorization: `Bearer ${token}`, 'a2a-version': '1.0' },
          { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: sendParams(pick(QUERIES)) },
        ));
      } catch {
        status = 0;
      }
      const end = Date.now();
      const states = registry.admissible(start, end);
      const policies = states.map((g) => g.partners.get(azp));
      const mayAllow = policies.some((p) => p !== undefined);
      const mustAllow = policies.every((p) => p !== undefined);
      const allowed = status === 200 && /grounded answer|retrieval denied|retrieval unavailable/.test(text);
      const rows = allowed ? resultRows(parseOrText(text)) : [];
      let leaked = 0;
      for (const row of rows) {
        if (!policies.some((p) => p && partnerMayRead(row.sourceId, p.groups, p.classes))) leaked++;
      }
      const wrongAllow = allowed && !mayAllow;
      const stale =
        allowed && mayAllow && registry.current.partners.get(azp) === undefined && states.length === 1;
      let ok: boolean | undefined;
      if (!mayAllow) ok = status === 401 || status === 403;
      else if (!mustAllow) ok = undefined;
      else ok = status === 200 && text.includes('grounded answer');
      return { kind: 'partner', start, end, ok, wrongAllow, leaked, stale };
    };

    const mcpOp = async (): Promise<Op> => {
      const now = Math.floor(Date.now() / 1000);
      const expired = rand() < 0.05;
      const iat = expired ? now - 700 : now - 1;
      let header: string;
      let mayRead: (sourceId: string) => boolean;
      if (rand() < 0.6) {
        const roomId = rand() < 0.5 ? GENERAL_ROOM : ENGINEERING_ROOM;
        const audience = rand() < 0.5 ? [ALICE] : [ALICE, BOB];
        const classes: Classification[] =
          roomId === ENGINEERING_ROOM ? ['approved_non_public', 'public'] : ['public'];
        header = matrixHeader({ caller: ALICE, audience, classifications: classes as never, iat, roomId });
        mayRead = (id) => matrixMayRead(id, audience, classes);
      } else {
        const groups =
          rand() < 0.5 ? ['partner/org-b/docs'] : ['partner/org-d/docs', 'partner/org-d/engineering'];
        const classes: Classification[] =
          groups.length === 1 ? ['public'] : ['approved_non_public', 'public'];
        header = oauthHeader({
          policy: groups.length === 1 ? 'org-b' : 'org-d',
          groups,
          classifications: classes as never,
          iat,
        });
        mayRead = (id) => partnerMayRead(id, groups, classes);
      }
      const withNul = rand() < 0.03;
      const query = withNul ? `${pick(QUERIES)}\u0000` : pick(QUERIES);
      const mode = rand() < 0.5 ? 'vector' : 'hybrid';
      const start = Date.now();
      let status = 0;
      let text = '';
      try {
        ({ status, text } = await postJson(
          s.mcpRouteUrl,
          {
            ...s.agentMcpHeaders,
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': '2025-11-25',
            [IDENTITY_HEADER]: header,
          },
          {
            jsonrpc: '2.0',
            id: 1,
            method: 'tools/call',
            params: { name: RETRIEVAL_TOOL, arguments: { query, mode, max_results: 10 } },
          },
        ));
      } catch {
        status = 0;
      }
      const end = Date.now();
      let body: any;
      try {
        body = status === 200 ? JSON.parse(text) : undefined;
      } catch {
        body = undefined;
      }
      const served = body?.result && body.result.isError !== true;
      const rows = served ? resultRows(body.result.structuredContent) : [];
      const leaked = rows.filter((r) => !mayRead(r.sourceId)).length;
      const mustDeny = expired || withNul;
      const wrongAllow = Boolean(served) && mustDeny;
      let ok: boolean;
      if (mustDeny) {
        const err = body?.result?.isError === true ? String(body.result.content?.[0]?.text ?? '') : '';
        ok = expired ? /"denied"/.test(err) : /"invalid_arguments"/.test(err);
      } else ok = Boolean(served);
      return { kind: 'mcp', start, end, ok, wrongAllow, leaked, stale: false };
    };

    function pick<T>(list: readonly T[]): T {
      return list[Math.floor(rand() * list.length)]!;
    }

    // ---- traffic ------------------------------------------------------------------------------
    const stopAt = t0 + options.durationMs;
    let scheduleDone = false;
    let harnessErrors = 0;
    let next = Date.now();
    const interval = 1000 / rate;
    const worker = async () => {
      while (Date.now() < stopAt || !scheduleDone) {
        const at = next;
        next = Math.max(next + interval, Date.now());
        await sleep(at - Date.now());
        const r = rand();
        try {
          ops.push(await (r < 0.4 ? matrixOp() : r < 0.65 ? partnerOp() : mcpOp()));
        } catch (e) {
          harnessErrors++;
          say(`operation failed in the soak itself: ${(e as Error).message}`);
        }
      }
    };

    // Membership changes: every 7 s one registered room switches its reader set.
    const churn = () => {
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
    };
    const churnTimer = setInterval(churn, 7_000);

    // ---- faults -------------------------------------------------------------------------------
    const writeProjector = (text: string) => writeFileSync(s.projectorConfigFile, text);
    const goodProjector = () => writeProjector(JSON.stringify(projectorConfig));
    let flap: NodeJS.Timeout | undefined;
    const restart = async (c: ChildServer, how: 'sigterm' | 'sigkill') => {
      let stopped = 'crashed';
      if (how === 'sigterm') stopped = `stop: ${await c.stop(10_000)}`;
      else await c.kill();
      const ready = await c.start();
      return `${stopped}; back ready: ${ready}`;
    };
    // Drain the route's token bucket with cheap requests (a GET is answered 405 by the server) until
    // 429s come back, as a runaway agent would; bounded in requests and time.
    const fillRateLimit = async () => {
      let limited = 0;
      let sent = 0;
      const until = Date.now() + 30_000;
      const one = async () => {
        while (Date.now() < until && sent < 5_000 && limited < 50) {
          sent++;
          try {
            const r = await fetch(s.mcpRouteUrl, {
              headers: { ...s.agentMcpHeaders, 'mcp-protocol-version': '2025-11-25' },
              signal: AbortSignal.timeout(10_000),
            });
            await r.arrayBuffer();
            if (r.status === 429) limited++;
          } catch {}
        }
      };
      await Promise.all(Array.from({ length: 32 }, one));
      return `${sent} requests, ${limited} answered 429`;
    };
    const holdScale = Math.max(0.25, Math.min(1, options.durationMs / 600_000));
    const hold = (ms: number) => sleep(ms * holdScale);
    const schedule: { name: string; run: () => Promise<string | undefined> }[] = [
      {
        name: 'database socket down, then back',
        run: async () => {
          await s.dbProxy.down();
          await hold(15_000);
          await s.dbProxy.up();
          return undefined;
        },
      },
      {
        name: 'database slow (150 ms per packet)',
        run: async () => {
          s.dbProxy.delayMs = 150;
          await hold(20_000);
          s.dbProxy.delayMs = 0;
          return undefined;
        },
      },
      {
        name: `homeserver slow (${Math.round(0.8 * 500)} ms, deadline 500 ms)`,
        run: async () => {
          s.homeserver.delayMs = 400;
          await hold(20_000);
          s.homeserver.delayMs = 0;
          return undefined;
        },
      },
      {
        name: 'homeserver flapping (500 every other 300 ms)',
        run: async () => {
          flap = setInterval(() => {
            s.homeserver.mode = s.homeserver.mode === 'ok' ? 'error' : 'ok';
          }, 300);
          await hold(20_000);
          clearInterval(flap);
          s.homeserver.mode = 'ok';
          return undefined;
        },
      },
      {
        name: 'homeserver down (hangs)',
        run: async () => {
          s.homeserver.mode = 'hang';
          await hold(15_000);
          s.homeserver.mode = 'ok';
          return undefined;
        },
      },
      {
        name: 'projector config corrupt, then good',
        run: async () => {
          writeProjector('{"version":1,"rooms":');
          await hold(10_000);
          goodProjector();
          return undefined;
        },
      },
      {
        name: 'retrieval config corrupt: a new replica must refuse to start',
        run: async () => {
          writeFileSync(s.retrievalConfigFile, '{"version":1,"agents":[]}');
          const replica = new ChildServer(
            'retrieval-rollout',
            0,
            (p) => [
              'serve',
              'retrieval',
              '--config',
              s.retrievalConfigFile,
              '--port',
              String(p),
              '--host',
              '127.0.0.1',
              '--no-migrate',
            ],
            { DATABASE_URL: s.db.urlAs(RETRIEVAL_ROLE, s.dbProxy.url) },
          );
          const ready = await replica.start(30_000);
          await replica.kill();
          writeFileSync(s.retrievalConfigFile, JSON.stringify(s.retrievalConfig));
          return `replica ready: ${ready}, exit ${replica.exits.join(',')}`;
        },
      },
      {
        name: 'revocation: engineering room downgraded to public, partner org-d removed',
        run: async () => {
          projectorConfig = structuredClone(projectorConfig);
          for (const r of projectorConfig['rooms'] as any[])
            if (r.roomId === ENGINEERING_ROOM) r.allowedClassifications = ['public'];
          projectorConfig['partners'] = (projectorConfig['partners'] as any[]).filter(
            (p) => p.azp !== 'org-d-a2a',
          );
          registry.change(registryFromConfig(projectorConfig), Date.now());
          goodProjector();
          bridgeConfig = parsedConfig();
          await hold(5_000);
          return undefined;
        },
      },
      { name: 'projector restart (SIGTERM, SIGKILL after 10 s)', run: () => restart(s.projector, 'sigterm') },
      { name: 'projector crash (SIGKILL)', run: () => restart(s.projector, 'sigkill') },
      { name: 'retrieval restart (SIGTERM, SIGKILL after 10 s)', run: () => restart(s.retrieval, 'sigterm') },
      { name: 'retrieval crash (SIGKILL)', run: () => restart(s.retrieval, 'sigkill') },
      { name: 'MCP route rate limit filled', run: fillRateLimit },
      ...(s.db.cluster ? postgresFaults(s, hold) : []),
    ];
    const slot = options.durationMs / (schedule.length + 1);
    const runSchedule = async () => {
      try {
        for (let i = 0; i < schedule.length; i++) {
          await sleep(t0 + (i + 0.6) * slot - Date.now());
          const f = schedule[i]!;
          say(`fault ${i + 1}/${schedule.length}: ${f.name}`);
          const start = Date.now();
          const note = await f.run();
          faults.push({ name: f.name, start, end: Date.now(), ...(note ? { note } : {}) });
        }
        // Leave an after-window behind the last fault.
        await sleep(Math.min(slot / 2, 15_000));
      } finally {
        scheduleDone = true;
      }
    };
    say(`traffic: ${concurrency} workers, ${rate} operations/s, ${Math.round(options.durationMs / 1000)} s`);
    await Promise.all([runSchedule(), ...Array.from({ length: concurrency }, worker)]);
    clearInterval(churnTimer);
    const tEnd = Date.now();
    (globalThis as { gc?: () => void }).gc?.();
    const memEnd = sample();

    // ---- report -------------------------------------------------------------------------------
    ops.sort((a, b) => a.start - b.start);
    const windowMs = Math.min(15_000, slot / 3);
    const between = (a: number, b: number) => ops.filter((o) => o.start >= a && o.start < b);
    const faultReports: FaultReport[] = faults.map((f) => {
      const afterOps = between(f.end, f.end + windowMs);
      let recoverMs: number | null = null;
      const judged = ops.filter((o) => o.start >= f.end && o.ok !== undefined);
      for (let i = 0; i + 2 < judged.length; i++) {
        if (judged[i]!.ok && judged[i + 1]!.ok && judged[i + 2]!.ok) {
          recoverMs = Math.max(0, judged[i]!.end - f.end);
          break;
        }
      }
      return {
        fault: f.name,
        startS: Math.round((f.start - t0) / 100) / 10,
        durationS: Math.round((f.end - f.start) / 100) / 10,
        ...(f.note ? { note: f.note } : {}),
        before: phase(between(f.start - windowMs, f.start)),
        during: phase(between(f.start, f.end)),
        after: phase(afterOps),
        recoverMs,
      };
    });
    const byKind = { matrix: 0, partner: 0, mcp: 0 } as Record<OpKind, number>;
    for (const o of ops) byKind[o.kind]++;
    return {
      durationS: Math.round((tEnd - t0) / 1000),
      operations: ops.length,
      byKind,
      wrongAllows: ops.filter((o) => o.wrongAllow).length,
      leakedRows: ops.reduce((n, o) => n + o.leaked, 0),
      staleDecisions: ops.filter((o) => o.stale).length,
      ambiguous: ops.filter((o) => o.ok === undefined).length,
      harnessErrors,
      overall: phase(ops),
      faults: faultReports,
      memory: { start: memStart, end: memEnd },
      heapGrowthBoundBytes: HEAP_GROWTH_BOUND_BYTES,
      heapGrowthBytes: memEnd.parentHeapUsed - memStart.parentHeapUsed,
    };
  } finally {
    await s.close();
  }
}

const pct = (x: number | null) => (x === null ? '–' : `${(x * 100).toFixed(1)}%`);
const ms = (x: number | null) => (x === null ? '–' : `${Math.round(x)}`);
const mb = (x: number | undefined) => (x === undefined ? '–' : `${(x / 1048576).toFixed(0)} MB`);

export function formatReport(r: SoakReport): string {
  const lines: string[] = [];
  lines.push(
    `soak: ${r.durationS} s, ${r.operations} operations (matrix ${r.byKind.matrix}, partner ${r.byKind.partner}, mcp ${r.byKind.mcp}), ${r.ambiguous} not judged (membership or registry changed in flight), ${r.harnessErrors} harness errors`,
  );
  lines.push(
    `oracle: wrong allows ${r.wrongAllows}, leaked rows ${r.leakedRows}, decisions older than the revocation bound ${r.staleDecisions}`,
  );
  lines.push(
    `overall: error rate ${pct(r.overall.errorRate)}, p50 ${ms(r.overall.p50Ms)} ms, p99 ${ms(r.overall.p99Ms)} ms`,
  );
  lines.push('');
  const head = [
    'fault',
    'at s',
    'len s',
    'err during',
    'err after',
    'recover ms',
    'p50 before/during/after ms',
    'p99 before/during/after ms',
  ];
  const rows = r.faults.map((f) => [
    f.fault,
    String(f.startS),
    String(f.durationS),
    pct(f.during.errorRate),
    pct(f.after.errorRate),
    ms(f.recoverMs),
    `${ms(f.before.p50Ms)} / ${ms(f.during.p50Ms)} / ${ms(f.after.p50Ms)}`,
    `${ms(f.before.p99Ms)} / ${ms(f.during.p99Ms)} / ${ms(f.after.p99Ms)}`,
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const fmt = (row: string[]) => row.map((c, i) => c.padEnd(widths[i]!)).join(' | ');
  lines.push(fmt(head));
  lines.push(widths.map((w) => '-'.repeat(w)).join('-|-'));
  for (const row of rows) lines.push(fmt(row));
  for (const f of r.faults) if (f.note) lines.push(`  ${f.fault}: ${f.note}`);
  lines.push('');
  const m = r.memory;
  lines.push(
    `memory start → end: parent RSS ${mb(m.start.parentRss)} → ${mb(m.end.parentRss)}, parent heap ${mb(m.start.parentHeapUsed)} → ${mb(m.end.parentHeapUsed)} (growth bound ${mb(r.heapGrowthBoundBytes)}), projector RSS ${mb(m.start.projectorRss)} → ${mb(m.end.projectorRss)}, retrieval RSS ${mb(m.start.retrievalRss)} → ${mb(m.end.retrievalRss)}`,
  );
  return lines.join('\n');
}
