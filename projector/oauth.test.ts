import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeProjection, oauthUserId } from '../contract/index.ts';
import {
  ALICE,
  config,
  encodeContext,
  fixedRandom,
  ISSUER,
  NOW,
  publicRequest,
  roomContext,
} from '../testkit/projector/fixtures.ts';
import type { ProjectorConfig } from './config.ts';
import { decideOAuth, type OAuthDecision } from './oauth.ts';
import type { CheckRequest } from './request.ts';

const cfg = config();
const run = (req: CheckRequest, c: ProjectorConfig = cfg, now = NOW): OAuthDecision =>
  decideOAuth(req, c, { now, randomBytes: fixedRandom });

function denied(d: OAuthDecision, reason: string) {
  assert.equal(d.allow, false, `expected denial ${reason}`);
  if (!d.allow) assert.equal(d.reason, reason);
}

describe('oauth route decision', () => {
  test('allows a registered client and derives identity only from the validated JWT metadata', () => {
    const d = run(publicRequest());
    assert.ok(d.allow);
    if (!d.allow) return;
    assert.equal(
      d.headers['x-user-id'],
      oauthUserId('org-b', { issuer: ISSUER, audience: 'fgentic-a2a', azp: 'org-b-a2a' }),
    );
    assert.match(d.headers['x-user-id'], /^oidc:org-b:[0-9a-f]{64}$/);
    const p = decodeProjection(d.headers['x-fgentic-identity'], {
      now: NOW,
      agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
    });
    assert.ok(p.ok && p.value.kind === 'oidc_client');
    if (!p.ok || p.value.kind !== 'oidc_client') return;
    assert.deepEqual(p.value.client, {
      audience: 'fgentic-a2a',
      azp: 'org-b-a2a',
      issuer: ISSUER,
      policy_id: 'org-b',
    });
    assert.deepEqual(p.value.groups, ['partner/org-b/docs']);
    assert.equal(p.value.delegation_id, 'ab'.repeat(32));
    assert.equal(p.value.iat, NOW);
    assert.equal(p.value.exp, NOW + 600);
  });

  test('exp is capped by the token expiry', () => {
    const d = run(publicRequest({ exp: NOW + 100 }));
    assert.ok(d.allow);
    if (!d.allow) return;
    const p = decodeProjection(d.headers['x-fgentic-identity'], { now: NOW, agents: 'any' });
    assert.ok(p.ok && p.value.exp === NOW + 100);
  });

  test('near-expiry token at the boundary: remaining == timeout + 30 denies, + 31 allows', () => {
    // timeout 30 ⇒ threshold 60 s.
    denied(run(publicRequest({ exp: NOW + 60 })), 'token_near_expiry');
    assert.ok(run(publicRequest({ exp: NOW + 61 })).allow);
    denied(run(publicRequest({ exp: NOW })), 'token_near_expiry');
    denied(run(publicRequest({ exp: NOW - 1 })), 'token_near_expiry');
    const c1 = config((c) => (c.publicRetrievalTimeoutSeconds = 1));
    denied(run(publicRequest({ exp: NOW + 31 }), c1), 'token_near_expiry');
    assert.ok(run(publicRequest({ exp: NOW + 32 }), c1).allow);
  });

  test('invalid timeout setting (0, 61, missing) denies everything', () => {
    for (const bad of [0, 61, undefined, 1.5]) {
      const c = { ...cfg, publicRetrievalTimeoutSeconds: bad } as unknown as ProjectorConfig;
      denied(run(publicRequest(), c), 'timeout_setting');
    }
  });

  test('unknown partner mapping denies', () => {
    denied(run(publicRequest({ azp: 'org-c-a2a' })), 'partner_unknown');
    denied(run(publicRequest({ iss: 'https://issuer.example/' })), 'partner_unknown');
    denied(run(publicRequest({ aud: 'FGENTIC-A2A' })), 'partner_unknown');
  });

  test('overlapping partner mapping denies at decision time too (defence in depth)', () => {
    const key = [...cfg.partnerIndex.keys()][0]!;
    const entry = cfg.partnerIndex.get(key)![0]!;
    const overlapping = { ...cfg, partnerIndex: new Map([[key, [entry, { ...entry, policyId: 'org-c' }]]]) };
    denied(run(publicRequest(), overlapping), 'partner_ambiguous');
  });

  test('partner not bound to this agent denies', () => {
    const c = config((x) => (x.partners[0].agents = [{ namespace: 'kagent', name: 'private-agent' }]));
    denied(run(publicRequest(), c), 'partner_agent');
  });

  test('missing, repeated or malformed JWT metadata denies', () => {
    denied(run(publicRequest({ headers: { 'x-fgentic-check-jwt-azp': undefined } })), 'jwt');
    denied(run(publicRequest({ headers: { 'x-fgentic-check-jwt-issuer': [ISSUER, ISSUER] } })), 'jwt');
    denied(run(publicRequest({ headers: { 'x-fgentic-check-jwt-exp': ['1.7841174005e+09'] } })), 'jwt');
    denied(run(publicRequest({ headers: { 'x-fgentic-check-jwt-exp': ['-1'] } })), 'jwt');
    denied(run(publicRequest({ headers: { 'x-fgentic-check-jwt-exp': ['01784120400'] } })), 'jwt');
  });

  test('caller-supplied X-User-Id or room context on the public route denies', () => {
    denied(run(publicRequest({ headers: { 'x-user-id': [ALICE] } })), 'unexpected_header');
    denied(
      run(publicRequest({ headers: { 'x-fgentic-room-context': [encodeContext(roomContext())] } })),
      'unexpected_header',
    );
    denied(run(publicRequest({ headers: { 'x-fgentic-check-workload': ['matrix-a2a-bridge'] } })), 'unexpected_header');
  });

  test('wrong agent, path, method deny; agent without public route denies', () => {
    denied(run(publicRequest({ headers: { 'x-fgentic-check-agent-name': ['nope'] } })), 'agent');
    denied(run(publicRequest({ headers: { 'x-fgentic-check-agent-name': ['private-agent'] } })), 'agent');
    denied(run({ ...publicRequest(), path: '/api/a2a/kagent/knowledge-agent' }), 'path');
    denied(run({ ...publicRequest(), method: 'PUT' }), 'method');
  });

  test('no credential/cookie ever read: Authorization or Cookie present denies', () => {
    denied(run(publicRequest({ headers: { authorization: ['Bearer eyJ...'] } })), 'credential_header');
    denied(run(publicRequest({ headers: { cookie: ['a=b'] } })), 'credential_header');
  });

  test('delegation_id comes from 32 injected random bytes', () => {
    const d = decideOAuth(publicRequest(), cfg, { now: NOW, randomBytes: (n) => new Uint8Array(n).fill(1) });
    assert.ok(d.allow);
    if (!d.allow) return;
    const p = decodeProjection(d.headers['x-fgentic-identity'], { now: NOW, agents: 'any' });
    assert.ok(p.ok && p.value.delegation_id === '01'.repeat(32));
    const short = decideOAuth(publicRequest(), cfg, { now: NOW, randomBytes: () => new Uint8Array(8) });
    denied(short, 'internal');
  });
});
