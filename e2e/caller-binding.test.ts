/**
 * A projection is bound to the agent that calls with it, end to end with two retrieval Agents: the
 * gateway double runs the rendered MCP routes (each Agent's API key, then the transformation that
 * sets `x-fgentic-agent` to the key's workload) in front of the real retrieval server, which denies
 * a value minted for one agent when another agent presents it on its own route.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { encodeProjection, type Projection } from '../contract/index.ts';
import { ALICE, GENERAL_ROOM } from '../local/helpers.ts';
import { EXAMPLES_DIR, type LocalStack, startLocalStack } from '../local/stack.ts';

const A = 'kagent/knowledge-agent';
const B = 'kagent/second-agent';
const T0 = Math.floor(Date.now() / 1000);
let stack: LocalStack;
let examples: string;

before(async () => {
  examples = mkdtempSync(join(tmpdir(), 'fgentic-two-agents-'));
  cpSync(EXAMPLES_DIR, examples, { recursive: true });
  writeFileSync(
    join(examples, 'second-agent.yaml'),
    stringify({
      apiVersion: 'retrieval.fgentic.dev/v1alpha1',
      kind: 'RetrievalAgent',
      metadata: { name: 'second-agent', namespace: 'kagent' },
      spec: {
        modelConfig: 'agentgateway-model',
        systemMessage: 'Answer from the knowledge base.',
        mcpApiKeySecretRef: { name: 'second-agent-mcp-credential', key: 'authorization' },
      },
    }),
  );
  stack = await startLocalStack({ now: () => T0, examplesDir: examples });
});
after(async () => {
  await stack?.close();
  rmSync(examples, { recursive: true, force: true });
});

/** A valid projection of Alice in the general room, minted for `agent`. */
function carrier(agent: string): string {
  const [namespace, name] = agent.split('/') as [string, string];
  const p = {
    agent: { name, namespace },
    allowed_classifications: ['public'],
    audience: [ALICE],
    delegation_id: 'cd'.repeat(32),
    exp: T0 + 600,
    groups: [],
    iat: T0,
    kind: 'matrix',
    principal: ALICE.principal,
    room: {
      event_id: '$event',
      history_visibility: 'joined',
      id: GENERAL_ROOM,
      join_rule: 'invite',
      state_sha256: 'ef'.repeat(32),
    },
    v: 1,
  } as unknown as Projection;
  const enc = encodeProjection(p);
  assert.ok(enc.ok);
  return enc.value;
}

/** One tools/call on the MCP route as `caller` (its API key and its route header). */
async function callAs(caller: string, value: string, extra: Record<string, string> = {}) {
  const res = await fetch(stack.mcpRouteUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      authorization: `Bearer ${stack.agentMcpKeys[caller]}`,
      'x-retrieval-agent': caller,
      'x-fgentic-identity': value,
      ...extra,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'search_knowledge', arguments: { query: 'handbook' } },
    }),
  });
  const text = await res.text();
  if (res.status !== 200) return `http ${res.status}`;
  const result = JSON.parse(text).result;
  return result.isError ? JSON.parse(result.content[0].text).reason : 'ok';
}

describe('the projection is bound to the calling agent (two agents)', () => {
  test('each agent is served with a value minted for it', async () => {
    assert.equal(await callAs(A, carrier(A)), 'ok');
    assert.equal(await callAs(B, carrier(B)), 'ok');
  });

  test("a value minted for one agent is denied on the other agent's route (caller_mismatch)", async () => {
    assert.equal(await callAs(B, carrier(A)), 'caller_mismatch');
    assert.equal(await callAs(A, carrier(B)), 'caller_mismatch');
  });

  test('a client cannot name the caller itself: the gateway refuses a client-sent x-fgentic-agent', async () => {
    assert.equal(await callAs(B, carrier(A), { 'x-fgentic-agent': A }), 'http 403');
  });
});
