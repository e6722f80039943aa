/** The projector and retrieval registries as ConfigMaps, exactly as docs/interfaces.md describes them. */
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
  };
}

export function retrievalConfig(m: Model): Record<string, unknown> {
  const e = m.platform.spec.embeddings;
  return {
    version: 1,
    agents: m.agents.map((a) => ({ namespace: a.namespace, name: a.name })),
    embeddings: { profile: e.profile, url: e.url, model: e.model, tokenFile: EMBEDDINGS_TOKEN_FILE },
    allowedOrigins: [],
  };
}

function configMap(m: Model, name: string, key: string, data: unknown): K8sObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta(name, m.platform.spec.namespaces.retrieval, platformOwner(m.platform)),
    // Compact: 10,000 rooms stay under the 1 MiB ConfigMap limit (pretty-printed they would not).
    data: { [key]: `${JSON.stringify(data)}\n` },
  };
}

export function renderServerConfig(m: Model): K8sObject[] {
  return [
    configMap(m, PROJECTOR_CONFIGMAP, 'projector.json', projectorConfig(m)),
    configMap(m, RETRIEVAL_CONFIGMAP, 'retrieval.json', retrievalConfig(m)),
  ];
}

/** The apiserver limits a ConfigMap's data (keys + values) to 1 MiB. */
export const CONFIGMAP_DATA_LIMIT = 1_048_576;
const utf8 = new TextEncoder();

export function configMapBytes(o: K8sObject): number {
  const data = (o as { data?: Record<string, string> }).data ?? {};
  return Object.entries(data).reduce((n, [k, v]) => n + utf8.encode(k).length + utf8.encode(v).length, 0);
}
