/**
 * Migrations 0017 and 0019 re-create 0001's audience and group validators, and the two text checks
 * they call, as PL/pgSQL. They are compared here with 0001's own definitions (installed beside them
 * from the migration file) on generated input:
 * the group test gives the same answer everywhere; the principal test too, except where 0001's
 * bool_and skipped an element without a string principal, which 0017 refuses as the origin does.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { DEFAULT_PLANNER, searchStatement } from '../planner.ts';
import { searchArguments } from '../predicate.ts';
import {
  decodeFixture,
  installOldFunctions,
  matrixHeader,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from '../testing.ts';
import { toVectorBinary } from './pool.ts';

let t: TestDatabase;

before(async () => {
  t = await startTestDatabase();
  await installOldFunctions(
    t.pool,
    ['is_valid_principal_array', 'is_valid_group_array', 'is_full_mxid', 'is_dns1123_label'].map(
      (name) => ['0001_base_schema.sql', `knowledge.${name}`] as const,
    ),
    'current',
  );
});
after(async () => {
  await t?.close();
});

/** true, false, or 'error' (0001's SQL raised on some non-arrays; a raise refuses as false does). */
async function answer(fn: string, value: string, max: number): Promise<boolean | 'error'> {
  try {
    const r = await t.pool.query(`SELECT ${fn}($1::jsonb, $2) AS ok`, [value, max]);
    return r.rows[0]?.ok as boolean;
  } catch {
    return 'error';
  }
}
const refuses = (a: boolean | 'error') => a !== true;

const word = fc.constantFrom('matrix', 'bridged_matrix', 'other', '', 'Matrix');
const mxid = fc.constantFrom(
  '@alice:org-a.example',
  '@bob:org-a.example:8448',
  '@slack_u1:bridge.example',
  '@Alice:org-a.example',
  'alice:org-a.example',
  '@a:',
  '@a:[::1]',
  '@a:256.1.1.1',
);
const network = fc.constantFrom('slack', 'teams', 'Slack', '-x', 'a'.repeat(64), '');
const jsonScalar = fc.oneof(fc.constant(null), fc.integer(), fc.boolean(), fc.string({ maxLength: 4 }));
const valid = fc.constantFrom('@alice:org-a.example', '@bob:org-a.example', '@slack_u1:bridge.example');
const principal = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('matrix'), principal: valid }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('bridged_matrix'),
      network: fc.constant('slack'),
      principal: valid,
    }),
  },
  // One key too many or too few for its kind.
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('matrix'), network: fc.constant('slack'), principal: valid }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('bridged_matrix'), principal: valid }) },
  // The shape 0001's bool_and let through: the right number of keys, no principal.
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('matrix'), x: fc.string({ maxLength: 3 }) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('bridged_matrix'),
      network: fc.constant('slack'),
      x: fc.constant('y'),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: word, principal: mxid }) },
  { weight: 2, arbitrary: fc.record({ kind: word, network, principal: mxid }) },
  // Missing or mistyped keys, extra keys.
  {
    weight: 2,
    arbitrary: fc.record(
      {
        kind: fc.oneof(word, jsonScalar),
        principal: fc.oneof(mxid, jsonScalar),
        network,
        x: fc.string({ maxLength: 3 }),
      },
      { requiredKeys: [] },
    ),
  },
  { weight: 1, arbitrary: jsonScalar },
);
const group = fc.oneof(
  fc.constantFrom('partner/org-b/docs', 'partner/org-b/ops', 'partner/Org/docs', 'partner/org-b', 'ops', ''),
  jsonScalar,
);
/** Arrays that often repeat an element, and sometimes are no array at all. */
const arrayOf = <T>(item: fc.Arbitrary<T>) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.array(item, { maxLength: 4 }) },
    { weight: 2, arbitrary: item.chain((x) => fc.constant([x, x])) },
    { weight: 1, arbitrary: jsonScalar },
    { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 2 }), jsonScalar, { maxKeys: 2 }) },
  );

describe('migration 0017: the validators as PL/pgSQL', () => {
  test('groups: the same answer as 0001 for any input and bound', async () => {
    await fc.assert(
      fc.asyncProperty(arrayOf(group), fc.integer({ min: 0, max: 8 }), async (value, max) => {
        const json = JSON.stringify(value);
        const now = await answer('knowledge.is_valid_group_array', json, max);
        const was = await answer('fgentic_old.is_valid_group_array', json, max);
        assert.equal(refuses(now), refuses(was), json);
        assert.notEqual(now, 'error', 'the PL/pgSQL test never raises');
      }),
      { numRuns: 300 },
    );
  });

  test('principals: the same answer as 0001, except elements without a string principal, now refused', async () => {
    let skippedByOld = 0;
    await fc.assert(
      fc.asyncProperty(arrayOf(principal), fc.integer({ min: 0, max: 8 }), async (value, max) => {
        const json = JSON.stringify(value);
        const now = await answer('knowledge.is_valid_principal_array', json, max);
        const was = await answer('fgentic_old.is_valid_principal_array', json, max);
        assert.notEqual(now, 'error', 'the PL/pgSQL test never raises');
        const principalLess =
          Array.isArray(value) &&
          value.some(
            (e) =>
              typeof e === 'object' &&
              e !== null &&
              typeof (e as { principal?: unknown }).principal !== 'string',
          );
        if (!refuses(was) && refuses(now)) {
          assert.ok(principalLess, `only the skipped-element case may differ: ${json}`);
          skippedByOld += 1;
        } else assert.equal(refuses(now), refuses(was), json);
      }),
      { numRuns: 400 },
    );
    // The generator does reach the case that changed.
    assert.ok(skippedByOld > 0, 'the generator never produced the case that changed');
  });

  test('the case that changed, named: 0001 let it in, 0017 refuses it', async () => {
    const value = '[{"kind":"matrix","x":"y"}]';
    assert.equal(await answer('fgentic_old.is_valid_principal_array', value, 16), true);
    assert.equal(await answer('knowledge.is_valid_principal_array', value, 16), false);
    assert.equal(
      await answer(
        'knowledge.is_valid_principal_array',
        '[{"kind":"matrix","principal":"@alice:org-a.example"}]',
        16,
      ),
      true,
    );
  });

  test('a search whose audience holds such an element is refused as an invalid argument', async () => {
    const projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    const args = searchArguments(projection);
    const st = searchStatement(
      { ...args, audience: '[{"kind":"matrix","x":"y"}]' } as typeof args,
      toVectorBinary(randomVector(prng(17))),
      10,
      null,
      DEFAULT_PLANNER,
    );
    await assert.rejects(
      t.retrieval.query(st.text, st.values as unknown[]),
      (err: { code?: string }) => err.code === '22023',
    );
  });
});

describe('migration 0019: the text checks as PL/pgSQL', () => {
  /** Each string's answer from both definitions, in one statement. */
  async function both(fn: string, xs: readonly string[]): Promise<[boolean | null, boolean | null][]> {
    const r = await t.pool.query(
      `SELECT knowledge.${fn}(s) AS now, fgentic_old.${fn}(s) AS was
         FROM unnest($1::text[]) WITH ORDINALITY AS u(s, i) ORDER BY i`,
      [xs],
    );
    return r.rows.map((x) => [x.now as boolean | null, x.was as boolean | null]);
  }
  const near = (base: fc.Arbitrary<string>) =>
    fc.oneof(
      base,
      fc.tuple(base, fc.string({ maxLength: 3 })).map(([a, b]) => a + b),
      fc.tuple(fc.string({ maxLength: 3 }), base).map(([a, b]) => a + b),
      fc.string({ maxLength: 12 }),
      fc.string({ unit: 'grapheme', maxLength: 6 }),
    );

  for (const [fn, base] of [
    ['is_full_mxid', mxid],
    ['is_dns1123_label', network],
  ] as const)
    test(`${fn}: the same answer as 0001 for any string`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(near(base), { minLength: 1, maxLength: 20 }), async (xs) => {
          for (const [i, [now, was]] of (await both(fn, xs)).entries()) assert.equal(now, was, xs[i]);
        }),
        { numRuns: 100 },
      );
    });

  test('is_full_mxid: the same answer at the length bounds (3, 4, 255 and 256 bytes)', async () => {
    const server = ':example.org';
    const sized = (bytes: number) => `@${'a'.repeat(bytes - 1 - server.length)}${server}`;
    const xs = ['@a:', '@a:b', sized(255), sized(256)];
    assert.deepEqual(
      (await both('is_full_mxid', xs)).map(([now]) => now),
      [false, true, true, false],
    );
    for (const [i, [now, was]] of (await both('is_full_mxid', xs)).entries()) assert.equal(now, was, xs[i]);
  });

  test('both are PL/pgSQL now, with their grants', async () => {
    const r = await t.pool.query(
      `SELECT p.proname, l.lanname, has_function_privilege('knowledge_ingestion', p.oid, 'EXECUTE') AS ingest
         FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = 'knowledge' AND p.proname IN ('is_full_mxid', 'is_dns1123_label') ORDER BY 1`,
    );
    assert.deepEqual(r.rows, [
      { proname: 'is_dns1123_label', lanname: 'plpgsql', ingest: true },
      { proname: 'is_full_mxid', lanname: 'plpgsql', ingest: true },
    ]);
  });
});
