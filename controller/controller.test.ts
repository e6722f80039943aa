/**
 * The controller loop against the API-server double: list/watch, server-side apply under one field
 * manager, owner references, pruning, Ready/Conflict/Degraded conditions with observedGeneration,
 * Events, Lease-based leader election, /healthz /readyz /metrics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { staysTrue, waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble, CONTROLLER_USER } from '../testkit/controller/apiserver.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { type Attributes, type Grant, unusedGrants } from '../testkit/controller/rbac.ts';
import { type ControllerHandle, startController } from './cli.ts';
import { RENDERED_KINDS } from './kube/client.ts';
import { render } from './render/index.ts';

const RV = 'retrieval.fgentic.dev/v1alpha1';
const MCP_KEY = 'mcp-key-0123456789abcdef';

function cond(o: any, type: string): any {
  return o?.status?.conditions?.find((c: any) => c.type === type);
}

const LABELS = {
  'app.kubernetes.io/managed-by': 'fgentic-retrieval',
  'retrieval.fgentic.dev/rendered': 'true',
};
/** Where a stale rendered object of each kind sits (the namespaces the examples render into). */
const STALE_NS: Record<string, string> = {
  ConfigMap: 'knowledge',
  NetworkPolicy: 'kagent',
  ReferenceGrant: 'knowledge',
  HTTPRoute: 'agentgateway-system',
  AgentgatewayBackend: 'agentgateway-system',
  AgentgatewayPolicy: 'agentgateway-system',
  RemoteMCPServer: 'kagent',
  Agent: 'kagent',
};
const show = (a: Attributes | Grant) =>
  `${a.verb} ${a.group || 'core'}/${a.resource}${'subresource' in a && a.subresource ? `/${a.subresource}` : ''} ns=${a.namespace ?? '*'}${'resourceName' in a && a.resourceName ? ` name=${a.resourceName}` : ''}`;

describe('controller loop against an API-server double, as its ServiceAccount under the shipped RBAC', () => {
  const api = new ApiServerDouble();
  let ctl: ControllerHandle;
  const input = examples();
  const expected = render(input).objects;

  before(async () => {
    await api.start();
    for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners]) api.put(r);
    // Stale objects from an earlier render (one per rendered kind, so pruning reaches every kind),
    // and a look-alike that is not ours to prune.
    for (const k of RENDERED_KINDS)
      api.put({
        apiVersion: k.apiVersion,
        kind: k.kind,
        metadata: { name: 'stale-render', namespace: STALE_NS[k.kind], labels: LABELS },
        spec: {},
      });
    api.put({
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'HTTPRoute',
      metadata: {
        name: 'fgentic-a2a-local.kagent.old-agent',
        namespace: 'agentgateway-system',
        labels: {
          'app.kubernetes.io/managed-by': 'fgentic-retrieval',
          'retrieval.fgentic.dev/rendered': 'true',
        },
      },
      spec: {},
    });
    // A labelled ConfigMap where the controller may not write ConfigMaps: anyone who can create a
    // ConfigMap anywhere can put one there. It is not the controller's to cache or prune.
    api.put({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'look-alike', namespace: 'default', labels: LABELS },
      data: {},
    });
    api.put({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'deploy-owned',
        namespace: 'knowledge',
        labels: { 'app.kubernetes.io/managed-by': 'fgentic-retrieval' },
      },
      data: {},
    });
    api.put({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'knowledge-agent-mcp-credential', namespace: 'kagent' },
      type: 'Opaque',
      data: { authorization: Buffer.from(`Bearer ${MCP_KEY}`).toString('base64') },
    });
    ctl = await startController({
      kubeConfig: api.kubeConfig(),
      port: 0,
      leaseNamespace: 'fgentic-system',
      identity: 'replica-a',
      leaseDurationSeconds: 1,
      renewIntervalMs: 150,
      debounceMs: 20,
    });
  });
  after(async () => {
    await ctl?.stop();
    await api.stop();
  });

  it('becomes leader through a Lease', async () => {
    await waitFor('leader', () => ctl.isLeader());
    const lease = api.get('coordination.k8s.io/v1', 'Lease', 'fgentic-system', 'fgentic-retrieval-controller');
    assert.equal(lease?.['spec'].holderIdentity, 'replica-a');
  });

  it('applies every rendered object with server-side apply under field manager fgentic-retrieval', async () => {
    await waitFor('kagent Agent', () => api.get('kagent.dev/v1alpha2', 'Agent', 'kagent', 'knowledge-agent'));
    await waitFor('all objects', () =>
      expected.every((o) => api.get(o.apiVersion, o.kind, o.metadata.namespace, o.metadata.name)),
    );
    assert.ok(api.applies.length >= expected.length);
    for (const a of api.applies) {
      assert.equal(a.fieldManager, 'fgentic-retrieval');
      assert.equal(a.force, 'true');
      assert.equal(a.contentType, 'application/apply-patch+yaml');
    }
  });

  it('every rendered object reaches the API server exactly as rendered (NetworkPolicy `from` included)', async () => {
    // client-node's typed serialiser renames NetworkPolicy `from` to `_from` and drops the plain
    // field: applied through it, every ingress rule would admit any source.
    const body = (o: Record<string, unknown>) => {
      const { metadata: _m, status: _s, ...rest } = o;
      return rest;
    };
    for (const o of expected) {
      const live = await waitFor(`${o.kind} ${o.metadata.name} as rendered`, () => {
        const x = api.get(o.apiVersion, o.kind, o.metadata.namespace, o.metadata.name);
        return x && JSON.stringify(body(x)) === JSON.stringify(body(o)) && x;
      });
      assert.deepEqual(body(live), body(o));
    }
    const np = api.get('networking.k8s.io/v1', 'NetworkPolicy', 'knowledge', 'fgentic-projector-ingress');
    assert.ok(np?.['spec'].ingress.every((r: { from?: unknown[] }) => (r.from ?? []).length > 0));
  });

  it('sets owner references: the kagent Agent to its RetrievalAgent, the rest to the platform', () => {
    const ra = api.get(RV, 'RetrievalAgent', 'kagent', 'knowledge-agent');
    const platform = api.get(RV, 'RetrievalPlatform', undefined, 'default');
    const agent = api.get('kagent.dev/v1alpha2', 'Agent', 'kagent', 'knowledge-agent');
    assert.deepEqual(agent?.['metadata'].ownerReferences, [
      {
        apiVersion: RV,
        kind: 'RetrievalAgent',
        name: 'knowledge-agent',
        uid: ra?.['metadata'].uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.equal(agent?.['metadata'].labels['retrieval.fgentic.dev/role'], 'retrieval-agent');
    const cm = api.get('v1', 'ConfigMap', 'knowledge', 'fgentic-projector-config');
    assert.equal(cm?.['metadata'].ownerReferences[0].uid, platform?.['metadata'].uid);
  });

  it('prunes stale rendered objects and leaves objects without the rendered label alone', async () => {
    for (const k of RENDERED_KINDS)
      await waitFor(`stale ${k.kind} pruned`, () => !api.get(k.apiVersion, k.kind, STALE_NS[k.kind], 'stale-render'));
    await waitFor(
      'prune',
      () =>
        !api.get(
          'gateway.networking.k8s.io/v1',
          'HTTPRoute',
          'agentgateway-system',
          'fgentic-a2a-local.kagent.old-agent',
        ),
    );
    assert.ok(api.get('v1', 'ConfigMap', 'knowledge', 'deploy-owned'));
  });

  it('a labelled ConfigMap outside the namespace it may write in is never listed, watched or deleted', () => {
    assert.ok(api.get('v1', 'ConfigMap', 'default', 'look-alike'));
    const outside = api.calls.filter(
      (c) => c.user === CONTROLLER_USER && c.resource === 'configmaps' && c.namespace !== 'knowledge',
    );
    assert.deepEqual(outside.map(show), []);
  });

  it('writes Ready/Conflict/Degraded with observedGeneration on every resource', async () => {
    for (const [kind, ns, name] of [
      ['RetrievalPlatform', undefined, 'default'],
      ['RetrievalAgent', 'kagent', 'knowledge-agent'],
      ['RetrievalRoom', undefined, 'org-a-general'],
      ['PartnerClient', undefined, 'org-b-a2a'],
    ] as const) {
      const o = await waitFor(`${kind} Ready`, () => {
        const x = api.get(RV, kind, ns, name);
        return cond(x, 'Ready')?.status === 'True' && x;
      });
      assert.equal(o['status'].observedGeneration, o['metadata'].generation);
      assert.equal(cond(o, 'Conflict').status, 'False');
      assert.equal(cond(o, 'Degraded').status, 'False');
      assert.equal(cond(o, 'Ready').observedGeneration, o['metadata'].generation);
    }
  });

  it("mirrors the Agent's MCP key into the gateway namespace in agentgateway's JSON API-key form", async () => {
    // Fails with RBAC that grants no Secrets: the source read is refused (403) and the Agent degrades.
    const s = await waitFor('mirrored key', () =>
      api.get('v1', 'Secret', 'agentgateway-system', 'fgentic-mcp-key.kagent.knowledge-agent'),
    );
    assert.deepEqual(api.denied.map(show), [], 'no call of the controller was refused');
    assert.equal(cond(api.get(RV, 'RetrievalAgent', 'kagent', 'knowledge-agent'), 'Degraded')?.reason, 'Applied');
    assert.equal(s['metadata'].labels['retrieval.fgentic.dev/api-key'], 'mcp');
    const entry = JSON.parse(Buffer.from(s['data']['kagent.knowledge-agent'], 'base64').toString('utf8'));
    assert.deepEqual(entry, { key: MCP_KEY, metadata: { workload: 'kagent/knowledge-agent' } });
    const policy = api.get(
      'agentgateway.dev/v1alpha1',
      'AgentgatewayPolicy',
      'agentgateway-system',
      'fgentic-mcp.kagent.knowledge-agent',
    );
    assert.deepEqual(policy?.['spec'].traffic.apiKeyAuthentication.secretSelector.matchLabels, {
      'retrieval.fgentic.dev/api-key': 'mcp',
    });
    // Owned by its MCP policy (same namespace), so the garbage collector removes it with the policy.
    assert.deepEqual(s['metadata'].ownerReferences, [
      {
        apiVersion: 'agentgateway.dev/v1alpha1',
        kind: 'AgentgatewayPolicy',
        name: 'fgentic-mcp.kagent.knowledge-agent',
        uid: policy?.['metadata'].uid,
      },
    ]);
  });

  it('a missing MCP key Secret degrades the RetrievalAgent and removes its mirrored key', async () => {
    const src = api.get('v1', 'Secret', 'kagent', 'knowledge-agent-mcp-credential') as any;
    api.remove('v1', 'Secret', 'kagent', 'knowledge-agent-mcp-credential');
    const ra = api.get(RV, 'RetrievalAgent', 'kagent', 'knowledge-agent') as any;
    api.put({ ...ra, metadata: { ...ra.metadata, annotations: { poke: '1' } } });
    const x = await waitFor('Degraded agent', () => {
      const o = api.get(RV, 'RetrievalAgent', 'kagent', 'knowledge-agent');
      return cond(o, 'Degraded')?.reason === 'McpKeyUnavailable' && o;
    });
    assert.equal(cond(x, 'Ready').status, 'False');
    await waitFor(
      'mirror pruned',
      () => !api.get('v1', 'Secret', 'agentgateway-system', 'fgentic-mcp-key.kagent.knowledge-agent'),
    );
    // The mirror is deleted by name: the controller never lists or watches Secrets, and in the
    // gateway namespace reads only its mirrors, by name.
    assert.ok(
      api.calls.some((c) => c.verb === 'delete' && c.resource === 'secrets' && c.namespace === 'agentgateway-system'),
    );
    assert.ok(!api.calls.some((c) => c.resource === 'secrets' && ['list', 'watch'].includes(c.verb)));
    assert.deepEqual(
      [
        ...new Set(
          api.calls.filter((c) => c.resource === 'secrets' && c.namespace === 'agentgateway-system').map((c) => c.name),
        ),
      ],
      ['fgentic-mcp-key.kagent.knowledge-agent'],
    );
    await waitFor('Warning event', () => api.list('v1', 'Event').find((e) => e['reason'] === 'McpKeyUnavailable'));
    api.put({ apiVersion: 'v1', kind: 'Secret', metadata: src.metadata, type: 'Opaque', data: src.data });
    api.put({ ...ra, metadata: { ...ra.metadata, annotations: { poke: '2' } } });
    await waitFor(
      'recovered',
      () => cond(api.get(RV, 'RetrievalAgent', 'kagent', 'knowledge-agent'), 'Ready')?.status === 'True',
    );
    await waitFor('mirror restored', () =>
      api.get('v1', 'Secret', 'agentgateway-system', 'fgentic-mcp-key.kagent.knowledge-agent'),
    );
  });

  it('serves /healthz, /readyz and /metrics', async () => {
    const base = `http://127.0.0.1:${ctl.port}`;
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
    await waitFor('ready', () => true);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const m = await (await fetch(`${base}/metrics`)).text();
    assert.match(m, /fgentic_controller_reconciles_total\{result="ok"\} [1-9]/);
    assert.match(m, /fgentic_controller_leader 1/);
  });

  it('a conflict (one room twice) renders neither room, sets Conflict and emits a Warning Event', async () => {
    api.put({
      apiVersion: RV,
      kind: 'RetrievalRoom',
      metadata: { name: 'dup' },
      spec: { roomId: '!room:org-a.example' },
    });
    const dup = await waitFor('Conflict on dup', () => {
      const x = api.get(RV, 'RetrievalRoom', undefined, 'dup');
      return cond(x, 'Conflict')?.status === 'True' && x;
    });
    assert.equal(cond(dup, 'Conflict').reason, 'DuplicateRoom');
    assert.equal(cond(dup, 'Ready').status, 'False');
    const orig = api.get(RV, 'RetrievalRoom', undefined, 'org-a-general');
    await waitFor(
      'Conflict on original',
      () => cond(api.get(RV, 'RetrievalRoom', undefined, 'org-a-general'), 'Conflict')?.status === 'True',
    );
    assert.ok(orig);
    const cm = await waitFor('ConfigMap without the room', () => {
      const c = api.get('v1', 'ConfigMap', 'knowledge', 'fgentic-projector-config');
      return c && !c['data']['projector.json'].includes('!room:org-a.example') && c;
    });
    assert.ok(cm['data']['projector.json'].includes('!Wv5rJrUq0T3bCu1mXxkP8n2Q6sZyLhDgAeFcI9oNj4E'));
    await waitFor('Warning event', () =>
      api
        .list('v1', 'Event')
        .find((e) => e['reason'] === 'DuplicateRoom' && e['type'] === 'Warning' && e['involvedObject'].name === 'dup'),
    );
    // Resolving the conflict restores the room.
    api.remove(RV, 'RetrievalRoom', undefined, 'dup');
    await waitFor(
      'conflict resolved',
      () => cond(api.get(RV, 'RetrievalRoom', undefined, 'org-a-general'), 'Conflict')?.status === 'False',
    );
    await waitFor('room back', () =>
      api
        .get('v1', 'ConfigMap', 'knowledge', 'fgentic-projector-config')
        ?.['data']['projector.json'].includes('!room:org-a.example'),
    );
  });

  it('a failing apply marks resources Degraded, prunes nothing, and is retried until it succeeds', async () => {
    // Only an object whose desired content changed is applied, so the change must reach a rendered
    // object: the room's classifications are in the projector's registry ConfigMap.
    api.failApply.add('ConfigMap');
    const r = api.get(RV, 'RetrievalRoom', undefined, 'org-a-general') as any;
    api.put({
      ...r,
      spec: {
        ...r.spec,
        allowedClassifications: ['approved_non_public', 'public'],
        agreementRef: 'adr-0015/org-a-general',
      },
    });
    // The room whose change cannot land says so; nobody else's status changes.
    const p = await waitFor('Degraded', () => {
      const x = api.get(RV, 'RetrievalRoom', undefined, 'org-a-general');
      return cond(x, 'Degraded')?.status === 'True' && x;
    });
    assert.equal(cond(p, 'Ready').reason, 'ApplyFailed');
    assert.match(cond(p, 'Degraded').message, /^apply ConfigMap knowledge\/fgentic-projector-config: /);
    assert.equal(cond(api.get(RV, 'RetrievalPlatform', undefined, 'default'), 'Ready')?.status, 'True');
    assert.ok(api.get('kagent.dev/v1alpha2', 'Agent', 'kagent', 'knowledge-agent'));
    // Retried on its own backoff, without any further change.
    const attempts = api.applies.filter((a) => a.kind === 'ConfigMap').length;
    await waitFor('a retry', () => api.applies.filter((a) => a.kind === 'ConfigMap').length > attempts);
    api.failApply.clear();
    await waitFor(
      'recovered',
      () => cond(api.get(RV, 'RetrievalRoom', undefined, 'org-a-general'), 'Degraded')?.status === 'False',
      20_000,
    );
    assert.match(
      api.get('v1', 'ConfigMap', 'knowledge', 'fgentic-projector-config')?.['data']['projector.json'],
      /"roomId":"!room:org-a\.example","allowedClassifications":\["approved_non_public","public"\]/,
    );
    api.put({ ...r, spec: { ...r.spec, description: 'changed again' } }); // back to public
    await waitFor('room observedGeneration', () => {
      const room = api.get(RV, 'RetrievalRoom', undefined, 'org-a-general') as any;
      return room.status.observedGeneration === room.metadata.generation && room.metadata.generation === 3;
    });
  });

  it('deleting a RetrievalAgent removes its kagent Agent, routes, policies and NetworkPolicy', async () => {
    api.remove(RV, 'RetrievalAgent', 'kagent', 'knowledge-agent');
    await waitFor('Agent gone', () => !api.get('kagent.dev/v1alpha2', 'Agent', 'kagent', 'knowledge-agent'));
    await waitFor('routes gone', () =>
      api
        .list('gateway.networking.k8s.io/v1', 'HTTPRoute')
        .every((o) => !String(o['metadata'].name).includes('knowledge-agent')),
    );
    // The garbage collector removes the Agent at once (owned by the RetrievalAgent); the rest goes
    // with the next reconcile pass.
    await waitFor('policies gone', () =>
      api
        .list('agentgateway.dev/v1alpha1', 'AgentgatewayPolicy')
        .every((o) => !o['metadata'].name.includes('knowledge-agent')),
    );
    await waitFor(
      'NetworkPolicy and RemoteMCPServer gone',
      () =>
        !api.get('networking.k8s.io/v1', 'NetworkPolicy', 'kagent', 'fgentic-retrieval-agent.knowledge-agent') &&
        !api.get('kagent.dev/v1alpha2', 'RemoteMCPServer', 'kagent', 'knowledge-retrieval'),
    );
    await waitFor('projector config without agents', () => {
      const cm = api.get('v1', 'ConfigMap', 'knowledge', 'fgentic-projector-config') as any;
      return JSON.parse(cm.data['projector.json']).agents.length === 0;
    });
    // Its mirrored MCP key goes with its MCP policy (garbage collection through the owner reference).
    await waitFor(
      'mirror gone',
      () => !api.get('v1', 'Secret', 'agentgateway-system', 'fgentic-mcp-key.kagent.knowledge-agent'),
    );
  });

  it('a second replica stays standby until the Lease expires', async () => {
    const b = await startController({
      kubeConfig: api.kubeConfig(),
      port: 0,
      leaseNamespace: 'fgentic-system',
      identity: 'replica-b',
      leaseDurationSeconds: 1,
      renewIntervalMs: 150,
      debounceMs: 20,
    });
    try {
      await staysTrue('the second replica stays standby while the Lease is held', () => !b.isLeader());
      assert.equal((await fetch(`http://127.0.0.1:${b.port}/readyz`)).status, 200);
      await ctl.stop();
      await waitFor('failover', () => b.isLeader(), 5000);
      assert.equal(
        api.get('coordination.k8s.io/v1', 'Lease', 'fgentic-system', 'fgentic-retrieval-controller')?.['spec']
          .holderIdentity,
        'replica-b',
      );
    } finally {
      await b.stop();
    }
  });

  // Scope is part of exactness: a call in a namespace the code has no grant for is refused (403) even
  // when the verb is granted elsewhere, and shows here.
  it('the shipped RBAC allows exactly the calls the controller made: none refused, no grant unused', () => {
    assert.deepEqual(api.denied.map(show), []);
    assert.ok(api.calls.filter((c) => c.user === CONTROLLER_USER).length > 50);
    assert.deepEqual(
      unusedGrants(api.rbac, CONTROLLER_USER, api.calls).map((g) => `${g.source}: ${show(g)}`),
      [],
    );
  });
});
