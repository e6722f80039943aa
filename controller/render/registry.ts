/**
 * The projector's registry as ConfigMaps, rendered incrementally (pure: no I/O, no clock).
 *
 * Layout (docs/interfaces.md "Projector configuration file"). Up to `INLINE_REGISTRY_LIMIT` (64 KiB)
 * the whole `projector.json` carries the rooms and partners itself. Above it, they live in exactly
 * `REGISTRY_SHARDS` (256) ConfigMaps `fgentic-projector-registry-NNN`, and `projector.json` carries a
 * manifest of their SHA-256 digests. An entry's shard is fixed by its key alone (the first byte of the
 * SHA-256 of the room ID, or of issuer/audience/azp), never by how many entries there are, so a room
 * always lands in the same shard and one change rewrites one shard plus the manifest.
 *
 * Why 256: at 100,000 rooms and 5,000 partners (about 10 MiB of entries) a shard holds about
 * 40 KiB and the manifest about 27 KiB, so one room change writes about 70 KiB; at 10 changes per
 * second that is about 210 MB of etcd history per 5-minute compaction window, a tenth of etcd's
 * default 2 GiB quota (one 0.5–0.8 MB shard per change, as before, was about 2 GB). A larger count
 * would shrink the shard but grow the manifest that every change rewrites; 256 keeps both in the tens
 * of KiB and far below the 1 MiB ConfigMap limit up to the projector's 500,000-room ceiling.
 *
 * `RegistryIndex` keeps the entries per shard, so a change re-serialises only its own shard; the
 * full render (`registryObjects`) builds the same objects from scratch, and a differential test
 * checks that both agree after any sequence of changes.
 */
import {
  MAX_REGISTRY_SHARDS,
  partnerRegistryKey,
  REGISTRY_SHARD_KEY,
  roomKey,
  shardDigest,
  shardName,
  shardPosition,
} from '../../projector/registry.ts';
import type { Conflict, K8sObject, OwnerReference, RetrievalRoom } from '../types.ts';
import { cmpStr } from './model.ts';

/** Fixed shard count once the registry is sharded (the projector reads at most this many). */
export const REGISTRY_SHARDS = MAX_REGISTRY_SHARDS;
/** Up to this size `projector.json` carries the registry inline (one object, one write per change). */
export const INLINE_REGISTRY_LIMIT = 64 * 1024;
/** The apiserver limits a ConfigMap's data (keys + values) to 1 MiB. */
export const CONFIGMAP_DATA_LIMIT = 1_048_576;
export const PROJECTOR_CONFIGMAP = 'fgentic-projector-config';
/** Label on the projector's configuration ConfigMaps (base, shards, heartbeat): what it watches. */
export const PROJECTOR_CONFIG_LABEL = 'retrieval.fgentic.dev/projector-config';

const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

/** The shard of an entry key, by the address the projector checks (projector/registry.ts). */
export function shardOf(key: string): number {
  return shardPosition(key, REGISTRY_SHARDS);
}

export { partnerRegistryKey, roomKey };

/** One registry entry: its key (shard address and sort order) and its compact JSON. */
export interface RegistryEntry {
  readonly key: string;
  readonly text: string;
}

/** Where the registry's ConfigMaps go and what the rest of `projector.json` says. */
export interface RegistryContext {
  readonly namespace: string;
  readonly labels: Record<string, string>;
  readonly ownerReferences?: OwnerReference[];
  /** `projector.json` with `"rooms": []` and `"partners": []` (rooms and partners added here). */
  readonly base: Record<string, unknown>;
}

const EMPTY_LISTS = '"rooms":[],"partners":[]';

function compact(v: unknown): string {
  return `${JSON.stringify(v)}\n`;
}

function configMap(ctx: RegistryContext, name: string, key: string, text: string): K8sObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      namespace: ctx.namespace,
      labels: { ...ctx.labels },
      ...(ctx.ownerReferences ? { ownerReferences: ctx.ownerReferences.map((r) => ({ ...r })) } : {}),
    },
    data: { [key]: text },
  };
}

/** One shard's text from its entries, each list sorted by key. */
export function shardText(rooms: readonly RegistryEntry[], partners: readonly RegistryEntry[]): string {
  const sorted = (l: readonly RegistryEntry[]) => [...l].sort((a, b) => cmpStr(a.key, b.key)).map((e) => e.text);
  return `{"version":1,"rooms":[${sorted(rooms).join(',')}],"partners":[${sorted(partners).join(',')}]}\n`;
}

/** `projector.json` with every entry inline (rooms and partners in key order). */
export function inlineText(
  ctx: RegistryContext,
  rooms: readonly RegistryEntry[],
  partners: readonly RegistryEntry[],
): string {
  const base = compact(ctx.base);
  const list = (l: readonly RegistryEntry[]) =>
    [...l]
      .sort((a, b) => cmpStr(a.key, b.key))
      .map((e) => e.text)
      .join(',');
  // A JSON string never holds an unescaped quote, so the first match is the top-level pair.
  return base.replace(EMPTY_LISTS, `"rooms":[${list(rooms)}],"partners":[${list(partners)}]`);
}

/** `projector.json` with the manifest of the shards' digests. */
export function manifestText(ctx: RegistryContext, digests: readonly string[]): string {
  return compact({
    ...ctx.base,
    registry: { shards: digests.map((sha256, i) => ({ name: shardName(i), sha256 })) },
  });
}

/** The registry's ConfigMaps from scratch (what `render` produces), or a RegistryTooLarge problem. */
export function registryObjects(
  ctx: RegistryContext,
  rooms: readonly RegistryEntry[],
  partners: readonly RegistryEntry[],
): { objects: K8sObject[]; tooLarge?: string } {
  const index = new RegistryIndex();
  index.setContext(ctx);
  for (const e of rooms) index.putEntry('room', e);
  index.setPartners(partners);
  return index.render();
}

type Part = 'room' | 'partner';

/** A size in bytes past the ConfigMap limit: the registry is left out whole, never truncated. */
function tooLargeMessage(name: string, bytes: number): string {
  return `${name} would hold ${bytes} bytes (limit ${CONFIGMAP_DATA_LIMIT})`;
}

/**
 * The registry's entries kept per shard. Every mutation returns the names of the ConfigMaps whose
 * content it changed; `object(name)` renders one of them on demand (memoised per shard).
 */
export class RegistryIndex {
  private ctx: RegistryContext | undefined;
  private baseText = '';
  /** UTF-8 length of `baseText`, kept so the layout check costs nothing per entry. */
  private baseBytes = 0;
  private readonly shards = Array.from({ length: REGISTRY_SHARDS }, () => ({
    rooms: new Map<string, string>(),
    partners: new Map<string, string>(),
    text: undefined as string | undefined,
    digest: undefined as string | undefined,
  }));
  /** Bytes of every entry's text, and entry counts, for the inline decision without serialising. */
  private bytes = 0;
  private entries = { room: 0, partner: 0 };
  private partnerKeys = new Map<string, string>();

  /** The context (platform), or undefined when there is none: then nothing is rendered. */
  setContext(ctx: RegistryContext | undefined): Set<string> {
    const before = this.layout();
    const was = this.ctx ? JSON.stringify([this.ctx.namespace, this.ctx.labels, this.ctx.ownerReferences ?? null]) : '';
    const oldBase = this.baseText;
    this.ctx = ctx;
    this.baseText = ctx ? compact(ctx.base) : '';
    this.baseBytes = utf8Length(this.baseText);
    const now = ctx ? JSON.stringify([ctx.namespace, ctx.labels, ctx.ownerReferences ?? null]) : '';
    // The same context renders the same objects: nothing to write (a pass hands it over every time).
    if (was === now && oldBase === this.baseText) return new Set();
    const changed = new Set<string>([PROJECTOR_CONFIGMAP]);
    // A layout change (inline ↔ sharded, or none), or a new namespace, labels or owner: every shard.
    if (before !== this.layout() || was !== now) for (let i = 0; i < REGISTRY_SHARDS; i++) changed.add(shardName(i));
    return changed;
  }

  /** Sets (text) or removes (undefined) one entry; returns the ConfigMaps whose content changed. */
  putEntry(part: Part, e: { readonly key: string; readonly text: string | undefined }): Set<string> {
    const before = this.layout();
    const i = shardOf(e.key);
    const shard = this.shards[i] as (typeof this.shards)[number];
    const map = part === 'room' ? shard.rooms : shard.partners;
    const old = map.get(e.key);
    if (old === e.text) return new Set();
    if (old !== undefined) {
      this.bytes -= utf8Length(old);
      this.entries[part]--;
    }
    if (e.text === undefined) map.delete(e.key);
    else {
      map.set(e.key, e.text);
      this.bytes += utf8Length(e.text);
      this.entries[part]++;
    }
    shard.text = undefined;
    shard.digest = undefined;
    const changed = new Set<string>([PROJECTOR_CONFIGMAP, shardName(i)]);
    if (before !== this.layout()) for (let n = 0; n < REGISTRY_SHARDS; n++) changed.add(shardName(n));
    return changed;
  }

  /** Replaces the whole partner list (a few thousand entries, from the main render). */
  setPartners(entries: readonly RegistryEntry[]): Set<string> {
    const changed = new Set<string>();
    const next = new Map(entries.map((e) => [e.key, e.text]));
    for (const key of this.partnerKeys.keys())
      if (!next.has(key)) for (const n of this.putEntry('partner', { key, text: undefined })) changed.add(n);
    for (const [key, text] of next) for (const n of this.putEntry('partner', { key, text })) changed.add(n);
    this.partnerKeys = next;
    return changed;
  }

  /** `none` without a context; `inline` while the whole file fits the inline limit; else `sharded`. */
  layout(): 'none' | 'inline' | 'sharded' {
    if (!this.ctx) return 'none';
    const commas = Math.max(0, this.entries.room - 1) + Math.max(0, this.entries.partner - 1);
    return this.baseBytes + this.bytes + commas <= INLINE_REGISTRY_LIMIT ? 'inline' : 'sharded';
  }

  private shardParts(i: number): { rooms: RegistryEntry[]; partners: RegistryEntry[] } {
    const s = this.shards[i] as (typeof this.shards)[number];
    const list = (m: Map<string, string>) => [...m].map(([key, text]) => ({ key, text }));
    return { rooms: list(s.rooms), partners: list(s.partners) };
  }

  /** Shard `i`'s text and digest (memoised until one of its entries changes). */
  shard(i: number): { text: string; digest: string } {
    const s = this.shards[i] as (typeof this.shards)[number];
    if (s.text === undefined) {
      const { rooms, partners } = this.shardParts(i);
      s.text = shardText(rooms, partners);
      s.digest = shardDigest(s.text);
    }
    return { text: s.text, digest: s.digest as string };
  }

  /** Every desired registry ConfigMap name, in the current layout. */
  names(): string[] {
    const l = this.layout();
    if (l === 'none') return [];
    if (l === 'inline') return [PROJECTOR_CONFIGMAP];
    return [PROJECTOR_CONFIGMAP, ...Array.from({ length: REGISTRY_SHARDS }, (_, i) => shardName(i))];
  }

  /**
   * One registry ConfigMap as desired, or undefined when it is not part of the layout. The manifest
   * lists `digests(i)` for each shard (default: the desired shard's own digest); the controller passes
   * the digest of the shard as last applied, so the manifest never names a shard the API does not hold.
   */
  object(name: string, digestOf?: (i: number) => string | undefined): K8sObject | undefined {
    const ctx = this.ctx;
    const l = this.layout();
    if (!ctx || l === 'none') return undefined;
    if (name === PROJECTOR_CONFIGMAP) {
      if (l === 'inline') {
        const all = Array.from({ length: REGISTRY_SHARDS }, (_, i) => this.shardParts(i));
        const text = inlineText(
          ctx,
          all.flatMap((p) => p.rooms),
          all.flatMap((p) => p.partners),
        );
        return configMap(ctx, PROJECTOR_CONFIGMAP, 'projector.json', text);
      }
      const digests = Array.from({ length: REGISTRY_SHARDS }, (_, i) => digestOf?.(i) ?? this.shard(i).digest);
      return configMap(ctx, PROJECTOR_CONFIGMAP, 'projector.json', manifestText(ctx, digests));
    }
    if (l !== 'sharded') return undefined;
    const m = /^fgentic-projector-registry-(\d{3})$/.exec(name);
    const i = m ? Number(m[1]) : -1;
    if (i < 0 || i >= REGISTRY_SHARDS) return undefined;
    return configMap(ctx, name, REGISTRY_SHARD_KEY, this.shard(i).text);
  }

  /** Every registry ConfigMap, or none and the reason when one would exceed the ConfigMap limit. */
  render(): { objects: K8sObject[]; tooLarge?: string } {
    const objects = this.names().map((n) => this.object(n) as K8sObject);
    const problem = this.tooLarge(objects);
    return problem ? { objects: [], tooLarge: problem } : { objects };
  }

  /** The first registry ConfigMap over the limit, as a message; undefined when all fit. */
  tooLarge(objects?: K8sObject[]): string | undefined {
    if (this.layout() === 'inline' || this.layout() === 'none') return undefined;
    for (let i = 0; i < REGISTRY_SHARDS; i++) {
      const bytes = utf8Length(REGISTRY_SHARD_KEY) + utf8Length(this.shard(i).text);
      if (bytes > CONFIGMAP_DATA_LIMIT) return tooLargeMessage(shardName(i), bytes);
    }
    const base = objects?.find((o) => o.metadata.name === PROJECTOR_CONFIGMAP) ?? this.object(PROJECTOR_CONFIGMAP);
    const text = (base as { data?: Record<string, string> } | undefined)?.data?.['projector.json'] ?? '';
    const bytes = utf8Length('projector.json') + utf8Length(text);
    return bytes > CONFIGMAP_DATA_LIMIT ? tooLargeMessage(PROJECTOR_CONFIGMAP, bytes) : undefined;
  }
}

/** The registry entry of one valid room (its key and compact JSON). */
export function roomEntry(roomId: string, classifications: readonly string[]): RegistryEntry {
  return {
    key: roomKey(roomId),
    text: JSON.stringify({ roomId, allowedClassifications: [...classifications] }),
  };
}

/** Room-level conflicts the registry index computes itself (the same rule as render/conflicts.ts). */
export type RoomConflict = Pick<Conflict, 'reason' | 'message'>;
export type { RetrievalRoom };
