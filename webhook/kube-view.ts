/**
 * The in-cluster ClusterView: list+watch informers (@kubernetes/client-node 1.4.0) over RetrievalAgents,
 * RetrievalRooms, PartnerClients, RetrievalPlatforms and kagent Agents. Lookups read a StaticClusterView
 * rebuilt lazily after any change, so a review never waits on the API server.
 */
import {
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  makeInformer,
} from '@kubernetes/client-node';
import type { Logger } from '../common/log.ts';
import type { ClusterView, KubeObject } from './rules/types.ts';
import { StaticClusterView } from './view.ts';

const SOURCES = [
  { group: 'retrieval.fgentic.dev', version: 'v1alpha1', plural: 'retrievalagents', kind: 'RetrievalAgent' },
  { group: 'retrieval.fgentic.dev', version: 'v1alpha1', plural: 'retrievalrooms', kind: 'RetrievalRoom' },
  { group: 'retrieval.fgentic.dev', version: 'v1alpha1', plural: 'partnerclients', kind: 'PartnerClient' },
  {
    group: 'retrieval.fgentic.dev',
    version: 'v1alpha1',
    plural: 'retrievalplatforms',
    kind: 'RetrievalPlatform',
  },
  { group: 'kagent.dev', version: 'v1alpha2', plural: 'agents', kind: 'Agent' },
] as const;

export class KubeClusterView implements ClusterView {
  private snapshot = new StaticClusterView();
  private dirty = true;
  private synced = 0;
  private readonly informers: Array<{
    list(): readonly KubernetesObject[];
    stop(): Promise<void>;
    apiVersion: string;
    kind: string;
  }> = [];

  constructor(
    private readonly kc: KubeConfig,
    private readonly log: Logger,
  ) {}

  async start(): Promise<void> {
    const api = this.kc.makeApiClient(CustomObjectsApi);
    for (const s of SOURCES) {
      const path = `/apis/${s.group}/${s.version}/${s.plural}`;
      const inf = makeInformer<KubernetesObject>(this.kc, path, () =>
        api.listClusterCustomObject({ group: s.group, version: s.version, plural: s.plural }),
      );
      const mark = () => {
        this.dirty = true;
      };
      inf.on('add', mark);
      inf.on('update', mark);
      inf.on('delete', mark);
      inf.on('error', () => {
        this.log.warn('informer error; restarting', { resource: s.plural });
        setTimeout(() => inf.start().catch(() => undefined), 3000).unref();
      });
      this.informers.push({
        list: () => inf.list(),
        stop: () => inf.stop(),
        apiVersion: `${s.group}/${s.version}`,
        kind: s.kind,
      });
      inf.start().then(
        () => {
          this.synced++;
          this.dirty = true;
        },
        () => this.log.warn('initial list failed', { resource: s.plural }),
      );
    }
  }

  ready(): boolean {
    return this.synced >= SOURCES.length;
  }

  async stop(): Promise<void> {
    await Promise.all(this.informers.map((i) => i.stop()));
  }

  private view(): StaticClusterView {
    if (this.dirty) {
      this.dirty = false;
      const objs: KubeObject[] = [];
      for (const inf of this.informers)
        for (const o of inf.list())
          objs.push({ ...(o as unknown as KubeObject), apiVersion: inf.apiVersion, kind: inf.kind });
      this.snapshot = new StaticClusterView(objs);
    }
    return this.snapshot;
  }

  retrievalAgent(namespace: string, name: string): KubeObject | undefined {
    return this.view().retrievalAgent(namespace, name);
  }
  agent(namespace: string, name: string): KubeObject | undefined {
    return this.view().agent(namespace, name);
  }
  platform(): KubeObject | undefined {
    return this.view().platform();
  }
  rooms(): readonly KubeObject[] {
    return this.view().rooms();
  }
  partners(): readonly KubeObject[] {
    return this.view().partners();
  }
}
