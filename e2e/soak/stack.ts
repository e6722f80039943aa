/**
 * The local stack for the soak: the same render and the same front (issuer, gateway double,
 * agent-runtime double) as `local/stack.ts`, from its `renderExamples` and `startFront`, but the projector and the retrieval server run as child processes through the real
 * CLI (so they can be stopped with signals and come back on the same port), the retrieval server
 * reaches the database (PGlite, or a PostgreSQL cluster of its own) through a fault proxy, and the projector's live room-state check
 * reads a homeserver double whose latency and availability the soak controls.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentCard } from '@a2a-js/sdk';
import { demoRecords } from '../../local/demo-corpus.ts';
import type { AgentRuntime } from '../../local/doubles/agent-runtime.ts';
import type { GatewayDouble } from '../../local/doubles/gateway.ts';
import { configMapJson, renderExamples, startFront } from '../../local/stack.ts';
import { INGESTION_ROLE, RETRIEVAL_ROLE } from '../../retrieval/db/roles.ts';
import { LOCAL_PROFILE } from '../../retrieval/embeddings/local.ts';
import { seedCorpus } from '../../retrieval/index.ts';
import { HomeserverDouble } from '../../testkit/projector/homeserver.ts';
import { ChildServer, freePort } from './child-server.ts';
import { type SoakDatabase, type SoakEngine, startSoakDatabase } from './database.ts';
import { FaultProxy } from './fault-proxy.ts';

export const HOMESERVER_TOKEN = 'syt_soak_bridge_token';
/** Shutdown timing of the children: short, so restarts fit the schedule (common/shutdown.ts). */
export const CHILD_SHUTDOWN = { FGENTIC_SHUTDOWN_DELAY_MS: '500', FGENTIC_SHUTDOWN_TIMEOUT_MS: '5000' };
/** Live-check deadline used by the soak (the shipped default is 150 ms; the soak machine is shared). */
export const LIVE_CHECK_TIMEOUT_MS = 500;

export interface SoakStack {
  readonly dir: string;
  readonly db: SoakDatabase;
  readonly dbProxy: FaultProxy;
  readonly homeserver: HomeserverDouble;
  readonly projector: ChildServer;
  readonly retrieval: ChildServer;
  readonly gateway: GatewayDouble;
  readonly runtime: AgentRuntime;
  readonly card: AgentCard;
  readonly localRouteUrl: string;
  readonly publicRouteUrl: string;
  readonly mcpRouteUrl: string;
  readonly bridgeApiKey: string;
  /** Headers the agent pod sends on its own MCP calls (the API key from `headersFrom`). */
  readonly agentMcpHeaders: Record<string, string>;
  /** The rendered projector configuration (JSON object), as first written. */
  readonly projectorConfig: Record<string, any>;
  readonly projectorConfigFile: string;
  readonly retrievalConfigFile: string;
  readonly retrievalConfig: Record<string, unknown>;
  issueToken(azp: string): Promise<string>;
  close(): Promise<void>;
}

const configObject = (...args: Parameters<typeof configMapJson>): Record<string, any> =>
  JSON.parse(configMapJson(...args));

export async function startSoakStack(options: { engine?: SoakEngine } = {}): Promise<SoakStack> {
  const closers: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    const dir = mkdtempSync(join(tmpdir(), 'fgentic-soak-'));
    closers.push(async () => rmSync(dir, { recursive: true, force: true }));
    const { objects, platform } = renderExamples();

    // Database: migrated and seeded once by the ingestion role, reached by the server through the proxy.
    const db = await startSoakDatabase(options.engine ?? 'pglite');
    closers.push(() => db.close());
    const retrievalConfig: Record<string, any> = {
      ...configObject(objects, 'fgentic-retrieval-config', 'retrieval.json'),
      embeddings: { profile: LOCAL_PROFILE },
    };
    await seedCorpus(db.urlAs(INGESTION_ROLE), demoRecords());
    const dbProxy = new FaultProxy(db.target.host, db.target.port);
    await dbProxy.up();
    closers.push(() => dbProxy.down());

    const homeserver = new HomeserverDouble(HOMESERVER_TOKEN);
    await homeserver.start();
    closers.push(() => homeserver.stop());
    const tokenFile = join(dir, 'homeserver-token');
    writeFileSync(tokenFile, `${HOMESERVER_TOKEN}\n`);

    const projectorConfig = configObject(objects, 'fgentic-projector-config', 'projector.json');
    projectorConfig['liveRoomCheck'] = {
      enabled: true,
      homeserverUrl: homeserver.url,
      accessTokenFile: tokenFile,
      timeoutMs: LIVE_CHECK_TIMEOUT_MS,
    };
    const projectorConfigFile = join(dir, 'projector.json');
    writeFileSync(projectorConfigFile, JSON.stringify(projectorConfig));
    const retrievalConfigFile = join(dir, 'retrieval.json');
    writeFileSync(retrievalConfigFile, JSON.stringify(retrievalConfig));

    const projector = new ChildServer(
      'projector',
      await freePort(),
      (p) => ['serve', 'projector', '--config', projectorConfigFile, '--port', String(p), '--host', '127.0.0.1'],
      CHILD_SHUTDOWN,
    );
    const retrieval = new ChildServer(
      'retrieval',
      await freePort(),
      (p) => [
        'serve',
        'retrieval',
        '--config',
        retrievalConfigFile,
        '--port',
        String(p),
        '--host',
        '127.0.0.1',
        '--no-migrate',
      ],
      {
        ...CHILD_SHUTDOWN,
        DATABASE_URL: db.urlAs(RETRIEVAL_ROLE, dbProxy.url),
      },
    );
    closers.push(() => projector.kill());
    closers.push(() => retrieval.kill());
    const [pOk, rOk] = await Promise.all([projector.start(), retrieval.start()]);
    if (!pOk || !rOk)
      throw new Error(
        `child not ready: projector ${projector.startFailure ?? 'ready'}, retrieval ${retrieval.startFailure ?? 'ready'}`,
      );

    const front = await startFront({
      objects,
      platform,
      projectorUrl: projector.url,
      retrievalUrl: retrieval.url,
      keyId: 'soak-issuer-key',
    });
    closers.push(() => front.close());

    return {
      dir,
      db,
      dbProxy,
      homeserver,
      projector,
      retrieval,
      gateway: front.gateway,
      runtime: front.runtime,
      card: front.card,
      localRouteUrl: front.localRouteUrl,
      publicRouteUrl: front.publicRouteUrl,
      mcpRouteUrl: front.mcpRouteUrl,
      bridgeApiKey: front.bridgeApiKey,
      agentMcpHeaders: front.agentMcpHeaders,
      projectorConfig,
      projectorConfigFile,
      retrievalConfig,
      retrievalConfigFile,
      issueToken: (azp) => front.issueToken({ azp }),
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}
