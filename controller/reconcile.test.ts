/**
 * The reconciler's decisions over an in-memory cluster (the writes it makes, counted): which platform
 * every step uses, no write when nothing changed, one shard + manifest + status for one room in a
 * sharded registry, re-apply of an object edited behind the controller's back, and no pruning while
 * an object is failing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ItemBackoff } from './backoff.ts';
import {
  type ClusterState,
  type ClusterWriter,
  covers,
  DESIRED_HASH,
  Reconciler,
  selectPlatform,
  upToDate,
  withHash,
} from './reconcile.ts';
import { agent, examples, room } from './testsupport/fixtures.ts';
import { kagent09 } from './testsupport/upstreams.ts';
import type { K8sObject, OwnKind, OwnResource, Resources, RetrievalPlatform } from './types.ts';
import type { UpstreamFacts } from './upstream.ts';

const MCP_KEY = 'Bearer mcp-key-0123456789abcdef';

function supportedFacts(): UpstreamFacts {
  const p = kagent09();
  const groups: UpstreamFacts['groups'] = {};
  for (const k of p.kinds) {
    const [g, v] = k.apiVersion.split('/') as [string, string];
    const versions = groups[g] ?? [];
    groups[g] = versions;
    let served = versions.find((x) => x.version === v);
    if (!served) {
      served = { version: v, resources: [] };
      versions.push(served);
    }
    served.resources.push(k.plural);
  }
  return { groups, ...(p.agentSchema ? { kagentAgentSchema: p.agentSchema } : {}) };
}

const key = (o: { apiVersion: string; kind: string; metadata: { namespace?: string; name: string } }) =>
  `${o.apiVersion}|${o.kind}|${o.metadata.namespace ?? ''}|${o.metadata.name}`;

/** A cluster in memory: stores what is applied (with a uid), counts every write and Secret read. */
class MemoryCluster implements ClusterWriter, ClusterState {
  readonly objects = new Map<string, K8sObject>();
  readonly writes: string[] = [];
  readonly reads: string[] = [];
  readonly failing = new Set<string>();
  private n = 0;
  constructor(private readonly input: Resources) {
    let i = 0;
    for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners]) {
      r.metadata.uid ??= `uid-own-${i++}`;
      r.metadata.generation ??= 1;
    }
  }
  own<T extends OwnResource>(kind: OwnKind): T[] {
    const by: Record<OwnKind, OwnResource[]> = {
      RetrievalPlatform: this.input.platforms,
      RetrievalAgent: this.input.agents,
      RetrievalRoom: this.input.rooms,
      PartnerClient: this.input.partners,
    };
    return by[kind] as T[];
  }
  rendered(apiVersion: string, kind: string): K8sObject[] {
    return [...this.objects.values()].filter((o) => o.apiVersion === apiVersion && o.kind === kind);
  }
  live(apiVersion: string, kind: string, namespace: string | undefined, name: string): K8sObject | undefined {
    return this.objects.get(`${apiVersion}|${kind}|${namespace ?? ''}|${name}`);
  }
  async apply(o: K8sObject): Promise<K8sObject> {
    this.writes.push(`apply ${o.kind} ${o.metadata.name}`);
    if (this.failing.has(o.metadata.name)) throw new Error('HTTP 500 InternalError');
    const prev = this.objects.get(key(o));
    const stored = structuredClone({
      ...o,
      metadata: { ...o.metadata, uid: prev?.metadata.uid ?? `uid-${this.n++}` },
    });
    this.objects.set(key(o), stored);
    return stored;
  }
  async delete(o: K8sObject): Promise<boolean> {
    this.writes.push(`delete ${o.kind} ${o.metadata.name}`);
    return this.objects.delete(key(o));
  }
  async patchStatus(res: OwnResource, status: Record<string, unknown>): Promise<undefined> {
    this.writes.push(`status ${res.kind} ${res.metadata.name}`);
    res.status = { ...(res.status ?? {}), ...status };
    return undefined;
  }
  async event(res: OwnResource, type: string, reason: string): Promise<void> {
    this.writes.push(`event ${type} ${reason} ${res.metadata.name}`);
  }
  async readSecretKey(namespace: string, name: string, k: string): Promise<string | undefined> {
    this.reads.push(`${namespace}/${name}/${k}`);
    return name === 'knowledge-agent-mcp-credential' ? MCP_KEY : name === 'jwks' ? '{"keys":[]}' : undefined;
  }
  async upstream(): Promise<UpstreamFacts> {
    return supportedFacts();
  }
}

describe('the platform every step uses', () => {
  const p = (name: string, extra: Partial<RetrievalPlatform['metadata']> = {}) =>
    ({ ...examples().platforms[0], metadata: { name, ...extra } }) as RetrievalPlatform;
  it('is the one live RetrievalPlatform named default, as the render requires', () => {
    assert.equal(selectPlatform([p('other'), p('default')])?.metadata.name, 'default');
    assert.equal(selectPlatform([p('other')]), undefined);
    assert.equal(selectPlatform([p('default'), p('default')]), undefined);
    assert.equal(selectPlatform([p('default', { deletionTimestamp: '2026-01-01T00:00:00Z' })]), undefined);
  });

  it('the JWKS Secret is read in the gateway namespace of that platform, not of the first one listed', async () => {
    const input = examples();
    const good = input.platforms[0] as RetrievalPlatform;
    good.spec = {
      ...good.spec,
      jwt: { issuer: 'https://issuer.example', jwksSecretRef: { name: 'jwks', key: 'jwks.json' } },
    };
    const stray = structuredClone(good);
    stray.metadata = { name: 'stray' };
    stray.spec.gateway = { ...stray.spec.gateway, namespace: 'elsewhere' };
    input.platforms = [stray, good];
    const c = new MemoryCluster(input);
    await new Reconciler(c).pass(c);
    assert.deepEqual(
      c.reads.filter((r) => r.includes('jwks')),
      ['agentgateway-system/jwks/jwks.json'],
    );
  });
});

describe('writes only what changed', () => {
  it('a second pass over an unchanged cluster writes nothing', async () => {
    const input = examples();
    input.agents.push(agent('kagent', 'second-agent'));
    const c = new MemoryCluster(input);
    const r = new Reconciler(c);
    const first = await r.pass(c);
    assert.ok(first.applied > 20);
    const n = c.writes.length;
    const second = await r.pass(c);
    assert.deepEqual(c.writes.slice(n), []);
    assert.equal(second.applied, 0);
    assert.equal(second.unchanged, first.applied);
  });

  it('one room in a sharded registry: its shard, the manifest and its status (3 writes)', async () => {
    const input = examples();
    for (let i = 0; i < 12_000; i++)
      input.rooms.push(room(`r-${i}`, `!room${i}-abcdefghijklmnop:org-a.example`));
    const c = new MemoryCluster(input);
    const r = new Reconciler(c);
    await r.pass(c);
    const shards = c
      .rendered('v1', 'ConfigMap')
      .filter((o) => o.metadata.name.startsWith('fgentic-projector-registry-'));
    assert.ok(shards.length >= 2, `sharded (${shards.length} shards)`);
    const target = input.rooms.find((x) => x.metadata.name === 'r-4242');
    assert.ok(target);
    target.spec = {
      ...target.spec,
      allowedClassifications: ['approved_non_public', 'public'],
      agreementRef: 'a',
    };
    target.metadata.generation = 2;
    const n = c.writes.length;
    await r.pass(c);
    const writes = c.writes.slice(n);
    assert.equal(writes.length, 3, writes.join(', '));
    assert.ok(writes.includes('apply ConfigMap fgentic-projector-config'));
    assert.ok(writes.includes('status RetrievalRoom r-4242'));
    assert.equal(writes.filter((w) => w.startsWith('apply ConfigMap fgentic-projector-registry-')).length, 1);
  });

  it('an object edited behind the controller is re-applied although its hash annotation still matches', async () => {
    const input = examples();
    const c = new MemoryCluster(input);
    const r = new Reconciler(c);
    await r.pass(c);
    const np = [...c.objects.values()].find((o) => o.kind === 'NetworkPolicy') as K8sObject & {
      spec: { ingress?: unknown[] };
    };
    np.spec.ingress = [{}]; // someone opened it up
    const n = c.writes.length;
    await r.pass(c);
    assert.deepEqual(c.writes.slice(n), [`apply NetworkPolicy ${np.metadata.name}`]);
  });

  it('after passes that remembered it up to date, an object replaced behind the controller is re-applied', async () => {
    const input = examples();
    const c = new MemoryCluster(input);
    const r = new Reconciler(c);
    await r.pass(c);
    await r.pass(c); // remembers every (desired, live) pair as up to date
    await r.pass(c);
    const np = [...c.objects.values()].find((o) => o.kind === 'NetworkPolicy') as K8sObject & {
      spec: { ingress?: unknown[] };
    };
    // As a watch event delivers it: a new object with the same hash annotation.
    c.objects.set(key(np), { ...structuredClone(np), spec: { ...np.spec, ingress: [{}] } });
    const n = c.writes.length;
    await r.pass(c);
    assert.deepEqual(c.writes.slice(n), [`apply NetworkPolicy ${np.metadata.name}`]);
  });

  it('after passes that remembered its status, a resource changed to a new generation gets its status written', async () => {
    const input = examples();
    const c = new MemoryCluster(input);
    const r = new Reconciler(c);
    await r.pass(c);
    await r.pass(c);
    await r.pass(c);
    const i = input.agents.findIndex((a) => a.metadata.name === 'knowledge-agent');
    const old = input.agents[i] as (typeof input.agents)[number];
    // As a watch event delivers it: a new object, spec and generation changed.
    input.agents[i] = {
      ...structuredClone(old),
      metadata: { ...structuredClone(old.metadata), generation: 2 },
      spec: { ...old.spec, rateLimit: { requestsPerMinute: 7 } },
    };
    const n = c.writes.length;
    await r.pass(c);
    assert.ok(
      c.writes.slice(n).includes('status RetrievalAgent knowledge-agent'),
      c.writes.slice(n).join(', '),
    );
  });

  it('prunes nothing while an object is failing, then prunes once it applies', async () => {
    const input = examples();
    const c = new MemoryCluster(input);
    const r = new Reconciler(c, { backoff: new ItemBackoff({ baseMs: 0, capMs: 0, jitter: 0 }) });
    await r.pass(c);
    const stale = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'stale', namespace: 'knowledge' },
    };
    c.objects.set(key(stale), stale);
    const rm = input.rooms[0];
    assert.ok(rm);
    rm.spec = {
      ...rm.spec,
      description: 'x',
      allowedClassifications: ['approved_non_public', 'public'],
      agreementRef: 'b',
    };
    c.failing.add('fgentic-projector-config');
    const failed = await r.pass(c);
    assert.equal(failed.pruned, 0);
    assert.ok(c.objects.has(key(stale)));
    assert.match(failed.errors[0] ?? '', /^apply ConfigMap knowledge\/fgentic-projector-config: HTTP 500/);
    assert.ok(failed.retryAt !== undefined);
    c.failing.clear();
    const ok = await r.pass(c);
    assert.equal(ok.errors.length, 0);
    assert.equal(ok.pruned, 1);
    assert.ok(!c.objects.has(key(stale)));
  });
});

describe('desired-hash comparison', () => {
  const desired = withHash({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'x', namespace: 'n', labels: { a: '1' } },
    data: { k: 'v' },
  });
  it('the hash ignores itself and changes with any content', () => {
    const h = desired.metadata.annotations?.[DESIRED_HASH];
    assert.match(h ?? '', /^[0-9a-f]{64}$/);
    assert.equal(withHash(desired).metadata.annotations?.[DESIRED_HASH], h);
    assert.notEqual(withHash({ ...desired, data: { k: 'w' } }).metadata.annotations?.[DESIRED_HASH], h);
  });
  it('up to date: same hash and every desired field live; server-added fields do not matter', () => {
    const live = structuredClone(desired) as K8sObject;
    live.metadata = { ...live.metadata, uid: 'u', resourceVersion: '9', labels: { a: '1', other: 'x' } };
    assert.equal(upToDate(live, desired), true);
    assert.equal(upToDate(undefined, desired), false);
    assert.equal(upToDate({ ...live, data: { k: 'changed' } }, desired), false);
    assert.equal(upToDate({ ...live, metadata: { ...live.metadata, annotations: {} } }, desired), false);
    assert.equal(
      upToDate({ ...live, metadata: { ...live.metadata, deletionTimestamp: 'now' } }, desired),
      false,
    );
  });
  it('covers: lists match element by element, maps as subsets', () => {
    assert.equal(covers({ a: [{ x: 1, y: 2 }] }, { a: [{ x: 1 }] }), true);
    assert.equal(covers({ a: [{ x: 1 }, { x: 2 }] }, { a: [{ x: 1 }] }), false);
    assert.equal(covers({ a: 1 }, { a: 1, b: 2 }), false);
    assert.equal(covers({ a: null }, { a: null }), true);
    assert.equal(covers([1], { 0: 1 }), false);
  });
});
