/** The rendered projector.json / retrieval.json follow docs/interfaces.md and parse with their consumers. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateConfig } from '../../projector/config.ts';
import { assembleConfig, REGISTRY_SHARD_PREFIX, shardName } from '../../projector/registry.ts';
import { readConfig } from '../../retrieval/config.ts';
import { examples } from '../../testkit/controller/fixtures.ts';
import { render } from './index.ts';
import { partnerRegistryKey, REGISTRY_SHARDS, RegistryIndex, registryObjects, roomEntry, shardOf } from './registry.ts';
import { CONFIGMAP_DATA_LIMIT, configMapBytes } from './server-config.ts';

function configs() {
  const { objects } = render(examples());
  const get = (name: string, key: string) => {
    const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name) as any;
    assert.equal(cm.metadata.namespace, 'knowledge');
    return JSON.parse(cm.data[key]);
  };
  return {
    projector: get('fgentic-projector-config', 'projector.json'),
    retrieval: get('fgentic-retrieval-config', 'retrieval.json'),
  };
}

describe('server configuration ConfigMaps', () => {
  it('projector.json has the documented shape and content', () => {
    const { projector } = configs();
    assert.deepEqual(Object.keys(projector), [
      'version',
      'publicRetrievalTimeoutSeconds',
      'bridge',
      'agents',
      'rooms',
      'partners',
      'localGroups',
      'liveRoomCheck',
    ]);
    assert.equal(projector.publicRetrievalTimeoutSeconds, 30);
    assert.deepEqual(projector.agents, [
      {
        namespace: 'kagent',
        name: 'knowledge-agent',
        localPath: '/api/a2a/kagent/knowledge-agent',
        publicPath: '/a2a/kagent/knowledge-agent',
      },
    ]);
    assert.deepEqual(projector.rooms, [
      {
        roomId: '!Wv5rJrUq0T3bCu1mXxkP8n2Q6sZyLhDgAeFcI9oNj4E',
        allowedClassifications: ['approved_non_public', 'public'],
      },
      { roomId: '!room:org-a.example', allowedClassifications: ['public'] },
    ]);
    assert.deepEqual(projector.partners[0], {
      issuer: 'https://issuer.example',
      audience: 'fgentic-a2a',
      azp: 'org-b-a2a',
      policyId: 'org-b',
      groups: ['partner/org-b/docs'],
      allowedClassifications: ['public'],
      agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
    });
    assert.deepEqual(projector.liveRoomCheck, {
      enabled: false,
      accessTokenFile: '/var/run/secrets/fgentic/homeserver-token',
    });
  });

  it('projector.json is accepted by projector/config.ts', () => {
    const r = validateConfig(configs().projector);
    assert.equal(r.ok, true, r.ok ? '' : r.error);
  });

  it('retrieval.json has the documented content and is accepted by retrieval/config.ts', () => {
    const { retrieval } = configs();
    assert.deepEqual(retrieval, {
      version: 1,
      agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
      embeddings: {
        profile: 'bge-m3-1024-v1',
        url: 'http://agentgateway-proxy.agentgateway-system.svc.cluster.local:8082/v1/embeddings',
        model: 'BAAI/bge-m3',
        tokenFile: '/credentials/authorization',
      },
      allowedOrigins: [],
    });
    assert.equal(readConfig(retrieval).ok, true);
  });
});

function roomsAndPartners(input: ReturnType<typeof examples>, rooms: number, partners: number, tag = 'r') {
  for (let i = 0; i < rooms; i++)
    input.rooms.push({
      apiVersion: 'retrieval.fgentic.dev/v1alpha1',
      kind: 'RetrievalRoom',
      metadata: { name: `${tag}${i}` },
      spec: { roomId: `!${tag}${i}abcdefghijklmnopq:org-a.example`, allowedClassifications: ['public'] },
    });
  const template = input.partners[0]!;
  for (let i = 0; i < partners; i++)
    input.partners.push({
      ...template,
      metadata: { name: `p${i}` },
      spec: {
        ...template.spec,
        azp: `client-${i}`,
        policyId: `p${i}`,
        groups: [`partner/p${i}/docs`],
      },
    } as typeof template);
}

function assembled(objects: ReturnType<typeof render>['objects']) {
  const data = (name: string) => (objects.find((o) => o.metadata.name === name) as any)?.data;
  const shards = new Map<string, string>();
  for (const o of objects)
    if (o.metadata.name.startsWith(REGISTRY_SHARD_PREFIX))
      shards.set(o.metadata.name, data(o.metadata.name)['registry.json']);
  return { result: assembleConfig(data('fgentic-projector-config')['projector.json'], shards), shards };
}

describe('registry size', () => {
  it('a small registry stays inline in projector.json (up to 64 KiB)', () => {
    const input = examples();
    roomsAndPartners(input, 500, 0);
    const r = render(input);
    assert.deepEqual(r.conflicts, []);
    const { result, shards } = assembled(r.objects);
    assert.equal(shards.size, 0);
    assert.ok(result.ok && result.config.rooms.size >= 500);
  });

  it('20,000 rooms move into shards below the ConfigMap limit; the assembled registry holds every entry', () => {
    const input = examples();
    roomsAndPartners(input, 20_000, 0);
    const r = render(input);
    assert.deepEqual(r.conflicts, []);
    const { result, shards } = assembled(r.objects);
    assert.equal(shards.size, REGISTRY_SHARDS);
    for (const o of r.objects) if (o.kind === 'ConfigMap') assert.ok(configMapBytes(o) <= CONFIGMAP_DATA_LIMIT);
    assert.ok(result.ok);
    if (result.ok) assert.equal(result.config.rooms.size, 20_000 + examples().rooms.length);
  });

  it('one room changed rewrites one shard and the manifest, nothing else', () => {
    const input = examples();
    roomsAndPartners(input, 20_000, 0);
    const before = render(input).objects;
    const room = input.rooms.find((x) => x.metadata.name === 'r777')!;
    room.spec = { ...room.spec, allowedClassifications: ['public', 'internal'] };
    const after = render(input).objects;
    const changed = after.filter((o) => {
      const old = before.find(
        (b) =>
          b.kind === o.kind && b.metadata.name === o.metadata.name && b.metadata.namespace === o.metadata.namespace,
      );
      return JSON.stringify(old) !== JSON.stringify(o);
    });
    assert.deepEqual(changed.map((o) => o.metadata.name).filter((n) => n !== 'fgentic-projector-config').length, 1);
    assert.ok(changed.some((o) => o.metadata.name === 'fgentic-projector-config'));
    assert.equal(after.length, before.length);
  });
});

describe('registry layout: the cost follows the change', () => {
  const ctx = {
    namespace: 'knowledge',
    labels: { 'retrieval.fgentic.dev/projector-config': 'true' },
    base: { version: 1, rooms: [], partners: [] },
  };
  const rooms = (n: number, from = 0) =>
    Array.from({ length: n }, (_, i) => roomEntry(`!room${from + i}:org-a.example`, ['approved_non_public', 'public']));

  it('a room always lands in the same shard, whatever the size of the registry', () => {
    const small = registryObjects(ctx, rooms(2_000), []).objects;
    const large = registryObjects(ctx, rooms(40_000), []).objects;
    const holder = (objects: typeof small, id: string) =>
      objects.find(
        (o) =>
          o.metadata.name.startsWith(REGISTRY_SHARD_PREFIX) && (o as any).data['registry.json'].includes(`"${id}"`),
      )?.metadata.name;
    for (const i of [0, 17, 999, 1_999]) {
      const id = `!room${i}:org-a.example`;
      assert.equal(holder(large, id), holder(small, id));
      assert.equal(holder(small, id), shardName(shardOf(id)));
    }
  });

  it('100,000 rooms and 5,000 partners: every shard and the manifest stay within tens of KiB', () => {
    const partners = Array.from({ length: 5_000 }, (_, i) => ({
      key: partnerRegistryKey('https://issuer.example', 'fgentic-a2a', `org-${i}-a2a`),
      text: JSON.stringify({
        issuer: 'https://issuer.example',
        audience: 'fgentic-a2a',
        azp: `org-${i}-a2a`,
        policyId: `org-${i}`,
        groups: [`partner/org-${i}/docs`],
        allowedClassifications: ['public'],
        agents: [{ namespace: 'kagent', name: 'retrieval-agent-0001' }],
      }),
    }));
    const r = registryObjects(ctx, rooms(100_000), partners);
    assert.equal(r.tooLarge, undefined);
    const sizes = r.objects.map((o) => configMapBytes(o));
    const shardMax = Math.max(...sizes.slice(1));
    assert.ok(shardMax <= 64 * 1024, `largest shard ${shardMax} bytes`);
    assert.ok((sizes[0] as number) <= 32 * 1024, `manifest ${sizes[0]} bytes`);
  });

  it('a shard over the ConfigMap limit leaves the whole registry out (never a truncated one)', () => {
    const huge = 600;
    const index = new RegistryIndex();
    index.setContext(ctx);
    // Entries whose keys share one shard, until it passes 1 MiB.
    const target = shardOf('!seed:org-a.example');
    let n = 0;
    for (let i = 0; n < huge; i++) {
      const id = `!x${i}:org-a.example`;
      if (shardOf(id) !== target) continue;
      index.putEntry('room', { key: id, text: JSON.stringify({ roomId: id, pad: 'p'.repeat(2_000) }) });
      n++;
    }
    const r = index.render();
    assert.deepEqual(r.objects, []);
    assert.match(r.tooLarge ?? '', /fgentic-projector-registry-\d{3} would hold \d+ bytes \(limit 1048576\)/);
  });
});
