/** The rendered projector.json / retrieval.json follow docs/interfaces.md and parse with their consumers. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateConfig } from '../../projector/config.ts';
import { assembleConfig, REGISTRY_SHARD_PREFIX } from '../../projector/registry.ts';
import { readConfig } from '../../retrieval/config.ts';
import { examples } from '../testsupport/fixtures.ts';
import { render } from './index.ts';
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
  it('a small registry stays inline in projector.json', () => {
    const input = examples();
    roomsAndPartners(input, 1_000, 0);
    const r = render(input);
    assert.deepEqual(r.conflicts, []);
    const { result, shards } = assembled(r.objects);
    assert.equal(shards.size, 0);
    assert.ok(result.ok && result.config.rooms.size >= 1_000);
  });

  it('20,000 rooms move into shards below the ConfigMap limit; the assembled registry holds every entry', () => {
    const input = examples();
    roomsAndPartners(input, 20_000, 0);
    const r = render(input);
    assert.deepEqual(r.conflicts, []);
    const { result, shards } = assembled(r.objects);
    assert.ok(shards.size >= 2, `${shards.size} shards`);
    for (const o of r.objects)
      if (o.kind === 'ConfigMap') assert.ok(configMapBytes(o) <= CONFIGMAP_DATA_LIMIT);
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
          b.kind === o.kind &&
          b.metadata.name === o.metadata.name &&
          b.metadata.namespace === o.metadata.namespace,
      );
      return JSON.stringify(old) !== JSON.stringify(o);
    });
    assert.deepEqual(
      changed.map((o) => o.metadata.name).filter((n) => n !== 'fgentic-projector-config').length,
      1,
    );
    assert.ok(changed.some((o) => o.metadata.name === 'fgentic-projector-config'));
    assert.equal(after.length, before.length);
  });
});
