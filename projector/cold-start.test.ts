/**
 * Cold start with the live room-state check on. The first test runs the real CLI in a fresh process,
 * so the Matrix client library is genuinely not yet loaded when the first probe arrives; the others
 * hold the load with a gate and read from memory, so only loading could exceed the deadline.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type Service, startProcess, waitFor } from '../testkit/common/index.ts';
import { sendCheck } from '../testkit/projector/client.ts';
import {
  AGENT_BOT,
  ALICE,
  BOB,
  configJson,
  localRequest,
  type MutableJson,
  ROOM,
  roomContext,
} from '../testkit/projector/fixtures.ts';
import { HomeserverDouble } from '../testkit/projector/homeserver.ts';
import { validateConfig } from './config.ts';
import { ConfiguredReader, liveRoomCheck, type loadMatrixSdk } from './homeserver.ts';

const TOKEN = 'syt_cold_start_token';
const CLI = fileURLToPath(new URL('../cli/main.ts', import.meta.url));
const hs = new HomeserverDouble(TOKEN);
let dir: string;

function liveConfig(tokenFile: string, timeoutMs: number): MutableJson {
  const c = configJson() as MutableJson;
  c.liveRoomCheck = { enabled: true, homeserverUrl: hs.url, accessTokenFile: tokenFile, timeoutMs };
  return c;
}

const LISTENING = /projector listening on (http:\/\/\S+)/;
const listeningUrl = (s: Service) => LISTENING.exec(s.stderr())![1]!;
/** One turn of the event loop: every pending promise reaction has run (setImmediate is not mocked). */
const flush = () => new Promise<void>((r) => setImmediate(r));

/** Start `serve projector` in a child process; resolves as soon as it listens. */
async function serveChild(configFile: string): Promise<Service> {
  const service = startProcess(
    process.execPath,
    ['--import', 'tsx', CLI, 'serve', 'projector', '--config', configFile, '--port', '0', '--host', '127.0.0.1'],
    { ready: ({ stderr }) => LISTENING.test(stderr) },
  );
  await service.ready;
  return service;
}

describe('cold start with the live room-state check', () => {
  before(async () => {
    await hs.start();
    hs.seedAdrRoom(
      ROOM,
      [
        { principal: AGENT_BOT, event_id: '$member-agent' },
        { principal: BOB, event_id: '$member-slack-bob' },
        { principal: ALICE, event_id: '$member-alice' },
      ],
      ALICE,
    );
    dir = mkdtempSync(join(tmpdir(), 'projector-cold-'));
    writeFileSync(join(dir, 'token'), `${TOKEN}\n`);
  });
  after(async () => {
    await hs.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a fresh process is not ready while cold, and its first check after ready is allowed', async () => {
    const file = join(dir, 'projector.json');
    // The homeserver reads themselves get a generous deadline here (a busy test machine); what this
    // test pins down is readiness while the client library loads.
    writeFileSync(file, JSON.stringify(liveConfig(join(dir, 'token'), 2_000)));
    const child = await serveChild(file);
    const url = listeningUrl(child);
    try {
      const first = await fetch(`${url}/readyz`);
      assert.equal(first.status, 503, 'ready before the Matrix client is loaded');
      await waitFor('ready', async () => (await fetch(`${url}/readyz`)).status === 200, { intervalMs: 25 });
      const r = await sendCheck(url, localRequest());
      assert.equal(r.status, 200, r.body);
      assert.ok(r.headers['x-fgentic-identity']);
    } finally {
      await child.stop();
    }
  });

  /**
   * A stand-in for the SDK module whose client answers from the homeserver double's state in memory,
   * so the read costs nothing and only loading can exceed a deadline. `gate` holds the load.
   */
  function gatedSdk(gate: Promise<void>, failFirst: boolean) {
    let attempts = 0;
    const load = async () => {
      attempts += 1;
      if (failFirst && attempts === 1) throw new Error('load failed');
      await gate;
      const events = [...(hs.rooms.get(ROOM)?.values() ?? [])].map((e) => ({ ...e, room_id: ROOM }));
      const joined: Record<string, object> = {};
      for (const e of events)
        if (e.type === 'm.room.member' && e.content['membership'] === 'join') joined[e.state_key] = {};
      return {
        createClient: () => ({
          roomState: async () => events,
          getJoinedRoomMembers: async () => ({ joined }),
        }),
      } as unknown as Awaited<ReturnType<typeof loadMatrixSdk>>;
    };
    return { load, attempts: () => attempts };
  }

  // Simulated time: the load "takes" 400 ms by advancing the mocked clock while the gate is held, so
  // a deadline started before the load ends would fire (and deny) without a real sleep.
  test('a check that arrives while the client loads waits for the load outside its 150 ms deadline', async (t) => {
    const parsed = validateConfig(liveConfig(join(dir, 'token'), 150));
    assert.ok(parsed.ok);
    if (!parsed.ok) return;
    let release!: () => void;
    const sdk = gatedSdk(
      new Promise<void>((r) => {
        release = r;
      }),
      false,
    );
    const reader = new ConfiguredReader(10_000, sdk.load);
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const pending = liveRoomCheck(
      reader.get(parsed.config, 1)!,
      parsed.config,
      parsed.config.rooms.get(ROOM)!,
      roomContext(),
      150,
    );
    await flush();
    t.mock.timers.tick(400); // the load takes longer than the deadline
    release();
    assert.deepEqual(await pending, { ok: true });
  });

  test('readiness follows the loader: false until it resolves, and a failed load is retried', async (t) => {
    const parsed = validateConfig(liveConfig(join(dir, 'token'), 150));
    assert.ok(parsed.ok);
    if (!parsed.ok) return;
    let release!: () => void;
    const sdk = gatedSdk(
      new Promise<void>((r) => {
        release = r;
      }),
      true,
    );
    const reader = new ConfiguredReader(10_000, sdk.load);
    assert.equal(reader.usable(parsed.config, 1), false);
    await flush();
    // The first load failed; the next read retries and waits for the (gated) load.
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const pending = liveRoomCheck(
      reader.get(parsed.config, 1)!,
      parsed.config,
      parsed.config.rooms.get(ROOM)!,
      roomContext(),
      150,
    );
    assert.equal(reader.usable(parsed.config, 1), false);
    await flush();
    t.mock.timers.tick(400);
    release();
    assert.deepEqual(await pending, { ok: true });
    assert.equal(reader.usable(parsed.config, 1), true);
    assert.equal(sdk.attempts(), 2);
  });
});
