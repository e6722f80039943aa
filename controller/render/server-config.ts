/** The projector and retrieval registries as ConfigMaps, exactly as docs/interfaces.md describes them. */
import { createHash } from 'node:crypto';
import { MAX_REGISTRY_SHARDS, REGISTRY_SHARD_KEY, shardDigest, shardName } from '../../projector/registry.ts';
import { DEFAULT_LEDGER_TIMING, type LedgerTiming, ledgerTiming } from '../../rules/ledger.ts';
import type { K8sObject } from '../types.ts';
import { type Model, meta, platformOwner } from './model.ts';

export const PROJECTOR_CONFIGMAP = 'fgentic-projector-config';
export const RETRIEVAL_CONFIGMAP = 'fgentic-retrieval-config';
const HOMESERVER_TOKEN_FILE = '/var/run/secrets/fgentic/homeserver-token';
const EMBEDDINGS_TOKEN_FILE = '/credentials/authorization';

export function projectorConfig(m: Model): Record<string, unknown> {
  const s = m.platform.spec;
  const live = s.liveRoomCheck ?? {};
  return {
    version: 1,
    publicRetrievalTimeoutSeconds: m.platform.timeout,
    bridge: {
      workload: s.bridge.workload,
      localServer: s.bridge.localServer,
      serviceUserRegex: s.bridge.serviceUserRegex,
      bridgedOrigins: [...(s.bridge.bridgedOrigins ?? [])]
        .sort((a, b) => (a.network < b.network ? -1 : a.network > b.network ? 1 : 0))
        .map((o) => ({ network: o.network, userIdRegex: o.userIdRegex })),
    },
    agents: m.agents.map((a) => ({
      namespace: a.namespace,
      name: a.name,
      localPath: a.localPath,
      ...(a.public && a.partners.length > 0 ? { publicPath: a.publicPath } : {}),
    })),
    rooms: m.rooms.map((r) => ({ roomId: r.roomId, allowedClassifications: [...r.classifications] })),
    partners: m.partners.map((p) => ({
      issuer: p.res.spec.issuer,
      audience: p.res.spec.audience,
      azp: p.res.spec.azp,
      policyId: p.res.spec.policyId,
      groups: [...p.res.spec.groups].sort(),
      allowedClassifications: [...p.classifications],
      agents: p.agents.map((a) => ({ namespace: a.namespace, name: a.name })),
    })),
    localGroups: [...(s.localGroups ?? [])].sort(),
    liveRoomCheck: {
      enabled: live.enabled === true,
      ...(live.homeserverUrl ? { homeserverUrl: live.homeserverUrl } : {}),
      accessTokenFile: HOMESERVER_TOKEN_FILE,
    },
    // Rendered only when on, so plain-mode configurations stay as they were (absent means plain).
    ...(s.capability === 'ledger' ? { capability: 'ledger', ledger: renderedLedgerTiming(s.ledger) } : {}),
  };
}

/** Both servers get the whole timing, defaults filled in, so each loader can check the ordering rule. */
function renderedLedgerTiming(v: unknown): LedgerTiming {
  // The analysis refused an invalid timing before rendering (controller/render/conflicts.ts).
  return ledgerTiming(v) ?? DEFAULT_LEDGER_TIMING;
}

export function retrievalConfig(m: Model): Record<string, unknown> {
  const e = m.platform.spec.embeddings;
  return {
    version: 1,
    agents: m.agents.map((a) => ({ namespace: a.namespace, name: a.name })),
    embeddings: { profile: e.profile, url: e.url, model: e.model, tokenFile: EMBEDDINGS_TOKEN_FILE },
    allowedOrigins: [],
    ...(m.platform.spec.capability === 'ledger'
      ? { capability: 'ledger', ledger: renderedLedgerTiming(m.platform.spec.ledger) }
      : {}),
  };
}

/** Label on the projector's configuration ConfigMaps (base and registry shards): what it watches. */
export const PROJECTOR_CONFIG_LABEL = 'retrieval.fgentic.dev/projector-config';

function configMap(
  m: Model,
  name: string,
  key: string,
  text: string,
  labels: Record<string, string> = {},
): K8sObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta(name, m.platform.spec.namespaces.retrieval, platformOwner(m.platform), labels),
    data: { [key]: text },
  };
}

// Compact JSON: 10,000 rooms pretty-printed would not fit where compact ones do.
const compact = (v: unknown): string => `${JSON.stringify(v)}\n`;

/**
 * Up to this size projector.json carries the registry inline (one object, one write per change);
 * above it the rooms and partners move into shards so that no ConfigMap nears the 1 MiB limit.
 */
export const INLINE_REGISTRY_LIMIT = 512 * 1024;
/** A shard is filled to at most this size, leaving room below the limit for keys and growth. */
export const SHARD_BUDGET = 768 * 1024;

type Entry = { key: string; value: unknown };

/** The first 32 bits of the key's SHA-256; its shard at count n (a power of two) is this modulo n. */
function keyHash(key: string): number {
  return createHash('sha256').update(key, 'utf8').digest().readUInt32BE(0);
}

/** UTF-8 length without encoding the text (Buffer.byteLength counts; it allocates nothing). */
const utf8Length = (s: string): number => Buffer.byteLength(s, 'utf8');

/**
 * Stable sharding: an entry's shard depends only on its key (room ID, or issuer/audience/azp) and the
 * shard count, so changing one room rewrites one shard (and the base's manifest). The count is the
 * smallest power of two that keeps every shard within the budget; it changes only when the registry
 * doubles or halves. Returns undefined when even the largest count cannot hold it.
 */
export function shardRegistry(rooms: Entry[], partners: Entry[]): string[] | undefined {
  // Each key is hashed once, not once per shard count tried.
  const roomHashes = rooms.map((r) => keyHash(r.key));
  const partnerHashes = partners.map((p) => keyHash(`partner\u0000${p.key}`));
  for (let n = 1; n <= MAX_REGISTRY_SHARDS; n *= 2) {
    const shards = Array.from({ length: n }, () => ({
      version: 1,
      rooms: [] as unknown[],
      partners: [] as unknown[],
    }));
    for (let i = 0; i < rooms.length; i++) shards[(roomHashes[i] as number) % n]!.rooms.push(rooms[i]!.value);
    for (let i = 0; i < partners.length; i++)
      shards[(partnerHashes[i] as number) % n]!.partners.push(partners[i]!.value);
    const texts = shards.map(compact);
    if (texts.every((t) => utf8Length(t) <= SHARD_BUDGET)) return texts;
  }
  return undefined;
}

export function renderServerConfig(m: Model): K8sObject[] {
  const retrieval = configMap(m, RETRIEVAL_CONFIGMAP, 'retrieval.json', compact(retrievalConfig(m)));
  const label = { [PROJECTOR_CONFIG_LABEL]: 'true' };
  const full = projectorConfig(m);
  const inline = compact(full);
  if (utf8Length(inline) <= INLINE_REGISTRY_LIMIT)
    return [configMap(m, PROJECTOR_CONFIGMAP, 'projector.json', inline, label), retrieval];
  const rooms = (full['rooms'] as { roomId: string }[]).map((r) => ({ key: r.roomId, value: r }));
  const partners = (full['partners'] as { issuer: string; audience: string; azp: string }[]).map((p) => ({
    key: `${p.issuer}\u0000${p.audience}\u0000${p.azp}`,
    value: p,
  }));
  const texts = shardRegistry(rooms, partners);
  // Too large for every shard count: the inline object is returned and refused by the size check in
  // render (RegistryTooLarge), never a truncated registry.
  if (texts === undefined)
    return [configMap(m, PROJECTOR_CONFIGMAP, 'projector.json', inline, label), retrieval];
  const base = {
    ...full,
    rooms: [],
    partners: [],
    registry: { shards: texts.map((t, i) => ({ name: shardName(i), sha256: shardDigest(t) })) },
  };
  return [
    configMap(m, PROJECTOR_CONFIGMAP, 'projector.json', compact(base), label),
    ...texts.map((t, i) => configMap(m, shardName(i), REGISTRY_SHARD_KEY, t, label)),
    retrieval,
  ];
}

/** The apiserver limits a ConfigMap's data (keys + values) to 1 MiB. */
export const CONFIGMAP_DATA_LIMIT = 1_048_576;
export function configMapBytes(o: K8sObject): number {
  const data = (o as { data?: Record<string, string> }).data ?? {};
  return Object.entries(data).reduce((n, [k, v]) => n + utf8Length(k) + utf8Length(v), 0);
}
