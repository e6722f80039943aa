/**
 * The incremental registry (render/registry.ts `RegistryIndex` fed by render/registry-rooms.ts
 * `RoomTable`) equals the full render after every step of a random sequence of room and partner
 * changes, duplicates and invalid rooms included, in both layouts; and one change touches only the
 * ConfigMaps it reports.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { agent, examples, room } from '../../testkit/controller/fixtures.ts';
import type { K8sObject, Resources, RetrievalRoom } from '../types.ts';
import { analyse } from './conflicts.ts';
import { RegistryIndex } from './registry.ts';
import { RoomTable } from './registry-rooms.ts';
import { registryContext, registryEntries, renderServerConfig } from './server-config.ts';

/** 800 agents push projector.json past the inline limit: the sharded layout. */
const pad = (input: Resources) => {
  for (let i = 0; i < 800; i++) input.agents.push(agent('kagent', `padding-agent-${i}`));
};

const projectorObjects = (objects: K8sObject[]) =>
  objects.filter((o) => o.metadata.name !== 'fgentic-retrieval-config');

describe('incremental registry', () => {
  it('equals the full render after every room change (fast-check), inline and sharded', () => {
    const ids = Array.from({ length: 12 }, (_, i) => `!room${i}:org-a.example`);
    const step = fc.record({
      name: fc.integer({ min: 0, max: 15 }).map((i) => `r${i}`),
      op: fc.constantFrom('set', 'set', 'set', 'delete'),
      id: fc.oneof(fc.constantFrom(...ids), fc.constant('not-a-room-id')),
      agreed: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 25 }), fc.boolean(), (steps, padded) => {
        const input = examples();
        if (padded) pad(input);
        input.rooms = [];
        const first = analyse(input);
        assert.ok(first.model, JSON.stringify(first.conflicts));
        const index = new RegistryIndex();
        index.setContext(registryContext(first.model));
        index.setPartners(registryEntries(first.model).partners);
        const table = new RoomTable();
        const live = new Map<string, RetrievalRoom>();
        for (const s of steps) {
          const r =
            s.op === 'delete'
              ? undefined
              : room(
                  s.name,
                  s.id,
                  s.agreed ? { allowedClassifications: ['approved_non_public', 'public'], agreementRef: 'a' } : {},
                );
          if (r) live.set(s.name, r);
          else live.delete(s.name);
          const change = table.set(s.name, r);
          for (const e of change.entries) index.putEntry('room', e);
          const full = analyse({ ...input, rooms: [...live.values()] });
          assert.ok(full.model);
          assert.deepEqual(index.render().objects, projectorObjects(renderServerConfig(full.model).objects));
          for (const name of live.keys()) {
            const c = full.conflicts.find((x) => x.kind === 'RetrievalRoom' && x.name === name);
            assert.deepEqual(table.conflict(name), c ? { reason: c.reason, message: c.message } : undefined);
          }
        }
        assert.equal(index.layout(), padded ? 'sharded' : 'inline');
      }),
      { numRuns: 20 },
    );
  });

  it('one room change reports exactly the ConfigMaps whose content changed', () => {
    const input = examples();
    pad(input);
    const { model } = analyse(input);
    assert.ok(model);
    const index = new RegistryIndex();
    index.setContext(registryContext(model));
    const table = new RoomTable();
    for (let i = 0; i < 500; i++)
      for (const e of table.set(`r${i}`, room(`r${i}`, `!room${i}:org-a.example`)).entries) index.putEntry('room', e);
    const before = new Map(index.render().objects.map((o) => [o.metadata.name, JSON.stringify(o)]));
    const changed = new Set<string>();
    const change = table.set(
      'r7',
      room('r7', '!room7:org-a.example', {
        allowedClassifications: ['approved_non_public', 'public'],
        agreementRef: 'a',
      }),
    );
    for (const e of change.entries) for (const n of index.putEntry('room', e)) changed.add(n);
    const after = index.render().objects;
    const differs = after.filter((o) => before.get(o.metadata.name) !== JSON.stringify(o)).map((o) => o.metadata.name);
    assert.equal(differs.length, 2);
    assert.deepEqual(new Set(differs), changed);
    assert.deepEqual([...change.rooms], ['r7']);
  });
});
