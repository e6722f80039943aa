/**
 * RetrievalRooms kept one by one for the registry (pure): the same rules as the full render's
 * `analyse` (render/conflicts.ts: `roomProblem`, one room per exact room ID, `duplicateRoom`), applied
 * per change, so a room change costs work proportional to the rooms that share its room ID. Each
 * change returns the registry entries to set or remove (render/registry.ts `RegistryIndex`) and the
 * rooms whose conditions may have changed.
 */

import { normCeiling } from '../../rules/index.ts';
import type { RetrievalRoom } from '../types.ts';
import { duplicateRoom, roomProblem } from './conflicts.ts';
import { type RegistryEntry, roomEntry, roomKey } from './registry.ts';

export interface RoomChange {
  /** Registry entries to set (text) or remove (undefined). */
  readonly entries: { key: string; text: string | undefined }[];
  /** RetrievalRooms (by name) whose conflict may differ now. */
  readonly rooms: Set<string>;
}

export class RoomTable {
  private readonly byName = new Map<string, RetrievalRoom>();
  /** Valid rooms by room ID (a room ID claimed by two or more renders none of them). */
  private readonly byId = new Map<string, Set<string>>();
  private readonly problems = new Map<string, string>();

  /** Sets (or, with undefined, removes) one RetrievalRoom. */
  set(name: string, room: RetrievalRoom | undefined): RoomChange {
    const ids = new Set<string>();
    const rooms = new Set<string>([name]);
    const old = this.byName.get(name);
    if (old && !this.problems.has(name)) {
      ids.add(old.spec.roomId);
      this.byId.get(old.spec.roomId)?.delete(name);
    }
    this.problems.delete(name);
    if (room) {
      this.byName.set(name, room);
      const problem = roomProblem(room);
      if (problem) this.problems.set(name, problem);
      else {
        const id = room.spec.roomId;
        ids.add(id);
        const set = this.byId.get(id) ?? new Set<string>();
        set.add(name);
        this.byId.set(id, set);
      }
    } else this.byName.delete(name);
    const entries: RoomChange['entries'] = [];
    for (const id of ids) {
      const claimants = this.byId.get(id);
      if (claimants && claimants.size === 0) this.byId.delete(id);
      for (const n of claimants ?? []) rooms.add(n);
      entries.push({ key: roomKey(id), text: this.entryOf(id)?.text });
    }
    return { entries, rooms };
  }

  private entryOf(id: string): RegistryEntry | undefined {
    const claimants = this.byId.get(id);
    if (claimants?.size !== 1) return undefined;
    const room = this.byName.get([...claimants][0] as string) as RetrievalRoom;
    return roomEntry(id, normCeiling(room.spec.allowedClassifications));
  }

  /** Every rendered entry (valid and alone for its room ID). */
  entries(): RegistryEntry[] {
    const out: RegistryEntry[] = [];
    for (const id of this.byId.keys()) {
      const e = this.entryOf(id);
      if (e) out.push(e);
    }
    return out;
  }

  /** The room's conflict (`Invalid` or `DuplicateRoom`), or undefined. */
  conflict(name: string): { reason: string; message: string } | undefined {
    const problem = this.problems.get(name);
    if (problem) return { reason: 'Invalid', message: problem };
    const room = this.byName.get(name);
    if (!room) return undefined;
    const claimants = this.byId.get(room.spec.roomId);
    if (!claimants || claimants.size < 2) return undefined;
    return duplicateRoom([...claimants].filter((n) => n !== name));
  }

  get(name: string): RetrievalRoom | undefined {
    return this.byName.get(name);
  }

  names(): IterableIterator<string> {
    return this.byName.keys();
  }
}
