/**
 * The database's validators (fgentic.is_valid_principal_array, fgentic.is_valid_group_array,
 * fgentic.is_full_mxid, fgentic.is_dns1123_label) against the contract's own rules on generated
 * input: an audience or group list, or an identifier, is valid in the database exactly when the
 * contract (contract/metadata.ts validateChunkMetadata, contract/identifiers.ts) says so. The search
 * functions re-check their arguments with these, so a caller of the database cannot widen them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { isDns1123Label, isFullMxid, validateChunkMetadata } from '../../contract/index.ts';
import {
  decodeFixture,
  matrixHeader,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from '../../testkit/retrieval.ts';
import { DEFAULT_PLANNER, searchStatement } from '../planner.ts';
import { searchArguments } from '../predicate.ts';
import { toVectorBinary } from './pool.ts';

let t: TestDatabase;

before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

/** true, false, or 'error' (a raise refuses as false does, but the validators never raise). */
async function answer(fn: string, value: string, max: number): Promise<boolean | 'error'> {
  try {
    const r = await t.pool.query(`SELECT ${fn}($1::jsonb, $2) AS ok`, [value, max]);
    return r.rows[0]?.ok as boolean;
  } catch {
    return 'error';
  }
}

/** The contract's verdict on a principal list or a group list, each inside otherwise valid metadata. */
const contractPrincipals = (value: unknown) =>
  validateChunkMetadata({
    source: { id: 'docs/a.md' },
    classification: 'public',
    allowed_principals: value,
    allowed_groups: ['partner/org-b/docs'],
  } as never).ok;
const contractGroups = (value: unknown) =>
  validateChunkMetadata({
    source: { id: 'docs/a.md' },
    classification: 'public',
    allowed_principals: [P.alice],
    allowed_groups: value,
  } as never).ok;

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

describe('the database validators = the contract', () => {
  test('groups: the same answer as the contract for any input', async () => {
    await fc.assert(
      fc.asyncProperty(arrayOf(group), async (value) => {
        const json = JSON.stringify(value);
        const db = await answer('fgentic.is_valid_group_array', json, 64);
        assert.notEqual(db, 'error', 'the validator never raises');
        assert.equal(db, contractGroups(value), json);
      }),
      { numRuns: 300 },
    );
  });

  test('principals: the same answer as the contract for any input', async () => {
    await fc.assert(
      fc.asyncProperty(arrayOf(principal), async (value) => {
        const json = JSON.stringify(value);
        const db = await answer('fgentic.is_valid_principal_array', json, 64);
        assert.notEqual(db, 'error', 'the validator never raises');
        assert.equal(db, contractPrincipals(value), json);
      }),
      { numRuns: 400 },
    );
  });

  test('the bound: at most max_items elements', async () => {
    const two = JSON.stringify([P.alice, P.bob]);
    assert.equal(await answer('fgentic.is_valid_principal_array', two, 2), true);
    assert.equal(await answer('fgentic.is_valid_principal_array', two, 1), false);
    const groups = JSON.stringify(['partner/org-b/docs', 'partner/org-b/ops']);
    assert.equal(await answer('fgentic.is_valid_group_array', groups, 2), true);
    assert.equal(await answer('fgentic.is_valid_group_array', groups, 1), false);
  });

  test('an element without a string principal is refused', async () => {
    assert.equal(await answer('fgentic.is_valid_principal_array', '[{"kind":"matrix","x":"y"}]', 16), false);
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

describe('the text checks = the contract', () => {
  async function answers(fn: string, xs: readonly string[]): Promise<(boolean | null)[]> {
    const r = await t.pool.query(
      `SELECT fgentic.${fn}(s) AS ok FROM unnest($1::text[]) WITH ORDINALITY AS u(s, i) ORDER BY i`,
      [xs],
    );
    return r.rows.map((x) => x.ok as boolean | null);
  }
  const near = (base: fc.Arbitrary<string>) =>
    fc.oneof(
      base,
      fc.tuple(base, fc.string({ maxLength: 3 })).map(([a, b]) => a + b),
      fc.tuple(fc.string({ maxLength: 3 }), base).map(([a, b]) => a + b),
      fc.string({ maxLength: 12 }),
      fc.string({ unit: 'grapheme', maxLength: 6 }),
    );

  for (const [fn, base, rule] of [
    ['is_full_mxid', mxid, isFullMxid],
    ['is_dns1123_label', network, isDns1123Label],
  ] as const)
    test(`${fn}: the same answer as the contract for any string`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(near(base), { minLength: 1, maxLength: 20 }), async (xs) => {
          for (const [i, ok] of (await answers(fn, xs)).entries()) assert.equal(ok, rule(xs[i] as string), xs[i]);
        }),
        { numRuns: 100 },
      );
    });

  test('is_full_mxid at the length bounds (3, 4, 255 and 256 bytes)', async () => {
    const server = ':example.org';
    const sized = (bytes: number) => `@${'a'.repeat(bytes - 1 - server.length)}${server}`;
    assert.deepEqual(await answers('is_full_mxid', ['@a:', '@a:b', sized(255), sized(256)]), [
      false,
      true,
      true,
      false,
    ]);
  });
});
