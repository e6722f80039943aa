/** Registry shards: the manifest check, validation with the single-file rules, and the shard cache. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { configJson } from '../testkit/projector/fixtures.ts';
import { assembleConfig, createAssembler, shardDigest, shardName } from './registry.ts';

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

describe('registry shards', () => {
  test('assembled rooms come from every shard; the base keeps its own settings', () => {
    const { base, texts } = set([shardText([room(1), room(2)]), shardText([room(3)])]);
    const r = assembleConfig(base, texts);
    assert.ok(r.ok);
    if (r.ok) assert.deepEqual([...r.config.rooms.keys()].length, 3);
  });

  test('a shard that differs from the manifest, or is missing, is a set in transit', () => {
    const { base, texts } = set([shardText([room(1)]), shardText([room(2)])]);
    texts.set(shardName(1), shardText([room(9)]));
    const r = assembleConfig(base, texts);
    assert.ok(!r.ok && 'inconsistent' in r && /does not match/.test(r.error));
    texts.delete(shardName(1));
    const m = assembleConfig(base, texts);
    assert.ok(!m.ok && 'inconsistent' in m && /missing/.test(m.error));
  });

  test('the same room in two shards is refused, as a duplicate in one file is', () => {
    const { base, texts } = set([shardText([room(1)]), shardText([room(1)])]);
    const r = assembleConfig(base, texts);
    assert.ok(!r.ok && !('inconsistent' in r) && /duplicate room across registry shards/.test(r.error));
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
    const a = set([shardText([room(1)]), shardText([room(2)])]);
    const first = assemble(a.base, a.texts);
    assert.ok(first.ok);
    const b = set([
      shardText([room(1)]),
      shardText([{ ...room(2), allowedClassifications: ['approved_non_public', 'public'] }]),
    ]);
    const second = assemble(b.base, b.texts);
    assert.ok(second.ok);
    if (!first.ok || !second.ok) return;
    const id1 = room(1).roomId;
    const id2 = room(2).roomId;
    assert.equal(second.config.rooms.get(id1), first.config.rooms.get(id1), 'unchanged shard reused');
    assert.deepEqual(second.config.rooms.get(id2)?.allowedClassifications, ['approved_non_public', 'public']);
    // A change of the base (local groups here) invalidates every cached shard.
    const c = set([shardText([room(1)]), shardText([room(2)])]);
    const changedBase = JSON.stringify({ ...JSON.parse(c.base), localGroups: ['team/extra'] });
    const third = assemble(changedBase, c.texts);
    assert.ok(third.ok);
    if (third.ok) assert.notEqual(third.config.rooms.get(id1), first.config.rooms.get(id1));
  });
});
