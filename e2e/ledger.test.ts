/**
 * Forgery resistance end to end (docs/ledger.md). A "compromised agent" — code running in the
 * retrieval Agent pod with its own MCP credential — sends projections straight to the gateway's MCP
 * route with the official MCP SDK client, as kagent's toolset would:
 *
 * - plain mode: a freshly forged, schema-valid projection for an audience of its choosing reads
 *   content (the residual risk of docs/security.md "Known limits and residual risks", demonstrated);
 * - ledger mode: the same forgery is denied `unminted`; the value the projector really minted for a
 *   delegation is accepted for as many calls as the agent makes within its lifetime, and denied
 *   after `exp` or once purged; a minted value re-bound to another served agent is denied.
 *
 * Both stacks are the full local stack (render → gateway double → projector → agent runtime double →
 * retrieval server on PGlite); the ledger stack differs only by `RetrievalPlatform.spec.capability`.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { encodeProjection, type Projection } from '../contract/index.ts';
import { bridgeSend } from '../local/doubles/bridge.ts';
import { ALICE, BOB, GENERAL_ROOM, groundedSources, roomSnapshot } from '../local/helpers.ts';
import { EXAMPLES_DIR, type LocalStack, startLocalStack } from '../local/stack.ts';

// A second served agent, so that a value re-bound to it passes the contract's agent check and only
// the ledger can refuse it.
let examples: string;
let plain: LocalStack;
let ledger: LocalStack;
const T0 = Math.floor(Date.now() / 1000);
let clock = T0;

before(async () => {
  examples = mkdtempSync(join(tmpdir(), 'fgentic-ledger-examples-'));
  cpSync(EXAMPLES_DIR, examples, { recursive: true });
  const agent = readFileSync(join(examples, 'agent.yaml'), 'utf8')
    .replace('name: knowledge-agent\n', 'name: other-agent\n')
    .replace('name: knowledge-agent-mcp-credential', 'name: other-agent-mcp-credential');
  writeFileSync(join(examples, 'other-agent.yaml'), agent);
  plain = await startLocalStack({ examplesDir: examples, now: () => clock });
  ledger = await startLocalStack({ examplesDir: examples, now: () => clock, capability: 'ledger' });
});
after(async () => {
  await plain?.close();
  await ledger?.close();
  rmSync(examples, { recursive: true, force: true });
});

/** What a compromised agent can build from public knowledge: a schema-valid projection for any audience. */
function forged(overrides: Record<string, unknown> = {}): string {
  const enc = encodeProjection({
    agent: { name: 'knowledge-agent', namespace: 'kagent' },
    allowed_classifications: ['approved_non_public', 'public'],
    audience: [ALICE],
    delegation_id: 'ab'.repeat(32),
    exp: clock + 600,
    groups: [],
    iat: clock,
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
    ...overrides,
  } as unknown as Projection);
  assert.ok(enc.ok);
  return enc.value;
}

/** One tools/call as an agent pod makes it: its own MCP key and route, the carrier it chooses. */
async function search(stack: LocalStack, carrier: string, as = 'kagent/knowledge-agent') {
  const client = new Client({ name: 'compromised-agent', version: '1' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(stack.mcpRouteUrl), {
      requestInit: {
        headers: {
          authorization: `Bearer ${stack.agentMcpKeys[as]}`,
          'x-retrieval-agent': as,
          'x-fgentic-identity': carrier,
        },
      },
    }),
  );
  try {
    const r = await client.callTool({
      name: 'search_knowledge',
      arguments: { query: 'handbook', max_results: 5 },
    });
    const results = ((r.structuredContent as { results?: unknown[] } | undefined)?.results ?? []) as unknown[];
    return { isError: r.isError === true, results, text: JSON.stringify(r.content) };
  } finally {
    await client.close();
  }
}

/** A real delegation through the local route; returns the carrier the agent pod received. */
async function delegate(stack: LocalStack): Promise<{ carrier: string; sources: string[] }> {
  const before = stack.runtime.receivedHeaders.length;
  const r = await bridgeSend({
    routeUrl: stack.localRouteUrl,
    card: stack.card,
    apiKey: stack.bridgeApiKey,
    snapshot: roomSnapshot(GENERAL_ROOM, [ALICE, BOB]),
    caller: ALICE,
    text: 'handbook',
  });
  const received = stack.runtime.receivedHeaders.slice(before);
  assert.equal(received.length, 1);
  const carrier = received[0]?.['x-fgentic-identity'];
  assert.ok(carrier, 'the agent pod received a carrier');
  return { carrier, sources: groundedSources(r.task) };
}

function rebind(carrier: string, agent: { namespace: string; name: string }): string {
  const p = JSON.parse(Buffer.from(carrier, 'base64url').toString('utf8'));
  const enc = encodeProjection({ ...p, agent } as Projection);
  assert.ok(enc.ok);
  return enc.value;
}

describe('compromised agent: forged projection straight to the MCP route', () => {
  test('plain mode: a forged, schema-valid projection reads content (the residual risk)', async () => {
    const r = await search(plain, forged());
    assert.equal(r.isError, false);
    assert.ok(r.results.length > 0, 'the forgery reads content');
  });

  test('ledger mode: the same forgery is denied, content-free', async () => {
    const r = await search(ledger, forged());
    assert.equal(r.isError, true);
    assert.match(r.text, /"reason\\?":\\?"unminted/);
    assert.equal(r.results.length, 0);
  });
});

describe('ledger mode: minted values', () => {
  test('the delegation itself is answered, and its value serves repeated calls within its lifetime', async () => {
    clock = T0;
    const { carrier, sources } = await delegate(ledger);
    assert.ok(sources.length > 0, 'the agent grounded its answer through the ledger check');
    for (let i = 0; i < 3; i++) {
      const r = await search(ledger, carrier);
      assert.equal(r.isError, false, r.text);
      assert.ok(r.results.length > 0);
    }
  });

  test('after exp the minted value is denied', async () => {
    clock = T0;
    const { carrier } = await delegate(ledger);
    clock = T0 + 600;
    try {
      const r = await search(ledger, carrier);
      assert.equal(r.isError, true);
      assert.match(r.text, /expired/);
    } finally {
      clock = T0;
    }
  });

  test('once purged the minted value is denied, even while the contract still accepts it', async () => {
    // Minted 1,000 s in the past: its exp lies beyond the purge's skew allowance on the database's
    // clock, while the servers' (test) clock still sees it as live.
    clock = T0 - 1000;
    try {
      const { carrier } = await delegate(ledger);
      assert.equal((await search(ledger, carrier)).isError, false, 'accepted before the purge');
      assert.ok((await ledger.ledger!.purge()) >= 1);
      const r = await search(ledger, carrier);
      assert.equal(r.isError, true);
      assert.match(r.text, /unminted/);
    } finally {
      clock = T0;
    }
  });

  test('a minted value re-bound to another served agent is denied', async () => {
    clock = T0;
    const { carrier } = await delegate(ledger);
    const other = rebind(carrier, { namespace: 'kagent', name: 'other-agent' });
    // On its own agent's route it is refused in both modes: the projection is bound to the caller.
    const mismatch = await search(plain, other);
    assert.equal(mismatch.isError, true);
    assert.match(mismatch.text, /caller_mismatch/);
    // The other agent's pod presenting it on its own route: plain mode takes it (the agent is served
    // and calls); the ledger has no entry for that value and agent.
    assert.equal((await search(plain, other, 'kagent/other-agent')).isError, false);
    const r = await search(ledger, other, 'kagent/other-agent');
    assert.equal(r.isError, true);
    assert.match(r.text, /unminted/);
  });
});

describe('ledger mode: the projector records after it answers', () => {
  test('a record that fails after the answer: that value is denied at search and the projector stops minting', async () => {
    clock = T0;
    const projectorLedger = ledger.ledger!;
    const owner = ledger.retrieval.pool;
    await owner.query(
      'REVOKE EXECUTE ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) FROM knowledge_projector',
    );
    try {
      // The ledger was healthy when the check arrived: the delegation is answered and forwarded …
      const before = ledger.runtime.receivedHeaders.length;
      await bridgeSend({
        routeUrl: ledger.localRouteUrl,
        card: ledger.card,
        apiKey: ledger.bridgeApiKey,
        snapshot: roomSnapshot(GENERAL_ROOM, [ALICE, BOB]),
        caller: ALICE,
        text: 'handbook',
      }).catch(() => undefined);
      const carrier = ledger.runtime.receivedHeaders[before]?.['x-fgentic-identity'];
      assert.ok(carrier, 'the agent pod received the value');
      await projectorLedger.flush();
      // … but its record failed, so the value reads nothing, however often it is sent.
      const r = await search(ledger, carrier);
      assert.equal(r.isError, true);
      assert.match(r.text, /unminted/);
      assert.equal(r.results.length, 0);
      // From the observed failure on, nothing is minted: the next delegation is refused at the gateway.
      assert.equal(projectorLedger.healthy(), false);
      const after = ledger.runtime.receivedHeaders.length;
      await assert.rejects(
        bridgeSend({
          routeUrl: ledger.localRouteUrl,
          card: ledger.card,
          apiKey: ledger.bridgeApiKey,
          snapshot: roomSnapshot(GENERAL_ROOM, [ALICE, BOB]),
          caller: ALICE,
          text: 'handbook',
        }),
      );
      assert.equal(ledger.runtime.receivedHeaders.length, after, 'nothing reached the agent pod');
    } finally {
      await owner.query(
        'GRANT EXECUTE ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) TO knowledge_projector',
      );
    }
    // The probe finds the ledger writable again; delegations work as before.
    await projectorLedger.purge();
    const { sources } = await delegate(ledger);
    assert.ok(sources.length > 0);
  });
});
