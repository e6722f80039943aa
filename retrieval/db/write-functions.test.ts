/**
 * Migration 0016 replaces fgentic_ids.row_ids (the generated ACL column, 0007) and
 * fgentic_ids.vector_key (the duplicate index, 0009) in place. Stored generated values and the
 * expression index stay valid only if the new definitions return exactly what the old ones return,
 * for every input a writer can send: the old definitions are installed here from the migration files
 * themselves, under another schema, and compared on generated input, malformed shapes included.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { migrationFunction, startTestDatabase, type TestDatabase } from '../testing.ts';
import { toVectorBinary } from './pool.ts';

let t: TestDatabase;

before(async () => {
  t = await startTestDatabase();
  await t.pool.query('CREATE SCHEMA fgentic_old');
  for (const [file, name] of [
    ['0007_integer_acl_search.sql', 'id_of'],
    ['0007_integer_acl_search.sql', 'row_ids'],
    ['0009_exact_ties.sql', 'vector_key'],
  ] as const)
    await t.pool.query(migrationFunction(file, name, 'fgentic_old'));
});
after(async () => {
  await t?.close();
});

// Principals and groups drawn from a small pool, so that one row often names the same one twice
// (the ids must come out distinct and sorted), plus every malformed shape row_ids must pass over.
const text = fc.oneof(
  fc.constantFrom('@alice:org-a.example', '@bob:org-a.example', 'partner/org-b/docs', 'ops', '', 'ü', '"'),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
);
const json: fc.Arbitrary<unknown> = fc.oneof(
  text,
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.array(text, { maxLength: 2 }),
  fc.dictionary(text, text, { maxKeys: 2 }),
);
const principal = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ kind: fc.constantFrom('matrix', 'bridged_matrix', 'other'), principal: text }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('bridged_matrix'), network: text, principal: text }),
  },
  { weight: 1, arbitrary: fc.record({ principal: json }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: json },
);
const metadata = fc.record(
  {
    classification: fc.oneof(
      fc.constantFrom('public', 'approved_non_public', 'restricted', 'secret', 'Public'),
      json,
    ),
    allowed_principals: fc.oneof(
      { weight: 8, arbitrary: fc.array(principal, { maxLength: 8 }) },
      { weight: 1, arbitrary: json },
    ),
    allowed_groups: fc.oneof(
      { weight: 8, arbitrary: fc.array(fc.oneof(text, json), { maxLength: 6 }) },
      { weight: 1, arbitrary: json },
    ),
  },
  { requiredKeys: [] },
);

describe('migration 0016: the same ids and keys as 0007 and 0009', () => {
  test('row_ids: the same sorted, distinct ids for any metadata (and for NULL and non-objects)', async () => {
    const fixed = ['null', '{}', '[]', '"x"', '{"allowed_principals": {"a": 1}}'];
    const r = await t.pool.query(
      `SELECT count(*) FILTER (WHERE fgentic_ids.row_ids(m) IS DISTINCT FROM fgentic_old.row_ids(m)) AS differ,
              count(*) FILTER (WHERE fgentic_ids.row_ids(NULL) IS DISTINCT FROM fgentic_old.row_ids(NULL)) AS null_differs
         FROM unnest($1::jsonb[]) AS m`,
      [fixed],
    );
    assert.deepEqual(r.rows[0], { differ: '0', null_differs: '0' });
    await fc.assert(
      fc.asyncProperty(fc.array(metadata, { minLength: 1, maxLength: 40 }), async (rows) => {
        const q = await t.pool.query(
          `SELECT m::text AS m, fgentic_ids.row_ids(m) AS now, fgentic_old.row_ids(m) AS was
             FROM unnest($1::jsonb[]) AS m
            WHERE fgentic_ids.row_ids(m) IS DISTINCT FROM fgentic_old.row_ids(m)`,
          [rows.map((m) => JSON.stringify(m))],
        );
        assert.deepEqual(q.rows, []);
      }),
      { numRuns: 150 },
    );
  });

  test('id_of, which searches use for the audience, is still the hash row_ids writes out', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(text, { minLength: 1, maxLength: 40 }), async (values) => {
        const q = await t.pool.query(
          `SELECT count(*) FILTER (WHERE fgentic_ids.id_of(v) IS DISTINCT FROM fgentic_old.id_of(v)
                                     OR fgentic_ids.row_ids(jsonb_build_object('allowed_groups', jsonb_build_array(v)))
                                        IS DISTINCT FROM ARRAY[fgentic_ids.id_of('g' || v)]) AS differ
             FROM unnest($1::text[]) AS v`,
          [values],
        );
        assert.equal(q.rows[0]?.differ, '0');
      }),
      { numRuns: 50 },
    );
  });

  test('row_ids: duplicates and several levels are actually exercised', async () => {
    const r = await t.pool.query(
      `SELECT fgentic_ids.row_ids($1::jsonb) AS ids, fgentic_old.row_ids($1::jsonb) AS was`,
      [
        JSON.stringify({
          classification: 'public',
          allowed_principals: [
            { kind: 'matrix', principal: '@bob:org-a.example' },
            { kind: 'matrix', principal: '@alice:org-a.example' },
            { kind: 'matrix', principal: '@bob:org-a.example' },
          ],
          allowed_groups: ['ops', 'ops', 'partner/org-b/docs'],
        }),
      ],
    );
    const ids = r.rows[0]?.ids as number[];
    // Two principals, two groups, two levels: six distinct ids, ascending.
    assert.equal(ids.length, 6);
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
    );
    assert.deepEqual(ids, r.rows[0]?.was);
  });

  test('vector_key: the same key for any vector, copies and signed zeros included', async () => {
    const float4 = fc.float({
      noNaN: true,
      noDefaultInfinity: true,
      min: Math.fround(-1e30),
      max: Math.fround(1e30),
    });
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(float4, { minLength: 1, maxLength: 40 }), { minLength: 1, maxLength: 20 }),
        async (vectors) => {
          const usable = vectors.filter((v) => v.some((x) => Math.fround(x) !== 0));
          if (usable.length === 0) return;
          const q = await t.pool.query(
            `SELECT count(*) FILTER (WHERE fgentic_ids.vector_key(v) IS DISTINCT FROM fgentic_old.vector_key(v)) AS differ
               FROM unnest($1::vector[]) AS v`,
            [`{${usable.map((v) => `"[${v.map((x) => Math.fround(x)).join(',')}]"`).join(',')}}`],
          );
          assert.equal(q.rows[0]?.differ, '0');
        },
      ),
      { numRuns: 100 },
    );
    const bin = await t.pool.query(
      'SELECT fgentic_ids.vector_key($1::vector) = fgentic_old.vector_key($1::vector) AS same',
      [toVectorBinary([0.25, -0, 3])],
    );
    assert.equal(bin.rows[0]?.same, true);
  });

  test('the vector key has no planner statistics, and the duplicate lookup still probes its index', async () => {
    const s = await t.pool.query(
      `SELECT a.attstattarget FROM pg_attribute a
        WHERE a.attrelid = 'knowledge.chunks_fgentic_vector_key_idx'::regclass AND a.attnum = 1`,
    );
    assert.equal(Number(s.rows[0]?.attstattarget), 0);
    // 3,000 rows, four copies of each vector, analyzed: the generic plan (as the search functions
    // plan it, once per session) must still probe the index rather than read the table.
    await t.pool.query('DROP INDEX knowledge.chunks_embedding_hnsw_idx');
    await t.pool.query(
      `INSERT INTO knowledge.chunks (chunk_id, content, embedding, metadata)
       SELECT 'k' || g, 'c', (ARRAY[(g % 750)::real] || array_fill(1::real, ARRAY[1023]))::vector,
              '{"source":{"id":"s"},"classification":"public","allowed_principals":[{"kind":"matrix","principal":"@alice:org-a.example"}],"allowed_groups":[]}'
         FROM generate_series(1, 3000) g`,
    );
    await t.pool.query('ANALYZE knowledge.chunks');
    const client = await t.pool.connect();
    try {
      await client.query("SET plan_cache_mode = 'force_generic_plan'");
      await client.query(
        'PREPARE dup(vector) AS SELECT chunk_id FROM knowledge.chunks WHERE fgentic_ids.vector_key(embedding) = fgentic_ids.vector_key($1)',
      );
      const probe = `[5${',1'.repeat(1023)}]`;
      const plan = (await client.query(`EXPLAIN (FORMAT JSON) EXECUTE dup('${probe}')`)).rows[0]?.[
        'QUERY PLAN'
      ];
      assert.match(JSON.stringify(plan), /chunks_fgentic_vector_key_idx/);
      const found = await client.query(`EXECUTE dup('${probe}')`);
      assert.equal(found.rowCount, 4);
    } finally {
      client.release(true);
    }
  });
});
