/**
 * What a reconcile pass reads and writes (the cluster's side of `reconcile.ts`), what it reports,
 * and the two reads every step shares: the platform in force and the Secrets read by name.
 */

import type { ItemBackoff } from './backoff.ts';
import type { SecretReader } from './kube/mcp-keys.ts';
import type { Model } from './render/model.ts';
import type { Conflict, K8sObject, OwnKind, OwnResource, RetrievalPlatform } from './types.ts';
import type { UpstreamFacts, UpstreamVerdict } from './upstream.ts';

/** The writes (and the few reads no cache holds) a pass makes; KubeClient implements it. */
export interface ClusterWriter {
  /** Server-side apply; resolves to the object as stored (its uid names it in owner references). */
  apply(obj: K8sObject): Promise<K8sObject>;
  /** Deletes; resolves to false when the object did not exist. */
  delete(obj: K8sObject): Promise<boolean>;
  /** Merge-patches status; resolves to the stored object when the API returns it. */
  patchStatus(res: OwnResource, status: Record<string, unknown>): Promise<K8sObject | undefined>;
  event(res: OwnResource, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void>;
  readSecretKey(namespace: string, name: string, key: string): Promise<string | undefined>;
  /**
   * One MCP key mirror, read by its fixed name (kube/mcp-keys.ts `mirrorName`) in the gateway
   * namespace; undefined when it does not exist. Nothing watches the mirrors: a pass reads one only
   * when it does not know what the live mirror holds (after a resync, in a new term).
   */
  readMirror(namespace: string, name: string): Promise<K8sObject | undefined>;
  /** The kagent and agentgateway APIs the cluster serves. */
  upstream(): Promise<UpstreamFacts>;
}

/**
 * What a pass reads: our four kinds and the live rendered objects (label-selected), from caches.
 * Objects are never changed in place: a change is a new object, as the informer caches store every
 * watch event and write-through. The reconciler's memos recognise unchanged objects by identity.
 */
export interface ClusterState {
  own<T extends OwnResource>(kind: OwnKind): T[];
  /** One of our resources by name, from its cache (constant time: per-key work looks up one). */
  ownOne?<T extends OwnResource>(kind: OwnKind, namespace: string | undefined, name: string): T | undefined;
  /**
   * Live rendered objects of one kind where the controller may delete them (kube/client.ts
   * `RENDERED_KINDS` scopes), or undefined when that cache is not synced: nothing of it is pruned.
   */
  rendered(apiVersion: string, kind: string): K8sObject[] | undefined;
  /** One live rendered object (undefined when absent or not cached). */
  live(apiVersion: string, kind: string, namespace: string | undefined, name: string): K8sObject | undefined;
  /** Write-through after a successful write, so the next pass sees it before the watch event. */
  stored?(obj: K8sObject): void;
  removed?(obj: K8sObject): void;
}

export interface ReconcileResult {
  /** Objects written by server-side apply in this pass. */
  applied: number;
  /** Desired objects whose live copy already matched (no request made). */
  unchanged: number;
  pruned: number;
  /** Status subresource patches written. */
  statusWrites: number;
  conflicts: Conflict[];
  errors: string[];
  /** Set when the upstream is unsupported: nothing was applied or pruned. */
  unsupported?: UpstreamVerdict;
  /** The conditions this pass computed for every resource (what their status says once written). */
  conditions: {
    kind: OwnResource['kind'];
    type: string;
    status: 'True' | 'False' | 'Unknown';
    reason: string;
  }[];
  /** Epoch ms when the earliest failed object may be retried; undefined when nothing is failing. */
  retryAt?: number;
  /** Wall time of each stage of the pass, in ms (`PASS_STAGES`). */
  stages: Record<PassStage, number>;
  /** Retrieval Agents whose objects were rendered in this pass (all of them without `incremental`). */
  agentsRendered: number;
}

/** The stages of a pass, in order, as `ReconcileResult.stages` and the stage metric name them. */
export const PASS_STAGES = ['upstream', 'render', 'compare', 'apply', 'mirror', 'prune', 'status'] as const;
export type PassStage = (typeof PASS_STAGES)[number];

export interface ReconcilerOptions {
  /** Applies and deletes in flight at once (default 8). */
  concurrency?: number;
  now?: () => Date;
  backoff?: ItemBackoff;
  /**
   * Render only what the changed resources affect and remember hashes and comparisons of unchanged
   * objects (default true). False renders, hashes and compares everything on every pass: kept so the
   * benchmark can run both side by side.
   */
  incremental?: boolean;
  /** The registry sync (registry-sync.ts); without it the pass renders and applies the registry itself. */
  registry?: RegistryHooks;
}

/**
 * The registry's own work (registry-sync.ts): when given, the pass leaves rooms and the registry
 * ConfigMaps to it, hands it the model after each render, and reports its RegistryTooLarge.
 */
export interface RegistryHooks {
  onModel(model: Model | undefined): void;
  owns(o: { kind: string; metadata: { name: string } }): boolean;
  tooLarge(): string | undefined;
}

/**
 * The RetrievalPlatform every step uses: the one live platform named `default`, if it is the only
 * one so named. The render applies the same rule (render/conflicts.ts) and refuses anything else, so
 * the JWKS read, Events and the render can never look at different platforms.
 */
export function selectPlatform(platforms: RetrievalPlatform[]): RetrievalPlatform | undefined {
  const named = platforms.filter((p) => p.metadata.name === 'default' && !p.metadata.deletionTimestamp);
  return named.length === 1 ? named[0] : undefined;
}

/** Reads of Secrets, remembered until `forget` (a changed RetrievalAgent or platform, or a full resync). */
export class SecretCache implements SecretReader {
  private readonly values = new Map<string, string | undefined>();
  reads = 0;
  constructor(private readonly api: SecretReader) {}

  async readSecretKey(namespace: string, name: string, key: string): Promise<string | undefined> {
    const k = `${namespace}/${name}/${key}`;
    if (this.values.has(k)) return this.values.get(k);
    this.reads++;
    const v = await this.api.readSecretKey(namespace, name, key);
    // A missing key is read again next pass: it may be created any moment and nothing watches it.
    if (v !== undefined) this.values.set(k, v);
    return v;
  }

  forget(namespace?: string, name?: string): void {
    if (namespace === undefined) {
      this.values.clear();
      return;
    }
    for (const k of [...this.values.keys()])
      if (k.startsWith(`${namespace}/${name === undefined ? '' : `${name}/`}`)) this.values.delete(k);
  }
}
