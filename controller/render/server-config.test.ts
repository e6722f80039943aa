/** The rendered projector.json / retrieval.json follow docs/interfaces.md and parse with their consumers. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateConfig } from '../../projector/config.ts';
import { parseConfig as parseRetrievalConfig } from '../../retrieval/config.ts';
import { examples } from '../testsupport/fixtures.ts';
import { render } from './index.ts';

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
    assert.doesNotThrow(() => parseRetrievalConfig(retrieval));
  });
});

describe('registry size', () => {
  it('10,000 rooms fit one ConfigMap; an oversized registry renders no ConfigMap and reports it', () => {
    const input = examples();
    for (let i = 0; i < 10_000; i++)
      input.rooms.push({
        apiVersion: 'retrieval.fgentic.dev/v1alpha1',
        kind: 'RetrievalRoom',
        metadata: { name: `r${i}` },
        spec: { roomId: `!r${i}abcdefghijklmnopq:org-a.example`, allowedClassifications: ['public'] },
      });
    let r = render(input);
    assert.deepEqual(r.conflicts, []);
    assert.ok(r.objects.some((o) => o.metadata.name === 'fgentic-projector-config'));
    for (let i = 0; i < 10_000; i++)
      input.rooms.push({
        apiVersion: 'retrieval.fgentic.dev/v1alpha1',
        kind: 'RetrievalRoom',
        metadata: { name: `s${i}` },
        spec: { roomId: `!s${i}abcdefghijklmnopq:org-a.example`, allowedClassifications: ['public'] },
      });
    r = render(input);
    assert.deepEqual(
      r.conflicts.map((c) => c.reason),
      ['RegistryTooLarge'],
    );
    assert.ok(!r.objects.some((o) => o.metadata.name === 'fgentic-projector-config'));
  });
});
