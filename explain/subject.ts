/**
 * Who is asking: a room's audience and ceiling, or a partner's groups and ceiling, taken from the
 * same sources the projector uses — the projector configuration (room registry, partner registry,
 * bridged origins) and the bridge's room snapshot or the homeserver's current state.
 */
import { readFileSync } from 'node:fs';
import {
  audienceFromSnapshot,
  checkSnapshotPolicy,
  isRoomId,
  parseStrictJson,
  type RoomSnapshot,
  validateSnapshot,
} from '../contract/index.ts';
import type { ProjectorConfig, RoomEntry } from '../projector/config.ts';
import { readShardsBeside } from '../projector/config-store.ts';
import { matrixSdkReader, type RoomStateReader, snapshotFromState } from '../projector/homeserver.ts';
import { audienceDenial, ceilingDenial } from '../projector/matrix.ts';
import { assembleConfig } from '../projector/registry.ts';
import { ExplainError, type Subject } from './core.ts';

export function loadProjectorConfig(path: string): ProjectorConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new ExplainError('cannot read the projector configuration');
  }
  // A large registry lives in shards beside projector.json (projector/registry.ts).
  const parsed = assembleConfig(text, text.includes('"registry"') ? readShardsBeside(path) : new Map());
  // The loader's message names a field path, never a value.
  if (!parsed.ok) throw new ExplainError(`projector configuration: ${parsed.error}`);
  return parsed.config;
}

function registryEntry(config: ProjectorConfig, roomId: string): RoomEntry {
  if (!isRoomId(roomId)) throw new ExplainError('--room is not a room ID');
  const entry = config.rooms.get(roomId);
  // The projector denies an unregistered room, so nothing is retrievable there.
  if (!entry) throw new ExplainError('the room is not in the room registry; the projector denies it');
  return entry;
}

/** The room as the projector would judge it from this snapshot. */
export function roomSubject(config: ProjectorConfig, entry: RoomEntry, snapshot: RoomSnapshot): Subject {
  if (snapshot.room_id !== entry.roomId) throw new ExplainError('the snapshot is of another room');
  const audience = audienceFromSnapshot(snapshot);
  if (audience.length < 1) throw new ExplainError('the room has no readers');
  if (audience.length > 16)
    throw new ExplainError(`the room has ${audience.length} readers; the projector denies rooms over 16`);
  const notes: string[] = [];
  // The projector's own decisions on this room state, in its order: every reader's kind against the
  // bridge configuration, the ceiling against the registry, then the room-state policy.
  const refusals: string[] = [];
  const kinds = audienceDenial(config, audience);
  if (kinds) refusals.push(kinds);
  const ceiling = ceilingDenial(entry.allowedClassifications, snapshot.allowed_classifications);
  if (ceiling) {
    refusals.push(ceiling);
    notes.push(`the snapshot's ceiling (${snapshot.allowed_classifications.join(',')}) differs from the registry's`);
  }
  const first = audience[0];
  if (first) {
    const policy = checkSnapshotPolicy(snapshot, { localServer: config.bridge.localServer, caller: first });
    if (!policy.ok) {
      refusals.push(policy.reason);
      notes.push(`the room state fails the snapshot policy (${policy.reason} at ${policy.path ?? '$'})`);
    }
  }
  return {
    kind: 'room',
    roomId: entry.roomId,
    audience,
    ceiling: entry.allowedClassifications,
    notes,
    ...(refusals[0] ? { refused: refusals[0] } : {}),
  };
}

export function roomFromSnapshotText(config: ProjectorConfig, roomId: string, text: string): Subject {
  const entry = registryEntry(config, roomId);
  const parsed = parseStrictJson(text, { maxDepth: 16, maxLength: 4 * 1024 * 1024 });
  if (!parsed.ok) throw new ExplainError('the snapshot is not strict JSON');
  const v = validateSnapshot(parsed.value);
  if (!v.ok) throw new ExplainError(`the snapshot is invalid (${v.reason} at ${v.path ?? '$'})`);
  return roomSubject(config, entry, v.value);
}

/** A reader for the homeserver from liveRoomCheck (URL and token file), with an operator-sized deadline. */
export function configuredReader(config: ProjectorConfig, timeoutMs = 10_000): RoomStateReader {
  const live = config.liveRoomCheck;
  if (!live.homeserverUrl || !live.accessTokenFile)
    throw new ExplainError('liveRoomCheck has no homeserverUrl and accessTokenFile; pass --snapshot FILE');
  let token: string;
  try {
    token = readFileSync(live.accessTokenFile, 'utf8').trim();
  } catch {
    throw new ExplainError('cannot read the homeserver access token file');
  }
  if (token.length === 0 || /[\s\x00-\x1f\x7f]/.test(token))
    throw new ExplainError('the homeserver access token file is empty or malformed');
  return matrixSdkReader({ baseUrl: live.homeserverUrl, accessToken: token, timeoutMs });
}

export async function roomFromHomeserver(
  config: ProjectorConfig,
  roomId: string,
  reader: RoomStateReader,
): Promise<Subject> {
  const entry = registryEntry(config, roomId);
  let raw: Awaited<ReturnType<RoomStateReader['readRoomState']>>;
  try {
    raw = await reader.readRoomState(roomId);
  } catch {
    throw new ExplainError('the homeserver did not answer the room-state read');
  }
  const snapshot = snapshotFromState(raw, config, entry);
  if (snapshot === undefined)
    throw new ExplainError('the room state is incomplete, inconsistent or unclassifiable; the projector denies it');
  return roomSubject(config, entry, snapshot);
}

export function partnerSubject(config: ProjectorConfig, policyId: string, azp?: string): Subject {
  const entries = config.partners.filter((p) => p.policyId === policyId && (azp === undefined || p.azp === azp));
  if (entries.length === 0) throw new ExplainError('no partner registry entry has this policy id');
  if (entries.length > 1)
    throw new ExplainError(`${entries.length} partner registry entries have this policy id; choose one with --azp`);
  const e = entries[0]!;
  return {
    kind: 'partner',
    policyId: e.policyId,
    groups: [...e.groups],
    ceiling: e.allowedClassifications,
    notes: [],
  };
}
