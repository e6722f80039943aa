/** Registry shards: the manifest check, validation with the single-file rules, addresses, and the shard cache. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { configJson } from '../testkit/projector/fixtures.ts';
import { assembleConfig, createAssembler, roomKey, shardDigest, shardName, shardPosition } from './registry.ts';

const room = (i: number) => ({
  roomId: `!r${i}abcdefghijklmnop:org-a.example`,
  allowedClassifications: ['public'],
});
const shardText = (rooms: unknown[], partners: unknown[] = []) =>
  `${JSON.stringify({ version: 1, rooms, partners })}\n`;

function set(shards: string[]): { base: string; texts: Map<string, string> } {
  const base = {
    ...configJson(),
    rooms: [],
    partners: [],
    registry: { shards: shards.map((t, i) => ({ name: shardName(i), sha256: shardDigest(t) })) },
  };
  return { base: JSON.stringify(base), texts: new Map(shards.map((t, i) => [shardName(i), t])) };
}

/** Shard texts with every room at its address among `count` shards. */
function placed(count: number, rooms: { roomId: string }[]): string[] {
  const lists: unknown[][] = Array.from({ length: count }, () => []);
  for (const r of rooms) lists[shardPosition(roomKey(r.roomId), count)]!.push(r);
  return lists.map((l) => shardText(l));
}

/** Two rooms that address different shards of two, and the position of the first. */
function splitPair(): { a: ReturnType<typeof room>; b: ReturnType<typeof room>; at: number } {
  const a = room(1);
  const at = shardPosition(a.roomId, 2);
  for (let i = 2; ; i++) if (shardPosition(room(i).roomId, 2) !== at) return { a, b: room(i), at };
}

describe('registry shards', () => {
  test('assembled rooms come from every shard, each found in the shard it addresses', () => {
    const rooms = Array.from({ length: 300 }, (_, i) => room(i));
    const { base, texts } = set(placed(256, rooms));
    const r = assembleConfig(base, texts);
    assert.ok(r.ok);
    if (!r.ok) return;
    assert.equal(r.config.rooms.size, 300);
    assert.equal([...r.config.rooms.keys()].length, 300);
    for (const x of rooms) assert.deepEqual(r.config.rooms.get(x.roomId), x);
    assert.equal(r.config.rooms.get(room(300).roomId), undefined);
    assert.equal(r.config.rooms.has(room(300).roomId), false);
  });

  test('a room outside the shard its ID addresses is refused, so no room can sit in two shards', () => {
    const { a, at } = splitPair();
    const wrong = [shardText([]), shardText([])];
    wrong[1 - at] = shardText([a]);
    const r = assembleConfig(set(wrong).base, set(wrong).texts);
    assert.ok(!r.ok && !('inconsistent' in r) && /not in the shard its ID addresses/.test(r.error));
    const both = set([shardText([a]), shardText([a])]);
    const d = assembleConfig(both.base, both.texts);
    assert.ok(!d.ok && /not in the shard its ID addresses/.test(d.error));
  });

  test('a partner outside the shard its issuer, audience and azp address is refused', () => {
    const partner = (configJson() as { partners: Record<string, unknown>[] }).partners[0]!;
    const key = `partner\u0000${partner['issuer']}\u0000${partner['audience']}\u0000${partner['azp']}`;
    const lists = [shardText([]), shardText([])];
    lists[1 - shardPosition(key, 2)] = shardText([], [partner]);
    const { base, texts } = set(lists);
    const r = assembleConfig(base, texts);
    assert.ok(!r.ok && /a partner is not in the shard/.test(r.error));
    lists.reverse();
    const ok = set(lists);
    assert.ok(assembleConfig(ok.base, ok.texts).ok);
  });

  test('manifest shards are listed in order of their names', () => {
    const { base, texts } = set(placed(2, [room(1), room(2)]));
    const b = JSON.parse(base);
    b.registry.shards.reverse();
    const r = assembleConfig(JSON.stringify(b), texts);
    assert.ok(!r.ok && /registry\.shards\[0\]\.name: must be fgentic-projector-registry-000/.test(r.error));
  });

  test('a shard that differs from the manifest, or is missing, is a set in transit', () => {
    const { base, texts } = set(placed(2, [room(1), room(2)]));
    texts.set(shardName(1), shardText([room(9)]));
    const r = assembleConfig(base, texts);
    assert.ok(!r.ok && 'inconsistent' in r && /does not match/.test(r.error));
    texts.delete(shardName(1));
    const m = assembleConfig(base, texts);
    assert.ok(!m.ok && 'inconsistent' in m && /missing/.test(m.error));
  });

  test('an invalid entry names its shard and field, never its value', () => {
    const { base, texts } = set([
      shardText([room(1)]),
      shardText([{ roomId: 'not-a-room', allowedClassifications: ['public'] }]),
    ]);
    const r = assembleConfig(base, texts);
    assert.ok(!r.ok);
    if (!r.ok) {
      assert.match(r.error, /^fgentic-projector-registry-001: rooms\[0\]\.roomId/);
      assert.doesNotMatch(r.error, /not-a-room/);
    }
  });

  test('inline rooms next to a manifest are refused', () => {
    const { base, texts } = set([shardText([room(1)])]);
    const withInline = JSON.stringify({ ...JSON.parse(base), rooms: [room(5)] });
    assert.ok(!assembleConfig(withInline, texts).ok);
  });

  test('the cached assembler revalidates only a changed shard and sees the change', () => {
    const assemble = createAssembler();
    const { a: r1, b: r2 } = splitPair();
    const a = set(placed(2, [r1, r2]));
    const first = assemble(a.base, a.texts);
    assert.ok(first.ok);
    const b = set(placed(2, [r1, { ...r2, allowedClassifications: ['approved_non_public', 'public'] }]));
    const second = assemble(b.base, b.texts);
    assert.ok(second.ok);
    if (!first.ok || !second.ok) return;
    const id1 = r1.roomId;
    const id2 = r2.roomId;
    assert.equal(second.config.rooms.get(id1), first.config.rooms.get(id1), 'unchanged shard reused');
    assert.deepEqual(second.config.rooms.get(id2)?.allowedClassifications, ['approved_non_public', 'public']);
    // A change of the base (local groups here) invalidates every cached shard.
    const c = set(placed(2, [r1, r2]));
    const changedBase = JSON.stringify({ ...JSON.parse(c.base), localGroups: ['team/extra'] });
    const third = assemble(changedBase, c.texts);
    assert.ok(third.ok);
    if (third.ok) assert.notEqual(third.config.rooms.get(id1), first.config.rooms.get(id1));
  });
});
