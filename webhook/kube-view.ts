/**
 * The in-cluster ClusterView: list+watch informers (@kubernetes/client-node 1.4.0) over RetrievalAgents,
 * RetrievalRooms, PartnerClients, RetrievalPlatforms and kagent Agents. Lookups read a StaticClusterView
 * rebuilt lazily after any change, so a review never waits on the API server.
 */
import { CustomObjectsApi, type KubeConfig, type KubernetesObject, makeInformer } from '@kubernetes/client-node';
import { errorFields } from '../common/error-fields.ts';
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
  /** RetrievalAgents confirmed by a live GET before the informer delivered them (expire after 30 s). */
  private readonly confirmed = new Map<string, { obj: KubeObject; until: number }>();
  private api: CustomObjectsApi | undefined;
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
    this.api = api;
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
    const cached = this.view().retrievalAgent(namespace, name);
    if (cached) return cached;
    const key = `${namespace}/${name}`;
    const c = this.confirmed.get(key);
    if (c && c.until > Date.now()) return c.obj;
    if (c) this.confirmed.delete(key);
    return undefined;
  }

  /**
   * Informer lag: the reconciler renders an Agent right after it sees a new RetrievalAgent, possibly
   * before this cache has it. A live GET settles it; true when the RetrievalAgent exists.
   */
  async confirmRetrievalAgent(namespace: string, name: string, timeoutMs = 1500): Promise<boolean> {
    if (!this.api || namespace === '' || name === '') return false;
    const get = this.api
      .getNamespacedCustomObject({
        group: 'retrieval.fgentic.dev',
        version: 'v1alpha1',
        namespace,
        plural: 'retrievalagents',
        name,
      })
      .then((o: unknown) => o as KubeObject);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), timeoutMs);
    });
    try {
      const obj = await Promise.race([get, timeout]);
      if (!obj) return false;
      this.confirmed.set(`${namespace}/${name}`, {
        obj: { ...obj, apiVersion: 'retrieval.fgentic.dev/v1alpha1', kind: 'RetrievalAgent' },
        until: Date.now() + 30_000,
      });
      return true;
    } catch (err) {
      // Not confirmed, so the caller treats the agent as unknown (fail closed); say why in the log.
      this.log.warn('RetrievalAgent lookup failed', errorFields(err));
      return false;
    } finally {
      clearTimeout(timer);
      get.catch(() => undefined);
    }
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
  retrievalAgentCount(): number {
    return this.view().retrievalAgentCount();
  }
  roomsWithId(roomId: string): readonly KubeObject[] {
    return this.view().roomsWithId(roomId);
  }
  partnersWithKey(issuer: string, audience: string, azp: string): readonly KubeObject[] {
    return this.view().partnersWithKey(issuer, audience, azp);
  }
}
