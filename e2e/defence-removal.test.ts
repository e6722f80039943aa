/**
 * Each gateway defence the scenario tests rely on, removed from the rendered policy: the attack the
 * defence stops must then succeed. This proves the scenario tests fail when the defence is missing,
 * and that the doubles really execute the rendered objects rather than hard-coded rules.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { K8sObject } from '../controller/types.ts';
import { bridgeClient, bridgeRequestHeaders, textMessage } from '../local/doubles/bridge.ts';
import { ALICE, GENERAL_ROOM, rawA2A, roomSnapshot, sendParams } from '../local/helpers.ts';
import { type LocalStack, startLocalStack } from '../local/stack.ts';

type Any = any;

/**
 * Remove all three identity-forgery defences: the PreRouting strip, the projector's view of a
 * client-sent carrier (the identity count check header), and the response-header overwrite.
 */
function withoutForgeryDefences(objects: K8sObject[]): K8sObject[] {
  return (objects as Any[]).flatMap((o) => {
    if (o.kind === 'AgentgatewayPolicy' && o.spec?.traffic?.phase === 'PreRouting') return [];
    if (o.kind === 'AgentgatewayPolicy' && o.metadata.name.startsWith('fgentic-a2a-local')) {
      o.spec.traffic.extAuth.http.allowedResponseHeaders = ['x-user-id'];
      delete o.spec.traffic.extAuth.http.addRequestHeaders['x-fgentic-check-identity-count'];
    }
    return [o];
  });
}

/** Remove the continuation rule and the room-context header modifier. */
function withoutDelegationDefences(objects: K8sObject[]): K8sObject[] {
  for (const o of objects as Any[]) {
    if (o.kind === 'AgentgatewayPolicy' && o.metadata.name.startsWith('fgentic-a2a-local'))
      o.spec.traffic.authorization.policy.matchExpressions =
        o.spec.traffic.authorization.policy.matchExpressions.filter((e: string) => !e.includes('contextId'));
    if (o.kind === 'HTTPRoute' && o.metadata.name.startsWith('fgentic-a2a-local'))
      for (const rule of o.spec.rules) rule.filters = [];
  }
  return objects;
}

let forgery: LocalStack;
let delegation: LocalStack;
let stack: LocalStack;
before(async () => {
  forgery = await startLocalStack({ mutateObjects: withoutForgeryDefences });
  delegation = await startLocalStack({ mutateObjects: withoutDelegationDefences });
});
after(async () => {
  await forgery?.close();
  await delegation?.close();
});

function bridgeHeaders(): Record<string, string> {
  return bridgeRequestHeaders({
    apiKey: stack.bridgeApiKey,
    snapshot: roomSnapshot(GENERAL_ROOM, [ALICE]),
    caller: ALICE,
  }).headers;
}

describe('defence removed → attack succeeds', () => {
  test('without the PreRouting strip, the projector identity check and the response-header overwrite, a forged X-Fgentic-Identity reaches the agent', async () => {
    stack = forgery;
    const forged = 'eyJmb3JnZWQiOnRydWV9';
    const client = await bridgeClient(stack.localRouteUrl, stack.card, {
      ...bridgeHeaders(),
      'x-fgentic-identity': forged,
    });
    await client.sendMessage(textMessage('handbook') as any);
    assert.equal(stack.runtime.receivedHeaders.at(-1)!['x-fgentic-identity'], forged);
  });

  test('without the continuation rule, a caller-supplied contextId is admitted', async () => {
    stack = delegation;
    const r = await rawA2A(
      stack.localRouteUrl,
      bridgeHeaders(),
      'SendMessage',
      sendParams('x', { contextId: 'ctx-1' }),
    );
    assert.equal(r.status, 200, r.body);
  });

  test('without the header modifier, the room context reaches the agent', async () => {
    stack = delegation;
    const r = await rawA2A(stack.localRouteUrl, bridgeHeaders(), 'SendMessage', sendParams('handbook'));
    assert.equal(r.status, 200, r.body);
    assert.ok(stack.runtime.receivedHeaders.at(-1)!['x-fgentic-room-context']);
  });
});
