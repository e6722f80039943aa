/**
 * Test double of a kagent v0.9.11 Declarative Agent pod running the Python ADK executor, reduced to
 * the header and session behaviour ADR 0017 depends on (docs/upstream.md#kagent-header-propagation):
 * - a2a-sdk's default context builder stores the inbound headers, lowercased, first value only, in
 *   call-context state (`state['headers'] = dict(request.headers)`, docs/upstream.md#kagent-header-propagation);
 * - `x-user-id` becomes the session user; the session is keyed by (user, contextId), and a request
 *   without contextId gets a fresh server-generated one (docs/upstream.md#kagent-auth-and-sessions);
 * - on a normal turn the whole header map is written to session state; on a HITL decision message the
 *   refresh is skipped and the previous turn's headers stay in force (docs/upstream.md#kagent-hitl);
 * - the MCP header provider copies only the `allowedHeaders` names, case-insensitively, from session
 *   state onto every MCP call of that tool entry, and static headers (the API key from `headersFrom`)
 *   are overridden by request-derived ones of the same name (docs/upstream.md#kagent-header-propagation).
 * The "model" is deterministic: it calls `search_knowledge` once with the message text and answers
 * with the returned chunks, so tests can see exactly what the retrieval server admitted.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { type AgentCard, Role, TaskState } from '@a2a-js/sdk';
import {
  AgentEvent,
  type AgentExecutor,
  DefaultRequestHandler,
  type ExecutionEventBus,
  InMemoryTaskStore,
  type RequestContext,
} from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import express from 'express';

export interface AgentRuntimeOptions {
  /** `spec.declarative.tools[].mcpServer.allowedHeaders` of the rendered Agent. */
  readonly allowedHeaders: readonly string[];
  /** The RemoteMCPServer URL (the gateway's MCP route). */
  readonly mcpUrl: string;
  /** Static headers from `headersFrom` (the Agent's MCP API key). */
  readonly staticHeaders: Readonly<Record<string, string>>;
  readonly toolName: string;
  readonly agentName: string;
  /** The URL this pod advertises in its card (kagent advertises the pod/controller address). */
  readonly advertisedUrl?: string;
  /**
   * A2A revision the pod answers. kagent v0.9.11's Python pod speaks only 0.3 (a2a-sdk 0.3.23,
   * docs/upstream.md#kagent-controller-a2a-route); '1.0' stands for the controller route of a kagent build that
   * forwards the allowlisted header (docs/decisions.md#d9-a2a-backend).
   */
  readonly protocolVersion?: '1.0' | '0.3';
}

interface Session {
  headers: Record<string, string>;
}

export interface ToolCallRecord {
  readonly sessionKey: string;
  readonly sentHeaders: Readonly<Record<string, string>>;
  readonly ok: boolean;
}

export interface AgentRuntime {
  readonly url: string;
  readonly toolCalls: ToolCallRecord[];
  readonly receivedHeaders: Record<string, string>[];
  close(): Promise<void>;
}

function isHitlDecision(ctx: RequestContext): boolean {
  return ctx.userMessage.parts.some(
    (p) =>
      p.content?.$case === 'data' &&
      typeof p.content.value === 'object' &&
      p.content.value !== null &&
      'decision_type' in p.content.value,
  );
}

function textOf(ctx: RequestContext): string {
  return ctx.userMessage.parts
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
    .join(' ')
    .trim();
}

export async function startAgentRuntime(options: AgentRuntimeOptions): Promise<AgentRuntime> {
  const sessions = new Map<string, Session>();
  const toolCalls: ToolCallRecord[] = [];
  const receivedHeaders: Record<string, string>[] = [];
  const allowed = options.allowedHeaders.map((h) => h.toLowerCase());

  const executor: AgentExecutor = {
    async execute(ctx: RequestContext, bus: ExecutionEventBus) {
      const state = ctx.context.state.get('headers') as Record<string, string | string[]> | undefined;
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(state ?? {})) headers[k.toLowerCase()] = Array.isArray(v) ? (v[0] ?? '') : v;
      receivedHeaders.push(headers);
      const user = headers['x-user-id'] ?? `A2A_USER_${ctx.contextId}`;
      const key = `${user}\u0000${ctx.contextId}`;
      const session = sessions.get(key) ?? { headers: {} };
      sessions.set(key, session);
      if (!isHitlDecision(ctx)) session.headers = headers; // the HITL resume branch skips this refresh
      const sent: Record<string, string> = { ...options.staticHeaders };
      for (const [name, value] of Object.entries(session.headers)) if (allowed.includes(name)) sent[name] = value;

      bus.publish(
        AgentEvent.task({
          id: ctx.taskId,
          contextId: ctx.contextId,
          status: {
            state: TaskState.TASK_STATE_WORKING,
            message: undefined,
            timestamp: new Date().toISOString(),
          },
          artifacts: [],
          history: [ctx.userMessage],
          metadata: undefined,
        }),
      );
      let answer: string;
      let data: unknown;
      let ok = false;
      try {
        const client = new Client({ name: 'kagent-adk-double', version: '0.9.11' });
        await client.connect(
          new StreamableHTTPClientTransport(new URL(options.mcpUrl), { requestInit: { headers: sent } }),
        );
        const result = await client.callTool({
          name: options.toolName,
          arguments: { query: textOf(ctx) || 'overview', max_results: 10 },
        });
        await client.close();
        ok = result.isError !== true;
        data = result.structuredContent ?? null;
        answer = ok ? 'grounded answer' : 'retrieval denied';
      } catch {
        answer = 'retrieval unavailable';
        data = null;
      }
      toolCalls.push({ sessionKey: key, sentHeaders: sent, ok });
      bus.publish(
        AgentEvent.statusUpdate({
          taskId: ctx.taskId,
          contextId: ctx.contextId,
          status: {
            state: TaskState.TASK_STATE_COMPLETED,
            message: {
              messageId: randomUUID(),
              contextId: ctx.contextId,
              taskId: ctx.taskId,
              role: Role.ROLE_AGENT,
              parts: [
                {
                  content: { $case: 'text', value: answer },
                  metadata: undefined,
                  filename: '',
                  mediaType: '',
                },
                {
                  content: { $case: 'data', value: { result: data } },
                  metadata: undefined,
                  filename: '',
                  mediaType: '',
                },
              ],
              metadata: undefined,
              extensions: [],
              referenceTaskIds: [],
            },
            timestamp: new Date().toISOString(),
          },
          metadata: undefined,
        }),
      );
      bus.finished();
    },
    async cancelTask(taskId: string, bus: ExecutionEventBus) {
      bus.publish(
        AgentEvent.statusUpdate({
          taskId,
          contextId: '',
          status: {
            state: TaskState.TASK_STATE_CANCELED,
            message: undefined,
            timestamp: new Date().toISOString(),
          },
          metadata: undefined,
        }),
      );
      bus.finished();
    },
  };

  const app = express();
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const card: AgentCard = {
    name: options.agentName,
    description: 'retrieval agent (test double)',
    supportedInterfaces: [
      {
        url: options.advertisedUrl ?? `${url}/`,
        protocolBinding: 'JSONRPC',
        tenant: '',
        protocolVersion: options.protocolVersion ?? '1.0',
      },
    ],
    provider: undefined,
    version: '0.9.11',
    capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain', 'application/json'],
    skills: [],
    signatures: [],
  } as unknown as AgentCard;
  const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  // Served at the pod root (agentService backend) and at kagent's controller route (controller backend).
  for (const base of ['/api/a2a/:namespace/:name', '']) {
    app.use(`${base}/.well-known/agent-card.json`, agentCardHandler({ agentCardProvider: handler }));
    app.use(
      base || '/',
      jsonRpcHandler({
        requestHandler: handler,
        userBuilder: UserBuilder.noAuthentication,
        ...(options.protocolVersion === '0.3' ? { legacyCompat: { enabled: true } } : {}),
      }),
    );
  }
  return {
    url,
    toolCalls,
    receivedHeaders,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
