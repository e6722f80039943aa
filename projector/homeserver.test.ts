import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { stateDigest } from '../contract/index.ts';
import { sendCheck } from '../testkit/projector/client.ts';
import {
  AGENT_BOT,
  ALICE,
  BOB,
  config,
  configJson,
  localRequest,
  type MutableJson,
  NOW,
  publicRequest,
  ROOM,
  roomContext,
  snapshot,
} from '../testkit/projector/fixtures.ts';
import { HomeserverDouble } from '../testkit/projector/homeserver.ts';
import { validateConfig } from './config.ts';
import {
  ConfiguredReader,
  liveRoomCheck,
  matrixSdkReader,
  type RoomStateReader,
  snapshotFromState,
} from './homeserver.ts';
import { startProjector } from './index.ts';

const TOKEN = 'syt_test_token';
const cfg = config();
const room = cfg.rooms.get(ROOM)!;
const hs = new HomeserverDouble(TOKEN);
let reader: RoomStateReader;

function seed() {
  hs.rooms.clear();
  hs.mode = 'ok';
  hs.seedAdrRoom(
    ROOM,
    [
      { principal: AGENT_BOT, event_id: '$member-agent' },
      { principal: BOB, event_id: '$member-slack-bob' },
      { principal: ALICE, event_id: '$member-alice' },
    ],
    ALICE,
  );
}

const check = (timeoutMs = 1000) => liveRoomCheck(reader, cfg, room, roomContext(), timeoutMs);

describe('live room-state check against a Matrix client-server API double', () => {
  before(async () => {
    await hs.start();
    reader = matrixSdkReader({ baseUrl: hs.url, accessToken: TOKEN, timeoutMs: 1000 });
  });
  after(() => hs.stop());
  beforeEach(seed);

  test('unchanged state: the rebuilt snapshot has the bridge digest and audience', async () => {
    const raw = await reader.readRoomState(ROOM);
    const s = snapshotFromState(raw, cfg, room);
    assert.ok(s);
    assert.equal(stateDigest(s), stateDigest(snapshot()));
    assert.deepEqual(await check(), { ok: true });
  });

  test('drift: a new member joins → state_drift', async () => {
    hs.join(ROOM, '@dave:org-a.example');
    assert.deepEqual(await check(), { ok: false, reason: 'state_drift' });
  });

  test('drift: history visibility changes → state_drift', async () => {
    hs.setState(ROOM, {
      type: 'm.room.history_visibility',
      state_key: '',
      content: { history_visibility: 'shared' },
      sender: ALICE,
    });
    assert.deepEqual(await check(), { ok: false, reason: 'state_drift' });
  });

  test('drift: same values under a new event (join rule re-sent) → state_drift', async () => {
    hs.setState(ROOM, {
      type: 'm.room.join_rules',
      state_key: '',
      content: { join_rule: 'invite' },
      sender: ALICE,
    });
    assert.deepEqual(await check(), { ok: false, reason: 'state_drift' });
  });

  test('drift: server ACL changes or disappears → state_drift', async () => {
    hs.setState(ROOM, {
      type: 'm.room.server_acl',
      state_key: '',
      content: { allow: ['org-a.example', 'org-b.example'], allow_ip_literals: false, deny: [] },
      event_id: '$acl',
      sender: ALICE,
    });
    assert.deepEqual(await check(), { ok: false, reason: 'state_drift' });
  });

  test('drift: a member leaves → state_drift', async () => {
    hs.setState(ROOM, {
      type: 'm.room.member',
      state_key: BOB,
      content: { membership: 'leave' },
      event_id: '$bob-left',
      sender: BOB,
    });
    assert.deepEqual(await check(), { ok: false, reason: 'state_drift' });
  });

  test('incomplete state (no create event) → state_drift', async () => {
    hs.rooms.get(ROOM)!.delete(JSON.stringify(['m.room.create', '']));
    assert.deepEqual(await check(), { ok: false, reason: 'state_drift' });
  });

  test('outage: homeserver 500 → homeserver_unavailable', async () => {
    hs.mode = 'error';
    assert.deepEqual(await check(), { ok: false, reason: 'homeserver_unavailable' });
  });

  test('outage: homeserver hangs → homeserver_unavailable', async () => {
    hs.mode = 'hang';
    assert.deepEqual(await check(100), { ok: false, reason: 'homeserver_unavailable' });
  });

  // A read that never settles and holds no timer or socket: only the check's own budget can end it.
  // Without that deadline the check never settles and the test fails by its timeout (no clock read).
  test('the check budget ends a read that never answers', { timeout: 60_000 }, async () => {
    const never: RoomStateReader = { readRoomState: () => new Promise(() => {}) };
    assert.deepEqual(await liveRoomCheck(never, cfg, room, roomContext(), 100), {
      ok: false,
      reason: 'homeserver_unavailable',
    });
  });

  test('wrong access token or room not visible → homeserver_unavailable', async () => {
    const bad = matrixSdkReader({ baseUrl: hs.url, accessToken: 'nope', timeoutMs: 500 });
    assert.deepEqual(await liveRoomCheck(bad, cfg, room, roomContext(), 500), {
      ok: false,
      reason: 'homeserver_unavailable',
    });
    hs.rooms.clear();
    assert.deepEqual(await check(), { ok: false, reason: 'homeserver_unavailable' });
  });

  test('end to end: projector with liveRoomCheck enabled allows, then denies on drift and outage', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'projector-live-'));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, `${TOKEN}\n`);
    const c = configJson() as MutableJson;
    c.liveRoomCheck = { enabled: true, homeserverUrl: hs.url, accessTokenFile: tokenFile, timeoutMs: 500 };
    const parsed = validateConfig(c);
    assert.ok(parsed.ok);
    if (!parsed.ok) return;
    const p = await startProjector({ config: parsed.config, now: () => NOW });
    try {
      const send = async () => {
        const r = await sendCheck(p.url, localRequest());
        return {
          status: r.status,
          body: r.body,
          ...(r.headers['x-fgentic-identity'] ? { id: String(r.headers['x-fgentic-identity']) } : {}),
        };
      };
      const ok = await send();
      assert.equal(ok.status, 200);
      assert.ok(ok.id);
      hs.join(ROOM, '@eve:org-a.example');
      assert.deepEqual(await send(), { status: 403, body: '{"error":"denied","reason":"state_drift"}' });
      hs.mode = 'error';
      assert.deepEqual(await send(), {
        status: 403,
        body: '{"error":"denied","reason":"homeserver_unavailable"}',
      });
    } finally {
      await p.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('federated member without a server ACL → state_drift (snapshot policy)', async () => {
    const members = [
      { principal: ALICE, kind: 'matrix' as const, event_id: '$member-alice' },
      { principal: '@zoe:org-b.example', kind: 'matrix' as const, event_id: '$member-zoe' },
    ];
    const ctx = roomContext({ members, serverAcl: null });
    hs.rooms.clear();
    hs.seedAdrRoom(
      ROOM,
      [
        { principal: ALICE, event_id: '$member-alice' },
        { principal: '@zoe:org-b.example', event_id: '$member-zoe' },
      ],
      ALICE,
    );
    hs.rooms.get(ROOM)!.delete(JSON.stringify(['m.room.server_acl', '']));
    assert.deepEqual(await liveRoomCheck(reader, cfg, room, ctx, 1000), { ok: false, reason: 'state_drift' });
  });

  test('configured reader: token file rotation, missing token → failing reader and not usable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'projector-token-'));
    const tokenFile = join(dir, 'token');
    try {
      const c = configJson() as MutableJson;
      c.liveRoomCheck = { enabled: true, homeserverUrl: hs.url, accessTokenFile: tokenFile };
      const parsed = validateConfig(c);
      assert.ok(parsed.ok);
      if (!parsed.ok) return;
      const cr = new ConfiguredReader(0);
      assert.equal(cr.usable(parsed.config, 1), false);
      // The failing reader says why (the errno of the token read), for the room-check log.
      await assert.rejects(cr.get(parsed.config, 1)!.readRoomState(ROOM), { code: 'ENOENT' });
      assert.deepEqual(await liveRoomCheck(cr.get(parsed.config, 1)!, cfg, room, roomContext(), 500), {
        ok: false,
        reason: 'homeserver_unavailable',
      });
      writeFileSync(tokenFile, 'wrong');
      // A new token builds a new client: not usable until it is loaded.
      assert.equal(cr.usable(parsed.config, 1), false);
      await cr.get(parsed.config, 1)!.warm?.();
      assert.equal(cr.usable(parsed.config, 1), true);
      assert.deepEqual(await liveRoomCheck(cr.get(parsed.config, 1)!, cfg, room, roomContext(), 500), {
        ok: false,
        reason: 'homeserver_unavailable',
      });
      writeFileSync(tokenFile, TOKEN);
      assert.deepEqual(await liveRoomCheck(cr.get(parsed.config, 1)!, cfg, room, roomContext(), 500), {
        ok: true,
      });
      const disabled = config();
      assert.equal(cr.get(disabled, 2), undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('server: live check enabled with an unreadable token → /readyz 503, local denies, public still served', async () => {
    const c = configJson() as MutableJson;
    c.liveRoomCheck = { enabled: true, homeserverUrl: hs.url, accessTokenFile: '/nonexistent/token' };
    const parsed = validateConfig(c);
    assert.ok(parsed.ok);
    if (!parsed.ok) return;
    const p = await startProjector({ config: parsed.config, now: () => NOW });
    try {
      const ready = await fetch(`${p.url}/readyz`);
      assert.equal(ready.status, 503);
      const local = await sendCheck(p.url, localRequest());
      assert.equal(local.body, '{"error":"denied","reason":"homeserver_unavailable"}');
      assert.equal((await sendCheck(p.url, publicRequest())).status, 200);
    } finally {
      await p.close();
    }
  });
});
