import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { planSubgraphs, SUBGRAPH_INDEX_PATTERN, subgraphIndexName } from './subgraph-plan.ts';

const base = { tableRows: 100_000, bytesPerRow: 8_000, exactThreshold: 1_000 };

test('ids between 1 % and 20 % of the table, above the exact threshold, most selective first', () => {
  const counts = new Map([
    [1, 500], // 0.5 %: the exact path serves it
    [2, 1_500],
    [3, 10_000],
    [4, 25_000], // 25 %: the whole graph serves it
    [5, 90_000],
  ]);
  const p = planSubgraphs({ ...base, counts, built: new Set(), budgetBytes: 1e12 });
  assert.deepEqual(p.build, [2, 3]);
  assert.equal(p.bytes, 11_500 * 8_000);
});

test('the budget stops the build; a smaller id that still fits is taken', () => {
  const counts = new Map([
    [1, 2_000],
    [2, 15_000],
    [3, 3_000],
  ]);
  const p = planSubgraphs({ ...base, counts, built: new Set(), budgetBytes: 6_000 * 8_000 });
  assert.deepEqual(p.build, [1, 3]);
});

test('a built graph is kept inside the wider band and dropped outside it or over the budget', () => {
  const counts = new Map([
    [1, 800], // below the threshold now
    [2, 25_000], // 25 %: within the keep band
    [3, 35_000], // 35 %: outside
    [4, 2_000],
  ]);
  const p = planSubgraphs({ ...base, counts, built: new Set([1, 2, 3, 4, 9]), budgetBytes: 1e12 });
  assert.deepEqual(p.keep, [4, 2]);
  assert.deepEqual(p.drop, [1, 3, 9]);
  const tight = planSubgraphs({ ...base, counts, built: new Set([2, 4]), budgetBytes: 2_000 * 8_000 });
  assert.deepEqual(tight.keep, [4]);
  assert.deepEqual(tight.drop, [2]);
});

test('never over the budget, never an id twice, names fit the registry’s pattern', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.integer({ min: -2_147_483_648, max: 2_147_483_647 }), fc.nat(60_000)), {
        maxLength: 40,
      }),
      fc.array(fc.integer({ min: -5, max: 5 }), { maxLength: 10 }),
      fc.nat(400_000_000),
      (pairs, built, budgetBytes) => {
        const counts = new Map(pairs);
        const p = planSubgraphs({ ...base, counts, built: new Set(built), budgetBytes });
        assert.ok(p.bytes <= budgetBytes);
        const all = [...p.keep, ...p.build, ...p.drop];
        assert.equal(new Set(all).size, all.length);
        for (const id of p.build) assert.match(subgraphIndexName(id), SUBGRAPH_INDEX_PATTERN);
      },
    ),
  );
  assert.throws(() => subgraphIndexName(2 ** 31), RangeError);
});
