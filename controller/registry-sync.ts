/**
 * The registry's own work (the revocation path), per key instead of in the whole-world pass:
 *
 * - `room/<name>`: one RetrievalRoom changed; its entry is set in the `RoomTable` and the
 *   `RegistryIndex` (render/registry*.ts, pure), which name the ConfigMaps whose content changed;
 * - `cm/<name>`: one registry ConfigMap (a shard, or `fgentic-projector-config` with the manifest or
 *   the inline registry) brought to its desired content: compared by desired hash with the informer's
 *   copy, applied when it differs, deleted when no longer part of the layout; a failure is retried on
 *   the key's own backoff, and a new desired content (`forget`) is tried at once;
 * - `room-status/<name>`: one RetrievalRoom's conditions, written only when they differ from what
 *   its status says; a room is `ApplyFailed` only while its own entry is not in the live registry.
 *
 * All at `URGENT` priority: ahead of the pass and of any resync. The manifest names, for each shard,
 * the digest of the shard as the API holds it, so it never points at a shard that failed to apply;
 * each applied shard queues the manifest again. The pass (reconcile.ts) provides the rest of
 * `projector.json` and the partner entries (`onModel`) and leaves these ConfigMaps alone.
 */
import { createLogger } from '../common/log.ts';
import { HEARTBEAT_CONFIGMAP } from '../projector/heartbeat.ts';
import { REGISTRY_SHARD_KEY, REGISTRY_SHARD_PREFIX, shardDigest, shardName } from '../projector/registry.ts';
import type { ClusterState } from './cluster.ts';
import { conditionsFor, sameConditions } from './conditions.ts';
import { objKey, upToDate, withHash } from './desired.ts';
import type { WriteOptions } from './kube/client.ts';
import { analyse } from './render/conflicts.ts';
import type { Model } from './render/model.ts';
import { PROJECTOR_CONFIGMAP, RegistryIndex, roomKey, shardOf } from './render/registry.ts';
import { RoomTable } from './render/registry-rooms.ts';
import { registryContext, registryEntries } from './render/server-config.ts';
import type {
  Conflict,
  K8sObject,
  OwnKind,
  OwnResource,
  PartnerClient,
  Resources,
  RetrievalAgent,
  RetrievalPlatform,
  RetrievalRoom,
} from './types.ts';
import { URGENT, type WorkQueue } from './workqueue.ts';

const log = createLogger('controller');

export interface RegistryWriter {
  apply(obj: K8sObject, o?: WriteOptions): Promise<K8sObject>;
  delete(obj: K8sObject, o?: WriteOptions): Promise<boolean>;
  patchStatus(res: OwnResource, status: Record<string, unknown>, o?: WriteOptions): Promise<K8sObject | undefined>;
  event(res: OwnResource, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void>;
}

const NO_PLATFORM = 'no valid RetrievalPlatform "default": nothing is rendered';

type ConfigMapObj = K8sObject & { data?: Record<string, string> };

export class RegistrySync {
  readonly rooms = new RoomTable();
  readonly index = new RegistryIndex();
  private namespace: string | undefined;
  private hasPlatform = false;
  /** A pass has handed over its model (it renders only on a supported upstream). */
  private passSeen = false;
  /** Nothing is deleted before the pass has said what the platform is (its first model). */
  private modelSeen = false;
  /** Failing registry ConfigMaps: name → first error of this failure (stable, content-free). */
  private readonly failing = new Map<string, { error: string; since: number }>();
  /**
   * Rooms whose change is not yet in the live registry: room name → the ConfigMap that carries its
   * entry (a shard, or projector.json inline). Cleared when that ConfigMap and then the manifest are
   * applied; while one of them fails, the room reports that failure.
   */
  private readonly pending = new Map<string, string>();
  /** Shards applied since the manifest last was. */
  private readonly appliedShards = new Set<string>();
  /** Live shard digests, memoised per live object. */
  private readonly digests = new WeakMap<object, string>();
  writes = 0;

  constructor(
    private readonly api: RegistryWriter,
    private readonly queue: WorkQueue,
    private readonly state: () => ClusterState | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  private enqueue(names: Iterable<string>): void {
    for (const n of names) {
      // A new desired content is tried at once, whatever the previous content's failures.
      this.queue.forget(`cm/${n}`);
      this.queue.add(`cm/${n}`, URGENT);
    }
  }

  /** One RetrievalRoom added, changed (spec) or deleted. */
  onRoom(name: string, room: RetrievalRoom | undefined): void {
    const live = room && !room.metadata.deletionTimestamp ? room : undefined;
    const change = this.rooms.set(name, live);
    const changed = new Set<string>();
    for (const e of change.entries) for (const n of this.index.putEntry('room', e)) changed.add(n);
    this.enqueue(changed);
    if (changed.size > 0) {
      const holder =
        this.index.layout() === 'sharded' && room ? shardName(shardOf(roomKey(room.spec.roomId))) : PROJECTOR_CONFIGMAP;
      for (const r of change.rooms) this.pending.set(r, holder);
    }
    for (const r of change.rooms) if (r !== name || live) this.queue.add(`room-status/${r}`, URGENT);
  }

  /** The pass's model: the rest of `projector.json` and the partner entries (undefined: no platform). */
  onModel(model: Model | undefined): void {
    this.passSeen = true;
    this.apply(model);
  }

  /** True once a pass has handed over its model (the heartbeat and `renderFrom` wait for it). */
  get rendered(): boolean {
    return this.passSeen;
  }

  private apply(model: Model | undefined): void {
    const had = this.hasPlatform;
    const first = !this.modelSeen;
    this.modelSeen = true;
    this.hasPlatform = model !== undefined;
    const changed = new Set<string>();
    if (model) {
      this.namespace = model.platform.spec.namespaces.retrieval;
      for (const n of this.index.setContext(registryContext(model))) changed.add(n);
      for (const n of this.index.setPartners(registryEntries(model).partners)) changed.add(n);
    } else for (const n of this.index.setContext(undefined)) changed.add(n);
    // Only a changed base or set of entries yields a different object: the cm handler compares.
    this.enqueue(changed);
    // Room statuses wait for the first model (syncRoomStatus), then are checked against it.
    if (first || had !== this.hasPlatform)
      for (const r of this.rooms.names()) this.queue.add(`room-status/${r}`, URGENT);
  }

  /**
   * The registry's part of a render between passes: validation and the model from the cached
   * platform, agents and partners (no rooms), with the JWKS as the last pass read it. No I/O.
   */
  renderFrom(state: ClusterState, jwks: Pick<Resources, 'jwksInline' | 'jwksProblem'>): void {
    // Only once a pass has rendered (on a supported upstream): before that nothing new is written.
    if (!this.passSeen) return;
    const live = <T extends OwnResource>(kind: OwnKind) =>
      state.own<T>(kind).filter((r) => !r.metadata.deletionTimestamp);
    const { model } = analyse({
      platforms: live<RetrievalPlatform>('RetrievalPlatform'),
      agents: live<RetrievalAgent>('RetrievalAgent'),
      rooms: [],
      partners: live<PartnerClient>('PartnerClient'),
      ...jwks,
    });
    this.apply(model);
  }

  /** True for the ConfigMaps this sync owns (the pass neither applies nor prunes them). */
  owns(o: { kind: string; metadata: { name: string } }): boolean {
    const n = o.metadata.name;
    return (
      o.kind === 'ConfigMap' &&
      (n === PROJECTOR_CONFIGMAP || n.startsWith(REGISTRY_SHARD_PREFIX) || n === HEARTBEAT_CONFIGMAP)
    );
  }

  /** RegistryTooLarge, for the RetrievalPlatform's conflicts. */
  tooLarge(): string | undefined {
    return this.index.tooLarge();
  }

  /** How long the oldest failing registry write has been failing (ms), 0 when none: the heartbeat's health. */
  oldestFailureMs(): number {
    let min = Number.POSITIVE_INFINITY;
    for (const f of this.failing.values()) if (f.since < min) min = f.since;
    return min === Number.POSITIVE_INFINITY ? 0 : this.now() - min;
  }

  private live(name: string): ConfigMapObj | undefined {
    if (!this.namespace) return undefined;
    return this.state()?.live('v1', 'ConfigMap', this.namespace, name) as ConfigMapObj | undefined;
  }

  private liveDigest(i: number): string | undefined {
    const cm = this.live(shardName(i));
    const text = cm?.data?.[REGISTRY_SHARD_KEY];
    if (!cm || text === undefined) return undefined;
    let d = this.digests.get(cm);
    if (d === undefined) {
      d = shardDigest(text);
      this.digests.set(cm, d);
    }
    return d;
  }

  /** One RetrievalRoom from the cache, by name (constant time: 100,000 rooms are not scanned per key). */
  private room(name: string): RetrievalRoom | undefined {
    const state = this.state();
    if (!state) return undefined;
    if (state.ownOne) return state.ownOne<RetrievalRoom>('RetrievalRoom', undefined, name);
    return state.own<RetrievalRoom>('RetrievalRoom').find((r) => r.metadata.name === name);
  }

  /** One queued key; never throws (failures are re-queued with backoff). */
  async handle(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const kind = key.slice(0, slash);
    const name = key.slice(slash + 1);
    if (kind === 'room') this.onRoom(name, this.room(name));
    else if (kind === 'cm') await this.syncConfigMap(name);
    else if (kind === 'room-status') await this.syncRoomStatus(name);
  }

  private async syncConfigMap(name: string): Promise<void> {
    const key = `cm/${name}`;
    const state = this.state();
    if (!state || !this.namespace) return;
    const desired = this.index.object(name, (i) => this.liveDigest(i));
    const current = this.live(name);
    try {
      if (!desired) {
        if (current && this.modelSeen) {
          await this.api.delete({ ...current, apiVersion: 'v1', kind: 'ConfigMap' }, { priority: URGENT });
          this.writes++;
          state.removed?.({ ...current, apiVersion: 'v1', kind: 'ConfigMap' });
        }
      } else {
        const hashed = withHash(desired);
        if (!upToDate(current, hashed)) {
          const stored = await this.api.apply(hashed, { priority: URGENT });
          this.writes++;
          state.stored?.({ ...stored, apiVersion: 'v1', kind: 'ConfigMap' });
        }
      }
      // The manifest names the shards as applied: check it again now this one is.
      if (name !== PROJECTOR_CONFIGMAP) this.queue.add(`cm/${PROJECTOR_CONFIGMAP}`, URGENT);
      this.queue.forget(key);
      const recovered = this.failing.delete(name);
      if (name !== PROJECTOR_CONFIGMAP) this.appliedShards.add(name);
      else this.settle(recovered);
      if (recovered) this.roomsOf(name, (r) => this.queue.add(`room-status/${r}`, URGENT));
    } catch (e) {
      if ((e as { fenced?: boolean }).fenced) return; // the term is over: nothing more is written
      const first = !this.failing.has(name);
      if (first) {
        this.failing.set(name, {
          error: `apply ConfigMap ${this.namespace}/${name}: ${(e as Error).message}`.slice(0, 1024),
          since: this.now(),
        });
        log.warn('registry write failed', { name, error: (e as Error).message.slice(0, 200) });
        this.roomsOf(name, (r) => this.queue.add(`room-status/${r}`, URGENT));
      }
      this.queue.addRateLimited(key, URGENT);
    }
  }

  /**
   * The manifest (or the inline file) is applied: every pending room whose shard is applied is now
   * live; those that had reported a failure are checked again.
   */
  private settle(recovered: boolean): void {
    for (const [room, holder] of this.pending) {
      if (holder !== PROJECTOR_CONFIGMAP && !this.appliedShards.has(holder)) continue;
      this.pending.delete(room);
      if (this.wasFailing.has(room) || recovered) this.queue.add(`room-status/${room}`, URGENT);
    }
    this.appliedShards.clear();
  }

  /** The pending rooms whose entry this ConfigMap carries (all of them for the manifest). */
  private roomsOf(name: string, fn: (room: string) => void): void {
    for (const [room, holder] of this.pending) if (name === PROJECTOR_CONFIGMAP || holder === name) fn(room);
    for (const room of this.wasFailing) if (!this.pending.has(room)) fn(room);
  }

  /** Rooms whose status last said ApplyFailed (so recovery re-checks them). */
  private readonly wasFailing = new Set<string>();

  /** The failure that holds this room's change back, if its change is pending and a write fails. */
  private pendingError(roomName: string): string | undefined {
    const holder = this.pending.get(roomName);
    if (holder === undefined) return undefined;
    return (this.failing.get(holder) ?? this.failing.get(PROJECTOR_CONFIGMAP))?.error;
  }

  private async syncRoomStatus(name: string): Promise<void> {
    const key = `room-status/${name}`;
    // Before the first pass has said what the platform is, a room's conditions are unknown: writing
    // NoPlatform then would flap every room's status (and send two Events each) in every new term.
    // The first model queues every room's status again.
    if (!this.modelSeen) return;
    const room = this.room(name);
    if (!room || room.metadata.deletionTimestamp) return;
    const c = this.hasPlatform ? this.rooms.conflict(name) : { reason: 'NoPlatform', message: NO_PLATFORM };
    const conflict: Conflict | undefined = c ? { kind: 'RetrievalRoom', name, ...c } : undefined;
    const error = this.pendingError(name);
    if (error) this.wasFailing.add(name);
    else this.wasFailing.delete(name);
    const conditions = conditionsFor(
      room,
      { conflict, applyErrors: error ? [error] : [] },
      new Date(this.now()).toISOString(),
    );
    this.computed.set(
      name,
      conditions.map((c) => ({ type: c.type, status: c.status, reason: c.reason })),
    );
    if (
      sameConditions(room.status?.conditions, conditions) &&
      room.status?.observedGeneration === room.metadata.generation
    ) {
      if (error === undefined) this.verifiedRooms.add(room);
      this.queue.forget(key);
      return;
    }
    try {
      const stored = await this.api.patchStatus(room, {
        ...(room.metadata.generation !== undefined ? { observedGeneration: room.metadata.generation } : {}),
        conditions,
      });
      this.writes++;
      if (stored?.metadata) this.state()?.stored?.({ ...stored, apiVersion: room.apiVersion, kind: room.kind });
      this.queue.forget(key);
      const wasConflict = room.status?.conditions?.find((x) => x.type === 'Conflict')?.status === 'True';
      if (conflict && !wasConflict)
        await this.api.event(room, 'Warning', conflict.reason, conflict.message).catch(() => undefined);
      if (!conflict && wasConflict)
        await this.api.event(room, 'Normal', 'ConflictResolved', 'the resource renders again').catch(() => undefined);
    } catch (e) {
      if ((e as { fenced?: boolean }).fenced) return;
      this.queue.addRateLimited(key, URGENT);
    }
  }

  /** Room objects (by identity: the cache replaces an object on every change) whose status is as computed. */
  private verifiedRooms = new WeakSet<object>();

  /** True when this very room object's status was found as computed (a resync skips it). */
  verified(room: object): boolean {
    return this.verifiedRooms.has(room);
  }

  /** Each room's conditions as last computed, for the conditions metric. */
  roomConditions(): {
    kind: 'RetrievalRoom';
    type: string;
    status: 'True' | 'False' | 'Unknown';
    reason: string;
  }[] {
    const out: ReturnType<RegistrySync['roomConditions']> = [];
    for (const [name, list] of this.computed) {
      if (!this.rooms.get(name)) {
        this.computed.delete(name);
        continue;
      }
      for (const c of list) out.push({ kind: 'RetrievalRoom', ...c });
    }
    return out;
  }

  private readonly computed = new Map<
    string,
    { type: string; status: 'True' | 'False' | 'Unknown'; reason: string }[]
  >();

  /** Keys of every registry object the current layout desires, or may have to delete. */
  allKeys(): string[] {
    const names = new Set(this.index.names());
    for (let i = 0; i < 256; i++) names.add(shardName(i));
    names.add(PROJECTOR_CONFIGMAP);
    return [...names].map((n) => `cm/${n}`);
  }

  /** objKey of a registry ConfigMap (for tests). */
  static keyOf(namespace: string, name: string): string {
    return objKey({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { namespace, name } });
  }
}
