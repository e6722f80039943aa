/**
 * The search sends its query vector in pgvector's binary form (retrieval/db/pool.ts, toVectorBinary).
 * The server must read exactly the vector the text form gives it, for any float4 components, and the
 * encoder must refuse what cannot be a float4 vector instead of sending it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { startTestDatabase, type TestDatabase } from '../../testkit/retrieval.ts';
import { toVectorBinary, toVectorParam } from './pool.ts';

let t: TestDatabase;
before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

const float4 = fc.float({ noNaN: true, noDefaultInfinity: true });

test('a binary vector parameter reads as the same vector as its text form', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(float4, { minLength: 1, maxLength: 64 }), async (xs) => {
      const r = await t.pool.query('SELECT $1::vector = $2::vector AS same, $1::vector::text AS b', [
        toVectorBinary(xs),
        toVectorParam(xs),
      ]);
      assert.equal(r.rows[0]?.same, true, String(r.rows[0]?.b));
    }),
    { numRuns: 150 },
  );
});

test('a 1024-d query vector ranks alike in both forms', async () => {
  const v = Array.from(new Float32Array(Array.from({ length: 1024 }, (_, i) => Math.sin(i * 0.37) / 20)));
  const r = await t.pool.query('SELECT ($1::vector <=> $3::vector) = ($2::vector <=> $3::vector) AS same', [
    toVectorBinary(v),
    toVectorParam(v),
    toVectorParam(v.map((x, i) => (i % 2 ? x : -x))),
  ]);
  assert.equal(r.rows[0]?.same, true);
});

test('the binary encoder refuses what is not a finite float4 vector', () => {
  assert.throws(() => toVectorBinary([1, Number.NaN]), RangeError);
  assert.throws(() => toVectorBinary([1, Number.POSITIVE_INFINITY]), RangeError);
  // Finite as a double, infinite as a float4.
  assert.throws(() => toVectorBinary([1, 1e39]), RangeError);
  assert.throws(() => toVectorBinary([]), RangeError);
  assert.throws(() => toVectorBinary(new Array(0x8000).fill(0)), RangeError);
});
