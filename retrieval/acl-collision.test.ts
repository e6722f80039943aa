/**
 * The integer ACL ids (migration 0007) are a prefilter only. Here the id function is replaced, in
 * this test database alone, by one that maps every ACL string to the same id, so every row's integer
 * ACL matches every audience, group and classification level: the worst collision possible. Every
 * search must still return exactly the rows the typed jsonb test admits, on every plan, for both
 * projection kinds and in hybrid mode.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ChunkMetadata, isMatrixProjection, type Projection } from '../contract/index.ts';
import {
  cosineDistance,
  decodeFixture,
  matrixHeader,
  meta,
  oauthHeader,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from '../testkit/retrieval.ts';
import { toVectorParam } from './db/pool.ts';
import { writeChunks } from './ingest/store.ts';
import { DEFAULT_PLANNER, type Plan } from './planner.ts';
import { searchKnowledge } from './search.ts';

let t: TestDatabase;
const rand = prng(7_007);

interface Row {
  readonly id: string;
  readonly m: ChunkMetadata;
  readonly v: number[];
}

const kinds: readonly ChunkMetadata[] = [
  meta({ principals: [P.alice] }),
  meta({ principals: [P.bob] }),
  meta({ principals: [P.slackBob] }),
  meta({ principals: [P.alice, P.bob] }),
  meta({ principals: [P.bob], classification: 'approved_non_public' }),
  meta({ principals: [P.bob], classification: 'restricted' }),
  meta({ groups: ['partner/org-a/docs'] }),
  meta({ groups: ['partner/org-b/docs'] }),
  meta({ groups: ['partner/org-b/docs'], classification: 'secret' }),
];
const rows: Row[] = Array.from({ length: 180 }, (_, i) => ({
  id: `c${String(i).padStart(3, '0')}`,
  m: kinds[i % kinds.length] as ChunkMetadata,
  v: randomVector(rand),
}));

/** The model: the typed rules, written out independently of the SQL. */
function readable(p: Projection, m: ChunkMetadata): boolean {
  if (!(p.allowed_classifications as readonly string[]).includes(m.classification)) return false;
  if (!isMatrixProjection(p)) return m.allowed_groups.some((g) => p.groups.includes(g));
  return p.audience.every((a) =>
    m.allowed_principals.some(
      (r) =>
        r.kind === a.kind &&
        r.principal === a.principal &&
        (r.kind === 'bridged_matrix' ? a.kind === 'bridged_matrix' && r.network === a.network : true),
    ),
  );
}

function expected(p: Projection, q: readonly number[], k: number): string[] {
  return rows
    .filter((r) => readable(p, r.m))
    .map((r) => ({ id: r.id, d: cosineDistance(q, r.v) }))
    .sort((a, b) => a.d - b.d || (a.id < b.id ? -1 : 1))
    .slice(0, k)
    .map((r) => r.id);
}

before(async () => {
  t = await startTestDatabase();
  // Test build only: one id for every ACL string (row_ids and the search side both call id_of).
  await t.pool.query(`CREATE OR REPLACE FUNCTION fgentic.id_of(value text) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog AS $$ SELECT 7 $$`);
  await writeChunks(t.pool, {
    chunks: rows.map((r) => ({ chunk_id: r.id, content: `row ${r.id}`, embedding: r.v, metadata: r.m })),
  });
});

after(async () => {
  await t?.close();
});

const projections: readonly [string, Projection][] = [
  ['bob', decodeFixture(matrixHeader({ caller: P.bob, audience: [P.bob] }))],
  ['alice and bob', decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice, P.bob] }))],
  [
    'bob with approved_non_public',
    decodeFixture(
      matrixHeader({ caller: P.bob, audience: [P.bob], classifications: ['approved_non_public', 'public'] }),
    ),
  ],
  ['bridged bob', decodeFixture(matrixHeader({ caller: P.slackBob, audience: [P.slackBob] }))],
  [
    'irc bob (same principal string, other network)',
    decodeFixture(matrixHeader({ caller: P.ircBob, audience: [P.ircBob] })),
  ],
  ['partner org-b', decodeFixture(oauthHeader({ policy: 'org-b', groups: ['partner/org-b/docs'] }))],
];

describe('an integer ACL id collision cannot admit a row', () => {
  test('the collision is real: every stored row carries the same single id', async () => {
    const r = await t.pool.query('SELECT DISTINCT acl FROM fgentic.chunks');
    assert.deepEqual(
      r.rows.map((x) => x.acl),
      [[7]],
    );
  });

  for (const [name, projection] of projections) {
    test(`${name}: every plan returns exactly the rows the typed test admits`, async () => {
      for (const force of [undefined, 'exact', 'hnsw'] as (Plan | undefined)[]) {
        for (let i = 0; i < 3; i++) {
          const q = randomVector(rand);
          const planner = {
            ...DEFAULT_PLANNER,
            exactThreshold: force === undefined ? 5 : 1_000,
            ...(force ? { force } : {}),
          };
          const r = await searchKnowledge(t.retrieval, { projection, embedding: q, maxResults: 10 }, planner);
          assert.deepEqual(
            r.hits.map((h) => h.chunk_id),
            expected(projection, q, 10),
            `${name}, plan ${force ?? 'auto'} (${r.plan})`,
          );
          const hybrid = await searchKnowledge(
            t.retrieval,
            { projection, embedding: q, maxResults: 10, mode: 'hybrid', queryText: 'row' },
            planner,
          );
          for (const h of hybrid.hits) {
            const row = rows.find((x) => x.id === h.chunk_id);
            assert.ok(row && readable(projection, row.m), `${name}: hybrid returned an unreadable row`);
          }
        }
      }
    });
  }

  // Migration 0015 ranks the integer-authorized rows and applies the typed test to the best
  // depth + max(depth, 10) of them only, falling back to the typed test on every row when fewer than
  // depth pass. Called directly, without the wrappers' own re-check of the rows they return, at
  // depths where both branches answer (bob reads 2 of every 9 rows here).
  test('the ranking core alone, exact path: only typed-authorized rows, in exact order, at every depth', async () => {
    const bob = projections[0]?.[1] as Projection;
    const partner = projections[5]?.[1] as Projection;
    for (let depth = 1; depth <= 30; depth += 1) {
      const q = randomVector(rand);
      for (const [projection, audience, groups, anyIds] of [
        [bob, JSON.stringify([{ kind: P.bob.kind, principal: P.bob.principal }]), null, null],
        [partner, null, ['partner/org-b/docs'], [7]],
      ] as const) {
        const r = await t.pool.query(
          `SELECT chunk_id FROM fgentic.rank_v2($1::vector, ARRAY['public'], $2::jsonb, $3::text[],
             ARRAY[7], $4::integer[], $5, 'exact', 1000, 40, 50000)`,
          [toVectorParam(q), audience, groups, anyIds, depth],
        );
        assert.deepEqual(
          r.rows.map((x) => x.chunk_id),
          expected(projection, q, depth),
          `depth ${depth}, ${audience ? 'matrix' : 'oauth'}`,
        );
      }
    }
  });
});
