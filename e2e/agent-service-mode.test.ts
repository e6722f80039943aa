/**
 * `RetrievalPlatform.spec.a2aBackend: agentService` (docs/decisions.md#d9-a2a-backend): the gateway routes straight
 * to the Agent pod, which speaks A2A 0.3 only, so the bridge uses the SDK's 0.3 transport and the
 * rendered authorization allows the 0.3 method names. The same identity and delegation rules hold.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseAllDocuments, stringify } from 'yaml';
import { bridgeRequestHeaders, bridgeSend } from '../local/doubles/bridge.ts';
import { ALICE, BOB, GENERAL_ROOM, groundedSources, rawA2A, roomSnapshot } from '../local/helpers.ts';
import { EXAMPLES_DIR, type LocalStack, startLocalStack } from '../local/stack.ts';

let stack: LocalStack;
let examples: string;
before(async () => {
  examples = mkdtempSync(join(tmpdir(), 'fgentic-agentservice-'));
  cpSync(EXAMPLES_DIR, examples, { recursive: true });
  const file = join(examples, 'platform.yaml');
  const platform = parseAllDocuments(readFileSync(file, 'utf8'))[0]!.toJS();
  platform.spec.a2aBackend = 'agentService';
  writeFileSync(file, stringify(platform));
  stack = await startLocalStack({ examplesDir: examples });
});
after(async () => {
  await stack?.close();
  rmSync(examples, { recursive: true, force: true });
});

function headers(): Record<string, string> {
  return bridgeRequestHeaders({
    apiKey: stack.bridgeApiKey,
    snapshot: roomSnapshot(GENERAL_ROOM, [ALICE]),
    caller: ALICE,
  }).headers;
}

const legacyParams = (text: string, extra: Record<string, unknown> = {}) => ({
  message: {
    kind: 'message',
    messageId: `m-${text}`,
    role: 'user',
    parts: [{ kind: 'text', text }],
    ...extra,
  },
});

describe('agentService backend (A2A 0.3 straight to the pod)', () => {
  test('the backend is the Agent Service and the card advertises A2A 0.3', () => {
    type Backend = { kind: string; spec: { a2a?: { host: string; port: number } } };
    const backend = (stack.objects as unknown as Backend[]).find((o) => o.kind === 'AgentgatewayBackend' && o.spec.a2a);
    assert.equal(backend?.spec.a2a?.host, 'knowledge-agent.kagent.svc.cluster.local');
    assert.equal(backend?.spec.a2a?.port, 8080);
    assert.equal(stack.card.supportedInterfaces[0]!.protocolVersion, '0.3');
  });

  test('the bridge (SDK 0.3 transport) gets the audience intersection, with the carrier delivered to the pod', async () => {
    const { task } = await bridgeSend({
      routeUrl: stack.localRouteUrl,
      card: stack.card,
      apiKey: stack.bridgeApiKey,
      snapshot: roomSnapshot(GENERAL_ROOM, [ALICE, BOB]),
      caller: ALICE,
      text: 'handbook',
    });
    assert.deepEqual(groundedSources(task), ['handbook/onboarding', 'handbook/travel']);
    assert.ok(stack.runtime.receivedHeaders.at(-1)!['x-fgentic-identity']);
    assert.equal(stack.runtime.receivedHeaders.at(-1)!['x-fgentic-room-context'], undefined);
  });

  test('a 0.3 message/send with a contextId or taskId is rejected', async () => {
    for (const extra of [{ contextId: 'c' }, { taskId: 't' }, { referenceTaskIds: [] }]) {
      const r = await rawA2A(
        stack.localRouteUrl,
        { ...headers(), 'a2a-version': '0.3' },
        'message/send',
        legacyParams('x', extra),
      );
      assert.equal(r.status, 403, JSON.stringify(extra));
    }
  });

  test('an A2A 1.0 SendMessage is not a method this route admits', async () => {
    const r = await rawA2A(stack.localRouteUrl, headers(), 'SendMessage', {
      message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'x' }] },
    });
    assert.equal(r.status, 403);
  });
});
