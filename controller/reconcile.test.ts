/**
 * The reconciler's decisions over an in-memory cluster (the writes it makes, counted): which platform
 * every step uses, no write when nothing changed, one shard + manifest + status for one room in a
 * sharded registry, re-apply of an object edited behind the controller's back, and no pruning while
 * an object is failing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { agent, examples, room } from '../testkit/controller/fixtures.ts';
import { kagent09 } from '../testkit/controller/upstreams.ts';
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

/** What the client throws for a 403 (client-node's ApiException shape: code and Status body). */
function forbidden(): Error {
  return Object.assign(new Error('HTTP 403 Forbidden'), { code: 403, body: { reason: 'Forbidden' } });
}

/** A cluster in memory: stores what is applied (with a uid), counts every write and Secret read. */
class MemoryCluster implements ClusterWriter, ClusterState {
  readonly objects = new Map<string, K8sObject>();
  readonly writes: string[] = [];
  readonly reads: string[] = [];
  readonly failing = new Set<string>();
  /** Names whose apply and delete are refused (403), as RBAC refuses a name it does not grant. */
  readonly forbiddenNames = new Set<string>();
  /** Secret names whose read is refused, as the API server refuses a name RBAC does not grant. */
  readonly forbiddenSecrets = new Set<string>();
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
    if (this.forbiddenNames.has(o.metadata.name)) throw forbidden();
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
    if (this.forbiddenNames.has(o.metadata.name)) throw forbidden();
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
  /** The MCP key Secret is gone (its mirror must go). */
  secretMissing = false;
  async readSecretKey(namespace: string, name: string, k: string): Promise<string | undefined> {
    this.reads.push(`${namespace}/${name}/${k}`);
    if (this.forbiddenSecrets.has(name)) throw forbidden();
    if (name === 'knowledge-agent-mcp-credential') return this.secretMissing ? undefined : MCP_KEY;
    return name === 'jwks' ? '{"keys":[]}' : undefined;
  }
  async readMirror(namespace: string, name: string): Promise<K8sObject | undefined> {
    this.reads.push(`mirror ${namespace}/${name}`);
    if (this.forbiddenNames.has(name)) throw forbidden();
    const o = this.objects.get(`v1|Secret|${namespace}|${name}`);
    return o && structuredClone(o);
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
    for (let i = 0; i < 12_000; i++) input.rooms.push(room(`r-${i}`, `!room${i}-abcdefghijklmnop:org-a.example`));
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
    assert.ok(c.writes.slice(n).includes('status RetrievalAgent knowledge-agent'), c.writes.slice(n).join(', '));
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
    assert.equal(upToDate({ ...live, metadata: { ...live.metadata, deletionTimestamp: 'now' } }, desired), false);
  });
  it('covers: lists match element by element, maps as subsets', () => {
    assert.equal(covers({ a: [{ x: 1, y: 2 }] }, { a: [{ x: 1 }] }), true);
    assert.equal(covers({ a: [{ x: 1 }, { x: 2 }] }, { a: [{ x: 1 }] }), false);
    assert.equal(covers({ a: 1 }, { a: 1, b: 2 }), false);
    assert.equal(covers({ a: null }, { a: null }), true);
    assert.equal(covers([1], { 0: 1 }), false);
  });
});

const conditionOf = (r: OwnResource, type: string) => r.status?.conditions?.find((c) => c.type === type);

describe('what one failure holds back', () => {
  const stale = (name: string, namespace = 'knowledge'): K8sObject => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace },
  });

  it('a refused delete stops neither the other deletes nor later prunes, and is reported on the platform only', async () => {
    const input = examples();
    const c = new MemoryCluster(input);
    const r = new Reconciler(c, { backoff: new ItemBackoff({ baseMs: 0, capMs: 0, jitter: 0 }) });
    await r.pass(c);
    for (const o of [stale('refused'), stale('orphan-1')]) c.objects.set(key(o), o);
    c.forbiddenNames.add('refused');
    const first = await r.pass(c);
    assert.ok(!c.objects.has(key(stale('orphan-1'))), 'the other orphan is deleted in the same pass');
    assert.equal(first.pruned, 1);
    // A later orphan is pruned although the refused one is still failing.
    const later = stale('orphan-2');
    c.objects.set(key(later), later);
    const second = await r.pass(c);
    assert.ok(!c.objects.has(key(later)), 'pruning goes on while one delete keeps failing');
    assert.equal(second.pruned, 1);
    assert.ok(c.objects.has(key(stale('refused'))));
    // Nothing failed to apply: every resource but the platform is Ready, the platform says PruneFailed.
    const platform = input.platforms[0] as RetrievalPlatform;
    assert.equal(conditionOf(platform, 'Ready')?.status, 'True');
    assert.equal(conditionOf(platform, 'Degraded')?.reason, 'PruneFailed');
    assert.match(conditionOf(platform, 'Degraded')?.message ?? '', /delete ConfigMap knowledge\/refused: HTTP 403/);
    for (const res of [...input.agents, ...input.rooms, ...input.partners])
      assert.equal(conditionOf(res, 'Ready')?.status, 'True', `${res.kind} ${res.metadata.name}`);
    c.forbiddenNames.clear();
    await r.pass(c);
    assert.ok(!c.objects.has(key(stale('refused'))));
    assert.equal(conditionOf(platform, 'Degraded')?.status, 'False');
  });

  it('a refused mirror write degrades its RetrievalAgent only; the rest stays Ready and is pruned', async () => {
    const input = examples();
    input.agents.push(agent('kagent', 'second-agent'));
    const c = new MemoryCluster(input);
    c.forbiddenNames.add('fgentic-mcp-key.kagent.second-agent'); // its name is not granted
    const r = new Reconciler(c, { backoff: new ItemBackoff({ baseMs: 0, capMs: 0, jitter: 0 }) });
    await r.pass(c);
    const orphan = stale('orphan');
    c.objects.set(key(orphan), orphan);
    await r.pass(c);
    assert.ok(!c.objects.has(key(orphan)), 'a failed mirror does not hold pruning back');
    const [first, second] = input.agents as [OwnResource, OwnResource];
    assert.equal(conditionOf(first, 'Ready')?.status, 'True');
    assert.equal(conditionOf(second, 'Ready')?.reason, 'McpKeyUnavailable');
    assert.match(
      conditionOf(second, 'Degraded')?.message ?? '',
      /^apply Secret agentgateway-system\/fgentic-mcp-key\.kagent\.second-agent: HTTP 403/,
    );
    assert.equal(conditionOf(input.platforms[0] as OwnResource, 'Ready')?.status, 'True');
  });
});

describe('desired state is re-asserted', () => {
  it('a mirror deleted behind the controller is written again at the next resync', async () => {
    const input = examples();
    const c = new MemoryCluster(input);
    const r = new Reconciler(c);
    await r.pass(c);
    const mirror = [...c.objects.values()].find((o) => o.kind === 'Secret');
    assert.ok(mirror, 'the mirror was written');
    c.objects.delete(key(mirror)); // deleted by hand; nothing watches the mirrors
    r.resync();
    await r.pass(c);
    assert.ok(c.objects.has(key(mirror)), 'restored without a new leader');
  });

  it('a resync reads each mirror and writes none that holds what it should; an edited one is written', async () => {
    const input = examples();
    input.agents.push(agent('kagent', 'second-agent'));
    const c = new MemoryCluster(input);
    const r = new Reconciler(c);
    await r.pass(c);
    const mirrors = [...c.objects.values()].filter((o) => o.kind === 'Secret');
    assert.equal(mirrors.length, 2);
    // Between resyncs the remembered state stands: no read, no write.
    c.writes.length = 0;
    c.reads.length = 0;
    await r.pass(c);
    assert.deepEqual([c.writes, c.reads.filter((x) => x.startsWith('mirror '))], [[], []]);
    r.resync();
    await r.pass(c);
    assert.deepEqual(c.writes, [], 'a no-op resync writes nothing');
    assert.deepEqual(
      c.reads.filter((x) => x.startsWith('mirror ')).sort(),
      mirrors.map((m) => `mirror ${m.metadata.namespace}/${m.metadata.name}`).sort(),
    );
    // Edited behind the controller (another key, the desired-hash annotation left as it was).
    const [first] = mirrors as [K8sObject & { data: Record<string, string> }];
    const dataKey = Object.keys(first.data)[0] as string;
    c.objects.set(key(first), { ...first, data: { [dataKey]: Buffer.from('{}').toString('base64') } });
    r.resync();
    c.writes.length = 0;
    await r.pass(c);
    assert.deepEqual(c.writes, [`apply Secret ${first.metadata.name}`]);
  });

  it('a stale mirror already gone is not deleted again after a resync', async () => {
    const input = examples();
    const c = new MemoryCluster(input);
    const r = new Reconciler(c);
    await r.pass(c);
    c.secretMissing = true; // the source key disappears: the mirror must go
    r.secrets.forget();
    await r.pass(c);
    assert.ok(
      c.writes.some((w) => w.startsWith('delete Secret')),
      'the mirror is deleted by name',
    );
    assert.ok(![...c.objects.values()].some((o) => o.kind === 'Secret'));
    r.resync();
    c.writes.length = 0;
    await r.pass(c);
    assert.deepEqual(
      c.writes.filter((w) => w.includes('Secret')),
      [],
      'read as absent, not deleted again',
    );
  });
});

describe('the JWKS Secret', () => {
  it('unreadable (no jwks-secret-reader grant): a JwksUnresolved condition on the platform, not a failed pass', async () => {
    const input = examples();
    const platform = input.platforms[0] as RetrievalPlatform;
    platform.spec = {
      ...platform.spec,
      jwt: { issuer: 'https://issuer.example', jwksSecretRef: { name: 'jwks', key: 'jwks.json' } },
    };
    const c = new MemoryCluster(input);
    c.forbiddenSecrets.add('jwks');
    const result = await new Reconciler(c).pass(c);
    assert.equal(conditionOf(platform, 'Conflict')?.reason, 'JwksUnresolved');
    assert.equal(
      conditionOf(platform, 'Conflict')?.message,
      'cannot read Secret agentgateway-system/jwks: HTTP 403 Forbidden (the jwks-secret-reader component grants it)',
    );
    assert.equal(conditionOf(platform, 'Ready')?.status, 'False');
    assert.ok(result.applied > 0, 'everything else is rendered');
    assert.equal(conditionOf(input.rooms[0] as OwnResource, 'Ready')?.status, 'True');
  });
});
