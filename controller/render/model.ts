/** Normalised, defaulted view of the resources that survived conflict detection; shared by the renderers. */

import {
  partnerKey as clientKey,
  MANAGED_BY_LABEL,
  PROJECT,
  PROJECT_LABELS,
  RENDERED_LABEL,
  RETRIEVAL_SERVER,
  RETRIEVAL_TOOL,
} from '../../rules/index.ts';
import type {
  AgentRef,
  Classifications,
  K8sObject,
  OwnerReference,
  PartnerClient,
  RetrievalAgent,
  RetrievalPlatform,
  RetrievalPlatformSpec,
  RetrievalRoom,
} from '../types.ts';
import { API_VERSION } from '../types.ts';

export { AGENT_POD_LABEL, MCP_KEY_LABEL, RENDERED_LABEL, ROLE_LABEL } from '../../rules/index.ts';

export const MANAGED_LABELS = { ...PROJECT_LABELS, [RENDERED_LABEL]: 'true' } as const;
export const PRUNE_SELECTOR = `${MANAGED_BY_LABEL}=${PROJECT},${RENDERED_LABEL}=true`;

export const MCP_ROUTE_PATH = '/mcp/knowledge-retrieval';
export const MCP_TOOL = RETRIEVAL_TOOL;
export const REMOTE_MCP_SERVER = RETRIEVAL_SERVER;
export const KAGENT_CONTROLLER = { service: 'kagent-controller', port: 8083 } as const;
export const AGENT_PORT = 8080;

export interface Platform {
  name: string;
  uid?: string;
  spec: RetrievalPlatformSpec;
  timeout: number;
  a2aBackend: 'controller' | 'agentService';
  projector: { service: string; port: number };
  retrieval: { service: string; port: number };
  proxyPodLabels: Record<string, string>;
  mcpListener: string;
  mcpUrl: string;
  jwks?: { inline: string } | { service: string; namespace: string; port: number; path: string; tls: boolean };
}

export interface Agent {
  namespace: string;
  name: string;
  uid?: string;
  res: RetrievalAgent;
  rpm: number;
  public: boolean;
  localPath: string;
  publicPath: string;
  /** Partners bound to this agent that render (sorted by issuer/audience/azp). */
  partners: Partner[];
}

export interface Partner {
  name: string;
  res: PartnerClient;
  classifications: Classifications;
  agents: AgentRef[];
}

export interface Room {
  name: string;
  res: RetrievalRoom;
  roomId: string;
  classifications: Classifications;
}

export interface Model {
  platform: Platform;
  platformRes: RetrievalPlatform;
  agents: Agent[];
  rooms: Room[];
  partners: Partner[];
}

export function workloadOf(a: { namespace: string; name: string }): string {
  return `${a.namespace}/${a.name}`;
}

export function meta(
  name: string,
  namespace: string | undefined,
  owner: OwnerReference | undefined,
  extraLabels: Record<string, string> = {},
): K8sObject['metadata'] {
  return {
    name,
    ...(namespace !== undefined ? { namespace } : {}),
    labels: { ...MANAGED_LABELS, ...extraLabels },
    ...(owner ? { ownerReferences: [owner] } : {}),
  };
}

export function platformOwner(p: Platform): OwnerReference | undefined {
  return p.uid
    ? {
        apiVersion: API_VERSION,
        kind: 'RetrievalPlatform',
        name: p.name,
        uid: p.uid,
        controller: true,
        blockOwnerDeletion: true,
      }
    : undefined;
}

export function agentOwner(a: Agent): OwnerReference | undefined {
  return a.uid
    ? {
        apiVersion: API_VERSION,
        kind: 'RetrievalAgent',
        name: a.name,
        uid: a.uid,
        controller: true,
        blockOwnerDeletion: true,
      }
    : undefined;
}

export function cmpStr(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The registry key of a PartnerClient (rules/partners.ts). */
export function partnerKey(p: PartnerClient): string {
  return clientKey(p.spec.issuer, p.spec.audience, p.spec.azp);
}

/** Parses `http(s)://<svc>.<ns>.svc[.cluster.local][:port]/path` into a Service reference. */
export function serviceFromUrl(
  url: string,
): { service: string; namespace: string; port: number; path: string; tls: boolean } | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(\.cluster\.local)?$/.exec(
    u.hostname,
  );
  if (!m || (u.protocol !== 'http:' && u.protocol !== 'https:')) return undefined;
  const tls = u.protocol === 'https:';
  const port = u.port ? Number(u.port) : tls ? 443 : 80;
  return { service: m[1] as string, namespace: m[3] as string, port, path: u.pathname || '/', tls };
}

export function urlPort(url: string): number | undefined {
  try {
    const u = new URL(url);
    return u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  } catch {
    return undefined;
  }
}
