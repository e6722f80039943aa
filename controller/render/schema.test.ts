/**
 * Every rendered object validates against the upstream CRD schemas (agentgateway v1.3.1, Gateway API
 * v1.6.0-rc.1, kagent v0.9.11, kept in testkit/controller/upstream/): structural schema with unknown fields rejected
 * plus the CRDs' own CEL rules; core kinds against kubernetes-models 4.5.1.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { examples } from '../../testkit/controller/fixtures.ts';
import { AGENTGATEWAY_VERSIONS, upstreamObjects, upstreamValidator } from '../../testkit/controller/schema.ts';
import type { K8sObject, Resources } from '../types.ts';
import { render } from './index.ts';

const CORE: Record<string, (o: K8sObject) => void> = {
  NetworkPolicy: (o) => new NetworkPolicy(o as never).validate(),
  ConfigMap: (o) => new ConfigMap(o as never).validate(),
};

function variants(): [string, Resources][] {
  const agentService = examples();
  (agentService.platforms[0] as any).spec.a2aBackend = 'agentService';
  const inlineJwks = examples();
  const p = (inlineJwks.platforms[0] as any).spec;
  p.jwt = { issuer: 'https://issuer.example', jwksSecretRef: { name: 'jwks', key: 'jwks.json' } };
  p.liveRoomCheck = {
    enabled: true,
    homeserverUrl: 'http://ess-synapse.matrix.svc.cluster.local:8008',
    tokenSecretRef: { name: 'hs', key: 'token' },
  };
  inlineJwks.jwksInline = '{"keys":[]}';
  const privateOnly = examples();
  (privateOnly.agents[0] as any).spec.public = false;
  return [
    ['examples (controller backend)', examples()],
    ['agentService backend', agentService],
    ['inline JWKS + live room check', inlineJwks],
    ['no public route', privateOnly],
  ];
}

describe('rendered objects validate against upstream schemas', () => {
  const v = upstreamValidator();
  const byRelease = new Map(AGENTGATEWAY_VERSIONS.map((r) => [r, upstreamValidator(r)]));
  for (const [release, rv] of byRelease)
    for (const [label, input] of variants())
      it(`agentgateway ${release}, ${label}: every agentgateway object passes its schema and CEL rules`, () => {
        let checked = 0;
        for (const o of render(input).objects) {
          if (o.apiVersion !== 'agentgateway.dev/v1alpha1') continue;
          const id = `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`;
          const r = rv?.validate(o as never);
          assert.deepEqual([...(r?.schemaErrors ?? []), ...(r?.cel.failed ?? [])], [], id);
          assert.deepEqual(r?.cel.unevaluated, [], id);
          checked++;
        }
        assert.ok(checked >= 5, `${checked} agentgateway objects`);
      });
  for (const [label, input] of variants()) {
    it(`${label}: every object passes its schema and CEL rules`, () => {
      const { objects, conflicts } = render(input);
      assert.deepEqual(conflicts, []);
      assert.ok(objects.length > 10);
      const kinds = new Set<string>();
      for (const o of objects) {
        kinds.add(o.kind);
        const id = `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`;
        const core = CORE[o.kind];
        if (core) {
          assert.doesNotThrow(() => core(o), id);
          continue;
        }
        assert.ok(v?.has(o.apiVersion, o.kind), `no schema for ${id}`);
        const r = v?.validate(o as never);
        assert.deepEqual([...(r?.schemaErrors ?? []), ...(r?.cel.failed ?? [])], [], id);
        assert.deepEqual(r?.cel.unevaluated, [], id);
      }
      for (const k of [
        'AgentgatewayPolicy',
        'AgentgatewayBackend',
        'HTTPRoute',
        'Agent',
        'RemoteMCPServer',
        'NetworkPolicy',
      ])
        assert.ok(kinds.has(k), k);
    });
  }

  it('the validator is calibrated: upstream valid test CRs pass, invalid ones fail', () => {
    let valid = 0;
    let invalid = 0;
    for (const [what, expectOk] of [
      ['policy-valid', true],
      ['backend-valid', true],
      ['policy-invalid', false],
      ['backend-invalid', false],
    ] as const) {
      const file = `agentgateway-v1.3.1.api-testdata.${what}.json`;
      for (const o of upstreamObjects(file)) {
        const r = v?.validate(o);
        if (expectOk) {
          assert.deepEqual(
            [...(r?.schemaErrors ?? []), ...(r?.cel.failed ?? [])],
            [],
            `${file} ${JSON.stringify(o['metadata'])}`,
          );
          valid++;
        } else if (!r?.ok) invalid++;
        else if (r.cel.unevaluated.length === 0)
          assert.fail(`accepted invalid ${file} ${JSON.stringify(o['metadata'])}`);
      }
    }
    assert.ok(valid > 50 && invalid > 70, `valid ${valid}, invalid rejected ${invalid}`);
  });

  it('a mutated policy field is rejected (unknown fields are not pruned silently)', () => {
    const o = render(examples()).objects.find(
      (x) => x.kind === 'AgentgatewayPolicy' && x.metadata.name.startsWith('fgentic-a2a-local'),
    );
    const bad = structuredClone(o) as any;
    bad.spec.traffic.extAuth.http.includeRequestHeaders = bad.spec.traffic.extAuth.http.allowedRequestHeaders;
    delete bad.spec.traffic.extAuth.http.allowedRequestHeaders;
    assert.equal(v?.validate(bad).ok, false);
    const bad2 = structuredClone(o) as any;
    bad2.spec.traffic.authorization.action = 'Requires';
    assert.equal(v?.validate(bad2).ok, false);
  });
});
