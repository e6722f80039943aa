/**
 * One MXID grammar. contract's isFullMxid never accepts a string the origin's knowledge.is_full_mxid
 * (its CHECK helper, executed here from the origin's own schema SQL) refuses, and this project's own
 * fgentic.is_full_mxid accepts exactly what isFullMxid accepts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { isFullMxid } from '../../contract/index.ts';
import { applyOriginSchema, ORIGIN_SKIP } from '../../testkit/origin-fixture.ts';
import { startEmptyTestDatabase, startTestDatabase, type TestDatabase } from '../../testkit/retrieval.ts';
import { createPool } from './pool.ts';
import { OWNER_ROLE } from './roles.ts';

type Judge = (xs: readonly string[]) => Promise<boolean[]>;

function judge(pool: { query: TestDatabase['pool']['query'] }, schema: 'fgentic' | 'knowledge'): Judge {
  return async (xs) => {
    const r = await pool.query(
      `SELECT coalesce(${schema}.is_full_mxid(s), false) AS ok FROM unnest($1::text[]) WITH ORDINALITY AS u(s, i) ORDER BY i`,
      [xs],
    );
    return r.rows.map((x) => x.ok as boolean);
  };
}

let ours: TestDatabase;
let origin: Judge;
let closeOrigin: () => Promise<void>;
before(async () => {
  if (ORIGIN_SKIP) return;
  ours = await startTestDatabase();
  const db = await startEmptyTestDatabase();
  const pool = createPool({ connectionString: db.url, max: 2 });
  // Set before the schema is applied, so a failing fixture still closes the database.
  closeOrigin = async () => {
    await pool.end().catch(() => {});
    await db.close();
  };
  await applyOriginSchema(pool, [1], db.engine === 'postgres' ? db.urlAs(OWNER_ROLE) : undefined);
  origin = judge(pool, 'knowledge');
});
after(async () => {
  await ours?.close();
  await closeOrigin?.();
});

// Strings near the grammar: MXID-shaped pieces, glued with a few random characters.
const hex = fc.constantFrom(...'0123456789abcdefABCDEF');
const h16 = fc.string({ unit: hex, minLength: 0, maxLength: 5 });
const octet = fc.oneof(fc.integer({ min: 0, max: 300 }).map(String), fc.constantFrom('00', '01', '255', '256'));
const ipv4 = fc.array(octet, { minLength: 3, maxLength: 5 }).map((xs) => xs.join('.'));
const ipv6 = fc
  .tuple(
    fc.array(h16, { minLength: 0, maxLength: 9 }),
    fc.integer({ min: -1, max: 9 }),
    fc.option(ipv4, { nil: undefined }),
  )
  .map(([groups, gap, v4]) => {
    const parts: string[] = [...groups];
    if (gap >= 0 && gap <= parts.length) parts.splice(gap, 0, '');
    let s = parts.join(':');
    if (gap === 0) s = `:${s}`;
    if (gap === parts.length - 1) s = `${s}:`;
    if (v4) s = `${s}${s.endsWith(':') || s === '' ? '' : ':'}${v4}`;
    return `[${s}]`;
  });
const labelChar = fc.constantFrom(...'abcxyzAZ0189-_.');
const label = fc.oneof(
  fc.string({ unit: labelChar, minLength: 0, maxLength: 8 }),
  fc.integer({ min: 60, max: 66 }).map((n) => 'a'.repeat(n)),
);
const dns = fc.array(label, { minLength: 1, maxLength: 4 }).map((xs) => xs.join('.'));
const host = fc.oneof(dns, ipv4, ipv6, fc.constantFrom('', 'localhost', '-host', 'a..b', 'host-', '1.2.3'));
const port = fc.oneof(
  fc.constant(''),
  fc.integer({ min: 0, max: 70_000 }).map((n) => `:${n}`),
  fc.constantFrom(':', ':00', ':123456', ':08448', ':-1'),
);
const localChar = fc.constantFrom(...'abz09._=/+-A @:ä');
const localpart = fc.oneof(
  fc.string({ unit: localChar, minLength: 0, maxLength: 10 }),
  fc.integer({ min: 230, max: 256 }).map((n) => 'a'.repeat(n)),
);
const sigil = fc.constantFrom('@', '@', '@', '', '!', '#');
const mxidLike = fc
  .tuple(sigil, localpart, fc.constantFrom(':', ':', ':', ''), host, port)
  .map(([s, l, c, h, p]) => `${s}${l}${c}${h}${p}`);
// Mostly-valid MXIDs, so that acceptance is exercised as much as refusal.
const goodLabel = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,4}[a-z0-9])?$/);
const goodHost = fc.oneof(
  fc.array(goodLabel, { minLength: 1, maxLength: 3 }).map((xs) => xs.join('.')),
  fc.ipV4(),
  fc.ipV6().map((a) => `[${a}]`),
);
const plausible = fc
  .tuple(
    fc.stringMatching(/^[a-z0-9._=/+-]{1,12}$/),
    goodHost,
    fc.option(fc.integer({ min: 0, max: 70_000 }), { nil: undefined }),
  )
  .map(([l, h, p]) => `@${l}:${h}${p === undefined ? '' : `:${p}`}`);
const noisy = fc.oneof(
  { arbitrary: plausible, weight: 3 },
  { arbitrary: mxidLike, weight: 3 },
  { arbitrary: fc.tuple(mxidLike, fc.string({ maxLength: 3 })).map(([a, b]) => a + b), weight: 1 },
  { arbitrary: fc.string({ unit: fc.constantFrom(...'@a:[]1.-'), maxLength: 12 }), weight: 1 },
);

describe('one MXID grammar', { skip: ORIGIN_SKIP }, () => {
  test('the edge strings on which the two grammars used to differ', async () => {
    const edges = [
      '@a:b.c:0',
      '@a:b.c:65536',
      '@a:b.c:99999',
      '@a:1.2.3',
      '@a:-host',
      '@a:host-',
      '@a:a..b',
      `@a:${'a'.repeat(64)}.example`,
      '@a:[1.2.3.4]',
      '@a:[:::::]',
      '@a:[::1]',
      '@a:[::1]:0',
      '@a:[::ffff:1.2.3.4]',
      '@a:1.2.3.4',
      '@a:01.2.3.4',
    ];
    const theirs = await origin(edges);
    const mine = await judge(ours.pool, 'fgentic')(edges);
    edges.forEach((s, i) => {
      if (isFullMxid(s)) assert.equal(theirs[i], true, `contract accepts what the origin refuses: ${s}`);
      assert.equal(mine[i], isFullMxid(s), `the migrated functions and the contract differ on ${s}`);
    });
    // The two that the origin refuses and the contract used to accept.
    assert.equal(isFullMxid('@a:[1.2.3.4]'), false);
    assert.equal(isFullMxid('@a:[:::::]'), false);
  });

  test('property: contract ⊆ origin is_full_mxid, and the migrated functions = contract', async () => {
    let accepted = 0;
    let total = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(noisy, { minLength: 50, maxLength: 50 }), async (xs) => {
        const theirs = await origin(xs);
        const mine = await judge(ours.pool, 'fgentic')(xs);
        xs.forEach((s, i) => {
          const c = isFullMxid(s);
          if (c) {
            accepted++;
            assert.equal(theirs[i], true, `contract accepts what the origin refuses: ${JSON.stringify(s)}`);
          }
          assert.equal(mine[i], c, `the migrated functions and the contract differ on ${JSON.stringify(s)}`);
          total++;
        });
      }),
      { numRuns: 120, seed: 14 },
    );
    assert.ok(accepted > total / 20, `too few accepted strings (${accepted} of ${total})`);
  });
});
