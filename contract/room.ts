/** The Matrix room object shared by the projection and the room context. */
import { isEventId, isHex64, isRoomId } from './identifiers.ts';
import { checkFields } from './principal.ts';
import { type Denial, deny } from './reasons.ts';
import { isPlainObject, type JsonValue } from './strict-json.ts';

export interface RoomRef {
  readonly event_id: string;
  readonly history_visibility: 'joined';
  readonly id: string;
  readonly join_rule: 'invite';
  readonly state_sha256: string;
}

export function checkRoom(v: JsonValue | undefined, path: string): Denial | RoomRef {
  if (!isPlainObject(v)) return deny('schema', path);
  const bad = checkFields(v, ['event_id', 'history_visibility', 'id', 'join_rule', 'state_sha256'], [], path);
  if (bad) return bad;
  if (!isRoomId(v['id'])) return deny('room', `${path}.id`);
  if (!isEventId(v['event_id'])) return deny('room', `${path}.event_id`);
  if (v['history_visibility'] !== 'joined') return deny('room', `${path}.history_visibility`);
  if (v['join_rule'] !== 'invite') return deny('room', `${path}.join_rule`);
  if (!isHex64(v['state_sha256'])) return deny('room', `${path}.state_sha256`);
  return {
    event_id: v['event_id'],
    history_visibility: 'joined',
    id: v['id'],
    join_rule: 'invite',
    state_sha256: v['state_sha256'],
  };
}
