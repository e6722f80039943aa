/**
 * X-Fgentic-Room-Context: what the Matrix bridge tells the projector about the delegation's room.
 * Same carrier rules as the projection; exactly v, caller, delegation_id, room, audience,
 * allowed_classifications.
 */
import { decodeCarrier, encodeCarrier, type HeaderInput } from './carrier.ts';
import { type AllowedClassifications, isAllowedClassifications, isHex64 } from './identifiers.ts';
import { checkAudience, checkFields, checkPrincipal, type MatrixPrincipal } from './principal.ts';
import { accept, deny, type Verdict } from './reasons.ts';
import { checkRoom, type RoomRef } from './room.ts';
import type { JsonValue } from './strict-json.ts';

export interface RoomContext {
  readonly allowed_classifications: AllowedClassifications;
  readonly audience: readonly MatrixPrincipal[];
  readonly caller: MatrixPrincipal;
  readonly delegation_id: string;
  readonly room: RoomRef;
  readonly v: 1;
}

export function validateRoomContext(obj: { [key: string]: JsonValue }): Verdict<RoomContext> {
  const bad = checkFields(
    obj,
    ['allowed_classifications', 'audience', 'caller', 'delegation_id', 'room', 'v'],
    [],
    '$',
  );
  if (bad) return bad;
  if (obj['v'] !== 1) return deny('version', 'v');
  const caller = checkPrincipal(obj['caller'], 'caller');
  if ('ok' in caller) return caller;
  if (!isHex64(obj['delegation_id'])) return deny('delegation_id', 'delegation_id');
  const room = checkRoom(obj['room'], 'room');
  if ('ok' in room) return room;
  const audience = checkAudience(obj['audience'], caller, 'audience');
  if ('ok' in audience) return audience;
  if (!isAllowedClassifications(obj['allowed_classifications']))
    return deny('classifications', 'allowed_classifications');
  return accept({
    allowed_classifications: [...obj['allowed_classifications']] as unknown as AllowedClassifications,
    audience,
    caller,
    delegation_id: obj['delegation_id'],
    room,
    v: 1,
  });
}

export function decodeRoomContext(header: HeaderInput): Verdict<RoomContext> {
  try {
    const carrier = decodeCarrier(header);
    if (!carrier.ok) return carrier;
    return validateRoomContext(carrier.value);
  } catch {
    return deny('json');
  }
}

export function encodeRoomContext(ctx: RoomContext): Verdict<string> {
  const value = encodeCarrier(ctx);
  const back = decodeRoomContext(value);
  return back.ok ? accept(value) : back;
}
