/**
 * The soak's three kinds of operation, each sent as its caller would send it and judged by the
 * oracle (oracle.ts) against every registry state admissible while it was in flight:
 * - Matrix delegations on the local route: the bridge double reads the room's current state from the
 *   homeserver double and sends a fresh room context; some are for an unregistered room or carry a
 *   stale audience (both must be denied).
 * - Partner delegations on the public route with a fresh JWT: org B, org D, and an unknown azp
 *   (must be denied; org D must be denied once the revocation is in force).
 * - Direct MCP searches on the MCP route as the agent pod makes them, with a projection of a random
 *   identity, vector or hybrid; some with an expired projection (must be denied).
 */
import { randomUUID } from 'node:crypto';
import { asArray, isObject, objectField } from '../../common/json-read.ts';
import type { MatrixPrincipal, RoomSnapshot } from '../../contract/index.ts';
import { encodeRoomContext, roomContextFromSnapshot } from '../../contract/index.ts';
import { ALICE, BOB, ENGINEERING_ROOM, GENERAL_ROOM, roomSnapshot, sendParams } from '../../local/helpers.ts';
import type { ProjectorConfig } from '../../projector/config.ts';
import { snapshotFromState } from '../../projector/homeserver.ts';
import { IDENTITY_HEADER, RETRIEVAL_TOOL } from '../../rules/index.ts';
import { matrixHeader, oauthHeader } from '../../testkit/retrieval.ts';
import {
  type Classification,
  type MembershipHistory,
  matrixMayRead,
  partnerMayRead,
  type RegistryHistory,
} from './oracle.ts';
import type { SoakStack } from './stack.ts';

export type OpKind = 'matrix' | 'partner' | 'mcp';

export interface Op {
  readonly kind: OpKind;
  readonly start: number;
  readonly end: number;
  /** Correct and served (or correctly refused); false = an availability error. Undefined: ambiguous. */
  readonly ok: boolean | undefined;
  readonly wrongAllow: boolean;
  readonly leaked: number;
  readonly stale: boolean;
}

/** What the operations read of a running soak; the bridge's view of the registry changes with it. */
export interface TrafficContext {
  readonly s: SoakStack;
  readonly rand: () => number;
  readonly registry: RegistryHistory;
  readonly membership: MembershipHistory;
  /** The registry as the bridge double knows it (replaced by the revocation fault). */
  bridgeConfig(): ProjectorConfig;
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

const pickQuery = (c: TrafficContext) => QUERIES[Math.floor(c.rand() * QUERIES.length)]!;

/** Every `results` entry of a search (MCP structured content or an agent's data part), anywhere. */
function resultRows(value: unknown): { sourceId: string; classification: string }[] {
  const out: { sourceId: string; classification: string }[] = [];
  const walk = (v: unknown) => {
    const list = asArray(v);
    if (list) {
      list.forEach(walk);
      return;
    }
    if (!isObject(v)) return;
    const source = objectField(v, 'source');
    if (typeof v['chunk_id'] === 'string' && source !== undefined) {
      out.push({ sourceId: String(source['id']), classification: String(v['classification']) });
      return;
    }
    for (const x of Object.values(v)) walk(x);
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

/** POSTs a JSON body; a transport failure (refused, reset, timed out) is status 0. */
async function postJson(
  url: string,
  headers: Record<string, string>,
  body: unknown,
): Promise<{ status: number; text: string }> {
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    return { status: res.status, text: await res.text() };
  } catch {
    return { status: 0, text: '' };
  }
}

const sendMessage = (c: TrafficContext) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'SendMessage',
  params: sendParams(pickQuery(c)),
});

/** An agent's answer that carried the retrieval outcome (served, denied or unavailable). */
const agentAnswered = (status: number, text: string) =>
  status === 200 && /grounded answer|retrieval denied|retrieval unavailable/.test(text);

type MatrixVariant = 'unregistered' | 'stale' | 'current';

/**
 * The bridge's view of the room's state, with one reader wrong for a stale variant: missing a
 * reader who is joined, or holding one who left.
 */
function bridgeState(c: TrafficContext, roomId: string, stale: boolean) {
  const raw = readState(c.s, roomId);
  if (!stale) return raw;
  const hasBob = raw.joined.includes(BOB.principal);
  raw.events = raw.events.filter((e: any) => e.state_key !== BOB.principal);
  if (hasBob) {
    raw.joined = raw.joined.filter((j) => j !== BOB.principal);
  } else {
    // Replace Bob's leave event (if any) with a join the homeserver never saw.
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
  return raw;
}

/** The snapshot the bridge double builds for the room (or a lone caller's for an unregistered one). */
function matrixSnapshot(c: TrafficContext, variant: MatrixVariant, roomId: string): RoomSnapshot {
  if (variant === 'unregistered') return roomSnapshot(roomId, [ALICE]);
  const raw = bridgeState(c, roomId, variant === 'stale');
  const config = c.bridgeConfig();
  const entry = config.rooms.get(roomId);
  const snap = entry ? snapshotFromState(raw, config, entry) : undefined;
  if (!snap) throw new Error('bridge double could not build a snapshot');
  return snap;
}

/** The encoded room context of a fresh delegation by Alice. */
function encodedContext(snapshot: RoomSnapshot): string {
  const ctx = roomContextFromSnapshot(snapshot, {
    caller: ALICE,
    delegationId: randomUUID().replaceAll('-', '').padEnd(64, '0'),
    eventId: `$ev-${randomUUID()}`,
  });
  if (!ctx.ok) throw new Error(`room context: ${ctx.reason}`);
  const encoded = encodeRoomContext(ctx.value);
  if (!encoded.ok) throw new Error('room context encoding');
  return encoded.value;
}

export async function matrixOp(c: TrafficContext): Promise<Op> {
  const r = c.rand();
  const variant: MatrixVariant = r < 0.1 ? 'unregistered' : r < 0.2 ? 'stale' : 'current';
  const roomId =
    variant === 'unregistered' ? '!unregistered:org-a.example' : c.rand() < 0.5 ? GENERAL_ROOM : ENGINEERING_ROOM;
  const snapshot = matrixSnapshot(c, variant, roomId);
  const encoded = encodedContext(snapshot);
  const audience = audienceOf(snapshot);
  const start = Date.now();
  const { status, text } = await postJson(
    c.s.localRouteUrl,
    {
      authorization: `Bearer ${c.s.bridgeApiKey}`,
      'x-user-id': ALICE.principal,
      'x-fgentic-room-context': encoded,
      'a2a-version': '1.0',
    },
    sendMessage(c),
  );
  const end = Date.now();
  const states = c.registry.admissible(start, end);
  const membershipMoved = variant !== 'unregistered' && c.membership.changedDuring(roomId, start, end);
  const mustDeny = variant === 'unregistered' || (variant === 'stale' && !membershipMoved);
  const allowed = agentAnswered(status, text);
  const rows = allowed ? resultRows(parseOrText(text)) : [];
  let leaked = 0;
  let stale = false;
  for (const row of rows) {
    const okAny = states.some((g) => matrixMayRead(row.sourceId, audience, g.rooms.get(roomId) ?? []));
    if (!okAny) leaked++;
    const okNow = matrixMayRead(row.sourceId, audience, c.registry.current.rooms.get(roomId) ?? []);
    if (okAny && !okNow && states.length === 1) stale = true;
  }
  let ok: boolean | undefined;
  if (mustDeny) ok = status === 401 || status === 403;
  else if (membershipMoved) ok = undefined;
  else ok = status === 200 && text.includes('grounded answer');
  return { kind: 'matrix', start, end, ok, wrongAllow: allowed && mustDeny, leaked, stale };
}

export async function partnerOp(c: TrafficContext): Promise<Op> {
  const r = c.rand();
  const azp = r < 0.1 ? 'org-x-a2a' : r < 0.55 ? 'org-b-a2a' : 'org-d-a2a';
  const token = await c.s.issueToken(azp);
  const start = Date.now();
  const { status, text } = await postJson(
    c.s.publicRouteUrl,
    { authorization: `Bearer ${token}`, 'a2a-version': '1.0' },
    sendMessage(c),
  );
  const end = Date.now();
  const states = c.registry.admissible(start, end);
  const policies = states.map((g) => g.partners.get(azp));
  const mayAllow = policies.some((p) => p !== undefined);
  const mustAllow = policies.every((p) => p !== undefined);
  const allowed = agentAnswered(status, text);
  const rows = allowed ? resultRows(parseOrText(text)) : [];
  let leaked = 0;
  for (const row of rows) {
    if (!policies.some((p) => p && partnerMayRead(row.sourceId, p.groups, p.classes))) leaked++;
  }
  const stale = allowed && mayAllow && c.registry.current.partners.get(azp) === undefined && states.length === 1;
  let ok: boolean | undefined;
  if (!mayAllow) ok = status === 401 || status === 403;
  else if (!mustAllow) ok = undefined;
  else ok = status === 200 && text.includes('grounded answer');
  return { kind: 'partner', start, end, ok, wrongAllow: allowed && !mayAllow, leaked, stale };
}

/** A random projection (a room's or a partner's) and what its holder may read. */
function mcpIdentity(c: TrafficContext, iat: number): { header: string; mayRead: (id: string) => boolean } {
  if (c.rand() < 0.6) {
    const roomId = c.rand() < 0.5 ? GENERAL_ROOM : ENGINEERING_ROOM;
    const audience = c.rand() < 0.5 ? [ALICE] : [ALICE, BOB];
    const classes: Classification[] = roomId === ENGINEERING_ROOM ? ['approved_non_public', 'public'] : ['public'];
    return {
      header: matrixHeader({ caller: ALICE, audience, classifications: classes as never, iat, roomId }),
      mayRead: (id) => matrixMayRead(id, audience, classes),
    };
  }
  const groups = c.rand() < 0.5 ? ['partner/org-b/docs'] : ['partner/org-d/docs', 'partner/org-d/engineering'];
  const classes: Classification[] = groups.length === 1 ? ['public'] : ['approved_non_public', 'public'];
  return {
    header: oauthHeader({
      policy: groups.length === 1 ? 'org-b' : 'org-d',
      groups,
      classifications: classes as never,
      iat,
    }),
    mayRead: (id) => partnerMayRead(id, groups, classes),
  };
}

export async function mcpOp(c: TrafficContext): Promise<Op> {
  const now = Math.floor(Date.now() / 1000);
  const expired = c.rand() < 0.05;
  const { header, mayRead } = mcpIdentity(c, expired ? now - 700 : now - 1);
  const withNul = c.rand() < 0.03;
  const query = withNul ? `${pickQuery(c)}\u0000` : pickQuery(c);
  const mode = c.rand() < 0.5 ? 'vector' : 'hybrid';
  const start = Date.now();
  const { status, text } = await postJson(
    c.s.mcpRouteUrl,
    {
      ...c.s.agentMcpHeaders,
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
  );
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
  let ok: boolean;
  if (mustDeny) {
    const err = body?.result?.isError === true ? String(body.result.content?.[0]?.text ?? '') : '';
    ok = expired ? /"denied"/.test(err) : /"invalid_arguments"/.test(err);
  } else ok = Boolean(served);
  return { kind: 'mcp', start, end, ok, wrongAllow: Boolean(served) && mustDeny, leaked, stale: false };
}
