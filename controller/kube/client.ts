/**
 * Thin adapter over @kubernetes/client-node 1.4.0 (docs/upstream.md#deps-kubernetes-client): server-side apply under
 * one field manager, list/delete of rendered objects by label, status merge patches, Events, Secrets.
 */
import * as k8s from '@kubernetes/client-node';
import { type RawRequest, type RequestLimiter, type RequestPolicy, requestJson } from '../../common/kube-request.ts';
import { kindInfo } from '../../crds/schema.ts';
import { PRUNE_SELECTOR } from '../render/model.ts';
import {
  API_VERSION,
  FIELD_MANAGER,
  GROUP,
  type K8sObject,
  type OwnKind,
  type OwnResource,
  VERSION,
} from '../types.ts';
import type { UpstreamFacts } from '../upstream.ts';
import { readUpstream } from './discovery.ts';
import { collectionPath } from './raw.ts';

/**
 * Where the controller may write objects of a rendered kind (deploy/base/rbac-controller.yaml), and
 * so where it watches and prunes them: `cluster` for the kinds its ClusterRole writes in every
 * namespace; `retrieval` for ConfigMaps, which it may write only in the retrieval namespace the
 * RetrievalPlatform names (a namespaced Role there). A label selector is not an authorization
 * boundary: a labelled object outside that scope is never cached, so never pruned.
 */
export type RenderedScope = 'cluster' | 'retrieval';

export interface RenderedKind {
  apiVersion: string;
  kind: string;
  plural: string;
  scope: RenderedScope;
}

/** Every kind the render can produce (the informers cache these by label; pruning reads them). */
export const RENDERED_KINDS: readonly RenderedKind[] = [
  { apiVersion: 'v1', kind: 'ConfigMap', plural: 'configmaps', scope: 'retrieval' },
  { apiVersion: 'networking.k8s.io/v1', kind: 'NetworkPolicy', plural: 'networkpolicies', scope: 'cluster' },
  {
    apiVersion: 'gateway.networking.k8s.io/v1beta1',
    kind: 'ReferenceGrant',
    plural: 'referencegrants',
    scope: 'cluster',
  },
  { apiVersion: 'gateway.networking.k8s.io/v1', kind: 'HTTPRoute', plural: 'httproutes', scope: 'cluster' },
  {
    apiVersion: 'agentgateway.dev/v1alpha1',
    kind: 'AgentgatewayBackend',
    plural: 'agentgatewaybackends',
    scope: 'cluster',
  },
  {
    apiVersion: 'agentgateway.dev/v1alpha1',
    kind: 'AgentgatewayPolicy',
    plural: 'agentgatewaypolicies',
    scope: 'cluster',
  },
  {
    apiVersion: 'kagent.dev/v1alpha2',
    kind: 'RemoteMCPServer',
    plural: 'remotemcpservers',
    scope: 'cluster',
  },
  { apiVersion: 'kagent.dev/v1alpha2', kind: 'Agent', plural: 'agents', scope: 'cluster' },
];

/** Kinds the controller writes: the rendered kinds and the MCP key mirrors. */
const WRITTEN_KINDS = [...RENDERED_KINDS, { apiVersion: 'v1', kind: 'Secret', plural: 'secrets' }];

export function pluralOf(apiVersion: string, kind: string): string {
  const k = WRITTEN_KINDS.find((x) => x.apiVersion === apiVersion && x.kind === kind);
  if (!k) throw new Error(`not a kind the controller writes: ${apiVersion} ${kind}`);
  return k.plural;
}

function objectPath(o: K8sObject): string {
  return `${collectionPath(o.apiVersion, pluralOf(o.apiVersion, o.kind), o.metadata.namespace)}/${encodeURIComponent(o.metadata.name)}`;
}

export function isNotFound(e: unknown): boolean {
  return (e as { code?: number })?.code === 404;
}

/** Thrown instead of sending a write when the fence refuses it (a leadership term no longer held). */
export class FencedError extends Error {
  readonly fenced = true;
}

export interface KubeClientOptions {
  /** Every request waits on it (kube/rate-limit.ts). */
  limiter?: RequestLimiter;
  /** Checked before every write is sent: throws to refuse it (controller/leader.ts). */
  fence?: () => void;
}

/** A write's urgency: 0 (`URGENT`, the registry and heartbeat) is let through the limiter first. */
export interface WriteOptions {
  priority?: number;
}

export class KubeClient {
  readonly objects: k8s.KubernetesObjectApi;
  readonly coordination: k8s.CoordinationV1Api;
  limiter: RequestLimiter | undefined;
  fence: (() => void) | undefined;

  constructor(
    readonly kc: k8s.KubeConfig,
    o: KubeClientOptions = {},
  ) {
    this.objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    this.coordination = kc.makeApiClient(k8s.CoordinationV1Api);
    this.limiter = o.limiter;
    this.fence = o.fence;
  }

  /** Every request: through the limiter (429 and Retry-After honoured); writes through the fence too. */
  private request<T>(r: RawRequest, write: boolean, o: WriteOptions = {}): Promise<T> {
    const policy: RequestPolicy = {
      ...(this.limiter ? { limiter: this.limiter } : {}),
      ...(write && this.fence ? { fence: this.fence } : {}),
      priority: o.priority ?? 1,
    };
    return requestJson<T>(this.kc, r, policy);
  }

  /** Served kagent/agentgateway APIs (discovery + OpenAPI; no RBAC needed). */
  upstream(): Promise<UpstreamFacts> {
    return readUpstream(this.kc);
  }

  async listOwn<T extends OwnResource>(kind: OwnKind): Promise<T[]> {
    const list = await this.objects.list(API_VERSION, kind);
    return (list.items as unknown as T[]).map((o) => ({ ...o, apiVersion: API_VERSION, kind }));
  }

  /** Server-side apply as plain JSON (common/kube-request.ts says why not through the typed client). */
  async apply(obj: K8sObject, o?: WriteOptions): Promise<K8sObject> {
    const stored = await this.request<K8sObject>(
      {
        method: 'PATCH',
        path: objectPath(obj),
        query: { fieldManager: FIELD_MANAGER, force: 'true' },
        body: obj,
        contentType: 'application/apply-patch+yaml',
      },
      true,
      o,
    );
    return { ...stored, apiVersion: obj.apiVersion, kind: obj.kind };
  }

  /** Rendered objects of one kind, cluster-wide or in one namespace, exactly as the API stores them. */
  async listRendered(apiVersion: string, kind: string, namespace?: string): Promise<K8sObject[]> {
    const plural = pluralOf(apiVersion, kind);
    const list = await this.request<{ items?: K8sObject[] }>(
      {
        method: 'GET',
        path: collectionPath(apiVersion, plural, namespace),
        query: { labelSelector: PRUNE_SELECTOR },
      },
      false,
    );
    return (list.items ?? []).map((o) => ({ ...o, apiVersion, kind }));
  }

  async delete(obj: K8sObject, o?: WriteOptions): Promise<boolean> {
    try {
      await this.request(
        { method: 'DELETE', path: objectPath(obj), query: { propagationPolicy: 'Background' } },
        true,
        o,
      );
      return true;
    } catch (e) {
      if (!isNotFound(e)) throw e;
      return false;
    }
  }

  /** Merge-patches the status subresource; resolves to the object as stored. */
  async patchStatus(res: OwnResource, status: Record<string, unknown>, o?: WriteOptions): Promise<K8sObject> {
    const info = kindInfo(res.kind);
    if (!info) throw new Error(`unknown kind ${res.kind}`);
    const ns = info.scope === 'Cluster' ? undefined : (res.metadata.namespace as string);
    const stored = await this.request<K8sObject>(
      {
        method: 'PATCH',
        path: `${collectionPath(`${GROUP}/${VERSION}`, info.plural, ns)}/${encodeURIComponent(res.metadata.name)}/status`,
        body: { status },
        contentType: 'application/merge-patch+json',
      },
      true,
      o,
    );
    return stored;
  }

  async event(res: OwnResource, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const namespace = res.metadata.namespace ?? 'default';
    const now = new Date().toISOString();
    await this.request(
      {
        method: 'POST',
        path: collectionPath('v1', 'events', namespace),
        body: {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { generateName: `${res.metadata.name}.`, namespace },
          involvedObject: {
            apiVersion: API_VERSION,
            kind: res.kind,
            name: res.metadata.name,
            ...(res.metadata.namespace ? { namespace: res.metadata.namespace } : {}),
            ...(res.metadata.uid ? { uid: res.metadata.uid } : {}),
          },
          type,
          reason,
          message: message.slice(0, 1024),
          source: { component: FIELD_MANAGER },
          reportingComponent: FIELD_MANAGER,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      },
      true,
      { priority: 2 },
    );
  }

  /** One Secret by name (`get` with `resourceNames`: never listed); undefined when it does not exist. */
  private async getSecret(namespace: string, name: string): Promise<K8sObject | undefined> {
    try {
      const s = await this.request<K8sObject>(
        { method: 'GET', path: `${collectionPath('v1', 'secrets', namespace)}/${encodeURIComponent(name)}` },
        false,
      );
      return { ...s, apiVersion: 'v1', kind: 'Secret' };
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  async readSecretKey(namespace: string, name: string, key: string): Promise<string | undefined> {
    const s = (await this.getSecret(namespace, name)) as { data?: Record<string, string> } | undefined;
    const v = s?.data?.[key];
    return v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
  }

  /** An MCP key mirror by its fixed name (controller/cluster.ts `ClusterWriter.readMirror`). */
  readMirror(namespace: string, name: string): Promise<K8sObject | undefined> {
    return this.getSecret(namespace, name);
  }
}

/** Our four kinds, as the informers list and watch them. */
export const OWN_KINDS_INFO: { apiVersion: string; kind: OwnKind; plural: string }[] = [
  { apiVersion: API_VERSION, kind: 'RetrievalPlatform', plural: 'retrievalplatforms' },
  { apiVersion: API_VERSION, kind: 'RetrievalAgent', plural: 'retrievalagents' },
  { apiVersion: API_VERSION, kind: 'RetrievalRoom', plural: 'retrievalrooms' },
  { apiVersion: API_VERSION, kind: 'PartnerClient', plural: 'partnerclients' },
];
