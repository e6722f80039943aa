/**
 * The local stack for the soak: the same render, gateway double and agent-runtime double as
 * `e2e/stack.ts`, but the projector and the retrieval server run as child processes through the real
 * CLI (so they can be stopped with signals and come back on the same port), the retrieval server
 * reaches the embedded database through a fault proxy, and the projector's live room-state check
 * reads a homeserver double whose latency and availability the soak controls.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AgentCard } from '@a2a-js/sdk';
import { exportJWK, generateKeyPair, type JSONWebKeySet, SignJWT } from 'jose';
import { render } from '../../controller/render/index.ts';
import { loadResources } from '../../controller/render-command.ts';
import type { K8sObject } from '../../controller/types.ts';
import { HomeserverDouble } from '../../projector/test-doubles/homeserver.ts';
import { type EmbeddedDatabase, startEmbeddedDatabase } from '../../retrieval/db/embedded.ts';
import { LOCAL_PROFILE } from '../../retrieval/embeddings/local.ts';
import { startRetrievalServer } from '../../retrieval/index.ts';
import { demoRecords } from '../demo-corpus.ts';
import { type AgentRuntime, startAgentRuntime } from '../doubles/agent-runtime.ts';
import { type ApiKeySecret, type GatewayDouble, startGatewayDouble } from '../doubles/gateway.ts';
import { EXAMPLES_DIR } from '../stack.ts';
import { ChildServer, freePort } from './child-server.ts';
import { prepareDatabase } from './database.ts';
import { FaultProxy } from './fault-proxy.ts';

export const HOMESERVER_TOKEN = 'syt_soak_bridge_token';
/** Shutdown timing of the children: short, so restarts fit the schedule (common/shutdown.ts). */
export const CHILD_SHUTDOWN = { FGENTIC_SHUTDOWN_DELAY_MS: '500', FGENTIC_SHUTDOWN_TIMEOUT_MS: '5000' };
/** Live-check deadline used by the soak (the shipped default is 150 ms; the soak machine is shared). */
export const LIVE_CHECK_TIMEOUT_MS = 500;

export interface SoakStack {
  readonly dir: string;
  readonly db: EmbeddedDatabase;
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

function configMapJson(objects: K8sObject[], name: string, key: string): Record<string, any> {
  const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name) as
    | (K8sObject & { data?: Record<string, string> })
    | undefined;
  const text = cm?.data?.[key];
  if (!text) throw new Error(`render produced no ${name}/${key}`);
  return JSON.parse(text);
}

export async function startSoakStack(): Promise<SoakStack> {
  const closers: (() => Promise<void>)[] = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    const dir = mkdtempSync(join(tmpdir(), 'fgentic-soak-'));
    closers.push(async () => rmSync(dir, { recursive: true, force: true }));
    const resources = loadResources([EXAMPLES_DIR]);
    const { objects, conflicts } = render(resources);
    if (conflicts.length > 0) throw new Error('examples have conflicts');
    const platform = resources.platforms[0]!;
    const gatewayNs = platform.spec.gateway?.namespace ?? 'agentgateway-system';

    // Database: embedded PGlite, migrated and seeded once, reached by the server through the proxy.
    const db = await startEmbeddedDatabase({ maxConnections: 24 });
    closers.push(() => db.close());
    const retrievalConfig: Record<string, any> = {
      ...configMapJson(objects, 'fgentic-retrieval-config', 'retrieval.json'),
      embeddings: { profile: LOCAL_PROFILE },
    };
    await prepareDatabase(db.url);
    const seeder = await startRetrievalServer({
      agents: retrievalConfig['agents'],
      databaseUrl: db.url,
      pool: { max: 2 },
      port: 0,
    });
    await seeder.seed(demoRecords());
    await seeder.close();
    const dbPort = Number(new URL(db.url).port);
    const dbProxy = new FaultProxy('127.0.0.1', dbPort);
    await dbProxy.up();
    closers.push(() => dbProxy.down());

    const homeserver = new HomeserverDouble(HOMESERVER_TOKEN);
    await homeserver.start();
    closers.push(() => homeserver.stop());
    const tokenFile = join(dir, 'homeserver-token');
    writeFileSync(tokenFile, `${HOMESERVER_TOKEN}\n`);

    const projectorConfig = configMapJson(objects, 'fgentic-projector-config', 'projector.json');
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
      (p) => [
        'serve',
        'projector',
        '--config',
        projectorConfigFile,
        '--port',
        String(p),
        '--host',
        '127.0.0.1',
      ],
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
        DATABASE_URL: `postgres://postgres@${dbProxy.url}/postgres?sslmode=disable`,
      },
    );
    closers.push(() => projector.kill());
    closers.push(() => retrieval.kill());
    const [pOk, rOk] = await Promise.all([projector.start(), retrieval.start()]);
    if (!pOk || !rOk) throw new Error(`child not ready: projector ${pOk}, retrieval ${rOk}`);

    const bridgeApiKey = randomBytes(24).toString('base64url');
    const agentMcpKey = randomBytes(24).toString('base64url');
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), kid: 'soak-issuer-key', alg: 'ES256', use: 'sig' };
    const issuer = platform.spec.jwt?.issuer ?? 'https://issuer.example';
    const jwks: JSONWebKeySet = { keys: [jwk] };

    const agent = objects.find((o) => o.kind === 'Agent') as K8sObject & { spec: any };
    const tool = agent.spec.declarative.tools[0];
    const agentMcpHeaders: Record<string, string> = {};
    for (const h of tool.headersFrom ?? []) {
      agentMcpHeaders[h.name.toLowerCase()] =
        h.value ?? (h.valueFrom?.type === 'Secret' ? `Bearer ${agentMcpKey}` : '');
    }
    const mcpListener = platform.spec.gateway?.mcpListener ?? 'knowledge-mcp';
    let mcpRouteUrl = '';
    const runtime = await startAgentRuntime({
      allowedHeaders: tool.mcpServer.allowedHeaders ?? [],
      get mcpUrl() {
        return mcpRouteUrl;
      },
      staticHeaders: agentMcpHeaders,
      toolName: tool.mcpServer.toolNames[0],
      agentName: agent.metadata.name,
      protocolVersion: platform.spec.a2aBackend === 'agentService' ? '0.3' : '1.0',
    });
    closers.push(() => runtime.close());

    const upstreams: Record<string, string> = {
      [`${platform.spec.namespaces?.retrieval ?? 'knowledge'}/${platform.spec.projector?.service ?? 'fgentic-projector'}:${platform.spec.projector?.port ?? 8080}`]:
        projector.url,
    };
    for (const b of objects.filter((o) => o.kind === 'AgentgatewayBackend') as (K8sObject & {
      spec: any;
    })[]) {
      if (b.spec.a2a) upstreams[`${b.spec.a2a.host}:${b.spec.a2a.port}`] = runtime.url;
      for (const t of b.spec.mcp?.targets ?? [])
        upstreams[`${t.static.host}:${t.static.port}`] = retrieval.url;
    }
    const apiKeySecrets: ApiKeySecret[] = [
      {
        name: platform.spec.bridge?.apiKeySecretRef?.name ?? 'a2a-bridge-callers',
        namespace: gatewayNs,
        entries: [
          {
            key: bridgeApiKey,
            metadata: { workload: platform.spec.bridge?.workload ?? 'matrix-a2a-bridge' },
          },
        ],
      },
      {
        name: `${agent.metadata.name}-mcp-key`,
        namespace: gatewayNs,
        labels: { 'retrieval.fgentic.dev/api-key': 'mcp' },
        entries: [
          { key: agentMcpKey, metadata: { workload: `${agent.metadata.namespace}/${agent.metadata.name}` } },
        ],
      },
    ];
    const gateway = await startGatewayDouble({ objects, upstreams, apiKeySecrets, jwks: { [issuer]: jwks } });
    closers.push(() => gateway.close());
    const localListener = platform.spec.gateway?.localListener ?? 'default';
    const publicListener = platform.spec.gateway?.publicListener ?? 'federation-retrieval';
    mcpRouteUrl = `${gateway.urls[mcpListener]}/mcp/knowledge-retrieval`;
    const card = (await (await fetch(`${runtime.url}/.well-known/agent-card.json`)).json()) as AgentCard;
    const ns = agent.metadata.namespace;
    const name = agent.metadata.name;

    return {
      dir,
      db,
      dbProxy,
      homeserver,
      projector,
      retrieval,
      gateway,
      runtime,
      card,
      localRouteUrl: `${gateway.urls[localListener]}/api/a2a/${ns}/${name}`,
      publicRouteUrl: `${gateway.urls[publicListener]}/a2a/${ns}/${name}`,
      mcpRouteUrl,
      bridgeApiKey,
      agentMcpHeaders,
      projectorConfig,
      projectorConfigFile,
      retrievalConfig,
      retrievalConfigFile,
      issueToken: async (azp) => {
        const now = Math.floor(Date.now() / 1000);
        return new SignJWT({ azp })
          .setProtectedHeader({ alg: 'ES256', kid: jwk.kid })
          .setIssuer(issuer)
          .setAudience('fgentic-a2a')
          .setSubject(`service-account-${azp}`)
          .setIssuedAt(now)
          .setExpirationTime(now + 300)
          .sign(privateKey);
      },
      close,
    };
  } catch (e) {
    await close();
    throw e;
  }
}
