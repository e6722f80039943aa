import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MAX_AGENTS } from '../rules/index.ts';
import {
  admissionReview,
  partner,
  plainAgent,
  platform,
  retrievalAgent,
  retrievalAgentCr,
  room,
} from '../testkit/webhook.ts';
import { review } from './review.ts';
import type { KubeObject } from './rules/types.ts';
import { StaticClusterView } from './view.ts';

const LEGACY = '!abc:org-a.example';
const V12 = `!${'A'.repeat(43)}`;

function check(obj: KubeObject, others: KubeObject[], op: 'CREATE' | 'UPDATE' = 'CREATE') {
  const body = admissionReview(obj, op === 'UPDATE' ? { operation: 'UPDATE', oldObject: obj } : {});
  const r = review(body, new StaticClusterView(others)).review.response;
  assert.equal(r.uid, (body['request'] as { uid: string }).uid);
  return r;
}

function deniedWith(r: ReturnType<typeof check>, reason: string): void {
  assert.equal(r.allowed, false, `expected ${reason}`);
  assert.equal(r.status?.code, 403);
  assert.match(r.status?.message ?? '', new RegExp(`\\[${reason}\\]`));
}

describe('RetrievalRoom', () => {
  test('unique room IDs', () => {
    assert.equal(check(room('a', LEGACY), [room('b', V12)]).allowed, true);
    const r = check(room('a', LEGACY), [room('b', LEGACY)]);
    deniedWith(r, 'room-duplicate');
    assert.match(r.status?.message ?? '', /RetrievalRoom b/);
    // An UPDATE of the same room does not collide with itself.
    assert.equal(check(room('a', LEGACY), [room('a', LEGACY)], 'UPDATE').allowed, true);
  });

  test('room ID grammar', () => {
    deniedWith(check(room('a', 'not-a-room'), []), 'room-id');
  });

  test('approved_non_public only with an agreement reference (and the reverse)', () => {
    const both = ['approved_non_public', 'public'];
    deniedWith(check(room('a', LEGACY, { allowedClassifications: both }), []), 'agreement-required');
    assert.equal(
      check(room('a', LEGACY, { allowedClassifications: both, agreementRef: 'dpa-2026' }), []).allowed,
      true,
    );
    deniedWith(check(room('a', LEGACY, { agreementRef: 'dpa-2026' }), []), 'agreement-unexpected');
    deniedWith(check(room('a', LEGACY, { allowedClassifications: ['approved_non_public'] }), []), 'classifications');
  });
});

describe('PartnerClient', () => {
  test('the (issuer, audience, azp) mapping key is unique', () => {
    const other = partner('other', { policyId: 'org-c', groups: ['partner/org-c/docs'] });
    const r = check(partner('org-b'), [other]);
    deniedWith(r, 'partner-duplicate');
    assert.equal(check(partner('org-b'), [partner('other', { azp: 'x' })]).allowed, true);
    assert.equal(check(partner('org-b'), [partner('org-b')], 'UPDATE').allowed, true);
  });

  test('groups belong to the partner policy and do not collide with local groups', () => {
    deniedWith(check(partner('p', { groups: ['partner/org-x/docs'] }), []), 'partner-groups');
    deniedWith(check(partner('p', { groups: ['docs'] }), []), 'partner-groups');
    deniedWith(check(partner('p', { groups: [] }), []), 'partner-groups');
    deniedWith(check(partner('p', { groups: ['partner/org-b/docs', 'partner/org-b/docs'] }), []), 'partner-groups');
    deniedWith(check(partner('p'), [platform('kagent', ['partner/org-b/docs'])]), 'group-collision');
  });

  test('approved_non_public only with agreementRef', () => {
    deniedWith(
      check(partner('p', { allowedClassifications: ['approved_non_public', 'public'] }), []),
      'agreement-required',
    );
    assert.equal(
      check(partner('p', { allowedClassifications: ['approved_non_public', 'public'], agreementRef: 'a' }), [
        retrievalAgentCr(),
      ]).allowed,
      true,
    );
  });

  test('an unknown or non-public RetrievalAgent is a warning, not a denial', () => {
    const r = check(partner('p'), []);
    assert.equal(r.allowed, true);
    assert.match(r.warnings?.join() ?? '', /partner-agent-unknown/);
    const r2 = check(partner('p'), [retrievalAgentCr()]);
    assert.equal(r2.allowed, true);
    assert.match(r2.warnings?.join() ?? '', /partner-agent-not-public/);
    const pub = retrievalAgentCr();
    (pub['spec'] as Record<string, unknown>)['public'] = true;
    assert.equal(check(partner('p'), [pub]).warnings, undefined);
  });
});

describe('RetrievalPlatform', () => {
  test('local groups never start with partner/ nor equal a partner group', () => {
    assert.equal(check(platform('kagent', ['staff']), [partner('p')]).allowed, true);
    deniedWith(check(platform('kagent', ['partner/org-b/docs']), [partner('p')]), 'group-collision');
    deniedWith(check(platform('kagent', ['partner/anything']), []), 'group-collision');
    deniedWith(check(platform('kagent', ['staff', 'staff']), []), 'local-groups');
  });

  test('it is named default', () => {
    const p = platform();
    (p['metadata'] as { name: string }).name = 'other';
    deniedWith(check(p, []), 'platform-name');
  });
});

describe('RetrievalAgent', () => {
  test('one RetrievalAgent per kagent Agent: it must not adopt a foreign Agent', () => {
    const foreign = plainAgent('knowledge-agent', 'kagent');
    deniedWith(check(retrievalAgentCr(), [foreign]), 'agent-not-managed');
    assert.equal(check(retrievalAgentCr(), [retrievalAgent()]).allowed, true);
    assert.equal(check(retrievalAgentCr(), []).allowed, true);
  });

  test('a RetrievalAgent created past the agent bound is refused (agent-limit); an update never is', () => {
    const existing = Array.from({ length: MAX_AGENTS }, (_, i) => retrievalAgentCr(`agent-${i}`, 'team'));
    const r = check(retrievalAgentCr(), existing);
    deniedWith(r, 'agent-limit');
    assert.match(r.status?.message ?? '', /metadata\.name/);
    // At the bound the last one is admitted, and an existing one may still change.
    assert.equal(check(retrievalAgentCr(), existing.slice(1)).allowed, true);
    assert.equal(check(existing[0] as KubeObject, existing, 'UPDATE').allowed, true);
  });

  test('the RetrievalAgent rule: its name is a DNS-1123 label (its routes and both servers need one)', () => {
    deniedWith(check(retrievalAgentCr('a.b'), []), 'agent-name');
  });

  test('DELETE is admitted; unsupported versions and kinds fail closed', () => {
    const body = admissionReview(null, { operation: 'DELETE', oldObject: retrievalAgentCr() });
    assert.equal(review(body, new StaticClusterView()).review.response.allowed, true);
    const v2 = retrievalAgentCr();
    v2['apiVersion'] = 'retrieval.fgentic.dev/v1beta1';
    deniedWith(check(v2, []), 'version-unsupported');
    const odd = retrievalAgentCr();
    odd['kind'] = 'RetrievalThing';
    deniedWith(check(odd, []), 'kind-unsupported');
  });
});
