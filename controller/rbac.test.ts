/**
 * The API-server double's RBAC, rule by rule, and the webhook's and the servers' API calls against the
 * shipped RBAC: every component runs under its own ServiceAccount, nothing it calls is refused, and no
 * grant is left unused.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '../common/log.ts';
import { waitFor } from '../testkit/common/index.ts';
import { ADMIN_USER, ApiServerDouble, WEBHOOK_USER } from '../testkit/controller/apiserver.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { RbacAuthorizer, serviceAccountUser, unusedGrants } from '../testkit/controller/rbac.ts';
import { KubeClusterView } from '../webhook/kube-view.ts';

const SA = serviceAccountUser('team', 'bot');
const rbac = new RbacAuthorizer([
  { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'bot', namespace: 'team' } },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'r', namespace: 'a' },
    rules: [
      { apiGroups: [''], resources: ['secrets'], resourceNames: ['one'], verbs: ['get'] },
      { apiGroups: ['x.dev'], resources: ['things/status'], verbs: ['patch'] },
    ],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'r', namespace: 'a' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'r' },
    subjects: [{ kind: 'ServiceAccount', name: 'bot', namespace: 'team' }],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'c' },
    rules: [{ apiGroups: ['x.dev'], resources: ['things'], verbs: ['list'] }],
  },
  {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'c-in-b', namespace: 'b' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'c' },
    subjects: [{ kind: 'ServiceAccount', name: 'bot', namespace: 'team' }],
  },
]);
const ask = (verb: string, group: string, resource: string, more: Record<string, string> = {}) =>
  rbac.authorize({ user: SA, verb, group, resource, ...more });

describe('RBAC authorizer of the API-server double', () => {
  it('resourceNames: only the named object, and never list, watch or create', () => {
    assert.equal(ask('get', '', 'secrets', { namespace: 'a', name: 'one' }), true);
    assert.equal(ask('get', '', 'secrets', { namespace: 'a', name: 'two' }), false);
    assert.equal(ask('list', '', 'secrets', { namespace: 'a' }), false);
    assert.equal(ask('get', '', 'secrets', { namespace: 'a' }), false);
  });
  it('a Role grants in its namespace only', () => {
    assert.equal(ask('get', '', 'secrets', { namespace: 'other', name: 'one' }), false);
    assert.equal(ask('get', '', 'secrets', { name: 'one' }), false);
  });
  it('a ClusterRole through a RoleBinding grants in the binding namespace only', () => {
    assert.equal(ask('list', 'x.dev', 'things', { namespace: 'b' }), true);
    assert.equal(ask('list', 'x.dev', 'things'), false);
    assert.equal(ask('list', 'x.dev', 'things', { namespace: 'a' }), false);
  });
  it('a subresource is its own resource: status does not grant the object, nor the reverse', () => {
    assert.equal(ask('patch', 'x.dev', 'things', { namespace: 'a', subresource: 'status', name: 'n' }), true);
    assert.equal(ask('patch', 'x.dev', 'things', { namespace: 'a', name: 'n' }), false);
    assert.equal(ask('list', 'x.dev', 'things', { namespace: 'b', subresource: 'status' }), false);
  });
  it('verb and API group must both match', () => {
    assert.equal(ask('watch', 'x.dev', 'things', { namespace: 'b' }), false);
    assert.equal(ask('list', 'y.dev', 'things', { namespace: 'b' }), false);
  });
  it('another ServiceAccount holds nothing', () => {
    assert.equal(
      rbac.authorize({
        user: serviceAccountUser('team', 'other'),
        verb: 'list',
        group: 'x.dev',
        resource: 'things',
        namespace: 'b',
      }),
      false,
    );
  });
});

describe('API-server double answers refused requests as kube-apiserver', () => {
  const api = new ApiServerDouble();
  before(async () => {
    await api.start();
  });
  after(() => api.stop());

  it('403 with the Forbidden Status body, naming user, verb, resource, group and scope', async () => {
    const headers = {
      authorization: `Bearer ${api.token(serviceAccountUser('knowledge', 'fgentic-projector'))}`,
    };
    const server = `http://127.0.0.1:${api.port}`;
    const r = await fetch(`${server}/api/v1/namespaces/kagent/secrets/knowledge-agent-mcp-credential`, {
      headers,
    });
    assert.equal(r.status, 403);
    assert.deepEqual(await r.json(), {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'secrets "knowledge-agent-mcp-credential" is forbidden: User "system:serviceaccount:knowledge:fgentic-projector" cannot get resource "secrets" in API group "" in the namespace "kagent"',
      reason: 'Forbidden',
      details: { name: 'knowledge-agent-mcp-credential', kind: 'secrets' },
      code: 403,
    });
    const c = await fetch(`${server}/apis/retrieval.fgentic.dev/v1alpha1/retrievalplatforms`, {
      headers,
    });
    assert.equal(c.status, 403);
    assert.equal(
      ((await c.json()) as { message: string }).message,
      'retrievalplatforms.retrieval.fgentic.dev is forbidden: User "system:serviceaccount:knowledge:fgentic-projector" cannot list resource "retrievalplatforms" in API group "retrieval.fgentic.dev" at the cluster scope',
    );
  });

  it('401 without a token it issued', async () => {
    const r = await fetch(`http://127.0.0.1:${api.port}/api/v1/namespaces/kagent/secrets`, {
      headers: { authorization: 'Bearer forged' },
    });
    assert.equal(r.status, 401);
  });

  it('an apply that creates the object also needs create; patch alone only updates', async () => {
    const patchOnly = new ApiServerDouble({
      rbac: new RbacAuthorizer([
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'Role',
          metadata: { name: 'p', namespace: 'a' },
          rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['patch'] }],
        },
        {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'RoleBinding',
          metadata: { name: 'p', namespace: 'a' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'p' },
          subjects: [{ kind: 'ServiceAccount', name: 'bot', namespace: 'team' }],
        },
      ]),
    });
    await patchOnly.start();
    try {
      const apply = () =>
        fetch(`http://127.0.0.1:${patchOnly.port}/api/v1/namespaces/a/configmaps/c?fieldManager=m&force=true`, {
          method: 'PATCH',
          headers: {
            authorization: `Bearer ${patchOnly.token(SA)}`,
            'content-type': 'application/apply-patch+yaml',
          },
          body: JSON.stringify({
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: 'c' },
            data: { k: 'v' },
          }),
        });
      const refused = await apply();
      assert.equal(refused.status, 403);
      assert.match(((await refused.json()) as { message: string }).message, /cannot create resource "configmaps"/);
      patchOnly.put({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'c', namespace: 'a' },
        data: {},
      });
      assert.equal((await apply()).status, 200);
    } finally {
      await patchOnly.stop();
    }
  });

  it('the retrieval server only lists and watches its one ConfigMap; the projector only lists and watches ConfigMaps in its namespace', () => {
    const retrieval = serviceAccountUser('knowledge', 'knowledge-retrieval');
    assert.ok(api.rbac.serviceAccounts.has(retrieval));
    const may = (verb: string, name?: string, namespace = 'knowledge', resource = 'configmaps') =>
      api.rbac.authorize({
        user: retrieval,
        verb,
        group: '',
        resource,
        namespace,
        ...(name ? { name } : {}),
      });
    assert.equal(may('list', 'fgentic-retrieval-config'), true);
    assert.equal(may('watch', 'fgentic-retrieval-config'), true);
    assert.equal(may('list'), false, 'an unnamed list (every ConfigMap) is refused');
    assert.equal(may('watch', 'fgentic-projector-config'), false);
    assert.equal(may('get', 'fgentic-retrieval-config'), false);
    assert.equal(may('patch', 'fgentic-retrieval-config'), false);
    assert.equal(may('watch', 'fgentic-retrieval-config', 'kagent'), false);
    assert.equal(may('list', 'fgentic-retrieval-config', 'knowledge', 'secrets'), false);
    const projector = serviceAccountUser('knowledge', 'fgentic-projector');
    const ask = (verb: string, namespace?: string, resource = 'configmaps') =>
      api.rbac.authorize({ user: projector, verb, group: '', resource, ...(namespace ? { namespace } : {}) });
    assert.equal(ask('list', 'knowledge'), true);
    assert.equal(ask('watch', 'knowledge'), true);
    assert.equal(ask('list', 'kagent'), false);
    assert.equal(ask('list'), false);
    assert.equal(ask('patch', 'knowledge'), false);
    assert.equal(ask('list', 'knowledge', 'secrets'), false);
  });
});

describe('projector registry source as its ServiceAccount under the shipped RBAC', () => {
  it('syncs the rendered configuration and uses exactly its grants', async () => {
    const api = await new ApiServerDouble().start();
    const user = serviceAccountUser('knowledge', 'fgentic-projector');
    const { kubeConfigStore } = await import('../projector/kube-store.ts');
    const { render } = await import('./render/index.ts');
    for (const o of render(examples()).objects) if (o.kind === 'ConfigMap') api.put(o);
    const store = kubeConfigStore({
      kubeConfig: api.kubeConfig(user),
      namespace: 'knowledge',
      maxHeartbeatAgeMs: 0,
    });
    try {
      await store.synced;
      assert.equal(store.current().ready, true);
      assert.deepEqual(api.denied, []);
      assert.deepEqual(unusedGrants(api.rbac, user, api.calls), []);
    } finally {
      store.close();
      await api.stop();
    }
  });
});

describe('API-server double authorizes a list or watch by an exact metadata.name field selector as that name', () => {
  // kube-apiserver's request info takes the name of a list or watch from the selector, which is what
  // lets resourceNames grant a watch of one object (k8s.io/apiserver endpoints/request/requestinfo.go).
  it('named: allowed and filtered to that object; unnamed or another name: 403; unknown field: 400', async () => {
    const api = await new ApiServerDouble().start();
    try {
      for (const name of ['fgentic-retrieval-config', 'other'])
        api.put({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name, namespace: 'knowledge' },
          data: {},
        });
      const headers = {
        authorization: `Bearer ${api.token(serviceAccountUser('knowledge', 'knowledge-retrieval'))}`,
      };
      const get = (q: string) =>
        fetch(`http://127.0.0.1:${api.port}/api/v1/namespaces/knowledge/configmaps${q}`, { headers });
      const named = await get('?fieldSelector=metadata.name%3Dfgentic-retrieval-config');
      assert.equal(named.status, 200);
      const items = ((await named.json()) as { items: { metadata: { name: string } }[] }).items;
      assert.deepEqual(
        items.map((i) => i.metadata.name),
        ['fgentic-retrieval-config'],
      );
      assert.equal((await get('')).status, 403);
      assert.equal((await get('?fieldSelector=metadata.name%3Dother')).status, 403);
      assert.equal((await get('?fieldSelector=metadata.name%21%3Dother')).status, 403);
      const watch = await get('?watch=true&fieldSelector=metadata.name%3Dother');
      assert.equal(watch.status, 403);
      const admin = await fetch(
        `http://127.0.0.1:${api.port}/api/v1/namespaces/knowledge/configmaps?fieldSelector=data.x%3Dy`,
        { headers: { authorization: `Bearer ${api.token(ADMIN_USER)}` } },
      );
      assert.equal(admin.status, 400);
    } finally {
      await api.stop();
    }
  });
});

describe('retrieval configuration source as its ServiceAccount under the shipped RBAC', () => {
  it('syncs the rendered retrieval.json and uses exactly its grants', async () => {
    const api = await new ApiServerDouble().start();
    const user = serviceAccountUser('knowledge', 'knowledge-retrieval');
    const { kubeRetrievalConfigStore } = await import('../retrieval/config-kube.ts');
    const { render } = await import('./render/index.ts');
    for (const o of render(examples()).objects) if (o.kind === 'ConfigMap') api.put(o);
    const store = kubeRetrievalConfigStore({ kubeConfig: api.kubeConfig(user), namespace: 'knowledge' });
    try {
      await store.synced;
      assert.equal(store.current().ready, true);
      assert.deepEqual(api.denied, []);
      assert.deepEqual(unusedGrants(api.rbac, user, api.calls), []);
    } finally {
      store.close();
      await api.stop();
    }
  });
});

describe('webhook ClusterView as its ServiceAccount under the shipped RBAC', () => {
  const api = new ApiServerDouble();
  let view: KubeClusterView;
  before(async () => {
    await api.start();
    const input = examples();
    for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners]) api.put(r);
    view = new KubeClusterView(api.kubeConfig(WEBHOOK_USER), createLogger('test'));
    await view.start();
  });
  after(async () => {
    await view.stop();
    await api.stop();
  });

  it('syncs, confirms a RetrievalAgent live, and uses exactly its grants', async () => {
    await waitFor('informers synced', () => view.ready());
    assert.equal(view.rooms().length, examples().rooms.length);
    api.put({ ...examples().agents[0], metadata: { name: 'late', namespace: 'team-a' } } as never);
    assert.equal(await view.confirmRetrievalAgent('team-a', 'late', 5000), true);
    // Informers watch after listing; give the watches a moment to open.
    await waitFor('agents watch', () => api.calls.some((c) => c.verb === 'watch' && c.resource === 'agents'));
    assert.deepEqual(api.denied, []);
    assert.deepEqual(unusedGrants(api.rbac, WEBHOOK_USER, api.calls), []);
  });
});
