/**
 * The local (Matrix bridge) route end to end: the real A2A SDK client as the bridge, the gateway
 * double executing the rendered policy, the real projector, the kagent runtime double, the real
 * retrieval server over the real MCP SDK transport, PGlite through pg.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ClientFactory } from '@a2a-js/sdk/client';
import { stateDigest } from '../contract/index.ts';
import { bridgeClient, bridgeRequestHeaders, bridgeSend, mayDeliver, textMessage } from '../local/doubles/bridge.ts';
import {
  ALICE,
  answerText,
  BOB,
  CAROL,
  ENGINEERING_ROOM,
  GENERAL_ROOM,
  groundedSources,
  rawA2A,
  roomSnapshot,
  sendParams,
} from '../local/helpers.ts';
import { type LocalStack, startLocalStack } from '../local/stack.ts';

let stack: LocalStack;
before(async () => {
  stack = await startLocalStack();
});
after(async () => {
  await stack?.close();
});

const DELEGATION = 'ab'.repeat(32);

/** Headers a well-behaved bridge sends for `caller` in the given room. */
function bridgeHeaders(snapshot = roomSnapshot(GENERAL_ROOM, [ALICE]), caller = ALICE): Record<string, string> {
  return bridgeRequestHeaders({ apiKey: stack.bridgeApiKey, snapshot, caller, delegationId: DELEGATION }).headers;
}

async function ask(snapshot: ReturnType<typeof roomSnapshot>, caller = ALICE, text = 'handbook') {
  const r = await bridgeSend({
    routeUrl: stack.localRouteUrl,
    card: stack.card,
    apiKey: stack.bridgeApiKey,
    snapshot,
    caller,
    text,
  });
  return r;
}

describe('local route: protocol and routing', () => {
  test('A2A 1.0: the SDK client sends A2A-Version 1.0 and SendMessage reaches the agent through the projected listener', async () => {
    const { task } = await ask(roomSnapshot(GENERAL_ROOM, [ALICE]));
    assert.equal(answerText(task), 'grounded answer');
    const seen = stack.runtime.receivedHeaders.at(-1)!;
    assert.equal(seen['a2a-version'], '1.0');
    assert.ok(seen['x-fgentic-identity'], 'the projector-minted carrier reached the agent');
  });

  test('AgentCard URL binding: the bridge replaces the advertised direct kagent URL with the gateway route', async () => {
    // kagent advertises its own address; following it would skip the gateway and the projector.
    assert.equal(new URL(stack.card.supportedInterfaces[0]!.url).origin, stack.runtime.url);
    const before = stack.gateway.events.length;
    const client = await bridgeClient(stack.localRouteUrl, stack.card, bridgeHeaders());
    await client.sendMessage(textMessage('handbook') as any);
    const routed = stack.gateway.events.slice(before).filter((e) => e.route?.startsWith('fgentic-a2a-local'));
    assert.ok(
      routed.some((e) => e.phase === 'backend' && e.status === 200),
      'SendMessage observed at the gateway listener',
    );
  });

  test('AgentCard URL binding: a client that follows the card reaches kagent without a carrier and retrieval denies', async () => {
    const client = await new ClientFactory().createFromAgentCard(stack.card);
    const calls = stack.runtime.toolCalls.length;
    const task = await client.sendMessage(textMessage('handbook') as any);
    // Without a carrier the MCP route refuses tools/call at the gateway; either way no content.
    assert.notEqual(answerText(task), 'grounded answer');
    assert.equal(stack.runtime.toolCalls[calls]!.ok, false);
    assert.equal(stack.runtime.toolCalls[calls]!.sentHeaders['x-fgentic-identity'], undefined);
  });

  test('credential non-forwarding: the agent sees neither the API key nor the room context, and X-User-Id is the validated MXID', async () => {
    await ask(roomSnapshot(GENERAL_ROOM, [ALICE]));
    const seen = stack.runtime.receivedHeaders.at(-1)!;
    assert.equal(seen['authorization'], undefined);
    assert.equal(seen['x-fgentic-room-context'], undefined);
    assert.equal(seen['x-user-id'], ALICE.principal);
    assert.equal(seen['cookie'], undefined);
  });

  test('GetTask and CancelTask by the bridge on the local route', async () => {
    const { task } = await ask(roomSnapshot(GENERAL_ROOM, [ALICE]));
    const id = (task as { id: string }).id;
    const get = await rawA2A(
      stack.localRouteUrl,
      { authorization: `Bearer ${stack.bridgeApiKey}`, ...onlyIdentityInputs() },
      'GetTask',
      { id },
    );
    assert.equal(get.status, 200, get.body);
    assert.match(get.body, /TASK_STATE_COMPLETED/);
  });
});

/** GetTask/CancelTask still pass ext-auth on the route, so the bridge sends its identity inputs. */
function onlyIdentityInputs(): Record<string, string> {
  const h = bridgeHeaders();
  return { 'x-user-id': h['x-user-id']!, 'x-fgentic-room-context': h['x-fgentic-room-context']! };
}

describe('local route: audience intersection and classifications', () => {
  test('Alice alone in the general room: public chunks Alice may read', async () => {
    const { task } = await ask(roomSnapshot(GENERAL_ROOM, [ALICE]));
    assert.deepEqual(groundedSources(task), [
      'engineering/oncall',
      'federation/org-b-room',
      'handbook/onboarding',
      'handbook/travel',
    ]);
  });

  test('Alice with Bob (bridged Slack): only chunks both may read (fewer, the intersection)', async () => {
    const { task } = await ask(roomSnapshot(GENERAL_ROOM, [ALICE, BOB]));
    assert.deepEqual(groundedSources(task), ['handbook/onboarding', 'handbook/travel']);
  });

  test('a bridged Slack user as the caller', async () => {
    const { task } = await ask(roomSnapshot(GENERAL_ROOM, [ALICE, BOB]), BOB);
    assert.deepEqual(groundedSources(task), ['handbook/onboarding', 'handbook/travel']);
  });

  test('unauthorized audience member (Carol from org B) removes every chunk she may not read', async () => {
    const { task } = await ask(roomSnapshot(GENERAL_ROOM, [ALICE, CAROL]));
    assert.deepEqual(groundedSources(task), ['federation/org-b-room']);
  });

  test('room classification ceiling: the engineering room admits approved_non_public, never restricted', async () => {
    const { task } = await ask(roomSnapshot(ENGINEERING_ROOM, [ALICE], ['approved_non_public', 'public']));
    const sources = groundedSources(task);
    assert.ok(sources.includes('engineering/roadmap'));
    assert.ok(!sources.includes('hr/salaries'));
  });

  test('widened classification: a public-only room claiming approved_non_public is denied', async () => {
    const h = bridgeHeaders(roomSnapshot(GENERAL_ROOM, [ALICE], ['approved_non_public', 'public']));
    const r = await rawA2A(stack.localRouteUrl, h, 'SendMessage', sendParams('roadmap'));
    assert.equal(r.status, 403);
    assert.match(r.body, /"reason":"[a-z_]+"/);
  });

  test('unregistered room is denied', async () => {
    const h = bridgeHeaders(roomSnapshot('!other:org-a.example', [ALICE]));
    const r = await rawA2A(stack.localRouteUrl, h, 'SendMessage', sendParams('x'));
    assert.equal(r.status, 403);
  });
});

describe('local route: raw identity headers', () => {
  const cases: [string, (h: Record<string, string>) => Record<string, string> | [string, string][]][] = [
    ['missing X-User-Id', (h) => ({ ...h, 'x-user-id': '' })],
    ['missing X-Fgentic-Room-Context', (h) => ({ ...h, 'x-fgentic-room-context': '' })],
  ];
  for (const [name, mutate] of cases) {
    test(`${name} fails before decoding`, async () => {
      const headers = Object.fromEntries(Object.entries(mutate(bridgeHeaders())).filter(([, v]) => v !== ''));
      const r = await rawA2A(stack.localRouteUrl, headers, 'SendMessage', sendParams('x'));
      assert.ok([401, 403].includes(r.status), `status ${r.status}`);
    });
  }

  for (const name of ['x-user-id', 'x-fgentic-room-context']) {
    test(`duplicate ${name} fails before decoding`, async () => {
      const h = bridgeHeaders();
      const res = await postRaw(stack.localRouteUrl, [...Object.entries(h), [name, h[name]!]]);
      assert.ok([401, 403].includes(res.status), `status ${res.status}`);
    });
  }

  test('localpart-only X-User-Id is denied', async () => {
    const r = await rawA2A(
      stack.localRouteUrl,
      { ...bridgeHeaders(), 'x-user-id': 'alice' },
      'SendMessage',
      sendParams('x'),
    );
    assert.equal(r.status, 403);
  });

  test('caller mismatch between X-User-Id and the room context is denied', async () => {
    const snap = roomSnapshot(GENERAL_ROOM, [ALICE, BOB]);
    const r = await rawA2A(
      stack.localRouteUrl,
      { ...bridgeHeaders(snap), 'x-user-id': BOB.principal },
      'SendMessage',
      sendParams('x'),
    );
    assert.equal(r.status, 403);
  });

  test('a client-sent X-Fgentic-Identity is stripped and replaced by the projector value', async () => {
    const forged = 'eyJmb3JnZWQiOnRydWV9';
    const client = await bridgeClient(stack.localRouteUrl, stack.card, {
      ...bridgeHeaders(),
      'x-fgentic-identity': forged,
    });
    await client.sendMessage(textMessage('handbook') as any);
    const seen = stack.runtime.receivedHeaders.at(-1)!;
    assert.ok(seen['x-fgentic-identity'] && seen['x-fgentic-identity'] !== forged);
  });

  test('an unknown X-Fgentic-* header is rejected by route authorization', async () => {
    const r = await rawA2A(
      stack.localRouteUrl,
      { ...bridgeHeaders(), 'x-fgentic-groups': 'partner/org-b/docs' },
      'SendMessage',
      sendParams('x'),
    );
    assert.equal(r.status, 403);
  });

  test('wrong API key is 401; the agent MCP key on the local route is 401', async () => {
    const wrong = await rawA2A(
      stack.localRouteUrl,
      { ...bridgeHeaders(), authorization: 'Bearer nope' },
      'SendMessage',
      sendParams('x'),
    );
    assert.equal(wrong.status, 401);
    const mcpKey = await rawA2A(
      stack.localRouteUrl,
      { ...bridgeHeaders(), authorization: `Bearer ${stack.agentMcpKey}` },
      'SendMessage',
      sendParams('x'),
    );
    assert.equal(mcpKey.status, 401);
  });

  test('wrong path: a sibling path is not the agent route', async () => {
    const r = await rawA2A(`${stack.localRouteUrl}-other`, bridgeHeaders(), 'SendMessage', sendParams('x'));
    assert.notEqual(r.status, 200);
  });

  test('the generic kagent route cannot reach the retrieval agent', async () => {
    const url = stack.localRouteUrl.replace('/api/a2a/kagent/knowledge-agent', '/api/a2a/kagent/knowledge-agent/');
    const r = await rawA2A(url, bridgeHeaders(), 'SendMessage', sendParams('x'));
    assert.equal(r.status, 404);
  });
});

async function postRaw(url: string, headers: [string, string][]): Promise<{ status: number }> {
  const { request } = await import('node:http');
  const u = new URL(url);
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'SendMessage', params: sendParams('x') });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method: 'POST',
        headers: [
          ...headers.flat(),
          'host',
          u.host,
          'content-length',
          String(Buffer.byteLength(body)),
          'content-type',
          'application/json',
          'a2a-version',
          '1.0',
        ],
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('local route: stateless delegations', () => {
  for (const [name, extra] of [
    ['contextId', { contextId: 'ctx-1' }],
    ['taskId', { taskId: 'task-1' }],
    ['referenceTaskIds', { referenceTaskIds: ['task-1'] }],
    ['empty referenceTaskIds', { referenceTaskIds: [] }],
    ['empty contextId', { contextId: '' }],
  ] as const) {
    test(`caller-supplied ${name} is rejected (no continuation, no shared context)`, async () => {
      const r = await rawA2A(stack.localRouteUrl, bridgeHeaders(), 'SendMessage', sendParams('x', extra));
      assert.equal(r.status, 403);
    });
  }

  test('HITL/input continuation: a decision message on an existing task is rejected', async () => {
    const { task } = await ask(roomSnapshot(GENERAL_ROOM, [ALICE]));
    const t = task as { id: string; contextId: string };
    const r = await rawA2A(stack.localRouteUrl, bridgeHeaders(), 'SendMessage', {
      message: {
        messageId: 'm-decision',
        role: 'ROLE_USER',
        taskId: t.id,
        contextId: t.contextId,
        parts: [{ data: { decision_type: 'approve' } }],
      },
    });
    assert.equal(r.status, 403);
  });

  test("two clients attempting the same context: naming another delegation's contextId is rejected", async () => {
    const first = await ask(roomSnapshot(GENERAL_ROOM, [ALICE, BOB]), ALICE);
    const contextId = (first.task as { contextId: string }).contextId;
    const bobHeaders = bridgeHeaders(roomSnapshot(GENERAL_ROOM, [ALICE, BOB]), BOB);
    const r = await rawA2A(stack.localRouteUrl, bobHeaders, 'SendMessage', sendParams('x', { contextId }));
    assert.equal(r.status, 403);
  });

  test('every delegation runs in a fresh server-generated context', async () => {
    const a = await ask(roomSnapshot(GENERAL_ROOM, [ALICE]));
    const b = await ask(roomSnapshot(GENERAL_ROOM, [ALICE]));
    assert.notEqual((a.task as { contextId: string }).contextId, (b.task as { contextId: string }).contextId);
  });

  test('earlier grounded content does not survive an ACL change: the next delegation sees the new ACL', async () => {
    const first = await ask(roomSnapshot(GENERAL_ROOM, [ALICE, BOB]), ALICE, 'travel');
    assert.ok(groundedSources(first.task).includes('handbook/travel'));
    const { rows } = await stack.retrieval.pool.query(
      "select content, metadata from knowledge.chunks where metadata #>> '{source,id}' = 'demo/handbook/travel'",
    );
    const meta = rows[0].metadata;
    await stack.retrieval.seed([{ content: rows[0].content, metadata: { ...meta, allowed_principals: [ALICE] } }]);
    try {
      const second = await ask(roomSnapshot(GENERAL_ROOM, [ALICE, BOB]), ALICE, 'travel');
      assert.ok(!groundedSources(second.task).includes('handbook/travel'));
    } finally {
      await stack.retrieval.seed([{ content: rows[0].content, metadata: meta }]);
    }
  });
});

describe('local route: state drift before delivery', () => {
  test('a member joining after dispatch blocks delivery; an unchanged room delivers', async () => {
    const before = roomSnapshot(GENERAL_ROOM, [ALICE]);
    const { digest } = await ask(before);
    assert.equal(digest, stateDigest(before));
    assert.equal(mayDeliver(digest, roomSnapshot(GENERAL_ROOM, [ALICE])), true);
    assert.equal(mayDeliver(digest, roomSnapshot(GENERAL_ROOM, [ALICE, CAROL])), false);
    assert.equal(
      mayDeliver(digest, roomSnapshot(GENERAL_ROOM, [ALICE], ['public'], { historyVisibility: 'shared' })),
      false,
    );
  });
});
