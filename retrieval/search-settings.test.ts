/**
 * The planner settings the search functions run under (docs/filtered-search.md, "Storage and
 * per-call cost"): the ranking core runs without JIT and plans once per session unless a statement
 * says otherwise, the wrappers plan once per session, the id helpers are inlined, and whatever the
 * functions switch on the way (plan cache mode, the planner settings around the HNSW fetch) is back
 * to the session's values in the caller's transaction.
 * These settings change speed, not answers, so the answers are covered elsewhere; here a removed
 * setting fails by name.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
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
import { toVectorBinary } from './db/pool.ts';
import { writeChunks } from './ingest/store.ts';
import { DEFAULT_PLANNER, type Plan, searchStatement } from './planner.ts';
import { searchArguments } from './predicate.ts';

let t: TestDatabase;
const rand = prng(15_015);

before(async () => {
  t = await startTestDatabase();
  await writeChunks(t.pool, {
    chunks: [
      ...Array.from({ length: 40 }, (_, i) => ({
        chunk_id: `s-${String(i).padStart(2, '0')}`,
        content: `row ${i}`,
        embedding: randomVector(rand),
        metadata: i % 2 ? meta({ principals: [P.alice] }) : meta({ groups: ['partner/org-b/docs'] }),
      })),
      // Rows nobody in these tests' small audiences may read: what a plan must not walk through.
      ...Array.from({ length: 560 }, (_, i) => ({
        chunk_id: `w-${String(i).padStart(3, '0')}`,
        content: `other ${i}`,
        embedding: randomVector(rand),
        metadata: meta({ principals: [P.carol] }),
      })),
    ],
  });
  await t.pool.query('ANALYZE fgentic.chunks');
});
after(async () => {
  await t?.close();
});

async function settingsOf(name: string): Promise<string[]> {
  const r = await t.pool.query<{ c: string[] | null }>(
    `SELECT p.proconfig AS c FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
     WHERE n.nspname = 'fgentic' AND p.proname = $1`,
    [name],
  );
  assert.equal(r.rows.length, 1, name);
  return r.rows[0]?.c ?? [];
}

test('the ranking core runs without JIT and plans once per session unless a statement says otherwise', async () => {
  const c = await settingsOf('rank_v2');
  assert.ok(c.includes('jit=off'), c.join(' '));
  assert.ok(c.includes('plan_cache_mode=force_generic_plan'), c.join(' '));
});

test('id_of and level_id are inlined into the statements that call them: SQL bodies, no SET clause, not STRICT', async () => {
  for (const name of ['id_of', 'level_id']) {
    const r = await t.pool.query<{ lang: string; strict: boolean; config: string[] | null; body: boolean }>(
      `SELECT l.lanname AS lang, p.proisstrict AS strict, p.proconfig AS config, p.prosqlbody IS NOT NULL AS body
       FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
       JOIN pg_catalog.pg_language l ON l.oid = p.prolang
       WHERE n.nspname = 'fgentic' AND p.proname = $1`,
      [name],
    );
    assert.deepEqual(r.rows, [{ lang: 'sql', strict: false, config: null, body: true }], name);
  }
  // Inlined: the plan of a call shows the body's expression, not the function.
  const plan = await t.pool.query<{ 'QUERY PLAN': string }>(
    `EXPLAIN (VERBOSE, COSTS OFF) SELECT fgentic.id_of(x) FROM (VALUES ('a'), ('b')) AS v(x)`,
  );
  const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
  assert.ok(!/id_of/.test(text) && /sha256/.test(text), text);
});

test('both search functions plan once per session', async () => {
  for (const name of ['search_matrix_v1', 'search_groups_v1']) {
    const c = await settingsOf(name);
    assert.ok(c.includes('plan_cache_mode=force_generic_plan'), `${name}: ${c.join(' ')}`);
  }
});

test("after a search, the caller's transaction has its own planner settings back", async () => {
  const projections = [
    decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] })),
    decodeFixture(oauthHeader({ policy: 'org-b', groups: ['partner/org-b/docs'] })),
  ];
  const client = await t.retrieval.connect();
  try {
    for (const projection of projections)
      for (const force of ['exact', 'hnsw', undefined] as (Plan | undefined)[])
        for (const text of [null, 'row']) {
          await client.query('BEGIN READ ONLY');
          const before = await client.query(
            "SELECT current_setting('plan_cache_mode') AS p, current_setting('enable_seqscan') AS s, current_setting('enable_sort') AS o",
          );
          const st = searchStatement(
            searchArguments(projection),
            toVectorBinary(randomVector(rand)),
            5,
            text,
            force ? { ...DEFAULT_PLANNER, force } : { ...DEFAULT_PLANNER, exactThreshold: 5 },
          );
          const rows = await client.query(st.text, st.values as unknown[]);
          assert.ok(rows.rows.length > 0);
          const afterwards = await client.query(
            "SELECT current_setting('plan_cache_mode') AS p, current_setting('enable_seqscan') AS s, current_setting('enable_sort') AS o",
          );
          await client.query('COMMIT');
          assert.deepEqual(afterwards.rows[0], before.rows[0], `${projection.kind} ${force ?? 'auto'} ${text}`);
        }
  } finally {
    client.release();
  }
});

// The exact path's scan and the plan's count are planned for the call's values (migration 0015):
// a plan made once per session cannot drop the Matrix call's `any_ids IS NULL OR …` branch, and for an
// OAuth audience it then read every row at the classification level. Counted with the table
// statistics: rows read from knowledge.chunks by sequential and index scans during one search.
test("a small audience's exact search reads its own rows, not the table", async () => {
  const rowsRead = async () => {
    await flushStatistics(t.pool, t.retrieval);
    const r = await t.pool.query<{ n: string }>(
      `SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)) AS n
       FROM pg_catalog.pg_stat_user_tables WHERE schemaname IN ('knowledge', 'fgentic') AND relname = 'chunks'`,
    );
    return Number(r.rows[0]?.n);
  };
  for (const projection of [
    decodeFixture(oauthHeader({ policy: 'org-b', groups: ['partner/org-b/docs'] })),
    decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] })),
  ]) {
    const before = await rowsRead();
    const st = searchStatement(
      searchArguments(projection),
      toVectorBinary(randomVector(rand)),
      10,
      null,
      DEFAULT_PLANNER,
    );
    const r = await t.retrieval.query(st.text, st.values as unknown[]);
    assert.equal(r.rows[0]?.plan, 'exact');
    const read = (await rowsRead()) - before;
    // 60 with the plans as they are (the 20 authorized rows scanned, the typed probes of the best
    // of them, the rows read back for content); a plan over every row at the level read 640.
    assert.ok(read <= 100, `${projection.kind}: ${read} rows of knowledge.chunks read for 20 authorized`);
  }
});
