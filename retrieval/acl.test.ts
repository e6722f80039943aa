/**
 * The ACL prefilter against a plain-TypeScript model of the ADR 0017 row rules, through the real
 * path: pg → pglite-socket → Postgres 18 + pgvector. Differential (random corpora and projections,
 * both ranking plans) plus one named test per row rule.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { ChunkMetadata, Classification, MatrixPrincipal, Projection } from '../contract/index.ts';
import { matrixArb, metadataArb, oauthArb, projectionFrom, referenceAllows } from '../testkit/acl-model.ts';
import {
  cosineDistance,
  decodeFixture,
  flushStatistics,
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
before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

async function load(rows: { id: string; m: ChunkMetadata; v: number[] }[]): Promise<void> {
  await t.pool.query('DELETE FROM knowledge.chunks; DELETE FROM fgentic.chunks');
  await writeChunks(t.pool, {
    chunks: rows.map((r) => ({
      chunk_id: r.id,
      content: `content of ${r.id}`,
      metadata: r.m,
      embedding: r.v,
    })),
  });
}

// Searches run as the retrieval role, through the search functions, exactly as the server runs them.
async function ids(p: Projection, q: number[], k: number, force?: Plan): Promise<string[]> {
  const r = await searchKnowledge(
    t.retrieval,
    { projection: p, embedding: q, maxResults: k },
    { ...DEFAULT_PLANNER, ...(force ? { force } : {}) },
  );
  return r.hits.map((h) => h.chunk_id);
}

describe('differential: server = reference model of the row rules', () => {
  test('random corpora × random projections × both plans', async () => {
    let checked = 0;
    let nonEmpty = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(metadataArb, { minLength: 1, maxLength: 40 }),
        fc.array(fc.oneof(matrixArb, oauthArb), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer(),
        async (metas, projections, k, seed) => {
          const rand = prng(seed);
          const rows = metas
            .filter((m) => m.principals.length + m.groups.length > 0)
            .map((m, i) => ({
              id: `c${String(i).padStart(3, '0')}`,
              m: meta({
                classification: m.classification as Classification,
                principals: m.principals,
                groups: m.groups,
              }),
              v: randomVector(rand),
            }));
          await load(rows);
          const q = randomVector(rand);
          for (const x of projections) {
            const p = projectionFrom(x);
            const ref = rows
              .filter((r) => referenceAllows(p, r.m))
              .map((r) => ({ id: r.id, d: cosineDistance(q, r.v) }))
              .sort((a, b) => a.d - b.d || (a.id < b.id ? -1 : 1));
            const dist = new Map(ref.map((r) => [r.id, r.d]));
            const expected = ref.slice(0, k);
            for (const plan of ['exact', 'hnsw'] as const) {
              const got = await ids(p, q, k, plan);
              assert.equal(got.length, expected.length, `${plan}: result count`);
              got.forEach((id, i) => {
                const d = dist.get(id);
                assert.ok(d !== undefined, `${plan}: ${id} returned but not authorized by the model`);
                const want = expected[i];
                if (want && want.id !== id) assert.ok(Math.abs(want.d - d) < 1e-5, `${plan}: order at ${i}`);
              });
              checked++;
              if (got.length > 0) nonEmpty++;
            }
            // Hybrid: keyword candidates come from the same predicate; fusion may reorder, never widen.
            const hybrid = await searchKnowledge(t.retrieval, {
              projection: p,
              embedding: q,
              maxResults: k,
              mode: 'hybrid',
              queryText: `content ${rows[0]?.id ?? ''}`,
            });
            assert.equal(hybrid.hits.length, expected.length, 'hybrid: result count');
            for (const h of hybrid.hits) assert.ok(dist.has(h.chunk_id), `hybrid: ${h.chunk_id} not authorized`);
          }
        },
      ),
      { numRuns: 60, seed: 333 },
    );
    assert.ok(checked > 50 && nonEmpty > 10, `too few meaningful cases (${checked}, ${nonEmpty})`);
  });
});

describe('ADR 0017 row rules (named)', () => {
  const rand = prng(7);
  const q = randomVector(rand);
  const rows: { id: string; m: ChunkMetadata; v: number[] }[] = [];
  const row = (id: string, m: ChunkMetadata) => rows.push({ id, m, v: randomVector(rand) });
  row('oauth-docs', meta({ groups: ['partner/org-b/docs'] }));
  row('oauth-empty-groups', meta({ principals: [P.alice] }));
  row('oauth-other-group', meta({ groups: ['partner/org-b/eng'] }));
  row('oauth-prefix-short', meta({ groups: ['partner/org-b/doc'] }));
  row('oauth-prefix-long', meta({ groups: ['partner/org-b/docs-internal'] }));
  row('oauth-docs-anp', meta({ groups: ['partner/org-b/docs'], classification: 'approved_non_public' }));
  row('oauth-docs-restricted', meta({ groups: ['partner/org-b/docs'], classification: 'restricted' }));
  row('mx-alice', meta({ principals: [P.alice] }));
  row('mx-alice-bob', meta({ principals: [P.alice, P.bob] }));
  row('mx-alice-slackbob', meta({ principals: [P.alice, P.slackBob] }));
  row('mx-alice-ircbob', meta({ principals: [P.alice, P.ircBob] }));
  row('mx-group-only', meta({ groups: ['partner/org-c/docs'] }));
  row('mx-alice-anp', meta({ principals: [P.alice], classification: 'approved_non_public' }));
  for (const c of ['restricted', 'regulated', 'secret', 'authentication'] as const)
    row(`mx-alice-${c}`, meta({ principals: [P.alice], classification: c }));

  before(async () => load(rows));

  const oauth = (groups: string[], wide = false) =>
    decodeFixture(
      oauthHeader({
        policy: 'org-b',
        groups,
        classifications: wide ? ['approved_non_public', 'public'] : ['public'],
      }),
    );
  const matrix = (caller: MatrixPrincipal, audience: MatrixPrincipal[], wide = false) =>
    decodeFixture(
      matrixHeader({
        caller,
        audience,
        classifications: wide ? ['approved_non_public', 'public'] : ['public'],
      }),
    );
  const all = async (p: Projection) => (await ids(p, q, 20)).sort();

  test('OAuth: exact group intersection admits the row (positive control)', async () => {
    assert.deepEqual(await all(oauth(['partner/org-b/docs'])), ['oauth-docs']);
  });
  test('OAuth: absent allowed_groups cannot be stored (CHECK) and empty groups deny', async () => {
    const bad = { ...meta({ principals: [P.alice] }) } as Record<string, unknown>;
    delete bad['allowed_groups'];
    await assert.rejects(
      t.pool.query(
        "INSERT INTO knowledge.chunks VALUES ('x', 'x', (ARRAY[1::real] || array_fill(0::real, ARRAY[1023]))::vector, $1)",
        [JSON.stringify(bad)],
      ),
      /chunks_metadata_valid/,
    );
    assert.ok(!(await all(oauth(['partner/org-b/docs', 'partner/org-b/eng']))).includes('oauth-empty-groups'));
  });
  test('OAuth: non-intersecting groups deny', async () => {
    assert.deepEqual(await all(oauth(['partner/org-b/ops'])), []);
  });
  test('OAuth: prefix matches deny in both directions', async () => {
    assert.deepEqual(await all(oauth(['partner/org-b/docs'])), ['oauth-docs']);
    assert.deepEqual(await all(oauth(['partner/org-b/do'])), []);
  });
  test('OAuth: a principals-only row is never admitted, whatever the groups', async () => {
    const got = await all(oauth(['partner/org-b/doc', 'partner/org-b/docs', 'partner/org-b/eng'], true));
    assert.ok(!got.includes('oauth-empty-groups') && !got.some((id) => id.startsWith('mx-alice')));
  });
  test('OAuth: disallowed classification denies; approved_non_public needs the wide ceiling', async () => {
    assert.deepEqual(await all(oauth(['partner/org-b/docs'])), ['oauth-docs']);
    assert.deepEqual(await all(oauth(['partner/org-b/docs'], true)), ['oauth-docs', 'oauth-docs-anp']);
  });
  test('Matrix: group-only row is denied', async () => {
    assert.ok(!(await all(matrix(P.alice, [P.alice], true))).includes('mx-group-only'));
  });
  test('Matrix: partial audience intersection denies', async () => {
    assert.deepEqual(await all(matrix(P.alice, [P.alice, P.bob])), ['mx-alice-bob']);
    assert.deepEqual(await all(matrix(P.alice, [P.alice, P.bob, P.carol])), []);
  });
  test('Matrix: single-reader audience sees every row naming it', async () => {
    assert.deepEqual(await all(matrix(P.alice, [P.alice])), [
      'mx-alice',
      'mx-alice-bob',
      'mx-alice-ircbob',
      'mx-alice-slackbob',
      'oauth-empty-groups',
    ]);
  });
  test('Matrix: unauthorized audience member (kind or network differs) denies', async () => {
    assert.deepEqual(await all(matrix(P.alice, [P.alice, P.slackBob])), ['mx-alice-slackbob']);
    assert.deepEqual(await all(matrix(P.alice, [P.alice, P.ircBob])), ['mx-alice-ircbob']);
    // Same MXID as alice but a bridged identity: not alice.
    assert.deepEqual(await all(matrix(P.slackAlice, [P.slackAlice])), []);
  });
  test('Matrix: disallowed classifications deny; restricted and above never pass', async () => {
    const narrow = await all(matrix(P.alice, [P.alice]));
    assert.ok(!narrow.includes('mx-alice-anp'));
    const wide = await all(matrix(P.alice, [P.alice], true));
    assert.ok(wide.includes('mx-alice-anp'));
    assert.ok(!wide.some((id) => /restricted|regulated|secret|authentication/.test(id)));
  });
});

describe('plans', () => {
  test('the approximate plan uses the HNSW index under the same WHERE and its settings stay local', async () => {
    const rand = prng(11);
    // Two tight clusters and a query inside one: a query the recall guard trusts the index with
    // (in a uniformly random corpus every row is about as far as every other, and the guard would
    // rightly send the query to the exact path).
    const centres = [randomVector(rand), randomVector(rand)];
    const near = (c: readonly number[]) => {
      const noise = randomVector(rand);
      return c.map((x, i) => x + 0.1 * (noise[i] ?? 0));
    };
    await load(
      Array.from({ length: 60 }, (_, i) => ({
        id: `r${i}`,
        m: meta({ principals: [P.alice] }),
        v: near(centres[i % 2] as number[]),
      })),
    );
    const p = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    const scans = async () => {
      // Statistics of the index as seen by the superuser; flushed so this backend's counts show.
      await flushStatistics(t.pool, t.retrieval);
      const r = await t.pool.query(
        "SELECT idx_scan::int AS n FROM pg_stat_user_indexes WHERE indexrelname = 'chunks_embedding_hnsw_idx'",
      );
      return Number(r.rows[0]?.n ?? 0);
    };
    const before = await scans();
    const r = await searchKnowledge(
      t.retrieval,
      { projection: p, embedding: near(centres[0] as number[]), maxResults: 5 },
      { ...DEFAULT_PLANNER, exactThreshold: 10 },
    );
    assert.equal(r.plan, 'hnsw');
    assert.equal(r.hits.length, 5);
    const afterHnsw = await scans();
    assert.ok(afterHnsw > before, 'the approximate plan scanned the HNSW index');
    const small = await searchKnowledge(t.retrieval, {
      projection: p,
      embedding: randomVector(rand),
      maxResults: 5,
    });
    assert.equal(small.plan, 'exact');
    assert.equal(await scans(), afterHnsw, 'the exact plan does not use the HNSW index');
    const show = await t.pool.query('SHOW hnsw.iterative_scan');
    assert.equal(show.rows[0]?.['hnsw.iterative_scan'], 'off');
  });
});

describe('the search functions re-check their arguments (a caller of the database cannot widen them)', () => {
  const q = toVectorParam(randomVector(prng(5)));
  const invalid = (err: unknown) => (err as { code?: string }).code === '22023';
  const groupsCall = (policy: string, groups: string[], k = 5) =>
    t.retrieval.query(
      'SELECT * FROM fgentic.search_groups_v1($1::vector, $2::text[], $3, $4::text[], $5, NULL, $6, 1000, 100, 50000)',
      [q, ['public'], policy, groups, k, 'auto'],
    );
  const matrixCall = (audience: unknown, k = 5, classes = ['public']) =>
    t.retrieval.query(
      'SELECT * FROM fgentic.search_matrix_v1($1::vector, $2::text[], $3::jsonb, $4, NULL, $5, 1000, 100, 50000)',
      [q, classes, JSON.stringify(audience), k, 'auto'],
    );
  test('groups outside partner/<policy_id>/ are refused (ADR 0017 OAuth rule 2)', async () => {
    await groupsCall('org-b', ['partner/org-b/docs']);
    await assert.rejects(groupsCall('org-b', ['partner/org-c/docs']), invalid);
    await assert.rejects(groupsCall('org-b', ['partner/org-b/docs', 'partner/org-c/docs']), invalid);
    await assert.rejects(groupsCall('org-b', []), invalid);
  });
  test('max_results above 20 is refused', async () => {
    await matrixCall([P.alice], 20);
    await assert.rejects(matrixCall([P.alice], 21), invalid);
    await assert.rejects(groupsCall('org-b', ['partner/org-b/docs'], 100), invalid);
  });
  test('an empty or malformed audience and classifications above the ceiling are refused', async () => {
    await assert.rejects(matrixCall([]), invalid);
    await assert.rejects(matrixCall([{ kind: 'matrix', principal: 'alice' }]), invalid);
    await assert.rejects(matrixCall([{ ...P.alice, extra: 1 }]), invalid);
    await assert.rejects(matrixCall([P.alice], 5, ['public', 'restricted']), invalid);
    await assert.rejects(matrixCall([P.alice], 5, ['restricted']), invalid);
  });
});
