/**
 * `fgentic-retrieval start` (what `npm start` runs): the whole flow on loopback with embedded
 * defaults. The corpus persists in the data directory; the connection details for `npm run demo`
 * are written to `<data>/stack.json` (local development only: it holds throwaway keys), and the
 * projector configuration the stack runs to `<data>/projector.json`, for the walkthrough's `explain`.
 */
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseFlags, usageError } from '../common/args.ts';
import { hasOpenssl, makeSelfSignedCert } from '../common/dev-tls.ts';
import { loadDocuments } from '../controller/render-command.ts';
import { DatabaseInUseError, readLock } from '../retrieval/db/embedded.ts';
import { CAPABILITY_MODES, type CapabilityMode, isCapabilityMode } from '../rules/ledger.ts';
import { handleReview } from '../webhook/main.ts';
import { DEFAULT_RULES_CONFIG } from '../webhook/rules/types.ts';
import { startWebhookServer } from '../webhook/server.ts';
import { StaticClusterView } from '../webhook/view.ts';
import { EXAMPLES_DIR, type LocalStack, startLocalStack } from './stack.ts';

export interface StackFile {
  readonly localRouteUrl: string;
  readonly publicRouteUrl: string;
  readonly mcpRouteUrl: string;
  readonly retrievalUrl: string;
  readonly projectorUrl: string;
  readonly webhookUrl?: string;
  /** The embedded database's loopback postgres:// URL: ingest through it while the stack runs. */
  readonly databaseUrl?: string;
  readonly bridgeApiKey: string;
  readonly agentMcpKey: string;
  readonly issuerPrivateJwk: Record<string, unknown>;
  readonly card: unknown;
  /** For `explain` in the walkthrough: the projector configuration the stack runs with. */
  readonly projectorConfigFile?: string;
}

const out = (line: string) => process.stderr.write(`${line}\n`);

function selfSignedCert(dir: string): boolean {
  if (existsSync(join(dir, 'tls.crt')) && existsSync(join(dir, 'tls.key'))) return true;
  if (!hasOpenssl()) return false;
  makeSelfSignedCert(dir, { days: 30 });
  return true;
}

async function waitReady(url: string, timeoutMs = 30000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return true;
    } catch {}
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

interface StartFlags {
  readonly dataDir: string;
  readonly base: number;
  readonly webhook: boolean;
  readonly capability: CapabilityMode | undefined;
}

/** The flags, checked; an exit code when they are not usable (the message is printed). */
function parseStartFlags(argv: string[]): StartFlags | number {
  let values: { 'data-dir': string; 'port-base': string; 'no-webhook': boolean; capability?: string };
  try {
    values = parseFlags(argv, {
      'data-dir': { type: 'string', default: 'data' },
      'port-base': { type: 'string', default: '18080' },
      'no-webhook': { type: 'boolean', default: false },
      capability: { type: 'string' },
    }).values as typeof values;
  } catch (err) {
    return usageError(
      'start',
      'fgentic-retrieval start [--data-dir DIR] [--port-base N] [--no-webhook] [--capability plain|ledger]',
      err,
    );
  }
  const base = Number(values['port-base']);
  if (!Number.isInteger(base) || base < 1024 || base > 65000) {
    out('start: --port-base must be an integer between 1024 and 65000');
    return 2;
  }
  // Overrides RetrievalPlatform.spec.capability of the examples (docs/ledger.md); absent: as rendered.
  const capability = values.capability;
  if (capability !== undefined && !isCapabilityMode(capability)) {
    out(`start: --capability must be ${CAPABILITY_MODES.join(' or ')}`);
    return 2;
  }
  return { dataDir: resolve(values['data-dir']), base, webhook: !values['no-webhook'], capability };
}

/** The admission webhook on a self-signed certificate, over the examples and the rendered objects. */
async function startLocalWebhook(
  flags: StartFlags,
  stack: LocalStack,
): Promise<{ url: string; close: () => Promise<void> } | undefined> {
  const certDir = join(flags.dataDir, 'webhook-tls');
  if (!selfSignedCert(certDir)) {
    out('      openssl not found: the admission webhook is skipped (`admission check` works offline)');
    return undefined;
  }
  const objects = [...loadDocuments([EXAMPLES_DIR]).map((d) => d.object), ...stack.objects];
  const view = new StaticClusterView(objects as never[]);
  const server = await startWebhookServer({
    certDir,
    port: flags.base + 363,
    host: '127.0.0.1',
    handler: (body) => handleReview(body, view, DEFAULT_RULES_CONFIG, () => true),
  });
  return { url: `https://127.0.0.1:${server.port}`, close: () => server.close() };
}

/** What `npm run demo` and the tests read of the running stack. */
function stackInfo(
  stack: LocalStack,
  webhookUrl: string | undefined,
  databaseUrl: string | undefined,
  projectorConfigFile: string,
): StackFile {
  return {
    localRouteUrl: stack.localRouteUrl,
    publicRouteUrl: stack.publicRouteUrl,
    mcpRouteUrl: stack.mcpRouteUrl,
    retrievalUrl: stack.retrieval.url,
    projectorUrl: stack.projectorUrl,
    ...(webhookUrl ? { webhookUrl } : {}),
    ...(databaseUrl ? { databaseUrl } : {}),
    bridgeApiKey: stack.bridgeApiKey,
    agentMcpKey: stack.agentMcpKey,
    issuerPrivateJwk: stack.issuerPrivateJwk,
    card: stack.card,
    projectorConfigFile,
  };
}

function printBanner(
  stack: LocalStack,
  o: { ready: boolean; started: number; webhookUrl?: string; databaseUrl?: string; pgliteDir: string },
): void {
  const retrievalUrl = stack.retrieval.url;
  out('');
  out(
    o.ready
      ? `fgentic-retrieval local stack is ready (${((Date.now() - o.started) / 1000).toFixed(1)} s)`
      : 'fgentic-retrieval local stack started, but a component is not ready',
  );
  out(`  gateway, local A2A route (Matrix bridge)  ${stack.localRouteUrl}`);
  out(`  gateway, public A2A route (partners)      ${stack.publicRouteUrl}`);
  out(`  gateway, MCP route (retrieval Agent)      ${stack.mcpRouteUrl}`);
  out(`  retrieval server (MCP 2025-11-25)         ${retrievalUrl}/mcp   ${retrievalUrl}/metrics`);
  out(`  projector (ext-auth)                      ${stack.projectorUrl}/readyz`);
  if (stack.ledger) out('  capability ledger                         on (embedded Postgres, docs/ledger.md)');
  if (o.webhookUrl) out(`  admission webhook (AdmissionReview v1)   ${o.webhookUrl}/healthz`);
  if (o.databaseUrl) out(`  embedded Postgres (corpus)                ${o.databaseUrl}`);
  out('');
  out('Try:');
  out('  npm run demo                                  # walkthrough: rooms, bridged users, partners, denials');
  out('  npx fgentic-retrieval render -f examples       # what the reconciler renders');
  out('  npx fgentic-retrieval admission check -f examples');
  out(`  curl -s ${retrievalUrl}/metrics | grep fgentic`);
  out(
    `  npx fgentic-retrieval ingest --jsonl retrieval/examples/knowledge.jsonl --data-dir ${o.pgliteDir}   # writes through this stack`,
  );
  out('Ctrl-C stops everything; the corpus stays in ' + o.pgliteDir);
}

export async function startCommand(argv: string[]): Promise<number> {
  const flags = parseStartFlags(argv);
  if (typeof flags === 'number') return flags;
  const { dataDir, base, capability } = flags;
  mkdirSync(dataDir, { recursive: true });
  const pgliteDir = join(dataDir, 'pglite');
  // Refuse at once, before rendering or binding ports, when another process holds the corpus.
  const holder = readLock(pgliteDir);
  if (holder) {
    out(`start: ${new DatabaseInUseError(pgliteDir, holder).message}`);
    return 1;
  }
  const started = Date.now();
  let n = 0;
  const progress = (step: string) => out(`[${++n}/6] ${step} (${((Date.now() - started) / 1000).toFixed(1)} s)`);

  let stack: LocalStack;
  try {
    stack = await startLocalStack({
      dataDir: pgliteDir,
      progress,
      ...(capability !== undefined ? { capability } : {}),
      ports: {
        retrieval: base + 20,
        projector: base + 30,
        listeners: { default: base, 'federation-retrieval': base + 1, 'knowledge-mcp': base + 10 },
      },
    });
  } catch (e) {
    out(`start: ${(e as Error).message}`);
    return 1;
  }

  let webhook: Awaited<ReturnType<typeof startLocalWebhook>>;
  if (flags.webhook) {
    progress('start admission webhook');
    webhook = await startLocalWebhook(flags, stack);
  }
  const databaseUrl = readLock(pgliteDir)?.url ?? stack.databaseUrl;
  const ready = (await waitReady(`${stack.retrieval.url}/readyz`)) && (await waitReady(`${stack.projectorUrl}/readyz`));
  const stackFile = join(dataDir, 'stack.json');
  const projectorConfigFile = join(dataDir, 'projector.json');
  writeFileSync(projectorConfigFile, stack.projectorConfigJson, { mode: 0o600 });
  const info = stackInfo(stack, webhook?.url, databaseUrl, projectorConfigFile);
  writeFileSync(stackFile, `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });

  // Listen for Ctrl-C / SIGTERM before announcing readiness: whoever waits for the banner may stop the
  // stack at once.
  const stopRequested = new Promise<void>((resolveStop) => {
    const stop = () => resolveStop();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  printBanner(stack, {
    ready,
    started,
    pgliteDir,
    ...(webhook ? { webhookUrl: webhook.url } : {}),
    ...(databaseUrl ? { databaseUrl } : {}),
  });

  await stopRequested;
  out('shutting down');
  await webhook?.close().catch(() => {});
  await stack.close();
  rmSync(stackFile, { force: true });
  rmSync(projectorConfigFile, { force: true });
  out('stopped');
  return 0;
}
