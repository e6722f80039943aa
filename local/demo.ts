/**
 * `npm run demo`: a scripted walkthrough through the same protocols a deployment uses — the A2A SDK
 * as the Matrix bridge and as a partner, the gateway's rendered policy, the projector, the agent
 * runtime, MCP to the retrieval server. Uses the stack `npm start` is running (data/stack.json), or
 * starts an in-memory one when none is running.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { AgentCard } from '@a2a-js/sdk';
import { importJWK, SignJWT } from 'jose';
import { encodeCarrier } from '../contract/index.ts';
import { explainCommand } from '../explain/command.ts';
import { IDENTITY_HEADER, RETRIEVAL_TOOL } from '../rules/index.ts';
import { bridgeClient, bridgeRequestHeaders, bridgeSend, textMessage } from './doubles/bridge.ts';
import {
  ALICE,
  BOB,
  CAROL,
  ENGINEERING_ROOM,
  GENERAL_ROOM,
  groundedSources,
  rawA2A,
  roomSnapshot,
  sendParams,
} from './helpers.ts';
import type { StackFile } from './start.ts';

export interface DemoTarget {
  readonly localRouteUrl: string;
  readonly publicRouteUrl: string;
  readonly mcpRouteUrl: string;
  readonly bridgeApiKey: string;
  readonly agentMcpKey: string;
  readonly card: AgentCard;
  issueToken(claims: { azp: string; expiresInSeconds?: number }): Promise<string>;
  /** For the `explain` step: the stack's embedded database and the projector configuration it runs. */
  readonly databaseUrl?: string;
  readonly projectorConfigJson?: string;
}

export interface DemoStep {
  readonly title: string;
  readonly outcome: 'answer' | 'denied' | 'report';
  readonly detail: string;
}

function targetFromFile(info: StackFile): DemoTarget {
  const configFile = info.projectorConfigFile;
  return {
    ...info,
    ...(configFile && existsSync(configFile) ? { projectorConfigJson: readFileSync(configFile, 'utf8') } : {}),
    card: info.card as AgentCard,
    issueToken: async ({ azp, expiresInSeconds }) => {
      const key = await importJWK(info.issuerPrivateJwk as never, 'ES256');
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ azp })
        .setProtectedHeader({ alg: 'ES256', kid: String(info.issuerPrivateJwk['kid']) })
        .setIssuer('https://issuer.example')
        .setAudience('fgentic-a2a')
        .setIssuedAt(now)
        .setExpirationTime(now + (expiresInSeconds ?? 300))
        .sign(key);
    },
  };
}

const list = (xs: string[]) => (xs.length === 0 ? '(nothing)' : xs.join(', '));

/** Runs every scenario and returns what happened; `print` receives readable lines. */
export async function runDemo(t: DemoTarget, print: (line: string) => void = () => {}): Promise<DemoStep[]> {
  const steps: DemoStep[] = [];
  const record = (s: DemoStep) => {
    steps.push(s);
    print(`${s.outcome === 'answer' ? '✔' : s.outcome === 'report' ? 'ℹ' : '✖'} ${s.title}\n    ${s.detail}`);
  };
  const room = async (title: string, snapshot: ReturnType<typeof roomSnapshot>, caller = ALICE) => {
    const { task } = await bridgeSend({
      routeUrl: t.localRouteUrl,
      card: t.card,
      apiKey: t.bridgeApiKey,
      snapshot,
      caller,
      text: 'what do we know?',
    });
    record({ title, outcome: 'answer', detail: `grounded in: ${list(groundedSources(task))}` });
  };

  print('Matrix rooms (local route: bridge API key → projector → agent → MCP → retrieval)');
  await room('Alice alone in the general room (public ceiling)', roomSnapshot(GENERAL_ROOM, [ALICE]));
  await room('Alice with Bob from Slack: only what both may read', roomSnapshot(GENERAL_ROOM, [ALICE, BOB]));
  await room('Bob (a bridged Slack user) asks himself', roomSnapshot(GENERAL_ROOM, [ALICE, BOB]), BOB);
  await room('Alice with Carol from a federated homeserver', roomSnapshot(GENERAL_ROOM, [ALICE, CAROL]));
  await room(
    'Alice in the engineering room (approved_non_public by agreement; restricted never)',
    roomSnapshot(ENGINEERING_ROOM, [ALICE], ['approved_non_public', 'public']),
  );

  print('\nA guest joins, and the operator asks why the room now knows less (explain, CLI only)');
  const joined = roomSnapshot(GENERAL_ROOM, [ALICE, BOB, CAROL]);
  await room('Carol, a guest from org B, joins Alice and Bob in the general room', joined);
  await explainStep(t, joined, record, print);

  print('\nPartner organisations (public route: JWT → projector → partner groups only)');
  for (const azp of ['org-b-a2a', 'org-d-a2a']) {
    const token = await t.issueToken({ azp });
    const client = await bridgeClient(t.publicRouteUrl, t.card, { authorization: `Bearer ${token}` });
    const task = await client.sendMessage(textMessage('what can we read?') as any);
    record({
      title: `partner ${azp}`,
      outcome: 'answer',
      detail: `grounded in: ${list(groundedSources(task))}`,
    });
  }

  print('\nDenials (every one fails closed with a stable reason code and no content)');
  const deny = async (title: string, run: () => Promise<{ status: number; body: string }>) => {
    const r = await run();
    // Gateway and projector deny with HTTP 401/403; the retrieval server with an MCP tool error.
    const reason = /\\?"reason\\?":\\?"([a-z_]+)/.exec(r.body)?.[1];
    record({
      title,
      outcome: r.status === 200 && !reason ? 'answer' : 'denied',
      detail: `HTTP ${r.status}${reason ? `, reason ${reason}` : ` ${r.body.slice(0, 60)}`}`,
    });
  };
  const bridgeHeaders = (classes: string[]) =>
    bridgeRequestHeaders({
      apiKey: t.bridgeApiKey,
      snapshot: roomSnapshot(GENERAL_ROOM, [ALICE], classes),
      caller: ALICE,
    }).headers;
  await deny('widened classification: the general room claims approved_non_public', () =>
    rawA2A(t.localRouteUrl, bridgeHeaders(['approved_non_public', 'public']), 'SendMessage', sendParams('roadmap')),
  );
  await deny('near-expiry partner token (60 s left, timeout 30 s + 30 s skew)', async () => {
    const token = await t.issueToken({ azp: 'org-b-a2a', expiresInSeconds: 60 });
    return rawA2A(t.publicRouteUrl, { authorization: `Bearer ${token}` }, 'SendMessage', sendParams('x'));
  });
  await deny('continuation: a caller-supplied contextId', () =>
    rawA2A(t.localRouteUrl, bridgeHeaders(['public']), 'SendMessage', sendParams('x', { contextId: 'earlier' })),
  );
  const mcpCall = async (identity: string) => {
    const res = await fetch(t.mcpRouteUrl, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${t.agentMcpKey}`,
        'x-retrieval-agent': 'kagent/knowledge-agent',
        [IDENTITY_HEADER]: identity,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: RETRIEVAL_TOOL, arguments: { query: 'roadmap' } },
      }),
    });
    return { status: res.status, body: await res.text() };
  };
  const forged = (o: Record<string, unknown>) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const base = {
    agent: { name: 'knowledge-agent', namespace: 'kagent' },
    allowed_classifications: ['approved_non_public', 'public'],
    audience: [ALICE],
    delegation_id: 'ab'.repeat(32),
    groups: [],
    kind: 'matrix',
    principal: ALICE.principal,
    room: {
      event_id: '$e',
      history_visibility: 'joined',
      id: GENERAL_ROOM,
      join_rule: 'invite',
      state_sha256: 'ab'.repeat(32),
    },
    v: 1,
  };
  const now = Math.floor(Date.now() / 1000);
  await deny('expired projection presented to the retrieval server', () =>
    mcpCall(encodeCarrier({ ...base, exp: now - 60, iat: now - 600 })),
  );
  await deny('forged projection written by hand (not canonical JSON)', () =>
    mcpCall(forged({ ...base, exp: now + 300, iat: now })),
  );
  return steps;
}

/**
 * `fgentic-retrieval explain --room … --snapshot … --summary` against the stack's database and the
 * projector configuration it runs, exactly as an operator would type it (the same command function).
 */
async function explainStep(
  t: DemoTarget,
  snapshot: ReturnType<typeof roomSnapshot>,
  record: (s: DemoStep) => void,
  print: (line: string) => void,
): Promise<void> {
  if (t.databaseUrl === undefined || t.projectorConfigJson === undefined) {
    print('  (explain skipped: this stack did not publish its database URL and projector configuration)');
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'fgentic-demo-explain-'));
  try {
    const snapshotFile = join(dir, 'room-state.json');
    const configFile = join(dir, 'projector.json');
    writeFileSync(snapshotFile, JSON.stringify(snapshot));
    writeFileSync(configFile, t.projectorConfigJson);
    let out = '';
    let err = '';
    const argv = ['--room', snapshot.room_id, '--snapshot', snapshotFile, '--summary'];
    const code = await explainCommand([...argv, '--config', configFile, '--database-url', t.databaseUrl], {
      stdout: (s) => {
        out += s;
      },
      stderr: (s) => {
        err += s;
      },
      env: {},
    });
    if (code !== 0) throw new Error(`explain exited ${code}: ${err.trim()}`);
    print(`  $ fgentic-retrieval explain --room '${snapshot.room_id}' --snapshot room-state.json --summary`);
    print(out.trimEnd().replace(/^(?=.)/gm, '    '));
    const lost = out.split('\n').filter((l) => l.startsWith('without '));
    record({
      title: 'explain --summary: whom the room lost access for',
      outcome: 'report',
      detail: lost.length > 0 ? lost.join('; ') : 'no single reader narrows this room',
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  const file = resolve('data/stack.json');
  let target: DemoTarget;
  let stop = async () => {};
  if (existsSync(file)) {
    target = targetFromFile(JSON.parse(readFileSync(file, 'utf8')) as StackFile);
    console.log(`Using the running stack (${file}).\n`);
  } else {
    console.log('No running stack (npm start); starting an in-memory one for this walkthrough...\n');
    const { startLocalStack } = await import('./stack.ts');
    const stack = await startLocalStack();
    target = stack;
    stop = () => stack.close();
  }
  try {
    await runDemo(target, (l) => console.log(l));
  } finally {
    await stop();
  }
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname)) {
  main().catch((e) => {
    console.error(`demo failed: ${(e as Error).message}`);
    process.exitCode = 1;
  });
}
