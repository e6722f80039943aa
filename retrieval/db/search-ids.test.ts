/**
 * Migration 0018 computes the ids a search asks for with PL/pgSQL (fgentic_ids.id_of and
 * fgentic_ids.level_id re-created, fgentic_ids.audience_ids and fgentic_ids.group_ids new). The rows' stored ids come from
 * 0007's hash, so a search finds its rows only if the new functions return the same ids as the
 * expressions 0015's search functions evaluated: 0007's definitions are installed here from the
 * migration file under another schema and compared on generated input. The second part checks what
 * a search now returns of a row's metadata.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { writeChunks } from '../ingest/store.ts';
import { searchKnowledge } from '../search.ts';
import {
  decodeFixture,
  installOldFunctions,
  matrixHeader,
  meta,
  oauthHeader,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from '../testing.ts';

let t: TestDatabase;

before(async () => {
  t = await startTestDatabase();
  await installOldFunctions(
    t.pool,
    ['id_of', 'level_id'].map((name) => ['0007_integer_acl_search.sql', `fgentic_ids.${name}`] as const),
    'old',
  );
});
after(async () => {
  await t?.close();
});

const text = fc.oneof(
  fc.constantFrom('@alice:org-a.example', '@slack_u1:bridge.example', 'slack', 'matrix', '', 'ü', '"'),
  fc.string({ maxLength: 10 }),
);
const classes = fc.oneof(
  fc.constantFrom(['public'], ['approved_non_public', 'public'], ['public', 'approved_non_public'], []),
  fc.array(fc.oneof(text, fc.constant(null)), { maxLength: 3 }),
);
const scalar = fc.oneof(text, fc.integer(), fc.boolean(), fc.constant(null));
// The search functions validate an audience before asking for its ids; the ids are compared on any
// array of elements anyway, malformed ones included, so neither side depends on that order.
const element = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constantFrom('matrix', 'bridged_matrix'), principal: text }) },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('bridged_matrix'), network: text, principal: text }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: scalar, network: scalar, principal: scalar }, { requiredKeys: [] }),
  },
  { weight: 1, arbitrary: scalar },
);
const audience = fc.oneof(
  fc.array(element, { maxLength: 6 }),
  element.chain((e) => fc.constant([e, e])),
);

const sorted = (ids: readonly number[]) => [...ids].sort((a, b) => a - b);

describe('migration 0018: the ids a search asks for', () => {
  test('id_of: the same id as 0007 for every string', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(text, fc.string({ unit: 'grapheme', maxLength: 8 })), async (v) => {
        const r = await t.pool.query('SELECT fgentic_ids.id_of($1) AS now, fgentic_old.id_of($1) AS was', [
          v,
        ]);
        assert.equal(r.rows[0].now, r.rows[0].was);
      }),
      { numRuns: 100 },
    );
  });

  test('level_id: the same id as 0007 for every classification set', async () => {
    await fc.assert(
      fc.asyncProperty(classes, async (c) => {
        const r = await t.pool.query(
          'SELECT fgentic_ids.level_id($1::text[]) AS now, fgentic_old.level_id($1::text[]) AS was',
          [c],
        );
        assert.equal(r.rows[0].now, r.rows[0].was);
      }),
      { numRuns: 100 },
    );
  });

  test('audience_ids: the set 0015 built for a Matrix audience, ascending and distinct', async () => {
    await fc.assert(
      fc.asyncProperty(audience, classes, async (a, c) => {
        const r = await t.pool.query(
          `SELECT fgentic_ids.audience_ids($1::jsonb, $2::text[]) AS now, ARRAY(
             SELECT fgentic_old.id_of('p' || jsonb_build_array(e->'kind', e->'network', e->'principal')::text)
             FROM jsonb_array_elements($1::jsonb) AS a(e)
             UNION
             SELECT fgentic_old.level_id($2::text[])) AS was`,
          [JSON.stringify(a), c],
        );
        const now = r.rows[0].now as number[];
        assert.deepEqual(now, sorted(r.rows[0].was as number[]));
        assert.deepEqual(now, [...new Set(sorted(now))], 'ascending and distinct');
      }),
      { numRuns: 150 },
    );
  });

  test('group_ids: the set 0015 built for a partner, ascending and distinct', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(text, { maxLength: 6 }), async (g) => {
        const r = await t.pool.query(
          `SELECT fgentic_ids.group_ids($1::text[]) AS now,
             ARRAY(SELECT DISTINCT fgentic_old.id_of('g' || v) FROM unnest($1::text[]) AS u(v)) AS was`,
          [g],
        );
        assert.deepEqual(r.rows[0].now, sorted(r.rows[0].was as number[]));
      }),
      { numRuns: 100 },
    );
  });

  test('group_ids: a NULL group adds no id (0015 added a NULL, which matches no row)', async () => {
    const r = await t.pool.query(
      "SELECT fgentic_ids.group_ids(ARRAY['partner/org-b/docs', NULL]) AS now, fgentic_ids.group_ids(ARRAY['partner/org-b/docs']) AS one",
    );
    assert.deepEqual(r.rows[0].now, r.rows[0].one);
  });

  test('only the owner may call the two new functions; every writer may still call level_id', async () => {
    const r = await t.pool.query(
      `SELECT has_function_privilege('knowledge_retrieval', 'fgentic_ids.audience_ids(jsonb, text[])', 'EXECUTE') AS a,
              has_function_privilege('knowledge_retrieval', 'fgentic_ids.group_ids(text[])', 'EXECUTE') AS g,
              has_function_privilege('knowledge_ingestion', 'fgentic_ids.level_id(text[])', 'EXECUTE') AS l`,
    );
    assert.deepEqual(r.rows[0], { a: false, g: false, l: true });
  });
});

describe('migration 0018: what a search returns of a row', () => {
  test("a hit carries its source and classification, never the row's list of readers", async () => {
    const v = randomVector(prng(18));
    await writeChunks(t.pool, {
      chunks: [
        {
          chunk_id: 'ids-matrix',
          content: 'shared with alice and bob',
          metadata: meta({ source: 'docs/shared.md', principals: [P.alice, P.bob] }),
          embedding: v,
        },
        {
          chunk_id: 'ids-partner',
          content: 'for the partner',
          metadata: meta({ source: 'docs/partner.md', groups: ['partner/org-b/docs', 'partner/org-b/ops'] }),
          embedding: v,
        },
      ],
    });
    for (const [header, id] of [
      [matrixHeader({ caller: P.alice, audience: [P.alice] }), 'ids-matrix'],
      [oauthHeader({ policy: 'org-b', groups: ['partner/org-b/docs'] }), 'ids-partner'],
    ] as const)
      for (const mode of ['vector', 'hybrid'] as const) {
        const r = await searchKnowledge(t.pool, {
          projection: decodeFixture(header),
          embedding: v,
          maxResults: 5,
          mode,
          queryText: 'shared partner',
        });
        const hit = r.hits.find((h) => h.chunk_id === id);
        assert.ok(hit, `${id} found (${mode})`);
        assert.deepEqual(Object.keys(hit.metadata).sort(), ['classification', 'source'], `${id} (${mode})`);
        assert.equal(hit.metadata.classification, 'public');
        assert.equal(typeof hit.metadata.source.id, 'string');
        assert.doesNotMatch(JSON.stringify(r.hits), /allowed_|@bob|partner\/org-b\/ops/);
      }
  });
});
