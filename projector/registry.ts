/**
 * The projector's registry split over several ConfigMaps ("shards"), so that the number of rooms and
 * partners is not bounded by one ConfigMap's 1 MiB. Pure: the stores (config-store.ts,
 * kube-store.ts) hand the texts in; this module checks and assembles them.
 *
 * The base `projector.json` then carries `"rooms": []`, `"partners": []` and a manifest
 * `"registry": {"shards": [{"name", "sha256"}]}`. Each shard's `registry.json` is
 * `{"version": 1, "rooms": [...], "partners": [...]}`. The assembled object (base rooms and partners
 * replaced by the shards' in manifest order) goes through the one validator (`validateConfig`), so
 * every rule — duplicate rooms or partner keys across shards included — holds exactly as for a
 * single file. A shard that is missing or whose digest differs from the manifest makes the set
 * inconsistent: the caller keeps its last good registry for a bounded time (README "Registry").
 *
 * Every entry sits in the shard its key addresses (`shardPosition`), which the controller's render
 * (controller/render/registry.ts) uses to place it: a room is then looked up in its own shard's map,
 * so a change re-validates one shard and the assembly reuses the other 255 maps as they are.
 */
import { hash } from 'node:crypto';
import { errorFields } from '../common/error-fields.ts';
import { isPlainObject, type JsonValue, parseStrictJson } from '../contract/index.ts';
import {
  type ConfigResult,
  type PartnerEntry,
  type ProjectorConfig,
  type RoomEntry,
  type RoomLookup,
  validateConfig,
} from './config.ts';

export const REGISTRY_SHARD_PREFIX = 'fgentic-projector-registry-';
export const REGISTRY_SHARD_KEY = 'registry.json';
/** The number of shards (controller/render/registry.ts renders exactly this many above 64 KiB). */
export const MAX_REGISTRY_SHARDS = 256;
const MAX_SHARD_BYTES = 1_048_576;
// The same ceiling parseConfig applies to a self-contained projector.json.
const MAX_BASE_BYTES = 4 * 1024 * 1024;
const SHARD_NAME = /^fgentic-projector-registry-[0-9]{3}$/;
const HEX64 = /^[0-9a-f]{64}$/;

export interface ShardRef {
  readonly name: string;
  readonly sha256: string;
}

/** Why an assembly failed: the set is `inconsistent` (in transit) or a text is `invalid`. */
export type AssembleResult = ConfigResult | { readonly ok: false; readonly error: string; readonly inconsistent: true };

export function shardDigest(text: string): string {
  return hash('sha256', text, 'hex');
}

export function shardName(index: number): string {
  return `${REGISTRY_SHARD_PREFIX}${String(index).padStart(3, '0')}`;
}

export const roomKey = (roomId: string): string => roomId;
export const partnerRegistryKey = (issuer: string, audience: string, azp: string): string =>
  `partner\u0000${issuer}\u0000${audience}\u0000${azp}`;

/**
 * The shard an entry key belongs to among `count`: the first byte of the key's SHA-256, so it never
 * depends on how many entries there are (with 256 shards, the byte itself).
 */
export function shardPosition(key: string, count: number): number {
  return (hash('sha256', key, 'buffer')[0] as number) % count;
}

/** The rooms of every shard behind one lookup: a room ID is looked for in the shard it addresses. */
class ShardedRooms implements RoomLookup {
  readonly size: number;
  constructor(private readonly parts: readonly RoomLookup[]) {
    this.size = parts.reduce((n, p) => n + p.size, 0);
  }
  get(roomId: string): RoomEntry | undefined {
    return this.parts[shardPosition(roomKey(roomId), this.parts.length)]?.get(roomId);
  }
  has(roomId: string): boolean {
    return this.get(roomId) !== undefined;
  }
  *keys(): Iterable<string> {
    for (const p of this.parts) yield* p.keys();
  }
}

function invalid(error: string): ConfigResult {
  return { ok: false, error };
}

function parseObject(text: string, max: number, what: string): Record<string, JsonValue> | string {
  if (text.length > max) return `${what}: too large`;
  const parsed = parseStrictJson(text, { maxDepth: 16, maxLength: max });
  if (!parsed.ok) return `${what}: not strict JSON (${parsed.error} at ${parsed.offset})`;
  if (!isPlainObject(parsed.value)) return `${what}: must be an object`;
  return parsed.value as Record<string, JsonValue>;
}

/** The manifest of a base configuration, `undefined` when the base is a single self-contained file. */
export function registryManifest(base: Record<string, JsonValue>): ShardRef[] | undefined | string {
  const reg = base['registry'];
  if (reg === undefined) return undefined;
  if (!isPlainObject(reg)) return 'registry: must be an object';
  const r = reg as Record<string, JsonValue>;
  if (Object.keys(r).some((k) => k !== 'shards')) return 'registry: unknown field';
  const shards = r['shards'];
  if (!Array.isArray(shards) || shards.length < 1 || shards.length > MAX_REGISTRY_SHARDS)
    return `registry.shards: must list 1–${MAX_REGISTRY_SHARDS} shards`;
  const out: ShardRef[] = [];
  for (const [k, s] of shards.entries()) {
    const p = `registry.shards[${k}]`;
    if (!isPlainObject(s)) return `${p}: must be an object`;
    const e = s as Record<string, JsonValue>;
    if (Object.keys(e).some((x) => x !== 'name' && x !== 'sha256')) return `${p}: unknown field`;
    const name = e['name'];
    const sha256 = e['sha256'];
    if (typeof name !== 'string' || !SHARD_NAME.test(name)) return `${p}.name: must be ${REGISTRY_SHARD_PREFIX}NNN`;
    // The position is the address (shardPosition), so the names follow it.
    if (name !== shardName(k)) return `${p}.name: must be ${shardName(k)} (shards are listed in order)`;
    if (typeof sha256 !== 'string' || !HEX64.test(sha256)) return `${p}.sha256: must be 64 lowercase hex digits`;
    out.push({ name, sha256 });
  }
  return out;
}

/** Validated content of one shard, kept while the base (without its manifest) and the shard are unchanged. */
interface ShardPart {
  readonly rooms: RoomLookup;
  readonly partners: ProjectorConfig['partners'];
  readonly partnerIndex: ProjectorConfig['partnerIndex'];
}

export type Assembler = (baseText: string, shards: ReadonlyMap<string, string>) => AssembleResult;

/** A shard's digest, recomputed only when its text changed (256 shards of a large registry are ~10 MB). */
type DigestCache = Map<string, { readonly text: string; readonly sha256: string }>;

function cachedDigest(cache: DigestCache, name: string, text: string): string {
  const hit = cache.get(name);
  if (hit !== undefined && hit.text === text) return hit.sha256;
  const sha256 = shardDigest(text);
  cache.set(name, { text, sha256 });
  return sha256;
}

/** Every digest first: a set in transit is recognised without parsing anything. */
function inTransit(
  manifest: readonly ShardRef[],
  shards: ReadonlyMap<string, string>,
  digests: DigestCache,
): AssembleResult | undefined {
  for (const ref of manifest) {
    const text = shards.get(ref.name);
    if (text === undefined) return { ok: false, error: `registry shard ${ref.name} missing`, inconsistent: true };
    if (cachedDigest(digests, ref.name, text) !== ref.sha256)
      return {
        ok: false,
        error: `registry shard ${ref.name} does not match the manifest`,
        inconsistent: true,
      };
  }
  return undefined;
}

/** One shard's rooms and partners, validated together with the base they depend on, each at its address. */
function validateShard(
  ref: ShardRef,
  position: number,
  count: number,
  text: string,
  rest: Record<string, JsonValue>,
): { readonly part: ShardPart } | { readonly failed: AssembleResult } {
  const shard = parseObject(text, MAX_SHARD_BYTES, ref.name);
  if (typeof shard === 'string') return { failed: invalid(shard) };
  if (Object.keys(shard).some((k) => k !== 'version' && k !== 'rooms' && k !== 'partners'))
    return { failed: invalid(`${ref.name}: unknown field`) };
  if (shard['version'] !== 1) return { failed: invalid(`${ref.name}.version: must be 1`) };
  const r = shard['rooms'];
  const p = shard['partners'];
  if (!Array.isArray(r) || !Array.isArray(p))
    return { failed: invalid(`${ref.name}: rooms and partners must be arrays`) };
  const checked = validateConfig({ ...rest, rooms: r, partners: p });
  if (!checked.ok) return { failed: invalid(`${ref.name}: ${checked.error}`) };
  const { rooms, partners, partnerIndex } = checked.config;
  for (const id of rooms.keys())
    if (shardPosition(roomKey(id), count) !== position)
      return { failed: invalid(`${ref.name}: a room is not in the shard its ID addresses`) };
  for (const e of partners)
    if (shardPosition(partnerRegistryKey(e.issuer, e.audience, e.azp), count) !== position)
      return { failed: invalid(`${ref.name}: a partner is not in the shard its issuer, audience and azp address`) };
  return { part: { rooms, partners, partnerIndex } };
}

/**
 * The shards' parts over the base's configuration. Rooms stay in their shards' maps (each room is in
 * the one shard it addresses, so none can be in two); partners, a few thousand at most, are merged.
 */
function mergeParts(core: ProjectorConfig, parts: readonly ShardPart[]): AssembleResult {
  const partners: PartnerEntry[] = [];
  const partnerIndex = new Map<string, readonly PartnerEntry[]>();
  for (const part of parts) {
    for (const e of part.partners) partners.push(e);
    for (const [k, v] of part.partnerIndex) {
      if (partnerIndex.has(k))
        return invalid('partners: overlapping partner mapping (same issuer, audience, azp) across registry shards');
      partnerIndex.set(k, v);
    }
  }
  const rooms = new ShardedRooms(parts.map((p) => p.rooms));
  return { ok: true, config: { ...core, rooms, partners, partnerIndex } };
}

/**
 * An assembler that remembers each shard's validated content, keyed by the shard's digest and the
 * base without its manifest: after one room changes, only its shard is parsed and validated again,
 * and the parts are merged (duplicates across shards refused). Each shard is validated with the same
 * validator as a single file, together with the base it depends on (local groups, agents).
 */
export function createAssembler(): Assembler {
  let cache = new Map<string, ShardPart>();
  const digests: DigestCache = new Map();
  return (baseText, shards) => {
    try {
      const base = parseObject(baseText, MAX_BASE_BYTES, 'projector.json');
      if (typeof base === 'string') return invalid(base);
      const manifest = registryManifest(base);
      if (typeof manifest === 'string') return invalid(manifest);
      if (manifest === undefined) return validateConfig(base);
      const baseRooms = base['rooms'];
      const basePartners = base['partners'];
      if (
        !Array.isArray(baseRooms) ||
        baseRooms.length !== 0 ||
        !Array.isArray(basePartners) ||
        basePartners.length !== 0
      )
        return invalid('rooms/partners: must be empty when a registry manifest is present');
      const transit = inTransit(manifest, shards, digests);
      if (transit !== undefined) return transit;
      const { registry: _manifest, ...rest } = base;
      const core = validateConfig(rest);
      if (!core.ok) return core;
      const coreKey = shardDigest(JSON.stringify(rest));
      const next = new Map<string, ShardPart>();
      const parts: ShardPart[] = [];
      for (const [position, ref] of manifest.entries()) {
        const key = `${coreKey}:${manifest.length}:${position}:${ref.sha256}`;
        let part = cache.get(key);
        if (part === undefined) {
          const shard = validateShard(ref, position, manifest.length, shards.get(ref.name)!, rest);
          if ('failed' in shard) return shard.failed;
          part = shard.part;
        }
        next.set(key, part);
        parts.push(part);
      }
      const merged = mergeParts(core.config, parts);
      if (merged.ok) cache = next;
      return merged;
    } catch (err) {
      // Deny-all either way; the class (never the message) tells a bug from bad input in the log.
      return invalid(`invalid configuration (${errorFields(err).error})`);
    }
  };
}

/**
 * Assemble a base configuration text and the shard texts it names. Never throws. Shards not named by
 * the manifest are ignored (an old shard awaiting deletion changes nothing).
 */
export function assembleConfig(baseText: string, shards: ReadonlyMap<string, string>): AssembleResult {
  return createAssembler()(baseText, shards);
}
