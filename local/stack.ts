/**
 * The local stack: every real server of the project plus the doubles of the parts that cannot run on
 * one machine, wired exactly as a deployment wires them, on loopback.
 *
 *   bridge (A2A SDK) ─▶ gateway double ─▶ projector (ext-auth) ─▶ gateway double ─▶ agent-runtime double
 *   agent-runtime double (MCP SDK) ─▶ gateway double (MCP route) ─▶ retrieval server ─▶ PGlite via pg
 *
 * The gateway double executes the objects that `render` produces from `examples/`; the projector and
 * retrieval server read the ConfigMaps from the same render. Used by `npm start` and the tests in e2e/.
 */
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { AgentCard } from '@a2a-js/sdk';
import { exportJWK, generateKeyPair, type JSONWebKeySet, SignJWT } from 'jose';
import { render } from '../controller/render/index.ts';
import { loadResources } from '../controller/render-command.ts';
import type { K8sObject } from '../controller/types.ts';
import { type ProjectorConfig, parseConfig, startProjector } from '../projector/index.ts';
import type { CapabilityLedger } from '../projector/ledger.ts';
import { createWorkerLedger } from '../projector/ledger-worker.ts';
import { type RetrievalServer, startRetrievalServer } from '../retrieval/index.ts';
import { RETRIEVAL_SERVER } from '../rules/index.ts';
import type { CapabilityMode } from '../rules/ledger.ts';
import { demoRecords } from './demo-corpus.ts';
import { type AgentRuntime, startAgentRuntime } from './doubles/agent-runtime.ts';
import { type ApiKeySecret, type GatewayDouble, startGatewayDouble } from './doubles/gateway.ts';

export const EXAMPLES_DIR = fileURLToPath(new URL('../examples/', import.meta.url));

export interface LocalStackOptions {
  readonly examplesDir?: string;
  /** Embedded database directory, or 'memory' (default). */
  readonly dataDir?: string;
  /** Seed the demo corpus when the database has no chunks (default true). */
  readonly seed?: boolean;
  /** Clock for projector and retrieval server, Unix seconds. */
  readonly now?: () => number;
  /** Change rendered objects before the gateway executes them (defence-removal tests). */
  readonly mutateObjects?: (objects: K8sObject[]) => K8sObject[];
  /** Change the projector configuration before it starts (negative tests). */
  readonly mutateProjectorConfig?: (config: ProjectorConfig) => ProjectorConfig;
  /**
   * Set `RetrievalPlatform.spec.capability` before rendering (default: as in the examples, plain).
   * In ledger mode the projector records into the embedded database (docs/ledger.md).
   */
  readonly capability?: CapabilityMode;
  /** Ledger mode: purge interval of the projector's ledger schedule (default 60 s). */
  readonly ledgerPurgeIntervalMs?: number;
  /** Clock of the gateway double's local rate limit, in ms (default Date.now). */
  readonly gatewayNow?: () => number;
  /** Progress callback for `npm start`. */
  readonly progress?: (step: string) => void;
  /** Fixed loopback ports (`npm start`); tests use free ports. */
  readonly ports?: {
    readonly retrieval?: number;
    readonly projector?: number;
    readonly listeners?: Record<string, number>;
  };
}

export interface LocalStack {
  readonly objects: K8sObject[];
  readonly gateway: GatewayDouble;
  readonly retrieval: RetrievalServer;
  readonly projectorUrl: string;
  readonly runtime: AgentRuntime;
  /** The exact local route the bridge is configured with. */
  readonly localRouteUrl: string;
  readonly publicRouteUrl: string;
  readonly mcpRouteUrl: string;
  readonly bridgeApiKey: string;
  readonly agentMcpKey: string;
  /** The MCP API key of every rendered retrieval Agent, by `namespace/name`. */
  readonly agentMcpKeys: Readonly<Record<string, string>>;
  /** The embedded database (loopback) and the projector's configuration text, for `explain`. */
  readonly databaseUrl?: string;
  readonly projectorConfigJson: string;
  /** The projector's capability ledger (ledger mode only). */
  readonly ledger?: CapabilityLedger;
  /** The agent card as kagent advertises it: its interface URL is the direct (un-gated) address. */
  readonly card: AgentCard;
  /** A JWT from the partner issuer, signed with the key the gateway trusts. */
  issueToken(claims: {
    azp: string;
    aud?: string | string[];
    expiresInSeconds?: number;
    iss?: string;
  }): Promise<string>;
  /** The partner issuer's signing key (local stack only), so a walkthrough in another process can mint tokens. */
  readonly issuerPrivateJwk: Record<string, unknown>;
  close(): Promise<void>;
}

/** The text of one key of one rendered ConfigMap. */
export function configMapJson(objects: K8sObject[], name: string, key: string): string {
  const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name) as
    | (K8sObject & { data?: Record<string, string> })
    | undefined;
  const text = cm?.data?.[key];
  if (!text) throw new Error(`render produced no ${name}/${key}`);
  return text;
}

type Platform = ReturnType<typeof loadResources>['platforms'][number];

export interface RenderedExamples {
  readonly objects: K8sObject[];
  readonly platform: Platform;
}

/** Renders the examples as a controller would, refusing any conflict. */
export function renderExamples(
  options: Pick<LocalStackOptions, 'examplesDir' | 'capability' | 'mutateObjects'> = {},
): RenderedExamples {
  const resources = loadResources([options.examplesDir ?? EXAMPLES_DIR]);
  if (options.capability !== undefined && resources.platforms[0])
    resources.platforms[0].spec.capability = options.capability;
  const result = render(resources);
  if (result.conflicts.length > 0) throw new Error(`examples have ${result.conflicts.length} conflicts`);
  const objects = options.mutateObjects ? options.mutateObjects(structuredClone(result.objects)) : result.objects;
  return { objects, platform: resources.platforms[0]! };
}

export interface FrontOptions extends RenderedExamples {
  /** Where the gateway sends ext-auth checks and MCP calls: the projector and the retrieval server. */
  readonly projectorUrl: string;
  readonly retrievalUrl: string;
  /** Key id of the partner issuer's signing key. */
  readonly keyId: string;
  readonly now?: () => number;
  readonly listenerPorts?: Record<string, number>;
  /** Clock of the gateway double's local rate limit, in ms. */
  readonly gatewayNow?: () => number;
}

/**
 * What stands in front of the projector and the retrieval server: the partner issuer, the agent
 * runtime double and the gateway double executing the rendered objects, with the API keys of the
 * bridge and of the agent's MCP calls.
 */
export interface Front {
  readonly gateway: GatewayDouble;
  readonly runtime: AgentRuntime;
  readonly card: AgentCard;
  readonly localRouteUrl: string;
  readonly publicRouteUrl: string;
  readonly mcpRouteUrl: string;
  readonly bridgeApiKey: string;
  readonly agentMcpKey: string;
  /** The MCP API key of every rendered retrieval Agent, by `namespace/name` (the first is `agentMcpKey`). */
  readonly agentMcpKeys: Readonly<Record<string, string>>;
  /** Headers the agent pod sends on its own MCP calls (the API key from `headersFrom`). */
  readonly agentMcpHeaders: Record<string, string>;
  issueToken: LocalStack['issueToken'];
  readonly issuerPrivateJwk: Record<string, unknown>;
  close(): Promise<void>;
}

/** Where the gateway double sends each rendered backend: the projector, the runtime, retrieval. */
function upstreamsFor(o: FrontOptions, runtimeUrl: string): Record<string, string> {
  const { objects, platform } = o;
  const upstreams: Record<string, string> = {
    [`${platform.spec.namespaces?.retrieval ?? 'knowledge'}/${platform.spec.projector?.service ?? 'fgentic-projector'}:${platform.spec.projector?.port ?? 8080}`]:
      o.projectorUrl,
  };
  for (const b of objects.filter((x) => x.kind === 'AgentgatewayBackend') as (K8sObject & {
    spec: any;
  })[]) {
    if (b.spec.a2a) upstreams[`${b.spec.a2a.host}:${b.spec.a2a.port}`] = runtimeUrl;
    for (const t of b.spec.mcp?.targets ?? []) upstreams[`${t.static.host}:${t.static.port}`] = o.retrievalUrl;
  }
  return upstreams;
}

/**
 * The API-key Secrets the gateway authenticates with: the bridge's, and one MCP key mirror per
 * rendered retrieval Agent, as the controller writes them (`agent`'s key is `agentMcpKey`).
 */
function apiKeySecretsFor(
  objects: readonly K8sObject[],
  platform: FrontOptions['platform'],
  agent: K8sObject,
  bridgeApiKey: string,
  agentMcpKey: string,
): { secrets: ApiKeySecret[]; agentMcpKeys: Record<string, string> } {
  const gatewayNs = platform.spec.gateway?.namespace ?? 'agentgateway-system';
  const secrets: ApiKeySecret[] = [
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
  ];
  const agentMcpKeys: Record<string, string> = {};
  for (const a of objects.filter((x) => x.kind === 'Agent')) {
    const workload = `${a.metadata.namespace}/${a.metadata.name}`;
    const key = a === agent ? agentMcpKey : randomBytes(24).toString('base64url');
    agentMcpKeys[workload] = key;
    secrets.push({
      name: `fgentic-mcp-key.${a.metadata.namespace}.${a.metadata.name}`,
      namespace: gatewayNs,
      labels: { 'retrieval.fgentic.dev/api-key': 'mcp' },
      entries: [{ key, metadata: { workload } }],
    });
  }
  return { secrets, agentMcpKeys };
}

export async function startFront(o: FrontOptions): Promise<Front> {
  const { objects, platform } = o;
  const closers: (() => Promise<void>)[] = [];
  const closeAll = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    const bridgeApiKey = randomBytes(24).toString('base64url');
    const agentMcpKey = randomBytes(24).toString('base64url');
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), kid: o.keyId, alg: 'ES256', use: 'sig' };
    const issuer = platform.spec.jwt?.issuer ?? 'https://issuer.example';
    const jwks: JSONWebKeySet = { keys: [jwk] };

    const agent = objects.find((x) => x.kind === 'Agent') as K8sObject & { spec: any };
    const tool = agent.spec.declarative.tools[0];
    const agentMcpHeaders: Record<string, string> = {};
    for (const h of tool.headersFrom ?? []) {
      agentMcpHeaders[h.name.toLowerCase()] =
        h.value ?? (h.valueFrom?.type === 'Secret' ? `Bearer ${agentMcpKey}` : '');
    }

    const mcpListener = platform.spec.gateway?.mcpListener ?? 'knowledge-mcp';
    // The runtime needs the gateway's MCP URL and the gateway needs the runtime's URL: start the
    // runtime against a late-bound URL.
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

    const keys = apiKeySecretsFor(objects, platform, agent, bridgeApiKey, agentMcpKey);
    const agentMcpKeys = keys.agentMcpKeys;
    const gateway = await startGatewayDouble({
      objects,
      upstreams: upstreamsFor(o, runtime.url),
      apiKeySecrets: keys.secrets,
      jwks: { [issuer]: jwks },
      ...(o.listenerPorts ? { ports: o.listenerPorts } : {}),
      ...(o.gatewayNow ? { now: o.gatewayNow } : {}),
    });
    closers.push(() => gateway.close());
    const localListener = platform.spec.gateway?.localListener ?? 'default';
    const publicListener = platform.spec.gateway?.publicListener ?? 'federation-retrieval';
    const ns = agent.metadata.namespace;
    const name = agent.metadata.name;
    mcpRouteUrl = `${gateway.urls[mcpListener]}/mcp/${RETRIEVAL_SERVER}`;
    const card = (await (await fetch(`${runtime.url}/.well-known/agent-card.json`)).json()) as AgentCard;

    return {
      gateway,
      runtime,
      card,
      localRouteUrl: `${gateway.urls[localListener]}/api/a2a/${ns}/${name}`,
      publicRouteUrl: `${gateway.urls[publicListener]}/a2a/${ns}/${name}`,
      mcpRouteUrl,
      bridgeApiKey,
      agentMcpKey,
      agentMcpKeys,
      agentMcpHeaders,
      issueToken: async ({ azp, aud, expiresInSeconds, iss }) => {
        const now = o.now ? o.now() : Math.floor(Date.now() / 1000);
        return new SignJWT({ azp })
          .setProtectedHeader({ alg: 'ES256', kid: jwk.kid })
          .setIssuer(iss ?? issuer)
          .setAudience(aud ?? 'fgentic-a2a')
          .setSubject(`service-account-${azp}`)
          .setIssuedAt(now)
          .setExpirationTime(now + (expiresInSeconds ?? 300))
          .sign(privateKey);
      },
      issuerPrivateJwk: { ...(await exportJWK(privateKey)), kid: jwk.kid, alg: 'ES256' },
      close: closeAll,
    };
  } catch (e) {
    await closeAll();
    throw e;
  }
}

export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const step = options.progress ?? (() => {});
  const closers: (() => Promise<void>)[] = [];
  const closeAll = async () => {
    for (const c of closers.reverse()) await c().catch(() => {});
  };
  try {
    step('render examples');
    const { objects, platform } = renderExamples(options);

    step('start retrieval server (embedded Postgres + pgvector)');
    const retrievalConfig = JSON.parse(configMapJson(objects, 'fgentic-retrieval-config', 'retrieval.json'));
    const retrieval = await startRetrievalServer({
      agents: retrievalConfig.agents,
      dataDir: options.dataDir ?? 'memory',
      host: '127.0.0.1',
      port: options.ports?.retrieval ?? 0,
      ...(options.now ? { now: options.now } : {}),
      ...(retrievalConfig.capability === 'ledger'
        ? { capability: 'ledger' as const, ledgerWaitMs: retrievalConfig.ledger.mintWindowMilliseconds }
        : {}),
    });
    closers.push(() => retrieval.close());
    if (options.seed ?? true) {
      const { rows } = await retrieval.pool.query('select count(*)::int as n from knowledge.chunks');
      if (rows[0].n === 0) {
        step('seed demo corpus');
        await retrieval.seed(demoRecords());
      }
    }

    step('start projector');
    const projectorConfigJson = configMapJson(objects, 'fgentic-projector-config', 'projector.json');
    const parsed = parseConfig(projectorConfigJson);
    if (!parsed.ok) throw new Error(`rendered projector config rejected: ${parsed.error}`);
    const projectorConfig = options.mutateProjectorConfig
      ? options.mutateProjectorConfig(parsed.config)
      : parsed.config;
    // Ledger mode: the projector records as `serve projector` does, through a writer thread with its
    // own connection to the embedded database, as knowledge_projector (projector/ledger-worker.ts).
    let ledger: CapabilityLedger | undefined;
    if (projectorConfig.capability === 'ledger' && retrieval.embeddedDatabaseUrl) {
      ledger = createWorkerLedger({
        database: { connectionString: retrieval.embeddedDatabaseUrl, max: 2, connectionTimeoutMs: 60_000 },
        ...(options.ledgerPurgeIntervalMs ? { purgeIntervalMs: options.ledgerPurgeIntervalMs } : {}),
      });
    }
    const projector = await startProjector({
      config: projectorConfig,
      ...(ledger ? { ledger } : {}),
      port: options.ports?.projector ?? 0,
      host: '127.0.0.1',
      ...(options.now ? { now: options.now } : {}),
    });
    closers.push(() => projector.close());

    step('start gateway double and agent runtime double');
    const front = await startFront({
      objects,
      platform,
      projectorUrl: projector.url,
      retrievalUrl: retrieval.url,
      keyId: 'demo-issuer-key',
      ...(options.now ? { now: options.now } : {}),
      ...(options.ports?.listeners ? { listenerPorts: options.ports.listeners } : {}),
      ...(options.gatewayNow ? { gatewayNow: options.gatewayNow } : {}),
    });
    closers.push(() => front.close());

    return {
      objects,
      gateway: front.gateway,
      retrieval,
      projectorUrl: projector.url,
      runtime: front.runtime,
      localRouteUrl: front.localRouteUrl,
      publicRouteUrl: front.publicRouteUrl,
      mcpRouteUrl: front.mcpRouteUrl,
      bridgeApiKey: front.bridgeApiKey,
      agentMcpKey: front.agentMcpKey,
      agentMcpKeys: front.agentMcpKeys,
      ...(retrieval.embeddedDatabaseUrl ? { databaseUrl: retrieval.embeddedDatabaseUrl } : {}),
      projectorConfigJson,
      ...(ledger ? { ledger } : {}),
      card: front.card,
      issueToken: front.issueToken,
      issuerPrivateJwk: front.issuerPrivateJwk,
      close: closeAll,
    };
  } catch (e) {
    await closeAll();
    throw e;
  }
}
