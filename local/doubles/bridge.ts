/**
 * Test double of the Matrix bridge's side of ADR 0017 ("Matrix snapshot and delivery") (docs/decisions.md#adr-snapshot): it builds the
 * room-state snapshot, derives `X-Fgentic-Room-Context` with the contract module, sends SendMessage
 * through the real A2A SDK client bound to the gateway's exact agent route (never to a URL taken from
 * the agent card, decision 5), and re-checks the snapshot digest immediately before delivery.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { type AgentCard, Role } from '@a2a-js/sdk';
import { Client, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import {
  encodeRoomContext,
  type MatrixPrincipal,
  type RoomSnapshot,
  roomContextFromSnapshot,
  stateDigest,
} from '../../contract/index.ts';

export interface BridgeSendOptions {
  /** Gateway origin + exact local agent route, e.g. http://127.0.0.1:1234/api/a2a/kagent/knowledge-agent */
  readonly routeUrl: string;
  /** The agent card as discovered; its interface URLs are replaced before the client is built. */
  readonly card: AgentCard;
  readonly apiKey: string;
  readonly snapshot: RoomSnapshot;
  readonly caller: MatrixPrincipal;
  readonly text: string;
  /** Extra or replacement headers for negative tests. */
  readonly headers?: Record<string, string>;
  readonly eventId?: string;
}

export interface BridgeResult {
  readonly task: unknown;
  readonly digest: string;
}

/** Bind the SDK transport to the configured gateway route whatever the card advertises. */
export async function bridgeClient(
  routeUrl: string,
  card: AgentCard,
  headers: Record<string, string>,
): Promise<Client> {
  const bound: AgentCard = {
    ...card,
    supportedInterfaces: card.supportedInterfaces.map((i) => ({ ...i, url: routeUrl })),
  };
  const fetchWithHeaders: typeof fetch = (input, init) => {
    const h = new Headers(init?.headers);
    for (const [k, v] of Object.entries(headers)) h.set(k, v);
    return fetch(input, { ...init, headers: h });
  };
  // legacyCompat picks the A2A 0.3 transport only for a 0.3 interface (the agentService backend).
  const transport = await new JsonRpcTransportFactory({
    fetchImpl: fetchWithHeaders,
    legacyCompat: { enabled: true },
  }).create(routeUrl, bound);
  return new Client(transport, bound);
}

export function textMessage(text: string, extra: Partial<Record<'contextId' | 'taskId', string>> = {}) {
  return {
    message: {
      messageId: randomUUID(),
      contextId: extra.contextId ?? '',
      taskId: extra.taskId ?? '',
      role: Role.ROLE_USER,
      parts: [
        {
          content: { $case: 'text' as const, value: text },
          metadata: undefined,
          filename: '',
          mediaType: '',
        },
      ],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    tenant: '',
    configuration: undefined,
    metadata: undefined,
  };
}

/**
 * The identity inputs the bridge sends on the local route: its API key, the caller's MXID and the
 * room context derived from the snapshot. Returns the headers and the digest that was dispatched.
 */
export function bridgeRequestHeaders(o: {
  apiKey: string;
  snapshot: RoomSnapshot;
  caller: MatrixPrincipal;
  delegationId?: string;
  eventId?: string;
}): { headers: Record<string, string>; digest: string } {
  const ctx = roomContextFromSnapshot(o.snapshot, {
    caller: o.caller,
    delegationId: o.delegationId ?? randomBytes(32).toString('hex'),
    eventId: o.eventId ?? '$event',
  });
  if (!ctx.ok) throw new Error(`room context: ${ctx.reason}`);
  const encoded = encodeRoomContext(ctx.value);
  if (!encoded.ok) throw new Error(`room context: ${encoded.reason}`);
  return {
    headers: {
      authorization: `Bearer ${o.apiKey}`,
      'x-user-id': o.caller.principal,
      'x-fgentic-room-context': encoded.value,
    },
    digest: ctx.value.room.state_sha256,
  };
}

export async function bridgeSend(o: BridgeSendOptions): Promise<BridgeResult> {
  const { headers, digest } = bridgeRequestHeaders(o);
  const client = await bridgeClient(o.routeUrl, o.card, { ...headers, ...o.headers });
  const task = await client.sendMessage(textMessage(o.text) as any);
  return { task, digest };
}

/** The delivery gate: deliver only when the current snapshot still hashes to the dispatched digest. */
export function mayDeliver(dispatchedDigest: string, current: RoomSnapshot): boolean {
  return stateDigest(current) === dispatchedDigest;
}
