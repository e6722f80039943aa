/** Types of the four `retrieval.fgentic.dev/v1alpha1` resources (docs/interfaces.md) and rendered objects. */
import type { CapabilityMode } from '../rules/ledger.ts';

export { API_VERSION, GROUP, VERSION } from '../rules/wire.ts';
export const FIELD_MANAGER = 'fgentic-retrieval';

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
  deletionTimestamp?: string;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export interface SecretKeyRef {
  name: string;
  key: string;
}

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime?: string;
}

export interface ResourceStatus {
  observedGeneration?: number;
  conditions?: Condition[];
}

export type Classifications = ['public'] | ['approved_non_public', 'public'];

export interface Skill {
  id: string;
  name: string;
  description?: string;
  tags?: string[];
}

export interface RetrievalAgentSpec {
  description?: string;
  modelConfig: string;
  systemMessage: string;
  skills?: Skill[];
  mcpApiKeySecretRef: SecretKeyRef;
  rateLimit?: { requestsPerMinute?: number };
  public?: boolean;
}

export interface RetrievalRoomSpec {
  roomId: string;
  allowedClassifications?: string[];
  agreementRef?: string;
  description?: string;
}

export interface AgentRef {
  namespace: string;
  name: string;
}

export interface PartnerClientSpec {
  issuer: string;
  audience: string;
  azp: string;
  policyId: string;
  groups: string[];
  allowedClassifications?: string[];
  agreementRef?: string;
  agents?: AgentRef[];
}

export interface RetrievalPlatformSpec {
  gateway: {
    name: string;
    namespace: string;
    localListener: string;
    publicListener?: string;
    /** Listener of the MCP route; default localListener (kagent's proxy.url sends MCP to the proxy's :8080). */
    mcpListener?: string;
    /** Base URL of the proxy for the RemoteMCPServer; default http://<name>.<namespace>.svc.cluster.local:8080 */
    mcpUrl?: string;
    proxyPodLabels?: Record<string, string>;
  };
  namespaces: { retrieval: string; kagent: string; gateway: string };
  bridge: {
    workload: string;
    apiKeySecretRef: SecretKeyRef;
    localServer: string;
    serviceUserRegex: string;
    bridgedOrigins?: { network: string; userIdRegex: string }[];
  };
  localGroups?: string[];
  publicRetrievalTimeoutSeconds?: number;
  jwt?: { issuer: string; jwksSecretRef?: SecretKeyRef; jwksUri?: string };
  projector?: { service?: string; port?: number };
  retrieval?: { service?: string; port?: number };
  embeddings: { url: string; model: string; profile: string; tokenSecretRef?: SecretKeyRef };
  a2aBackend?: 'controller' | 'agentService';
  /** How projections are trusted (docs/ledger.md); absent means plain. */
  capability?: CapabilityMode;
  /** Ledger timing (rules/ledger.ts); absent fields take their defaults. */
  ledger?: { recordDeadlineMilliseconds?: number; mintWindowMilliseconds?: number };
  liveRoomCheck?: { enabled?: boolean; homeserverUrl?: string; tokenSecretRef?: SecretKeyRef };
  database?: {
    namespace?: string;
    podLabels?: Record<string, string>;
    port?: number;
    replicaUrls?: string[];
    maxReplicaLagMilliseconds?: number;
    pooler?: string;
  };
  observability?: { namespace?: string; podLabels?: Record<string, string>; ports?: number[] };
}

export interface Resource<K extends string, S> {
  apiVersion: string;
  kind: K;
  metadata: ObjectMeta;
  spec: S;
  status?: ResourceStatus;
}

export type RetrievalAgent = Resource<'RetrievalAgent', RetrievalAgentSpec>;
export type RetrievalRoom = Resource<'RetrievalRoom', RetrievalRoomSpec>;
export type PartnerClient = Resource<'PartnerClient', PartnerClientSpec>;
export type RetrievalPlatform = Resource<'RetrievalPlatform', RetrievalPlatformSpec>;
export type OwnResource = RetrievalAgent | RetrievalRoom | PartnerClient | RetrievalPlatform;
export const OWN_KINDS = ['RetrievalPlatform', 'RetrievalAgent', 'RetrievalRoom', 'PartnerClient'] as const;
export type OwnKind = (typeof OWN_KINDS)[number];

/**
 * Everything the pure render reads. `jwksInline` is the JWKS the adapter resolved from
 * `jwt.jwksSecretRef`; `jwksProblem` says, content-free, why it could not (the platform's
 * `JwksUnresolved` conflict carries it).
 */
export interface Resources {
  platforms: RetrievalPlatform[];
  agents: RetrievalAgent[];
  rooms: RetrievalRoom[];
  partners: PartnerClient[];
  jwksInline?: string;
  jwksProblem?: string;
}

/** A resource that renders nothing, with the reason surfaced as its `Conflict` condition. */
export interface Conflict {
  kind: OwnKind;
  namespace?: string;
  name: string;
  reason: string;
  message: string;
}

export interface RenderResult {
  objects: K8sObject[];
  conflicts: Conflict[];
}

export function resourceKey(r: { kind: string; metadata: { namespace?: string; name: string } }): string {
  return `${r.kind}/${r.metadata.namespace ?? ''}/${r.metadata.name}`;
}
