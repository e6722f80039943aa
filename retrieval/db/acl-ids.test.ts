/**
 * The integer ACL ids and vector keys the database computes, against a TypeScript reference written
 * from their definition (retrieval/db/migrations/0001_baseline.sql): an id is the first four bytes
 * of SHA-256 over the typed string, read as a signed 32-bit integer; a row's ids are its principals'
 * ('p' + [kind, network, principal] as JSON), its groups' ('g' + group) and its levels' ('l' +
 * level), ascending and distinct; a vector's key is the first eight bytes of SHA-256 over pgvector's
 * binary form. A search finds a row only if both sides agree, on every input a writer can send.
 * Also: the search side's helpers stay the owner's, and what a search returns of a row.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
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
} from '../../testkit/retrieval.ts';
import { writeChunks } from '../ingest/store.ts';
import { searchKnowledge } from '../search.ts';
import { toVectorBinary } from './pool.ts';
import { INGESTION_ROLE, RETRIEVAL_ROLE } from './roles.ts';

let t: TestDatabase;
before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

const idOf = (s: string) => createHash('sha256').update(s, 'utf8').digest().readInt32BE(0);
const sorted = (ids: number[]) => [...new Set(ids)].sort((a, b) => a - b);

/** JSON text as PostgreSQL's jsonb::text prints an array of scalars: `["a", null, "b"]`. */
function jsonbArrayText(xs: readonly unknown[]): string {
  return `[${xs.map((x) => (x === undefined ? 'null' : JSON.stringify(x))).join(', ')}]`;
}

/** The reference for fgentic.row_ids: what a row's metadata grants, as ids. */
function rowIds(m: unknown): number[] {
  const ids: number[] = [];
  const o = (m ?? {}) as Record<string, unknown>;
  if (Array.isArray(o['allowed_principals']))
    for (const e of o['allowed_principals'] as unknown[]) {
      if (typeof e !== 'object' || e === null || Array.isArray(e)) continue;
      const p = e as Record<string, unknown>;
      if (typeof p['principal'] !== 'string') continue;
      ids.push(idOf(`p${jsonbArrayText([p['kind'], p['network'], p['principal']])}`));
    }
  if (Array.isArray(o['allowed_groups']))
    for (const g of o['allowed_groups'] as unknown[]) if (typeof g === 'string') ids.push(idOf(`g${g}`));
  const levels =
    o['classification'] === 'public'
      ? ['public', 'approved_non_public']
      : o['classification'] === 'approved_non_public'
        ? ['approved_non_public']
        : [];
  for (const l of levels) ids.push(idOf(`l${l}`));
  return sorted(ids);
}

// Principals and groups drawn from a small pool, so that one row often names the same one twice,
// plus every malformed shape row_ids must pass over. Strings avoid what jsonb::text escapes
// differently from JSON.stringify (control characters, non-ASCII) only in the row_ids property;
// id_of itself is checked on any string below.
const plain = fc.oneof(
  fc.constantFrom('@alice:org-a.example', '@bob:org-a.example', 'partner/org-b/docs', 'ops', '', '"q"'),
  fc.string({ unit: fc.constantFrom(...'abz@:./-_ 0'), maxLength: 12 }),
);
const json: fc.Arbitrary<unknown> = fc.oneof(plain, fc.integer(), fc.boolean(), fc.constant(null));
const principal = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ kind: fc.constantFrom('matrix', 'bridged_matrix', 'other'), principal: plain }),
  },
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('bridged_matrix'), network: plain, principal: plain }),
  },
  { weight: 1, arbitrary: fc.record({ principal: json }, { requiredKeys: [] }) },
  { weight: 1, arbitrary: json },
);
const metadata = fc.record(
  {
    classification: fc.constantFrom('public', 'approved_non_public', 'secret', 'x'),
    allowed_principals: fc.oneof(fc.array(principal, { maxLength: 4 }), json),
    allowed_groups: fc.oneof(fc.array(json, { maxLength: 4 }), json),
  },
  { requiredKeys: [] },
);

describe('ids and keys = their TypeScript reference', () => {
  test('id_of: the first four bytes of SHA-256, for any string', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.string({ unit: 'grapheme', maxLength: 10 }), { minLength: 1, maxLength: 20 }),
        async (xs) => {
          const clean = xs.map((x) => x.replaceAll('\u0000', ''));
          const r = await t.pool.query(
            'SELECT fgentic.id_of(s) AS id FROM unnest($1::text[]) WITH ORDINALITY AS u(s, i) ORDER BY i',
            [clean],
          );
          assert.deepEqual(
            r.rows.map((x) => x.id),
            clean.map(idOf),
          );
        },
      ),
      { numRuns: 60 },
    );
  });

  test('row_ids: the sorted, distinct ids of any metadata (malformed shapes pass over)', async () => {
    let several = 0;
    await fc.assert(
      fc.asyncProperty(metadata, async (m) => {
        const r = await t.pool.query('SELECT fgentic.row_ids($1::jsonb) AS ids', [JSON.stringify(m)]);
        const want = rowIds(m);
        assert.deepEqual(r.rows[0]?.ids, want, JSON.stringify(m));
        if (want.length >= 4) several++;
      }),
      { numRuns: 300, seed: 7 },
    );
    assert.ok(several > 20, 'rows with several ids were exercised');
  });

  test('audience_ids and group_ids: what a search asks for, the same ids a row stores', async () => {
    const audience = [P.slackBob, P.alice, P.alice];
    const r = await t.pool.query(
      `SELECT fgentic.audience_ids($1::jsonb, ARRAY['public']) AS a,
              fgentic.audience_ids($1::jsonb, ARRAY['approved_non_public', 'public']) AS b,
              fgentic.group_ids(ARRAY['partner/org-b/docs', NULL, 'partner/org-b/docs']) AS g`,
      [JSON.stringify(audience)],
    );
    const principals = audience.map((p) =>
      idOf(`p${jsonbArrayText([p.kind, (p as { network?: string }).network, p.principal])}`),
    );
    assert.deepEqual(r.rows[0]?.a, sorted([...principals, idOf('lpublic')]));
    assert.deepEqual(r.rows[0]?.b, sorted([...principals, idOf('lapproved_non_public')]));
    // A NULL group adds no id.
    assert.deepEqual(r.rows[0]?.g, [idOf('gpartner/org-b/docs')]);
  });

  test("vector_key: the first eight bytes of SHA-256 over pgvector's binary form", async () => {
    const float4 = fc.float({
      noNaN: true,
      noDefaultInfinity: true,
      min: Math.fround(-1e30),
      max: Math.fround(1e30),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(float4, { minLength: 1, maxLength: 40 }), async (v) => {
        const bin = toVectorBinary(v);
        const r = await t.pool.query('SELECT fgentic.vector_key($1) AS k', [bin]);
        assert.equal(BigInt(r.rows[0]?.k), createHash('sha256').update(bin).digest().readBigInt64BE(0));
      }),
      { numRuns: 60 },
    );
  });

  test("the search side's helpers are the owner's: neither the serving nor the ingestion role calls them", async () => {
    const r = await t.pool.query(
      `SELECT has_function_privilege($1, 'fgentic.audience_ids(jsonb, text[])', 'EXECUTE') AS a,
              has_function_privilege($1, 'fgentic.rank_v2(public.vector, text[], jsonb, text[], integer[], integer[], integer, text, integer, integer, integer)', 'EXECUTE') AS r,
              has_function_privilege($2, 'fgentic.row_ids(jsonb)', 'EXECUTE') AS w`,
      [RETRIEVAL_ROLE, INGESTION_ROLE],
    );
    assert.deepEqual(r.rows[0], { a: false, r: false, w: false });
  });
});

describe('what a search reads and returns', () => {
  /** Entries of the ACL index read so far (the statistics flushed first). */
  const aclIndexReads = async () => {
    await flushStatistics(t.pool, t.retrieval);
    const r = await t.pool.query<{ n: string }>(
      `SELECT coalesce(idx_tup_read, 0) AS n FROM pg_catalog.pg_stat_user_indexes
        WHERE schemaname = 'fgentic' AND indexrelname = 'chunks_acl_gin_idx'`,
    );
    return Number(r.rows[0]?.n);
  };

  // Every HNSW answer looks copies of its cut-off row up by the key: through the key's btree alone,
  // never a BitmapAnd with the ACL's GIN index, which would read the whole audience.
  test("a broad audience's HNSW search looks copies up through the key's index alone", async () => {
    const rand = prng(16);
    const alice = meta({ principals: [P.alice] });
    // Clustered, as embeddings are: on uniform random vectors every query is far from the corpus,
    // and the recall guard ranks it exactly.
    const centres = Array.from({ length: 15 }, () => randomVector(rand));
    const vectors = Array.from({ length: 1500 }, (_, i) =>
      (centres[i % 15] ?? []).map((x) => x + 0.02 * (rand() - 0.5)),
    );
    await writeChunks(t.pool, {
      chunks: vectors.map((embedding, i) => ({
        chunk_id: `b-${String(i).padStart(4, '0')}`,
        content: `row ${i}`,
        embedding,
        metadata: alice,
      })),
    });
    const projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    let read = 0;
    let walks = 0;
    for (let q = 0; q < 8; q++) {
      const before = await aclIndexReads();
      const r = await searchKnowledge(t.retrieval, {
        projection,
        embedding: (vectors[q * 100] ?? []).map((x) => x + 0.01 * (rand() - 0.5)),
        maxResults: 10,
      });
      if (r.plan !== 'hnsw') continue;
      walks += 1;
      read += (await aclIndexReads()) - before;
    }
    assert.ok(walks >= 4, `only ${walks} of 8 searches took the HNSW path`);
    assert.ok(read < 100, `${read} entries of the ACL index read by ${walks} HNSW searches over 1,500 rows`);
  });

  // The exact scan of a room starts from all of its members' ids at once: the ACL index intersects
  // their lists, so it reads the rows the whole room may read, not every row of its rarest member.
  test("a room's exact search reads from the ACL index only the rows every member may read", async () => {
    const rand = prng(17);
    const rows = (prefix: string, n: number, principals: (typeof P)[keyof typeof P][]) =>
      Array.from({ length: n }, (_, i) => ({
        chunk_id: `${prefix}-${String(i).padStart(4, '0')}`,
        content: `${prefix} ${i}`,
        embedding: randomVector(rand),
        metadata: meta({ principals }),
      }));
    await writeChunks(t.pool, {
      chunks: [...rows('m-bob', 300, [P.bob]), ...rows('m-both', 40, [P.alice, P.bob])],
    });
    const projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice, P.bob] }));
    const before = await aclIndexReads();
    const r = await searchKnowledge(t.retrieval, { projection, embedding: randomVector(rand), maxResults: 10 });
    const read = (await aclIndexReads()) - before;
    assert.equal(r.plan, 'exact');
    assert.equal(r.hits.length, 10);
    for (const h of r.hits) assert.match(h.chunk_id, /^m-both-/);
    // bob, the rarest member, may read 340 rows; the room 40 (and alice's other rows none of them).
    assert.ok(read <= 40, `${read} entries of the ACL index read for a room that may read 40 rows`);
  });

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
        assert.doesNotMatch(JSON.stringify(r.hits), /allowed_|@bob|partner\/org-b\/ops/);
      }
  });
});
