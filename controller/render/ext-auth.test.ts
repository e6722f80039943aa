/**
 * Every ext-auth hop to the projector carries an explicit deadline and never a response cache:
 * agentgateway v1.4 raised the HTTP ext-auth default timeout from 200 ms to 2 s, and its optional
 * ext-auth cache would replay one caller's identity to another unless the key covered every header
 * the projector reads (shared/upstream/agentgateway-v1.4.1/README.md).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { examples } from '../../testkit/controller/fixtures.ts';
import type { K8sObject } from '../types.ts';
import { render } from './index.ts';

type Y = any;

function extAuthPolicies(objects: K8sObject[]): Y[] {
  return objects.filter((o: Y) => o.kind === 'AgentgatewayPolicy' && o.spec?.traffic?.extAuth);
}

describe('ext-auth to the projector', () => {
  const agentService = examples();
  (agentService.platforms[0] as Y).spec.a2aBackend = 'agentService';
  for (const [label, input] of [
    ['examples', examples()],
    ['agentService backend', agentService],
  ] as const) {
    const objects = render(input).objects;

    it(`${label}: every ext-auth backend Service has an explicit request timeout`, () => {
      const policies = extAuthPolicies(objects);
      assert.ok(policies.length >= 2, `${policies.length} ext-auth policies`);
      for (const p of policies) {
        const ref = p.spec.traffic.extAuth.backendRef;
        assert.equal(ref.kind, 'Service');
        const timeout = objects.find(
          (o: Y) =>
            o.kind === 'AgentgatewayPolicy' &&
            o.metadata.namespace === (ref.namespace ?? p.metadata.namespace) &&
            o.spec?.targetRefs?.some((t: Y) => t.kind === 'Service' && t.group === '' && t.name === ref.name),
        ) as Y;
        assert.ok(timeout, `${p.metadata.name}: no backend policy on Service ${ref.name}`);
        assert.match(String(timeout.spec.backend?.http?.requestTimeout), /^[0-9]+(ms|s)$/);
      }
    });

    it(`${label}: no ext-auth policy enables response caching`, () => {
      for (const p of extAuthPolicies(objects))
        assert.equal(p.spec.traffic.extAuth.cache, undefined, `${p.metadata.name}: extAuth.cache`);
    });
  }
});
