/**
 * Filtered subgraphs (retrieval/db/subgraphs.ts, docs/filtered-search.md): which ids get a graph,
 * that a search walks one only for an audience whose every authorized row carries its id, that a
 * graph whose index is gone is never chosen, and that the recall guard still sends a far query to
 * the exact path.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
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
import { OWNER_ROLE } from './db/roles.ts';
import { maintainSubgraphs } from './db/subgraphs.ts';
import { writeChunks } from './ingest/store.ts';
import { DEFAULT_PLANNER } from './planner.ts';
import { searchKnowledge } from './search.ts';
import { subgraphIndexName } from './subgraph-plan.ts';

let t: TestDatabase;
const rand = prng(3_303);
const centres = Array.from({ length: 4 }, () => randomVector(rand));
const near = (c: readonly number[], spread = 0.2) => {
  const noise = randomVector(rand);
  return c.map((x, i) => x + spread * (noise[i] ?? 0));
};
// Four audiences of distinct size, each around its own centre: Alice's rows (15 % of the table),
// the partner groups docs (10 %) and wiki (6.7 %), and Bob's (68 %, too broad for a graph).
const DOCS = 'partner/org-b/docs';
const WIKI = 'partner/org-b/wiki';
const kinds = [
  { prefix: 'a', n: 90, centre: 0, m: meta({ principals: [P.alice] }) },
  { prefix: 'd', n: 60, centre: 1, m: meta({ groups: [DOCS] }) },
  { prefix: 'w', n: 40, centre: 2, m: meta({ groups: [WIKI] }) },
  { prefix: 'b', n: 410, centre: 3, m: meta({ principals: [P.bob] }) },
];
const rows = kinds.flatMap((k) =>
  Array.from({ length: k.n }, (_, i) => ({
    id: `${k.prefix}${String(i).padStart(3, '0')}`,
    v: near(centres[k.centre] as number[]),
    m: k.m,
    prefix: k.prefix,
  })),
);
const planner = { ...DEFAULT_PLANNER, exactThreshold: 20 };
const alice = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
const docsOnly = decodeFixture(oauthHeader({ policy: 'org-b', groups: [DOCS] }));
const docsAndWiki = decodeFixture(oauthHeader({ policy: 'org-b', groups: [DOCS, WIKI] }));

const exactIds = (q: readonly number[], prefixes: readonly string[], k = 10) =>
  rows
    .filter((r) => prefixes.includes(r.prefix))
    .map((r) => ({ id: r.id, d: cosineDistance(q, r.v) }))
    .sort((a, b) => a.d - b.d || (a.id < b.id ? -1 : 1))
    .slice(0, k)
    .map((r) => r.id);

async function maintain(budgetBytes?: number) {
  const client = await t.pool.connect();
  try {
    return await maintainSubgraphs(client, OWNER_ROLE, {
      exactThreshold: planner.exactThreshold,
      ...(budgetBytes === undefined ? {} : { budgetBytes }),
    });
  } finally {
    client.release();
  }
}

async function registered(): Promise<string[]> {
  const r = await t.pool.query<{ index_name: string }>('SELECT index_name FROM fgentic.subgraphs ORDER BY id');
  return r.rows.map((x) => x.index_name).sort();
}

async function aclId(kind: 'principal' | 'group', value: string): Promise<number> {
  // The row's ids are computed in the database (fgentic.row_ids); the id of a value is the one
  // every row carrying only that value shares besides the level id.
  const sample = rows.find((r) =>
    kind === 'principal'
      ? r.m.allowed_principals.some((p) => p.principal === value)
      : r.m.allowed_groups.includes(value),
  );
  const others = rows.find((r) => r.prefix === 'b' && r !== sample);
  const q = await t.pool.query<{ id: number }>(
    `SELECT u.id FROM fgentic.chunks a, unnest(a.acl) AS u(id)
      WHERE a.chunk_id = $1 AND u.id <> ALL (SELECT unnest(acl) FROM fgentic.chunks WHERE chunk_id = $2)`,
    [sample?.id, others?.id],
  );
  assert.equal(q.rowCount, 1, 'one id tells the value apart');
  return q.rows[0]?.id as number;
}

before(async () => {
  t = await startTestDatabase();
  // In writes below the bulk-load size, so the whole graph stays built (a bulk load into a table this
  // small defers it: retrieval/ingest/store.ts).
  for (let i = 0; i < rows.length; i += 200)
    await writeChunks(t.pool, {
      chunks: rows
        .slice(i, i + 200)
        .map((r) => ({ chunk_id: r.id, content: `row ${r.id}`, embedding: r.v, metadata: r.m })),
    });
  await t.pool.query('ANALYZE fgentic.chunks');
});

after(async () => {
  await t?.close();
});

describe('filtered subgraphs', () => {
  test('ids between 1 % and 20 % of the table get a graph, within the budget; broader ids do not', async () => {
    const report = await maintain();
    assert.equal(report.built, 3, JSON.stringify(report));
    const ids = [await aclId('principal', P.alice.principal), await aclId('group', DOCS), await aclId('group', WIKI)];
    assert.deepEqual(await registered(), ids.map(subgraphIndexName).sort());
    const valid = await t.pool.query(
      `SELECT count(*)::int AS n FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid
        WHERE x.relname LIKE 'chunks_sub_%' AND i.indisvalid AND i.indisready`,
    );
    assert.equal(valid.rows[0]?.n, 3);
    // A second run changes nothing.
    assert.deepEqual({ ...(await maintain()) }, { kept: 3, built: 0, dropped: 0, bytes: report.bytes });
  });

  test('an audience bounded by a graph is answered from it, with the exact answer', async () => {
    const q = near(centres[0] as number[], 0.1);
    const r = await searchKnowledge(t.retrieval, { projection: alice, embedding: q, maxResults: 10 }, planner);
    assert.equal(r.plan, 'subgraph');
    assert.deepEqual(
      r.hits.map((h) => h.chunk_id),
      exactIds(q, ['a']),
    );
    const p = await searchKnowledge(
      t.retrieval,
      { projection: docsOnly, embedding: near(centres[1] as number[], 0.1), maxResults: 10 },
      planner,
    );
    assert.equal(p.plan, 'subgraph');
  });

  test('a partner with two groups is not answered from one group’s graph', async () => {
    // Near the wiki rows: docs' graph would miss every one of them.
    const q = near(centres[2] as number[], 0.1);
    const r = await searchKnowledge(t.retrieval, { projection: docsAndWiki, embedding: q, maxResults: 10 }, planner);
    assert.notEqual(r.plan, 'subgraph');
    assert.deepEqual(
      r.hits.map((h) => h.chunk_id),
      exactIds(q, ['d', 'w']),
    );
  });

  test('a far query walked in a graph still goes to the exact path (recall guard)', async () => {
    const antipode = (centres[0] as number[]).map((x) => -x);
    for (const q of [antipode, randomVector(rand)]) {
      const r = await searchKnowledge(t.retrieval, { projection: alice, embedding: q, maxResults: 10 }, planner);
      assert.equal(r.plan, 'exact');
      assert.deepEqual(
        r.hits.map((h) => h.chunk_id),
        exactIds(q, ['a']),
      );
    }
  });

  test('a graph whose index was dropped is never chosen, and the next run rebuilds it', async () => {
    const name = subgraphIndexName(await aclId('principal', P.alice.principal));
    await t.pool.query(`DROP INDEX fgentic.${name}`);
    const q = near(centres[0] as number[], 0.1);
    const r = await searchKnowledge(t.retrieval, { projection: alice, embedding: q, maxResults: 10 }, planner);
    assert.notEqual(r.plan, 'subgraph');
    assert.deepEqual(
      r.hits.map((h) => h.chunk_id),
      exactIds(q, ['a']),
    );
    const report = await maintain();
    assert.equal(report.built, 1);
    assert.equal(report.kept, 2);
    const again = await searchKnowledge(t.retrieval, { projection: alice, embedding: q, maxResults: 10 }, planner);
    assert.equal(again.plan, 'subgraph');
  });

  test('a budget of 0 drops every graph, rows first', async () => {
    const report = await maintain(0);
    assert.equal(report.dropped, 3);
    assert.deepEqual(await registered(), []);
    const left = await t.pool.query(`SELECT count(*)::int AS n FROM pg_class WHERE relname LIKE 'chunks_sub_%'`);
    assert.equal(left.rows[0]?.n, 0);
  });
});
