/**
 * The cluster checks' logic against the API-server double, so none of it is dead code without a
 * cluster: the RBAC table's access checks go through SubjectAccessReview (what `kubectl auth can-i
 * --as` sends), the kubectl arguments are the documented form, and the bypass probe pods pass the
 * Pod schema and the restricted Pod Security profile's fields.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Pod } from 'kubernetes-models/v1/Pod';
import { ADMIN_USER, ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { accessChecks, bypassProbes, canIArgs, probePod, subjectAccessReview } from './checks.ts';

describe('cluster access checks against the API-server double', () => {
  const api = new ApiServerDouble();
  before(async () => {
    await api.start();
  });
  after(() => api.stop());

  const checks = accessChecks(api.rbac);
  it('covers every grant of every ServiceAccount plus the must-refuse list', () => {
    const users = [...new Set(checks.map((c) => c.user))];
    assert.equal(
      checks.filter((c) => c.expect).length,
      users.reduce((n, u) => n + api.rbac.grants(u).length, 0),
    );
    assert.ok(checks.filter((c) => !c.expect).length >= 10);
  });
  for (const c of checks)
    it(c.name, async () => {
      const r = await fetch(`http://127.0.0.1:${api.port}/apis/authorization.k8s.io/v1/subjectaccessreviews`, {
        method: 'POST',
        headers: { authorization: `Bearer ${api.token(ADMIN_USER)}`, 'content-type': 'application/json' },
        body: JSON.stringify(subjectAccessReview(c)),
      });
      assert.equal(r.status, 201);
      assert.equal(((await r.json()) as { status: { allowed: boolean } }).status.allowed, c.expect);
    });
});

describe('kubectl auth can-i arguments', () => {
  it('resource.group/name, --subresource, namespace or --all-namespaces, --as the ServiceAccount', () => {
    assert.deepEqual(
      canIArgs({
        name: 'x',
        user: 'system:serviceaccount:fgentic-system:fgentic-retrieval-controller',
        verb: 'patch',
        group: 'retrieval.fgentic.dev',
        resource: 'retrievalagents',
        subresource: 'status',
        expect: true,
      }),
      [
        'auth',
        'can-i',
        'patch',
        'retrievalagents.retrieval.fgentic.dev',
        '--subresource=status',
        '--all-namespaces',
        '--as',
        'system:serviceaccount:fgentic-system:fgentic-retrieval-controller',
      ],
    );
    assert.deepEqual(
      canIArgs({
        name: 'y',
        user: 'u',
        verb: 'get',
        group: '',
        resource: 'secrets',
        namespace: 'kagent',
        resourceName: 's',
        expect: true,
      }),
      ['auth', 'can-i', 'get', 'secrets/s', '-n', 'kagent', '--as', 'u'],
    );
  });
});

describe('bypass probe pods', () => {
  for (const [i, p] of bypassProbes().entries())
    it(`${p.name}: a valid, unprivileged Pod`, () => {
      const pod = probePod(p, i) as any;
      assert.doesNotThrow(() => new Pod(pod).validate());
      assert.equal(pod.metadata.namespace, p.namespace);
      assert.equal(pod.spec.automountServiceAccountToken, false);
      assert.equal(pod.spec.containers[0].securityContext.allowPrivilegeEscalation, false);
      assert.ok(pod.spec.containers[0].args.includes(p.url));
    });
});
