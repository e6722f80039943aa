/** The projector and retrieval registries as ConfigMaps, exactly as docs/interfaces.md describes them. */
import { isDirect, REPLICA_FIELDS, replicaSettings } from '../../rules/database.ts';
import { DEFAULT_LEDGER_TIMING, type LedgerTiming, ledgerTiming } from '../../rules/ledger.ts';
import type { K8sObject } from '../types.ts';
import { type Model, meta, platformOwner } from './model.ts';
import {
  CONFIGMAP_DATA_LIMIT,
  PROJECTOR_CONFIG_LABEL,
  PROJECTOR_CONFIGMAP,
  partnerRegistryKey,
  type RegistryContext,
  type RegistryEntry,
  registryObjects,
  roomEntry,
} from './registry.ts';

export { CONFIGMAP_DATA_LIMIT, PROJECTOR_CONFIG_LABEL, PROJECTOR_CONFIGMAP };

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
    ...renderedDatabase(m.platform.spec.database),
  };
}

/**
 * The replica settings, defaults filled in, only when they change something (no replica and no
 * pooler renders nothing, so such configurations stay as they were).
 */
function renderedDatabase(db: Record<string, unknown> | undefined): { database?: Record<string, unknown> } {
  const picked = Object.fromEntries(REPLICA_FIELDS.filter((k) => db?.[k] !== undefined).map((k) => [k, db?.[k]]));
  // The analysis refused invalid settings before rendering (controller/render/conflicts.ts).
  const s = replicaSettings(picked);
  return s === undefined || isDirect(s) ? {} : { database: { ...s, replicaUrls: [...s.replicaUrls] } };
}

function configMap(m: Model, name: string, key: string, text: string): K8sObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta(name, m.platform.spec.namespaces.retrieval, platformOwner(m.platform)),
    data: { [key]: text },
  };
}

// Compact JSON: 10,000 rooms pretty-printed would not fit where compact ones do.
const compact = (v: unknown): string => `${JSON.stringify(v)}\n`;

/** Where the registry goes and what `projector.json` says besides rooms and partners. */
export function registryContext(m: Model): RegistryContext {
  const md = meta(PROJECTOR_CONFIGMAP, m.platform.spec.namespaces.retrieval, platformOwner(m.platform), {
    [PROJECTOR_CONFIG_LABEL]: 'true',
  });
  return {
    namespace: md.namespace as string,
    labels: md.labels ?? {},
    ...(md.ownerReferences ? { ownerReferences: md.ownerReferences } : {}),
    base: { ...projectorConfig(m), rooms: [], partners: [] },
  };
}

/** The registry entries of the model's rooms and partners, in the registry's own form. */
export function registryEntries(m: Model): { rooms: RegistryEntry[]; partners: RegistryEntry[] } {
  const full = projectorConfig(m);
  return {
    rooms: m.rooms.map((r) => roomEntry(r.roomId, r.classifications)),
    partners: (full['partners'] as { issuer: string; audience: string; azp: string }[]).map((p) => ({
      key: partnerRegistryKey(p.issuer, p.audience, p.azp),
      text: JSON.stringify(p),
    })),
  };
}

/**
 * `fgentic-projector-config` (inline, or a manifest plus 256 shards: render/registry.ts) and
 * `fgentic-retrieval-config`. `tooLarge` names the registry ConfigMap that would exceed the 1 MiB
 * limit; the registry is then left out whole.
 */
export function renderServerConfig(
  m: Model,
  o: { registry?: boolean } = {},
): { objects: K8sObject[]; tooLarge?: string } {
  const retrieval = configMap(m, RETRIEVAL_CONFIGMAP, 'retrieval.json', compact(retrievalConfig(m)));
  if (o.registry === false) return { objects: [retrieval] };
  const { rooms, partners } = registryEntries(m);
  const reg = registryObjects(registryContext(m), rooms, partners);
  return { objects: [...reg.objects, retrieval], ...(reg.tooLarge ? { tooLarge: reg.tooLarge } : {}) };
}

export function configMapBytes(o: K8sObject): number {
  const data = (o as { data?: Record<string, string> }).data ?? {};
  return Object.entries(data).reduce((n, [k, v]) => n + Buffer.byteLength(k, 'utf8') + Buffer.byteLength(v, 'utf8'), 0);
}
