import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { roomContextExample, snapshotExample, withField } from '../testkit/contract/fixtures.ts';
import {
  checkSnapshotPolicy,
  decodeRoomContext,
  encodeRoomContext,
  roomContextFromSnapshot,
  stateDigest,
  validateSnapshot,
} from './index.ts';

const alice = { kind: 'matrix', principal: '@alice:org-a.example' } as const;
const valid = () => {
  const s = validateSnapshot(snapshotExample());
  assert.ok(s.ok);
  return s.value;
};

describe('room-state snapshot', () => {
  test('digest is order-independent in the input and changes with any relevant field', () => {
    const reordered = Object.fromEntries(Object.entries(snapshotExample()).reverse());
    const s = validateSnapshot(reordered);
    assert.ok(s.ok);
    assert.equal(stateDigest(s.value), stateDigest(valid()));
    const drifted = validateSnapshot(withField(snapshotExample(), 'history_visibility.value', 'shared'));
    assert.ok(drifted.ok);
    assert.notEqual(stateDigest(drifted.value), stateDigest(valid()));
  });
  test('joined must be sorted and typed', () => {
    const s = snapshotExample();
    const joined = s['joined'] as unknown[];
    assert.equal(validateSnapshot({ ...s, joined: [...joined].reverse() }).ok, false);
    assert.equal(validateSnapshot(withField(s, 'joined', [{ ...(joined[2] as object), network: 'x' }])).ok, false);
    assert.equal(validateSnapshot(withField(s, 'create.federate', undefined)).ok, false);
    assert.equal(validateSnapshot(withField(s, 'server_acl.allow', ['org-b.example', 'org-a.example'])).ok, false);
    assert.ok(validateSnapshot(withField(s, 'server_acl', null)).ok);
  });
  test('room context derived from the snapshot decodes and equals the ADR example', () => {
    const ctx = roomContextFromSnapshot(valid(), {
      caller: alice,
      delegationId: '9f4e9e8b6a8d33bdb85d8fd5bc13ed101cb42a1c9d9b49ccf42c0a49387eddb6',
      eventId: '$event',
    });
    assert.ok(ctx.ok);
    assert.deepEqual(ctx.value, roomContextExample());
    const encoded = encodeRoomContext(ctx.value);
    assert.ok(encoded.ok);
    const back = decodeRoomContext(encoded.value);
    assert.ok(back.ok);
    assert.deepEqual(back.value, ctx.value);
  });
  test('policy: invite-only, joined history, caller joined, ACL once foreign members join', () => {
    assert.ok(checkSnapshotPolicy(valid(), { localServer: 'org-a.example', caller: alice }).ok);
    const notJoined = checkSnapshotPolicy(valid(), {
      localServer: 'org-a.example',
      caller: { kind: 'matrix', principal: '@carol:org-a.example' },
    });
    assert.equal(notJoined.ok ? 'ok' : notJoined.reason, 'audience');
    const pub = validateSnapshot(withField(snapshotExample(), 'join_rule.value', 'public'));
    assert.ok(pub.ok);
    assert.equal(checkSnapshotPolicy(pub.value, { localServer: 'org-a.example', caller: alice }).ok, false);
    const s = snapshotExample();
    const foreign = {
      ...s,
      server_acl: null,
      joined: [...(s['joined'] as object[]), { event_id: '$m-z', kind: 'matrix', principal: '@zed:org-b.example' }],
    };
    const f = validateSnapshot(foreign);
    assert.ok(f.ok);
    const verdict = checkSnapshotPolicy(f.value, { localServer: 'org-a.example', caller: alice });
    assert.equal(verdict.ok ? 'ok' : verdict.path, 'server_acl');
  });
  test('bridge_service members are excluded from the audience but not from the digest', () => {
    const s = snapshotExample();
    const withoutBot = validateSnapshot({ ...s, joined: (s['joined'] as object[]).slice(1) });
    assert.ok(withoutBot.ok);
    assert.notEqual(stateDigest(withoutBot.value), stateDigest(valid()));
  });
});
