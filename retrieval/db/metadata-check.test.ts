/**
 * The metadata CHECK of a knowledge.chunks this project created (fgentic.metadata_valid) on generated
 * metadata, valid and near-valid: it lets in everything the contract's validateChunkMetadata lets in,
 * and never a row the origin's own CHECK function (knowledge.is_valid_metadata, from the origin's v1
 * schema SQL, on a database of its own) refuses. And the origin's own table keeps the origin's constraint.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type pg from 'pg';
import { validateChunkMetadata } from '../../contract/index.ts';
import { applyOriginSchema, ORIGIN_SKIP } from '../../testkit/origin-fixture.ts';
import {
  type EmptyTestDatabase,
  P,
  startEmptyTestDatabase,
  startTestDatabase,
  type TestDatabase,
} from '../../testkit/retrieval.ts';
import { migrate } from './migrate.ts';
import { createPool } from './pool.ts';
import { bootstrapDatabase, OWNER_ROLE } from './roles.ts';

let t: TestDatabase;
let origin: { db: EmptyTestDatabase; pool: pg.Pool } | undefined;
before(async () => {
  t = await startTestDatabase();
  if (ORIGIN_SKIP) return;
  const db = await startEmptyTestDatabase();
  const pool = createPool({ connectionString: db.url, max: db.poolSize });
  origin = { db, pool };
  await applyOriginSchema(pool, [1], db.engine === 'postgres' ? db.urlAs(OWNER_ROLE) : undefined);
});
after(async () => {
  await t?.close();
  await origin?.pool.end().catch(() => {});
  await origin?.db.close();
});

const constraint = async (pool = t.pool) =>
  (
    await pool.query(
      `SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
        WHERE conrelid = 'knowledge.chunks'::regclass AND conname = 'chunks_metadata_valid'`,
    )
  ).rows[0]?.def as string | undefined;

/** Whether the origin's CHECK lets the value in: true or NULL passes a CHECK, false or an error refuses it. */
async function originalAccepts(json: string): Promise<boolean> {
  const client = await origin!.pool.connect();
  try {
    const r = await client.query('SELECT knowledge.is_valid_metadata($1::jsonb) AS ok', [json]);
    return r.rows[0]?.ok !== false;
  } catch {
    return false;
  } finally {
    client.release();
  }
}

async function replacement(json: string): Promise<unknown> {
  return (await t.pool.query('SELECT fgentic.metadata_valid($1::jsonb) AS ok', [json])).rows[0]?.ok;
}

// Pieces chosen around every rule's edges: lengths at and past each bound (in bytes, with two-byte
// characters), control and whitespace characters, MXID server names of every form, duplicates.
const label = fc.oneof(
  fc.constantFrom('org-a', 'a', 'x'.repeat(63), 'x'.repeat(64), '-a', 'a-', 'Org', 'a_b', '0', ''),
  fc.stringMatching(/^[a-z0-9-]{1,8}$/),
);
const server = fc.oneof(
  fc.constantFrom(
    'org-a.example',
    'org-a.example:8448',
    'org-a.example:0',
    'org-a.example:65535',
    'org-a.example:65536',
    'org-a.example:080',
    'org-a.example:',
    '1.2.3.4',
    '255.255.255.255',
    '256.1.1.1',
    '1.2.3',
    '01.2.3.4',
    '[::1]',
    '[::1]:8448',
    '[2001:db8::1]',
    '[2001:db8:0:0:0:0:2:1]',
    '[::ffff:1.2.3.4]',
    '[::1',
    '[g::1]',
    'a..b',
    '.a',
    'a.',
    `${'a'.repeat(63)}.example`,
    `${'a'.repeat(64)}.example`,
    'ORG.example',
    'org_a.example',
    'é.example',
  ),
  fc.array(label, { minLength: 1, maxLength: 3 }).map((ls) => ls.join('.')),
);
const localpart = fc.oneof(
  fc.constantFrom('alice', 'Alice', 'a.b=c/d+e-f_', '', 'al ice', 'a'.repeat(250)),
  fc.stringMatching(/^[a-z0-9._=/+-]{1,6}$/),
);
const mxid = fc.oneof(
  fc.constantFrom(P.alice.principal, '@alice', 'alice:org-a.example', '@a:b', '@:org-a.example', '@alice:a:b'),
  fc.tuple(localpart, server).map(([l, s]) => `@${l}:${s}`),
);
const network = fc.oneof(fc.constantFrom<unknown>('slack', 'Slack', '-x', 'x'.repeat(64), 5, null), label);
const principal = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('matrix'), principal: mxid }) },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('bridged_matrix'), network, principal: mxid }),
  },
  {
    weight: 2,
    arbitrary: fc.record(
      {
        kind: fc.constantFrom<unknown>('matrix', 'bridged_matrix', 'oidc_client', 1, null, ['matrix']),
        network,
        principal: fc.oneof(mxid, fc.constantFrom<unknown>(5, null, [P.alice.principal])),
        extra: fc.constant(1),
      },
      { requiredKeys: [] },
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(P.alice, P.slackBob, 'alice', 5, null, []) },
);
const group = fc.oneof(
  fc.constantFrom<unknown>('partner/org-b/docs', 'partner/org-b', 'local/x/y', 'partner/org-b/docs/x', 5, null),
  fc.tuple(label, label).map(([a, b]) => `partner/${a}/${b}`),
);
/** Arrays drawn from a small pool so duplicates occur; sometimes at and past the 64-item bound. */
const list = <T>(item: fc.Arbitrary<T>) =>
  fc.oneof(
    { weight: 6, arbitrary: fc.array(item, { maxLength: 4 }) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.integer({ min: 63, max: 65 }), fc.boolean())
        .map(([n, dup]) =>
          Array.from({ length: n }, (_, i) => (dup && i === n - 1 ? `partner/g/0` : `partner/g/${i}`)),
        ),
    },
    {
      weight: 1,
      arbitrary: fc.tuple(fc.integer({ min: 63, max: 65 }), fc.boolean()).map(([n, dup]) =>
        Array.from({ length: n }, (_, i) => ({
          kind: 'matrix',
          principal: `@u${dup && i === n - 1 ? 0 : i}:x.example`,
        })),
      ),
    },
    { weight: 1, arbitrary: fc.constantFrom<unknown>('x', 5, null, {}) },
  );
const text = (max: number) =>
  fc.oneof(
    fc.constantFrom<unknown>(
      'docs/a.md',
      '',
      ' docs',
      'docs ',
      'a\tb',
      '\u00a0x',
      'a\u0001b',
      'a\u0085b',
      'a\u007fb',
      'x'.repeat(max),
      'x'.repeat(max + 1),
      `${'é'.repeat(Math.floor(max / 2))}`,
      `${'é'.repeat(Math.floor(max / 2))}x`,
      7,
      null,
    ),
    fc.string({ maxLength: 6 }),
  );
const source = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record(
      {
        id: text(512),
        title: text(512),
        locator: text(2048),
        revision: text(255),
        location: text(512),
        extra: fc.constant('x'),
      },
      { requiredKeys: ['id'] },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.record({ title: text(512) }, { requiredKeys: [] }),
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>('docs/a.md', [], null) },
);
const wildMetadata = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.record(
      {
        source,
        classification: fc.constantFrom<unknown>(
          'public',
          'approved_non_public',
          'restricted',
          'regulated',
          'secret',
          'authentication',
          'internal',
          'Public',
          1,
        ),
        allowed_principals: list(principal),
        allowed_groups: list(group),
        extra: fc.constant(true),
      },
      { requiredKeys: ['source', 'classification', 'allowed_principals', 'allowed_groups'] },
    ),
  },
  {
    weight: 2,
    arbitrary: fc.record(
      {
        source,
        classification: fc.constant('public'),
        allowed_principals: list(principal),
        allowed_groups: list(group),
      },
      { requiredKeys: [] },
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom<unknown>([], 'x', 1, null, { a: 1 }) },
  // Past the 64 KiB bound on the whole document.
  {
    weight: 1,
    arbitrary: fc.integer({ min: 65_400, max: 65_600 }).map((n) => ({
      source: { id: 'docs/a.md', title: 'x'.repeat(400), locator: 'y'.repeat(2000) },
      classification: 'public',
      allowed_principals: [P.alice],
      allowed_groups: [],
      padding: 'z'.repeat(n - 2500),
    })),
  },
);

// Valid metadata, and valid metadata with one field replaced by a piece from above.
const cleanLabel = fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,4}[a-z0-9])?$/);
const validMxid = fc
  .tuple(
    fc.stringMatching(/^[a-z0-9._=/+-]{1,6}$/),
    fc.oneof(
      fc.constantFrom('org-a.example', 'org-a.example:8448', '1.2.3.4', '[::1]:8448', '[2001:db8::1]'),
      fc.array(cleanLabel, { minLength: 1, maxLength: 3 }).map((ls) => ls.join('.')),
    ),
  )
  .map(([l, s]) => `@${l}:${s}`);
const validPrincipal = fc.oneof(
  fc.record({ kind: fc.constant('matrix'), principal: validMxid }),
  fc.record({ kind: fc.constant('bridged_matrix'), network: cleanLabel, principal: validMxid }),
);
const validMetadata = fc
  .record({
    source: fc.record(
      {
        id: fc.stringMatching(/^[a-z0-9/._-]{1,20}$/),
        title: fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9 ]{0,10}[A-Za-z0-9]$/),
        revision: fc.stringMatching(/^[0-9a-f]{1,12}$/),
      },
      { requiredKeys: ['id'] },
    ),
    classification: fc.constantFrom(
      'public',
      'approved_non_public',
      'restricted',
      'regulated',
      'secret',
      'authentication',
    ),
    allowed_principals: fc.uniqueArray(validPrincipal, { maxLength: 3, selector: (x) => JSON.stringify(x) }),
    allowed_groups: fc.uniqueArray(
      fc.tuple(cleanLabel, cleanLabel).map(([a, b]) => `partner/${a}/${b}`),
      { maxLength: 2 },
    ),
  })
  .filter((m) => m.allowed_principals.length + m.allowed_groups.length > 0);
const mutated = fc
  .tuple(
    validMetadata,
    fc.oneof(
      source.map((v) => ['source', v] as const),
      fc
        .constantFrom(
          ['id', 512] as const,
          ['title', 512] as const,
          ['locator', 2048] as const,
          ['revision', 255] as const,
          ['location', 512] as const,
          ['extra', 512] as const,
        )
        .chain(([key, max]) => text(max).map((v) => [`source.${key}`, v] as const)),
      fc.constantFrom<unknown>('internal', 'Public', 1, null).map((v) => ['classification', v] as const),
      list(principal).map((v) => ['allowed_principals', v] as const),
      list(group).map((v) => ['allowed_groups', v] as const),
      principal.map((v) => ['principal+', v] as const),
      group.map((v) => ['group+', v] as const),
    ),
  )
  .map(([m, [k, v]]) => {
    if (k === 'principal+') return { ...m, allowed_principals: [...m.allowed_principals, v] };
    if (k === 'group+') return { ...m, allowed_groups: [...m.allowed_groups, v] };
    if (k.startsWith('source.')) return { ...m, source: { ...m.source, [k.slice('source.'.length)]: v } };
    return { ...m, [k]: v };
  });
const metadata = fc.oneof(
  { weight: 3, arbitrary: validMetadata },
  { weight: 4, arbitrary: mutated },
  { weight: 3, arbitrary: wildMetadata },
);

describe('metadata CHECK', () => {
  test("property: this project's CHECK lets in what the contract does and nothing the origin's refuses", {
    skip: ORIGIN_SKIP,
  }, async () => {
    let accepted = 0;
    let refused = 0;
    let between = 0;
    await fc.assert(
      fc.asyncProperty(metadata, async (m) => {
        const json = JSON.stringify(m);
        const origin = await originalAccepts(json);
        const got = await replacement(json);
        assert.equal(typeof got, 'boolean', 'never NULL, never an error');
        // Everything the contract lets in (so an ingest that passed validation never fails here),
        // and never a row the origin's CHECK refuses. Between the two lie the origin's wider MXID
        // grammar (retrieval/db/mxid.test.ts) and strings that begin or end with a non-ASCII space,
        // which the contract's trim() refuses and both CHECKs, like the origin's, let in.
        if (validateChunkMetadata(m).ok) assert.equal(got, true, `contract: ${json.slice(0, 400)}`);
        else if (got) between++;
        if (got) assert.equal(origin, true, `origin: ${json.slice(0, 400)}`);
        if (got) accepted++;
        else refused++;
      }),
      { numRuns: 3000, seed: 1211 },
    );
    // Both answers are common: a generator that only produced one kind would prove little.
    assert.ok(accepted > 150, `accepted ${accepted}`);
    assert.ok(refused > 150, `refused ${refused}`);
    assert.ok(between < accepted / 10, `${between} rows only the database lets in`);
  });

  test('on a table this project created, the CHECK calls fgentic.metadata_valid; a bad row is refused by name', async () => {
    assert.equal(await constraint(), 'CHECK (fgentic.metadata_valid(metadata))');
    await assert.rejects(
      t.ingestion.query(
        "INSERT INTO knowledge.chunks (chunk_id, content, embedding, metadata) VALUES ('x', 'x', (ARRAY[1::real] || array_fill(0::real, ARRAY[1023]))::vector, $1)",
        [
          JSON.stringify({
            source: { id: 'docs/a.md' },
            classification: 'public',
            allowed_principals: [{ kind: 'matrix', principal: '@alice' }],
            allowed_groups: [],
          }),
        ],
      ),
      (err: { code?: string; constraint?: string }) =>
        err.code === '23514' && err.constraint === 'chunks_metadata_valid',
    );
  });

  test("on the origin database the constraint stays the origin's own", { skip: ORIGIN_SKIP }, async () => {
    const db = await startEmptyTestDatabase();
    const pool = createPool({ connectionString: db.url, max: db.poolSize });
    try {
      await applyOriginSchema(pool, [1, 2, 3], db.engine === 'postgres' ? db.urlAs(OWNER_ROLE) : undefined);
      await bootstrapDatabase(pool);
      const before = await constraint(pool);
      await migrate(pool);
      assert.equal(await constraint(pool), before);
      assert.doesNotMatch(before ?? '', /fgentic/);
    } finally {
      await pool.end();
      await db.close();
    }
  });
});
