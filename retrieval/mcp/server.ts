/**
 * POST /mcp: revision gate → (tools/call only) identity decode → a fresh stateless SDK Server +
 * Streamable HTTP transport per request (JSON responses, no sessions), with the decoded identity in
 * the tool handler's closure. Discovery methods need no projection (docs/decisions.md#d5-mcp-discovery).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import type pg from 'pg';
import { errorFields } from '../../common/error-fields.ts';
import { createLogger } from '../../common/log.ts';
import { type AgentRef, decodeProjection, type Projection, type Verdict } from '../../contract/index.ts';
import { CALLER_AGENT_HEADER, IDENTITY_HEADER } from '../../rules/index.ts';
import { type Embedder, EmbeddingError } from '../embeddings/types.ts';
import {
  agentKey,
  type CapabilityMode,
  type CapabilityProof,
  capabilityDigest,
  isRecorded,
  LEDGER_WAIT_MS,
  UNMINTED_REASON,
  UnmintedCapabilityError,
  withinMintWindow,
} from '../ledger.ts';
import type { RetrievalMetrics } from '../metrics.ts';
import type { PlannerOptions } from '../planner.ts';
import type { ReplicaSet } from '../replica-set.ts';
import { type SearchResult, searchKnowledge } from '../search.ts';
import { callerDenial } from './caller.ts';
import { classifySearchError } from './db-errors.ts';
import { type ArgumentProblem, errorResult, parseArgs, renderResult, TOOL, TOOL_NAME, type ToolArgs } from './tool.ts';
import { gateRequest, MCP_REVISION, originAllowed } from './version-gate.ts';

const log = createLogger('retrieval');
const MAX_BODY_BYTES = 64 * 1024;

export interface McpContext {
  readonly pool: pg.Pool;
  readonly embedder: Embedder;
  readonly agents: readonly AgentRef[];
  readonly allowedOrigins: readonly string[];
  readonly metrics: RetrievalMetrics;
  readonly planner: PlannerOptions;
  /** Whether the database profile matches the embedder; false → refuse to serve. */
  readonly ready: () => boolean;
  readonly now?: () => number;
  /**
   * The agents and origins served now, read once per request (a reloaded configuration applies from
   * the next request); `undefined` while the configuration is missing or stale: every call is refused.
   * Absent: `agents` and `allowedOrigins` are fixed.
   */
  readonly liveConfig?: () =>
    | { readonly agents: readonly AgentRef[]; readonly allowedOrigins: readonly string[] }
    | undefined;
  /** `ledger`: every search must find its projection in the capability ledger (default `plain`). */
  readonly capability?: CapabilityMode;
  /**
   * Ledger mode: the mint window (default LEDGER_WAIT_MS): a value the ledger does not have is
   * re-checked until that long after its issue second (retrieval/ledger.ts `recordHorizon`).
   */
  readonly ledgerWaitMs?: number;
  /**
   * Read replicas (retrieval/replica-set.ts): a search's first attempt goes where they route it;
   * `pool` stays the primary, where the ledger's re-checks and the attempt after them run.
   */
  readonly replicas?: ReplicaSet;
}

/** Every raw value of a header (Node merges duplicates in req.headers; rawHeaders keeps them apart). */
export function rawHeaderValues(req: IncomingMessage, name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i]?.toLowerCase() === name) out.push(req.rawHeaders[i + 1] ?? '');
  }
  return out;
}

function jsonRpcError(res: ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** What `tools/call` is decided on: the decoded projection, its binding to the caller, its proof. */
interface CallIdentity {
  readonly identity?: Verdict<Projection>;
  /** The projection names another agent than the one the gateway authenticated (caller.ts). */
  readonly callerDenied?: string;
  readonly proof?: CapabilityProof;
}

type Refusal = ReturnType<typeof errorResult>;
type Refuse = (
  error: 'denied' | 'invalid_arguments' | 'unavailable',
  reason: string,
  detail?: ArgumentProblem,
) => Refusal;

/** A refused call, counted by outcome and reason and logged without its content. */
function refuser(metrics: RetrievalMetrics): Refuse {
  return (error, reason, detail) => {
    metrics.toolCalls.inc({ outcome: error });
    metrics.denials.inc({ reason });
    log.info('tool call refused', { reason, ...(detail ? { argument: detail.argument } : {}) });
    return errorResult(error, reason, detail);
  };
}

/** The query's embedding, or the refusal when the model does not give one. */
async function embedQuery(ctx: McpContext, query: string, refuse: Refuse): Promise<number[] | Refusal> {
  const endEmbed = ctx.metrics.embedSeconds.startTimer();
  try {
    const [v] = await ctx.embedder.embed([query]);
    if (!v) throw new EmbeddingError('embedding_invalid');
    return v;
  } catch (err) {
    // Why the model could not be reached (class and code only), e.g. ECONNREFUSED or TimeoutError.
    const cause = err instanceof EmbeddingError ? err.cause : errorFields(err);
    if (cause) log.warn('embedding failed', { thrown: cause.error, ...(cause.code ? { code: cause.code } : {}) });
    return refuse('unavailable', err instanceof EmbeddingError ? err.reason : 'embedding_unavailable');
  } finally {
    endEmbed();
  }
}

/** The search: a replica may take the first attempt; in ledger mode re-checked within the mint window. */
async function searchFor(
  ctx: McpContext,
  projection: Projection,
  proof: CapabilityProof | undefined,
  args: ToolArgs,
  embedding: number[],
): Promise<SearchResult> {
  const request = {
    projection,
    embedding,
    maxResults: args.maxResults,
    mode: args.mode,
    queryText: args.query,
    ...(proof ? { capability: proof } : {}),
  };
  // The first attempt may run on a replica; one after the ledger's re-check runs on the primary,
  // which holds the record.
  let attempts = 0;
  const attempt = () =>
    ctx.replicas !== undefined && attempts++ === 0
      ? ctx.replicas.search(request, ctx.planner)
      : searchKnowledge(ctx.pool, request, ctx.planner);
  if (!proof) return attempt();
  // Ledger mode: a value not recorded yet is re-checked within the mint window (retrieval/ledger.ts).
  return withinMintWindow(attempt, () => isRecorded(ctx.pool, proof), {
    windowMs: ctx.ledgerWaitMs ?? LEDGER_WAIT_MS,
    issuedAt: projection.iat,
    // The contract's clock, so the value's age is measured as its expiry is.
    ...(ctx.now ? { nowMs: () => (ctx.now as () => number)() * 1000 } : {}),
  });
}

/** A failed search's refusal: the class of the failure only, never its content. */
function searchRefusal(err: unknown, args: ToolArgs, refuse: Refuse): Refusal {
  if (err instanceof UnmintedCapabilityError) return refuse('denied', UNMINTED_REASON);
  // No content and no fallback query. Only the SQLSTATE and the error's class name are logged.
  const failure = classifySearchError(err, args.mode);
  log.warn('search failed', {
    mode: args.mode,
    sqlstate: failure.sqlstate ?? 'none',
    error: err instanceof Error ? err.constructor.name : 'unknown',
  });
  if (failure.kind === 'input')
    return refuse('invalid_arguments', 'query_rejected', {
      argument: 'query',
      rule: 'the keyword search (mode "hybrid") cannot process this text; rephrase it or use mode "vector"',
    });
  return refuse('unavailable', 'database_unavailable');
}

/** One `tools/call` of the one tool: the identity's checks, the arguments, the embedding, the search. */
async function callTool(
  ctx: McpContext,
  call: CallIdentity,
  configUnavailable: boolean,
  name: string,
  rawArgs: unknown,
) {
  const { identity, proof } = call;
  const { toolCalls, denials } = ctx.metrics;
  const refuse = refuser(ctx.metrics);
  // An unknown tool is a protocol error (MCP 2025-11-25, tools "Error Handling": -32602); the name
  // the client sent is not echoed.
  if (name !== TOOL_NAME) {
    toolCalls.inc({ outcome: 'invalid_arguments' });
    denials.inc({ reason: 'unknown_tool' });
    log.info('tool call refused', { reason: 'unknown_tool' });
    throw new McpError(ErrorCode.InvalidParams, `Unknown tool; this server has one tool, ${TOOL_NAME}`);
  }
  if (configUnavailable) return refuse('unavailable', 'config_unavailable');
  if (!identity) return refuse('denied', 'missing');
  if (!identity.ok) return refuse('denied', identity.reason);
  if (call.callerDenied) return refuse('denied', call.callerDenied);
  if (ctx.capability === 'ledger' && proof === undefined) return refuse('denied', UNMINTED_REASON);
  const parsed = parseArgs(rawArgs);
  if (!parsed.ok) return refuse('invalid_arguments', 'invalid_arguments', parsed);
  const args = parsed.value;
  if (!ctx.ready()) return refuse('unavailable', 'profile_mismatch');
  const embedding = await embedQuery(ctx, args.query, refuse);
  if ('isError' in embedding) return embedding;
  const started = process.hrtime.bigint();
  try {
    const result = await searchFor(ctx, identity.value, proof, args, embedding);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    ctx.metrics.searchSeconds.observe({ plan: result.plan, mode: args.mode }, seconds);
    toolCalls.inc({ outcome: 'ok' });
    log.info('search served', { plan: result.plan, mode: args.mode, results: result.hits.length, seconds });
    return renderResult(result.hits);
  } catch (err) {
    return searchRefusal(err, args, refuse);
  }
}

function buildServer(ctx: McpContext, call: CallIdentity, configUnavailable = false): Server {
  const server = new Server(
    { name: 'fgentic-knowledge-retrieval', version: '0.1.0' },
    { capabilities: { tools: { listChanged: false } } },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [TOOL] }));
  server.setRequestHandler(CallToolRequestSchema, (request) =>
    callTool(ctx, call, configUnavailable, request.params.name, request.params.arguments ?? {}),
  );
  return server;
}

/** The projection of a `tools/call`, decoded as the contract says, bound to the calling agent. */
function callIdentity(req: IncomingMessage, ctx: McpContext, agents: readonly AgentRef[]): CallIdentity {
  const values = rawHeaderValues(req, IDENTITY_HEADER);
  if (values.length === 0) ctx.metrics.missingCarrier.inc();
  const now = ctx.now ? ctx.now() : Math.floor(Date.now() / 1000);
  const identity = decodeProjection(values.length === 1 ? values[0] : values, { now, agents });
  if (!identity.ok) return { identity };
  const callerDenied = callerDenial(identity.value.agent, rawHeaderValues(req, CALLER_AGENT_HEADER));
  if (callerDenied) return { identity, callerDenied };
  // The digest covers the exact bytes that were decoded (one value, or decoding denied already).
  const proof =
    ctx.capability === 'ledger' && values.length === 1
      ? { digest: capabilityDigest(values[0] as string), agent: agentKey(identity.value.agent), now }
      : undefined;
  return { identity, ...(proof ? { proof } : {}) };
}

export async function handleMcp(req: IncomingMessage, res: ServerResponse, ctx: McpContext): Promise<void> {
  const live = ctx.liveConfig ? ctx.liveConfig() : ctx;
  const origin = rawHeaderValues(req, 'origin');
  if (origin.length > 1 || !originAllowed(origin[0], live?.allowedOrigins ?? [])) {
    jsonRpcError(res, 403, -32000, 'origin not allowed');
    return;
  }
  if (req.method !== 'POST') {
    // Stateless JSON-only server: no GET stream, no session to DELETE.
    res.writeHead(405, { allow: 'POST', 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'method not allowed' }, id: null }));
    return;
  }
  const raw = await readBody(req);
  if (!raw) return jsonRpcError(res, 413, -32600, 'request too large');
  let body: unknown;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    return jsonRpcError(res, 400, -32700, 'parse error');
  }
  const gate = gateRequest(body, rawHeaderValues(req, 'mcp-protocol-version'));
  if (!gate.ok) return jsonRpcError(res, gate.status, gate.code, gate.message);

  const call = gate.method === 'tools/call' ? callIdentity(req, ctx, live?.agents ?? []) : {};
  const server = buildServer(ctx, call, live === undefined);
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: true,
  });
  res.on('close', () => {
    transport.close().catch(() => {});
    server.close().catch(() => {});
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}

export { MCP_REVISION };
