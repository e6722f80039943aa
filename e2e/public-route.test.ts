/**
 * The public (partner OAuth) route end to end: JWT authentication at the gateway double (jose,
 * ES256, kid required), the real projector minting an OAuth projection from the validated JWT
 * metadata and one registry entry, retrieval by partner groups only.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { bridgeClient, textMessage } from '../local/doubles/bridge.ts';
import { answerText, groundedSources, rawA2A, sendParams } from '../local/helpers.ts';
import { type LocalStack, startLocalStack } from '../local/stack.ts';

let stack: LocalStack;
const T0 = Math.floor(Date.now() / 1000);
before(async () => {
  // The projector and retrieval server share one fixed clock so token lifetimes are exact.
  stack = await startLocalStack({ now: () => T0 });
});
after(async () => {
  await stack?.close();
});

async function partnerAsk(azp: string, text = 'integration', expiresInSeconds = 300) {
  const token = await stack.issueToken({ azp, expiresInSeconds });
  const client = await bridgeClient(stack.publicRouteUrl, stack.card, { authorization: `Bearer ${token}` });
  return client.sendMessage(textMessage(text) as any);
}

describe('public route: partner clients', () => {
  test('org B (public only) reads only chunks shared with partner/org-b/docs', async () => {
    const task = await partnerAsk('org-b-a2a');
    assert.equal(answerText(task), 'grounded answer');
    assert.deepEqual(groundedSources(task), ['handbook/onboarding', 'partners/org-b-integration']);
  });

  test('org D (approved_non_public by agreement) reads its engineering group, never principals-only rows', async () => {
    const task = await partnerAsk('org-d-a2a', 'architecture');
    assert.deepEqual(groundedSources(task), ['engineering/roadmap', 'partners/org-d-architecture']);
  });

  test('X-User-Id for the partner is the OAuth attribution id, and no Matrix identity reaches the agent', async () => {
    await partnerAsk('org-b-a2a');
    const seen = stack.runtime.receivedHeaders.at(-1)!;
    assert.match(seen['x-user-id'] ?? '', /^oidc:org-b:[0-9a-f]{64}$/);
    assert.equal(seen['authorization'], undefined);
  });

  test('an unknown partner mapping (unregistered azp) is denied', async () => {
    const token = await stack.issueToken({ azp: 'org-x-a2a' });
    const r = await rawA2A(stack.publicRouteUrl, { authorization: `Bearer ${token}` }, 'SendMessage', sendParams('x'));
    assert.equal(r.status, 403);
  });

  test('a token for another audience or issuer is rejected by JWT authentication', async () => {
    const wrongAud = await stack.issueToken({ azp: 'org-b-a2a', aud: 'other-api' });
    assert.equal(
      (await rawA2A(stack.publicRouteUrl, { authorization: `Bearer ${wrongAud}` }, 'SendMessage', sendParams('x')))
        .status,
      401,
    );
    const wrongIss = await stack.issueToken({ azp: 'org-b-a2a', iss: 'https://evil.example' });
    assert.equal(
      (await rawA2A(stack.publicRouteUrl, { authorization: `Bearer ${wrongIss}` }, 'SendMessage', sendParams('x')))
        .status,
      401,
    );
    assert.equal((await rawA2A(stack.publicRouteUrl, {}, 'SendMessage', sendParams('x'))).status, 401);
  });

  test('near-expiry token: remaining lifetime of exactly timeout + 30 s is denied, one second more is admitted', async () => {
    const atBoundary = await stack.issueToken({ azp: 'org-b-a2a', expiresInSeconds: 30 + 30 });
    const r = await rawA2A(
      stack.publicRouteUrl,
      { authorization: `Bearer ${atBoundary}` },
      'SendMessage',
      sendParams('x'),
    );
    assert.equal(r.status, 403);
    assert.match(r.body, /"reason"/);
    const task = await partnerAsk('org-b-a2a', 'integration', 30 + 31);
    assert.equal(answerText(task), 'grounded answer');
  });

  test('caller-supplied X-User-Id has no authority; a caller-supplied room context is rejected', async () => {
    const token = await stack.issueToken({ azp: 'org-b-a2a' });
    const client = await bridgeClient(stack.publicRouteUrl, stack.card, {
      authorization: `Bearer ${token}`,
      'x-user-id': '@alice:org-a.example',
    });
    const task = await client.sendMessage(textMessage('oncall') as any);
    assert.ok(!groundedSources(task).includes('engineering/oncall'));
    assert.match(stack.runtime.receivedHeaders.at(-1)!['x-user-id'] ?? '', /^oidc:org-b:/);
    const withRoom = await rawA2A(
      stack.publicRouteUrl,
      { authorization: `Bearer ${token}`, 'x-fgentic-room-context': 'eyJ2IjoxfQ' },
      'SendMessage',
      sendParams('x'),
    );
    assert.equal(withRoom.status, 403);
  });
});

describe('public route: no task read or cancel, synchronous only', () => {
  for (const method of ['GetTask', 'CancelTask']) {
    test(`${method} is forbidden on the public route`, async () => {
      const token = await stack.issueToken({ azp: 'org-b-a2a' });
      const r = await rawA2A(stack.publicRouteUrl, { authorization: `Bearer ${token}` }, method, {
        id: 'any-task',
      });
      assert.equal(r.status, 403);
    });
  }

  test('returnImmediately true (a nonterminal result) is rejected', async () => {
    const token = await stack.issueToken({ azp: 'org-b-a2a' });
    const r = await rawA2A(
      stack.publicRouteUrl,
      { authorization: `Bearer ${token}` },
      'SendMessage',
      sendParams('x', {}, { returnImmediately: true }),
    );
    assert.equal(r.status, 403);
  });

  test('returnImmediately false is admitted', async () => {
    const token = await stack.issueToken({ azp: 'org-b-a2a' });
    const r = await rawA2A(
      stack.publicRouteUrl,
      { authorization: `Bearer ${token}` },
      'SendMessage',
      sendParams('integration', {}, { returnImmediately: false }),
    );
    assert.equal(r.status, 200, r.body);
  });

  test('a caller-supplied contextId is rejected on the public route too', async () => {
    const token = await stack.issueToken({ azp: 'org-b-a2a' });
    const r = await rawA2A(
      stack.publicRouteUrl,
      { authorization: `Bearer ${token}` },
      'SendMessage',
      sendParams('x', { contextId: 'c' }),
    );
    assert.equal(r.status, 403);
  });
});
