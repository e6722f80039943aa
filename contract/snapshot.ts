/**
 * The room-state snapshot the bridge reads before dispatch and before every delivery, its digest
 * (`state_sha256`, SHA-256 over the pure JCS bytes, no trailing newline) and the audience it implies.
 */
import {
  type AllowedClassifications,
  isAllowedClassifications,
  isDns1123Label,
  isEventId,
  isFullMxid,
  isHex64,
  isRoomId,
  isServerName,
} from './identifiers.ts';
import { jcsSha256 } from './jcs.ts';
import { checkFields, comparePrincipals, type MatrixPrincipal, toPrincipal } from './principal.ts';
import { accept, deny, type Verdict } from './reasons.ts';
import type { RoomContext } from './room-context.ts';
import { isPlainObject, type JsonValue } from './strict-json.ts';

export interface JoinedMember {
  readonly event_id: string;
  readonly kind: 'matrix' | 'bridged_matrix' | 'bridge_service';
  readonly network?: string;
  readonly principal: string;
}

export interface ServerAcl {
  readonly allow: readonly string[];
  readonly allow_ip_literals: boolean;
  readonly deny: readonly string[];
  readonly event_id: string;
}

export interface RoomSnapshot {
  readonly allowed_classifications: AllowedClassifications;
  readonly create: { readonly event_id: string; readonly federate: boolean };
  readonly history_visibility: { readonly event_id: string; readonly value: string };
  readonly join_rule: { readonly event_id: string; readonly value: string };
  readonly joined: readonly JoinedMember[];
  readonly room_id: string;
  readonly server_acl: ServerAcl | null;
}

function stateEvent(v: JsonValue | undefined, path: string): Verdict<{ event_id: string; value: string }> {
  if (!isPlainObject(v)) return deny('snapshot', path);
  const bad = checkFields(v, ['event_id', 'value'], [], path);
  if (bad) return bad;
  if (!isEventId(v['event_id']) || typeof v['value'] !== 'string' || v['value'].length === 0)
    return deny('snapshot', path);
  return accept({ event_id: v['event_id'], value: v['value'] });
}

function sortedUniqueStrings(v: JsonValue | undefined): v is string[] {
  if (!Array.isArray(v)) return false;
  for (let k = 0; k < v.length; k++) {
    const s = v[k];
    if (typeof s !== 'string' || s.length === 0 || s.length > 255) return false;
    const prev = v[k - 1];
    if (k > 0 && !((prev as string) < s)) return false;
  }
  return true;
}

function createEvent(v: JsonValue | undefined): Verdict<RoomSnapshot['create']> {
  if (!isPlainObject(v)) return deny('snapshot', 'create');
  const bad = checkFields(v, ['event_id', 'federate'], [], 'create');
  if (bad) return bad;
  if (!isEventId(v['event_id']) || typeof v['federate'] !== 'boolean') return deny('snapshot', 'create');
  return accept({ event_id: v['event_id'], federate: v['federate'] });
}

function joinedMember(m: JsonValue | undefined, path: string): Verdict<JoinedMember> {
  if (!isPlainObject(m)) return deny('snapshot', path);
  const kind = m['kind'];
  if (kind !== 'matrix' && kind !== 'bridged_matrix' && kind !== 'bridge_service') return deny('kind', path);
  const bad =
    kind === 'bridged_matrix'
      ? checkFields(m, ['event_id', 'kind', 'network', 'principal'], [], path)
      : checkFields(m, ['event_id', 'kind', 'principal'], [], path);
  if (bad) return bad;
  if (!isEventId(m['event_id'])) return deny('snapshot', `${path}.event_id`);
  if (!isFullMxid(m['principal'])) return deny('principal', `${path}.principal`);
  if (kind === 'bridged_matrix' && !isDns1123Label(m['network'])) return deny('network', `${path}.network`);
  return accept(
    kind === 'bridged_matrix'
      ? { event_id: m['event_id'], kind, network: m['network'] as string, principal: m['principal'] }
      : { event_id: m['event_id'], kind, principal: m['principal'] },
  );
}

/** 1 to 1000 members, each valid, in strictly increasing principal order. */
function joinedMembers(v: JsonValue | undefined): Verdict<JoinedMember[]> {
  if (!Array.isArray(v) || v.length === 0 || v.length > 1000) return deny('snapshot', 'joined');
  const joined: JoinedMember[] = [];
  for (let k = 0; k < v.length; k++) {
    const path = `joined[${k}]`;
    const member = joinedMember(v[k], path);
    if (!member.ok) return member;
    const prev = joined[k - 1];
    if (prev && comparePrincipals(prev, member.value) >= 0) return deny('snapshot', path);
    joined.push(member.value);
  }
  return accept(joined);
}

/** null, or the ACL event with sorted, unique server lists. */
function serverAcl(v: JsonValue | undefined): Verdict<ServerAcl | null> {
  if (v === null) return accept(null);
  if (!isPlainObject(v)) return deny('snapshot', 'server_acl');
  const bad = checkFields(v, ['allow', 'allow_ip_literals', 'deny', 'event_id'], [], 'server_acl');
  if (bad) return bad;
  if (!isEventId(v['event_id'])) return deny('snapshot', 'server_acl.event_id');
  if (typeof v['allow_ip_literals'] !== 'boolean') return deny('snapshot', 'server_acl.allow_ip_literals');
  if (!sortedUniqueStrings(v['allow'])) return deny('snapshot', 'server_acl.allow');
  if (!sortedUniqueStrings(v['deny'])) return deny('snapshot', 'server_acl.deny');
  return accept({
    allow: v['allow'],
    allow_ip_literals: v['allow_ip_literals'],
    deny: v['deny'],
    event_id: v['event_id'],
  });
}

/** Schema and ordering rules of the snapshot object (not the room policy; see checkSnapshotPolicy). */
export function validateSnapshot(v: unknown): Verdict<RoomSnapshot> {
  if (!isPlainObject(v)) return deny('snapshot', '$');
  const obj = v as { [key: string]: JsonValue };
  const bad = checkFields(
    obj,
    ['allowed_classifications', 'create', 'history_visibility', 'join_rule', 'joined', 'room_id', 'server_acl'],
    [],
    '$',
  );
  if (bad) return bad;
  if (!isAllowedClassifications(obj['allowed_classifications']))
    return deny('classifications', 'allowed_classifications');
  const create = createEvent(obj['create']);
  if (!create.ok) return create;
  const hv = stateEvent(obj['history_visibility'], 'history_visibility');
  if (!hv.ok) return hv;
  const jr = stateEvent(obj['join_rule'], 'join_rule');
  if (!jr.ok) return jr;
  if (!isRoomId(obj['room_id'])) return deny('snapshot', 'room_id');
  const joined = joinedMembers(obj['joined']);
  if (!joined.ok) return joined;
  const acl = serverAcl(obj['server_acl']);
  if (!acl.ok) return acl;
  return accept({
    allowed_classifications: [...obj['allowed_classifications']] as unknown as AllowedClassifications,
    create: create.value,
    history_visibility: hv.value,
    join_rule: jr.value,
    joined: joined.value,
    room_id: obj['room_id'],
    server_acl: acl.value,
  });
}

/** lowercase SHA-256 over the snapshot's JCS bytes, with no trailing newline (docs/decisions.md#d1-state-digest). */
export function stateDigest(snapshot: RoomSnapshot): string {
  return jcsSha256(snapshot);
}

/** Every joined identity except the bridge's own delivery identities, in the ADR audience order. */
export function audienceFromSnapshot(snapshot: RoomSnapshot): MatrixPrincipal[] {
  return snapshot.joined
    .filter((m): m is JoinedMember & { kind: 'matrix' | 'bridged_matrix' } => m.kind !== 'bridge_service')
    .map((m) => toPrincipal(m))
    .sort(comparePrincipals);
}

function serverOf(mxid: string): string {
  return mxid.slice(mxid.indexOf(':') + 1);
}

/**
 * Room policy the bridge and projector enforce on a snapshot: invite-only, joined-only history,
 * an ACL present once a native member of another homeserver is joined, the caller still joined,
 * and an audience of 1–16 readers.
 */
export function checkSnapshotPolicy(
  snapshot: RoomSnapshot,
  options: { localServer: string; caller: MatrixPrincipal },
): Verdict<MatrixPrincipal[]> {
  if (snapshot.join_rule.value !== 'invite') return deny('snapshot', 'join_rule');
  if (snapshot.history_visibility.value !== 'joined') return deny('snapshot', 'history_visibility');
  if (!isServerName(options.localServer)) return deny('snapshot', 'local_server');
  const foreign = snapshot.joined.some((m) => m.kind === 'matrix' && serverOf(m.principal) !== options.localServer);
  if (foreign && (snapshot.server_acl === null || !snapshot.create.federate)) return deny('snapshot', 'server_acl');
  const audience = audienceFromSnapshot(snapshot);
  if (audience.length < 1 || audience.length > 16) return deny('audience', 'joined');
  const caller = options.caller;
  if (!audience.some((p) => comparePrincipals(p, caller) === 0)) return deny('audience', 'caller');
  return accept(audience);
}

/** The X-Fgentic-Room-Context object for a validated snapshot. */
export function roomContextFromSnapshot(
  snapshot: RoomSnapshot,
  options: { caller: MatrixPrincipal; delegationId: string; eventId: string },
): Verdict<RoomContext> {
  if (!isHex64(options.delegationId)) return deny('delegation_id', 'delegation_id');
  if (!isEventId(options.eventId)) return deny('room', 'room.event_id');
  if (snapshot.history_visibility.value !== 'joined' || snapshot.join_rule.value !== 'invite')
    return deny('room', 'room');
  const audience = audienceFromSnapshot(snapshot);
  if (!audience.some((p) => comparePrincipals(p, options.caller) === 0)) return deny('audience', 'caller');
  if (audience.length > 16) return deny('audience', 'audience');
  return accept({
    allowed_classifications: snapshot.allowed_classifications,
    audience,
    caller: toPrincipal(options.caller),
    delegation_id: options.delegationId,
    room: {
      event_id: options.eventId,
      history_visibility: 'joined',
      id: snapshot.room_id,
      join_rule: 'invite',
      state_sha256: stateDigest(snapshot),
    },
    v: 1,
  });
}

export { isHex64 };
