import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decodeProjection, encodeRoomContext } from '../contract/index.ts';
import {
  AGENT_BOT,
  ALICE,
  ALICE_P,
  BOB,
  BOB_P,
  config,
  encodeContext,
  localRequest,
  NOW,
  roomContext,
  WIDE_ROOM,
} from '../testkit/projector/fixtures.ts';
import { decideMatrix, type MatrixDecision } from './matrix.ts';
import type { CheckRequest } from './request.ts';

const cfg = config();
const run = (req: CheckRequest, c = cfg): MatrixDecision => decideMatrix(req, c, { now: NOW });

function denied(d: MatrixDecision, reason: string) {
  assert.equal(d.allow, false, `expected denial ${reason}`);
  if (!d.allow) assert.equal(d.reason, reason);
}

describe('matrix route decision', () => {
  test('allows the exact request and stamps agent, iat/exp (600 s), groups [] and caller fields', () => {
    const d = run(localRequest());
    assert.ok(d.allow);
    if (!d.allow) return;
    assert.equal(d.headers['x-user-id'], ALICE);
    const p = decodeProjection(d.headers['x-fgentic-identity'], {
      now: NOW,
      agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
    });
    assert.ok(p.ok);
    if (!p.ok || p.value.kind === 'oidc_client') return;
    assert.equal(p.value.iat, NOW);
    assert.equal(p.value.exp, NOW + 600);
    assert.deepEqual(p.value.groups, []);
    assert.equal(p.value.kind, 'matrix');
    assert.equal(p.value.principal, ALICE);
    assert.deepEqual(p.value.allowed_classifications, ['public']);
    assert.deepEqual(p.value.audience, [BOB_P, ALICE_P]);
  });

  test('bridged caller: kind and network stamped from configuration', () => {
    const d = run(localRequest({ ctx: roomContext({ caller: BOB_P }), userId: BOB }));
    assert.ok(d.allow);
    if (!d.allow) return;
    const p = decodeProjection(d.headers['x-fgentic-identity'], { now: NOW, agents: 'any' });
    assert.ok(p.ok && p.value.kind === 'bridged_matrix' && p.value.network === 'slack');
  });

  test('missing raw X-User-Id (count header absent) denies missing', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-check-user-id-count': undefined } })), 'missing');
  });
  test('duplicate raw X-User-Id (count 2) denies duplicate', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-check-user-id-count': ['2'] } })), 'duplicate');
  });
  test('missing raw room context (count header absent) denies missing', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-check-room-context-count': undefined } })), 'missing');
  });
  test('duplicate raw room context (count 3) denies duplicate', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-check-room-context-count': ['3'] } })), 'duplicate');
  });
  test('malformed or repeated count headers deny', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-check-user-id-count': ['01'] } })), 'count');
    denied(run(localRequest({ headers: { 'x-fgentic-check-user-id-count': ['one'] } })), 'count');
    denied(run(localRequest({ headers: { 'x-fgentic-check-user-id-count': ['1', '1'] } })), 'count');
    denied(run(localRequest({ headers: { 'x-fgentic-check-user-id-count': ['0'] } })), 'missing');
  });
  test('count says 1 but the raw header is absent or repeated on the check request: deny', () => {
    denied(run(localRequest({ headers: { 'x-user-id': undefined } })), 'missing');
    denied(run(localRequest({ headers: { 'x-user-id': [ALICE, ALICE] } })), 'duplicate');
    denied(run(localRequest({ headers: { 'x-fgentic-room-context': undefined } })), 'missing');
  });

  test('wrong workload denies', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-check-workload': ['kagent/knowledge-agent'] } })), 'workload');
    denied(run(localRequest({ headers: { 'x-fgentic-check-workload': undefined } })), 'missing');
  });
  test('wrong agent denies', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-check-agent-name': ['other-agent'] } })), 'agent');
    denied(run(localRequest({ headers: { 'x-fgentic-check-agent-namespace': undefined } })), 'agent');
  });
  test('agent headers for another configured agent than the path denies (path)', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-check-agent-name': ['private-agent'] } })), 'path');
  });
  test('wrong path denies', () => {
    denied(run({ ...localRequest(), path: '/api/a2a/kagent/knowledge-agent/' }), 'path');
    denied(run({ ...localRequest(), path: '/api/a2a/kagent/knowledge-agent?x=1' }), 'path');
  });
  test('wrong method denies', () => {
    denied(run({ ...localRequest(), method: 'GET' }), 'method');
  });
  test('route header for the other route or repeated denies', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-check-route': ['public'] } })), 'route');
    denied(run(localRequest({ headers: { 'x-fgentic-check-route': ['local', 'local'] } })), 'route');
  });
  test('a check header of the public route on the local route denies', () => {
    denied(
      run(localRequest({ headers: { 'x-fgentic-check-jwt-issuer': ['https://issuer.example'] } })),
      'unexpected_header',
    );
  });

  test('localpart-only MXID denies', () => {
    denied(run(localRequest({ userId: 'alice' })), 'principal');
    const ctx = { ...roomContext(), caller: { kind: 'matrix', principal: 'alice' } };
    denied(run(localRequest({ ctx: encodeContext(ctx), userId: 'alice' })), 'principal');
  });
  test('mixed kinds in the room context deny', () => {
    const ctx = { ...roomContext(), caller: { kind: 'matrix', network: 'slack', principal: ALICE } };
    denied(run(localRequest({ ctx: encodeContext(ctx) })), 'network');
    const withClient = { ...roomContext(), client: { issuer: 'x' } };
    denied(run(localRequest({ ctx: encodeContext(withClient) })), 'unknown_field');
  });
  test('caller mismatch (room context caller differs from X-User-Id) denies', () => {
    denied(run(localRequest({ userId: '@mallory:org-a.example' })), 'caller_mismatch');
  });
  test('bridge-claimed kind ignored: a context claiming another kind than the configuration denies', () => {
    // Bob is a Slack ghost by configuration; the bridge claims he is a native Matrix user.
    const ctx = roomContext({
      members: [
        { principal: BOB, kind: 'matrix', event_id: '$b' },
        { principal: ALICE, kind: 'matrix', event_id: '$a' },
      ],
      caller: { kind: 'matrix', principal: BOB },
    });
    denied(run(localRequest({ ctx, userId: BOB })), 'caller_kind');
    // Alice claimed as a bridged ghost of another network.
    const ctx2 = roomContext({
      members: [{ principal: ALICE, kind: 'bridged_matrix', network: 'irc', event_id: '$a' }],
      caller: { kind: 'bridged_matrix', network: 'irc', principal: ALICE },
    });
    denied(run(localRequest({ ctx: ctx2 })), 'caller_kind');
    // An audience member claimed with the wrong kind.
    const ctx3 = roomContext({
      members: [
        { principal: BOB, kind: 'matrix', event_id: '$b' },
        { principal: ALICE, kind: 'matrix', event_id: '$a' },
      ],
    });
    denied(run(localRequest({ ctx: ctx3 })), 'audience_kind');
  });
  test('a bridge service identity as caller or in the audience denies', () => {
    const ctx = roomContext({
      members: [
        { principal: AGENT_BOT, kind: 'matrix', event_id: '$g' },
        { principal: ALICE, kind: 'matrix', event_id: '$a' },
      ],
    });
    denied(run(localRequest({ ctx })), 'audience_service');
    const ctx2 = roomContext({
      members: [{ principal: AGENT_BOT, kind: 'matrix', event_id: '$g' }],
      caller: { kind: 'matrix', principal: AGENT_BOT },
    });
    denied(run(localRequest({ ctx: ctx2, userId: AGENT_BOT })), 'caller_kind');
  });
  test('unregistered room denies', () => {
    denied(run(localRequest({ ctx: roomContext({ roomId: '!other:org-a.example' }) })), 'room_unregistered');
  });
  test('widened classification denies', () => {
    const ctx = roomContext({ classifications: ['approved_non_public', 'public'] });
    denied(run(localRequest({ ctx })), 'classification_widened');
  });
  test('narrower classification than the registry also denies (fail closed)', () => {
    denied(run(localRequest({ ctx: roomContext({ roomId: WIDE_ROOM }) })), 'classification_mismatch');
    const ok = run(
      localRequest({
        ctx: roomContext({ roomId: WIDE_ROOM, classifications: ['approved_non_public', 'public'] }),
      }),
    );
    assert.ok(ok.allow);
  });
  test('room context encoding failures deny with the contract reason', () => {
    denied(run(localRequest({ ctx: 'not base64url!' })), 'encoding');
    const bad = { ...roomContext(), delegation_id: 'abc' };
    denied(run(localRequest({ ctx: encodeContext(bad) })), 'delegation_id');
  });
  test('a client-supplied X-Fgentic-Identity (or its count) denies', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-identity': ['e30'] } })), 'identity_present');
    denied(run(localRequest({ headers: { 'x-fgentic-check-identity-count': ['1'] } })), 'identity_present');
  });
  test('an identity-bearing header the policy never sends denies; mesh plumbing does not', () => {
    denied(run(localRequest({ headers: { 'x-fgentic-data-classification': ['public'] } })), 'unexpected_header');
    denied(run(localRequest({ headers: { 'x-forwarded-user': ['alice'] } })), 'unexpected_header');
    assert.ok(run(localRequest({ headers: { 'x-forwarded-for': ['10.0.0.1'] } })).allow);
  });
  test('a body (or announced body) denies', () => {
    denied(run(localRequest({ headers: { 'x-envoy-auth-partial-body': ['false'] } })), 'body');
    denied(run(localRequest({ headers: { 'content-length': ['12'] } })), 'body');
    denied(run(localRequest({ headers: { 'transfer-encoding': ['chunked'] } })), 'body');
    assert.ok(run(localRequest({ headers: { 'content-length': ['0'], 'content-type': ['application/json'] } })).allow);
  });
  test('no credential/cookie ever read: Authorization or Cookie present denies by name alone', () => {
    denied(run(localRequest({ headers: { authorization: ['Bearer secret'] } })), 'credential_header');
    denied(run(localRequest({ headers: { cookie: ['session=1'] } })), 'credential_header');
    // The value is never consulted: an object whose value getter throws still only denies.
    const headers: Record<string, string[]> = { ...localRequest().headers } as Record<string, string[]>;
    Object.defineProperty(headers, 'cookie', {
      enumerable: true,
      get() {
        return new Proxy([], {
          get() {
            throw new Error('cookie value read');
          },
        });
      },
    });
    denied(run({ ...localRequest(), headers }), 'credential_header');
  });

  test('size ceiling: a room context near 8,192 bytes whose projection would exceed it denies, never emits', () => {
    const longRoom = `!${'r'.repeat(240)}:org-a.example`;
    const c = config((x) => x.rooms.push({ roomId: longRoom, allowedClassifications: ['public'] }));
    let largest: { ctx: string; caller: string } | undefined;
    for (let pad = 150; pad <= 237; pad += 1) {
      const members = Array.from({ length: 16 }, (_, k) => ({
        principal: `@slack-${String(k).padStart(2, '0')}${'x'.repeat(pad - 4)}:org-a.example`,
        kind: 'bridged_matrix' as const,
        network: 'slack',
        event_id: `$${'e'.repeat(200)}${k}`,
      }));
      let ctx: ReturnType<typeof roomContext>;
      try {
        ctx = roomContext({
          roomId: longRoom,
          eventId: `$${'v'.repeat(254)}`,
          members,
          caller: { kind: 'bridged_matrix', network: 'slack', principal: members[0]!.principal },
        });
      } catch {
        break;
      }
      const encoded = encodeRoomContext(ctx);
      if (!encoded.ok) break;
      largest = { ctx: encoded.value, caller: members[0]!.principal };
    }
    assert.ok(largest && largest.ctx.length > 8100, String(largest?.ctx.length));
    const d = run(localRequest({ ctx: largest.ctx, userId: largest.caller }), c);
    // The projection adds agent, iat/exp, kind, principal and groups (> 100 bytes) to the context.
    assert.equal(d.allow, false);
    if (!d.allow) assert.match(d.reason, /^(oversized|decoded_oversized)$/);
  });
});
