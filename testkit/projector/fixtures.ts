/**
 * Test-only builders: a projector configuration, room snapshots and the exact check requests the
 * rendered agentgateway v1.3.1 policy produces (docs/interfaces.md "Gateway → projector check request").
 * Not imported by production code.
 */

import {
  encodeRoomContext,
  type MatrixPrincipal,
  type RoomContext,
  type RoomSnapshot,
  roomContextFromSnapshot,
  validateSnapshot,
} from '../../contract/index.ts';
import { type ProjectorConfig, validateConfig } from '../../projector/config.ts';
import { HEARTBEAT_CONFIGMAP, HEARTBEAT_KEY, heartbeatText } from '../../projector/heartbeat.ts';
import type { CheckRequest } from '../../projector/request.ts';

export const NOW = 1784116800;
export const ROOM = '!room:org-a.example';
export const WIDE_ROOM = '!wide:org-a.example';
export const ALICE = '@alice:org-a.example';
export const BOB = '@slack-bob:org-a.example';
export const AGENT_BOT = '@agent-docs:org-a.example';
export const DELEGATION = '9f4e9e8b6a8d33bdb85d8fd5bc13ed101cb42a1c9d9b49ccf42c0a49387eddb6';
export const LOCAL_PATH = '/api/a2a/kagent/knowledge-agent';
export const PUBLIC_PATH = '/a2a/kagent/knowledge-agent';
export const ISSUER = 'https://issuer.example';

export function configJson(): Record<string, unknown> {
  return {
    version: 1,
    publicRetrievalTimeoutSeconds: 30,
    bridge: {
      workload: 'matrix-a2a-bridge',
      localServer: 'org-a.example',
      serviceUserRegex: '^@(agent-[a-z0-9-]+|a2a-bridge):org-a\\.example$',
      bridgedOrigins: [{ network: 'slack', userIdRegex: '^@slack-[a-z0-9._=/+-]+:org-a\\.example$' }],
    },
    agents: [
      { namespace: 'kagent', name: 'knowledge-agent', localPath: LOCAL_PATH, publicPath: PUBLIC_PATH },
      { namespace: 'kagent', name: 'private-agent', localPath: '/api/a2a/kagent/private-agent' },
    ],
    rooms: [
      { roomId: ROOM, allowedClassifications: ['public'] },
      { roomId: WIDE_ROOM, allowedClassifications: ['approved_non_public', 'public'] },
    ],
    partners: [
      {
        issuer: ISSUER,
        audience: 'fgentic-a2a',
        azp: 'org-b-a2a',
        policyId: 'org-b',
        groups: ['partner/org-b/docs'],
        allowedClassifications: ['public'],
        agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
      },
    ],
    localGroups: ['staff'],
    liveRoomCheck: { enabled: false, homeserverUrl: 'http://synapse:8008', accessTokenFile: '/tmp/none' },
  };
}

export type MutableJson = Record<string, any>;

export function config(mutate?: (c: MutableJson) => void): ProjectorConfig {
  const c = configJson() as MutableJson;
  mutate?.(c);
  const r = validateConfig(JSON.parse(JSON.stringify(c)));
  if (!r.ok) throw new Error(r.error);
  return r.config;
}

export interface SnapshotOptions {
  roomId?: string;
  classifications?: RoomSnapshot['allowed_classifications'];
  members?: {
    principal: string;
    kind: 'matrix' | 'bridged_matrix' | 'bridge_service';
    network?: string;
    event_id: string;
  }[];
  historyVisibility?: string;
  serverAcl?: RoomSnapshot['server_acl'];
}

export function defaultMembers(): NonNullable<SnapshotOptions['members']> {
  return [
    { principal: AGENT_BOT, kind: 'bridge_service', event_id: '$member-agent' },
    { principal: BOB, kind: 'bridged_matrix', network: 'slack', event_id: '$member-slack-bob' },
    { principal: ALICE, kind: 'matrix', event_id: '$member-alice' },
  ];
}

export function snapshot(o: SnapshotOptions = {}): RoomSnapshot {
  const members = [...(o.members ?? defaultMembers())].sort(
    (a, b) =>
      Buffer.compare(Buffer.from(a.kind), Buffer.from(b.kind)) ||
      Buffer.compare(Buffer.from(a.network ?? ''), Buffer.from(b.network ?? '')) ||
      Buffer.compare(Buffer.from(a.principal), Buffer.from(b.principal)),
  );
  const raw = {
    allowed_classifications: o.classifications ?? ['public'],
    create: { event_id: '$create', federate: true },
    history_visibility: { event_id: '$history', value: o.historyVisibility ?? 'joined' },
    join_rule: { event_id: '$join', value: 'invite' },
    joined: members.map((m) =>
      m.kind === 'bridged_matrix'
        ? { event_id: m.event_id, kind: m.kind, network: m.network, principal: m.principal }
        : { event_id: m.event_id, kind: m.kind, principal: m.principal },
    ),
    room_id: o.roomId ?? ROOM,
    server_acl:
      o.serverAcl === undefined
        ? { allow: ['org-a.example'], allow_ip_literals: false, deny: [], event_id: '$acl' }
        : o.serverAcl,
  };
  const v = validateSnapshot(raw);
  if (!v.ok) throw new Error(`bad test snapshot: ${v.reason} ${v.path}`);
  return v.value;
}

export const ALICE_P: MatrixPrincipal = { kind: 'matrix', principal: ALICE };
export const BOB_P: MatrixPrincipal = { kind: 'bridged_matrix', network: 'slack', principal: BOB };

export function roomContext(o: SnapshotOptions & { caller?: MatrixPrincipal; eventId?: string } = {}): RoomContext {
  const r = roomContextFromSnapshot(snapshot(o), {
    caller: o.caller ?? ALICE_P,
    delegationId: DELEGATION,
    eventId: o.eventId ?? '$event',
  });
  if (!r.ok) throw new Error(`bad test context: ${r.reason}`);
  return r.value;
}

/** Encode an arbitrary room-context object (possibly invalid, for negative tests) as the carrier. */
export function encodeContext(ctx: unknown): string {
  const r = encodeRoomContext(ctx as RoomContext);
  if (r.ok) return r.value;
  // Invalid on purpose: encode without validation so the projector sees it.
  return Buffer.from(canonicalJson(ctx)).toString('base64url');
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * The check request agentgateway v1.3.1 sends for the rendered local route: original method and path,
 * only the allowlisted raw headers plus the CEL-derived x-fgentic-check-* headers, no body.
 */
export function localRequest(
  o: { ctx?: RoomContext | string; userId?: string; headers?: Record<string, string[] | undefined> } = {},
): CheckRequest {
  const ctx = o.ctx ?? roomContext();
  const headers: Record<string, string[] | undefined> = {
    host: ['fgentic-projector.knowledge.svc.cluster.local:8080'],
    'x-fgentic-check-route': ['local'],
    'x-fgentic-check-agent-namespace': ['kagent'],
    'x-fgentic-check-agent-name': ['knowledge-agent'],
    'x-fgentic-check-workload': ['matrix-a2a-bridge'],
    'x-fgentic-check-user-id-count': ['1'],
    'x-fgentic-check-room-context-count': ['1'],
    'x-user-id': [o.userId ?? ALICE],
    'x-fgentic-room-context': [typeof ctx === 'string' ? ctx : encodeContext(ctx)],
    ...o.headers,
  };
  for (const k of Object.keys(headers)) if (headers[k] === undefined) delete headers[k];
  return { method: 'POST', path: LOCAL_PATH, headers };
}

export function publicRequest(
  o: { exp?: number; headers?: Record<string, string[] | undefined>; iss?: string; aud?: string; azp?: string } = {},
): CheckRequest {
  const headers: Record<string, string[] | undefined> = {
    host: ['fgentic-projector.knowledge.svc.cluster.local:8080'],
    'x-fgentic-check-route': ['public'],
    'x-fgentic-check-agent-namespace': ['kagent'],
    'x-fgentic-check-agent-name': ['knowledge-agent'],
    'x-fgentic-check-jwt-issuer': [o.iss ?? ISSUER],
    'x-fgentic-check-jwt-audience': [o.aud ?? 'fgentic-a2a'],
    'x-fgentic-check-jwt-azp': [o.azp ?? 'org-b-a2a'],
    'x-fgentic-check-jwt-exp': [String(o.exp ?? NOW + 3600)],
    ...o.headers,
  };
  for (const k of Object.keys(headers)) if (headers[k] === undefined) delete headers[k];
  return { method: 'POST', path: PUBLIC_PATH, headers };
}

export const fixedRandom = (n: number) => new Uint8Array(n).fill(0xab);

/** The controller's heartbeat ConfigMap as the controller writes it (controller/heartbeat.ts). */
export function heartbeatConfigMap(namespace: string, timeMs: number, holder = 'controller-0') {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: HEARTBEAT_CONFIGMAP,
      namespace,
      labels: { 'retrieval.fgentic.dev/projector-config': 'true' },
    },
    data: { [HEARTBEAT_KEY]: heartbeatText({ holder, timeMs, periodSeconds: 5 }) },
  };
}
