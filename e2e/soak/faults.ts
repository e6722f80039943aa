/**
 * The soak's fault schedule: each fault breaks one part (the database socket, the homeserver, a
 * configuration, a process, the rate limit) for a while and restores it; the run spreads them over
 * its duration and the report judges the traffic before, during and after each.
 */
import { writeFileSync } from 'node:fs';
import { ENGINEERING_ROOM } from '../../local/helpers.ts';
import { RETRIEVAL_ROLE } from '../../retrieval/db/roles.ts';
import { ChildServer } from './child-server.ts';
import type { SoakStack } from './stack.ts';

export interface Fault {
  readonly name: string;
  /** Breaks and restores; resolves to a note for the report. */
  readonly run: () => Promise<string | undefined>;
}

/** What the faults change of a running soak besides the stack itself. */
export interface FaultContext {
  readonly s: SoakStack;
  /** Waits `ms`, scaled to the run's length. */
  readonly hold: (ms: number) => Promise<void>;
  /** The projector's configuration as the soak last wrote it. */
  projectorConfig(): Record<string, any>;
  /** Installs a new projector configuration: the oracle's registry, the file and the bridge's view. */
  revoke(next: Record<string, any>): void;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

/** Stops (SIGTERM, or SIGKILL for a crash) and starts a child again. */
async function restart(c: ChildServer, how: 'sigterm' | 'sigkill'): Promise<string> {
  let stopped = 'crashed';
  if (how === 'sigterm') stopped = `stop: ${await c.stop(10_000)}`;
  else await c.kill();
  const ready = await c.start();
  return `${stopped}; back ready: ${ready}`;
}

/**
 * Drains the route's token bucket with cheap requests (a GET is answered 405 by the server) until
 * 429s come back, as a runaway agent would; bounded in requests and time.
 */
async function fillRateLimit(s: SoakStack): Promise<string> {
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
}

/** A new retrieval replica must refuse to start on a corrupt configuration. */
async function corruptRetrievalConfig(s: SoakStack): Promise<string> {
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
}

/** The engineering room downgraded to public and partner org-d removed. */
function revoked(config: Record<string, any>): Record<string, any> {
  const next = structuredClone(config);
  for (const r of next['rooms'] as any[]) if (r.roomId === ENGINEERING_ROOM) r.allowedClassifications = ['public'];
  next['partners'] = (next['partners'] as any[]).filter((p) => p.azp !== 'org-d-a2a');
  return next;
}

/** Faults only a real database server has: a restart of the server, and its connections ended. */
function postgresFaults(s: SoakStack, hold: (ms: number) => Promise<void>): Fault[] {
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

/** Sets a value for `ms` (scaled) and restores it. */
async function during(hold: (ms: number) => Promise<void>, ms: number, set: () => void, reset: () => void) {
  set();
  await hold(ms);
  reset();
  return undefined;
}

/** Database and homeserver faults. */
function dependencyFaults(c: FaultContext): Fault[] {
  const { s, hold } = c;
  let flap: NodeJS.Timeout | undefined;
  return [
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
      run: () =>
        during(
          hold,
          20_000,
          () => (s.dbProxy.delayMs = 150),
          () => (s.dbProxy.delayMs = 0),
        ),
    },
    {
      name: `homeserver slow (${Math.round(0.8 * 500)} ms, deadline 500 ms)`,
      run: () =>
        during(
          hold,
          20_000,
          () => (s.homeserver.delayMs = 400),
          () => (s.homeserver.delayMs = 0),
        ),
    },
    {
      name: 'homeserver flapping (500 every other 300 ms)',
      run: () =>
        during(
          hold,
          20_000,
          () => {
            flap = setInterval(() => {
              s.homeserver.mode = s.homeserver.mode === 'ok' ? 'error' : 'ok';
            }, 300);
          },
          () => {
            clearInterval(flap);
            s.homeserver.mode = 'ok';
          },
        ),
    },
    {
      name: 'homeserver down (hangs)',
      run: () =>
        during(
          hold,
          15_000,
          () => (s.homeserver.mode = 'hang'),
          () => (s.homeserver.mode = 'ok'),
        ),
    },
  ];
}

/** The whole schedule, in the order the run applies it. */
export function faultSchedule(c: FaultContext): Fault[] {
  const { s, hold } = c;
  const writeProjector = (text: string) => writeFileSync(s.projectorConfigFile, text);
  return [
    ...dependencyFaults(c),
    {
      name: 'projector config corrupt, then good',
      run: () =>
        during(
          hold,
          10_000,
          () => writeProjector('{"version":1,"rooms":'),
          () => writeProjector(JSON.stringify(c.projectorConfig())),
        ),
    },
    {
      name: 'retrieval config corrupt: a new replica must refuse to start',
      run: () => corruptRetrievalConfig(s),
    },
    {
      name: 'revocation: engineering room downgraded to public, partner org-d removed',
      run: async () => {
        c.revoke(revoked(c.projectorConfig()));
        await hold(5_000);
        return undefined;
      },
    },
    { name: 'projector restart (SIGTERM, SIGKILL after 10 s)', run: () => restart(s.projector, 'sigterm') },
    { name: 'projector crash (SIGKILL)', run: () => restart(s.projector, 'sigkill') },
    { name: 'retrieval restart (SIGTERM, SIGKILL after 10 s)', run: () => restart(s.retrieval, 'sigterm') },
    { name: 'retrieval crash (SIGKILL)', run: () => restart(s.retrieval, 'sigkill') },
    { name: 'MCP route rate limit filled', run: () => fillRateLimit(s) },
    ...(s.db.cluster ? postgresFaults(s, hold) : []),
  ];
}
