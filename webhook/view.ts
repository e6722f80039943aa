/**
 * The ClusterView over a fixed set of objects: the offline file set of the CLI, test fixtures, or a
 * snapshot of the in-cluster caches. Pure.
 */
import {
  type ClusterView,
  field,
  KAGENT_GROUP,
  type KubeObject,
  nameOf,
  namespaceOf,
  partnerKey,
  RETRIEVAL_GROUP,
  str,
} from './rules/types.ts';

export function groupOf(o: KubeObject): string {
  const av = str(o, 'apiVersion') ?? '';
  const slash = av.indexOf('/');
  return slash < 0 ? '' : av.slice(0, slash);
}

export function versionOf(o: KubeObject): string {
  const av = str(o, 'apiVersion') ?? '';
  return av.slice(av.indexOf('/') + 1);
}

function key(ns: string, name: string): string {
  return `${ns}/${name}`;
}

function push(index: Map<string, KubeObject[]>, key: string, o: KubeObject): void {
  const list = index.get(key);
  if (list) list.push(o);
  else index.set(key, [o]);
}

export class StaticClusterView implements ClusterView {
  private readonly retrievalAgents = new Map<string, KubeObject>();
  private readonly agents = new Map<string, KubeObject>();
  private readonly roomList: KubeObject[] = [];
  private readonly partnerList: KubeObject[] = [];
  private platformObj: KubeObject | undefined;
  private readonly roomIndex = new Map<string, KubeObject[]>();
  private readonly partnerIndex = new Map<string, KubeObject[]>();

  constructor(objects: Iterable<KubeObject> = []) {
    for (const o of objects) this.add(o);
  }

  add(o: KubeObject): void {
    const kind = str(o, 'kind');
    const group = groupOf(o);
    if (group === RETRIEVAL_GROUP) {
      if (kind === 'RetrievalAgent') this.retrievalAgents.set(key(namespaceOf(o), nameOf(o)), o);
      else if (kind === 'RetrievalRoom') {
        this.roomList.push(o);
        push(this.roomIndex, str(field(o, 'spec'), 'roomId') ?? '', o);
      } else if (kind === 'PartnerClient') {
        this.partnerList.push(o);
        const spec = field(o, 'spec');
        push(
          this.partnerIndex,
          partnerKey(str(spec, 'issuer') ?? '', str(spec, 'audience') ?? '', str(spec, 'azp') ?? ''),
          o,
        );
      } else if (kind === 'RetrievalPlatform' && nameOf(o) === 'default') this.platformObj = o;
    } else if (group === KAGENT_GROUP && kind === 'Agent') {
      this.agents.set(key(namespaceOf(o), nameOf(o)), o);
    }
  }

  retrievalAgent(namespace: string, name: string): KubeObject | undefined {
    return this.retrievalAgents.get(key(namespace, name));
  }
  retrievalAgentCount(): number {
    return this.retrievalAgents.size;
  }
  agent(namespace: string, name: string): KubeObject | undefined {
    return this.agents.get(key(namespace, name));
  }
  platform(): KubeObject | undefined {
    return this.platformObj;
  }
  rooms(): readonly KubeObject[] {
    return this.roomList;
  }
  partners(): readonly KubeObject[] {
    return this.partnerList;
  }
  roomsWithId(roomId: string): readonly KubeObject[] {
    return this.roomIndex.get(roomId) ?? [];
  }
  partnersWithKey(issuer: string, audience: string, azp: string): readonly KubeObject[] {
    return this.partnerIndex.get(partnerKey(issuer, audience, azp)) ?? [];
  }
}
