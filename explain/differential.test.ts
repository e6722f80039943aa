/**
 * Differential oracle for `explain`: over random corpora and random rooms and partners on the real
 * database, explain marks a chunk visible exactly when the server's search entry point
 * (searchKnowledge, what the MCP tool calls, with a projection that went through the contract's
 * encode and decode) returns it; every reason it reports is necessary (fix all the others and the
 * chunk stays hidden) and together they are sufficient (fix them all and search returns it); and the
 * summary's counts are the detail's counts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import {
  type AllowedClassifications,
  type ChunkMetadata,
  CLASSIFICATIONS,
  type MatrixPrincipal,
  type Projection,
} from '../contract/index.ts';
import { writeChunks } from '../retrieval/ingest/store.ts';
import { DEFAULT_PLANNER, type Plan } from '../retrieval/planner.ts';
import { searchKnowledge } from '../retrieval/search.ts';
import {
  decodeFixture,
  matrixHeader,
  oauthHeader,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
} from '../testkit/retrieval.ts';
import {
  type ChunkExplanation,
  detailStatement,
  explainRows,
  type Reason,
  type Subject,
  summarize,
  summaryStatement,
} from './core.ts';

// Same MXIDs under different kinds and networks, so typed mismatches are common.
const PRINCIPALS: MatrixPrincipal[] = Object.values(P);
const GROUPS = [
  'partner/org-b/docs',
  'partner/org-b/doc',
  'partner/org-b/docs-internal',
  'partner/org-b/eng',
  'partner/org-c/docs',
];
const NARROW: AllowedClassifications = ['public'];
const WIDE: AllowedClassifications = ['approved_non_public', 'public'];

let t: TestDatabase;
before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

interface Row {
  readonly id: string;
  readonly m: ChunkMetadata;
}

async function load(rows: readonly Row[], seed: number): Promise<void> {
  const rand = prng(seed);
  await t.pool.query('DELETE FROM knowledge.chunks; DELETE FROM fgentic.chunks');
  await writeChunks(t.pool, {
    chunks: rows.map((r) => ({
      chunk_id: r.id,
      content: `text ${r.id}`,
      metadata: r.m,
      embedding: randomVector(rand),
    })),
  });
}

/** An ACL change as the origin's writers make one, taken into the derived rows by a sync. */
async function setMetadata(id: string, m: ChunkMetadata): Promise<void> {
  await t.pool.query('UPDATE knowledge.chunks SET metadata = $2::jsonb WHERE chunk_id = $1', [id, JSON.stringify(m)]);
  await t.pool.query('SELECT fgentic.sync_rows(ARRAY[$1])', [id]);
}

/** The projection the projector would mint for the subject, through the contract's encode and decode. */
function projectionFor(s: Subject): Projection {
  if (s.kind === 'room') {
    return decodeFixture(matrixHeader({ caller: s.audience[0]!, audience: s.audience, classifications: s.ceiling }));
  }
  return decodeFixture(oauthHeader({ policy: s.policyId, groups: s.groups, classifications: s.ceiling }));
}

/** Chunk ids the server's search can return for the subject: every authorized row (corpora ≤ 20 rows). */
async function searchable(s: Subject, plan: Plan | undefined, seed: number): Promise<Set<string>> {
  const r = await searchKnowledge(
    t.pool,
    { projection: projectionFor(s), embedding: randomVector(prng(seed)), maxResults: 20 },
    { ...DEFAULT_PLANNER, ...(plan ? { force: plan } : {}) },
  );
  return new Set(r.hits.map((h) => h.chunk_id));
}

async function explain(s: Subject): Promise<ChunkExplanation[]> {
  const st = detailStatement(s, { kind: 'all' }, { titles: false, limit: 100 });
  return explainRows(s, (await t.pool.query(st.text, st.values as unknown[])).rows, 100).chunks;
}

/** Remove one reason: widen the ceiling when a wider one admits the row, otherwise change the row. */
function fix(r: Reason, s: Subject, m: ChunkMetadata): { s: Subject; m: ChunkMetadata } {
  if (r.rule === 'classification') {
    if (m.classification === 'approved_non_public') return { s: { ...s, ceiling: WIDE }, m };
    return { s, m: { ...m, classification: 'public' } };
  }
  if (r.rule === 'reader') return { s, m: { ...m, allowed_principals: [...m.allowed_principals, r.reader] } };
  if (s.kind !== 'partner') throw new Error('groups reason for a room');
  return { s, m: { ...m, allowed_groups: [...m.allowed_groups, s.groups[0]!] } };
}

const subset = <T>(xs: readonly T[]) => fc.subarray([...xs]);
const rowsArb = fc.array(
  fc.record({
    classification: fc.constantFrom(...CLASSIFICATIONS),
    principals: subset(PRINCIPALS),
    groups: subset(GROUPS),
    source: fc.constantFrom('docs/a.md', 'docs/b.md'),
  }),
  { minLength: 1, maxLength: 20 },
);
const subjectArb: fc.Arbitrary<Subject> = fc.oneof(
  fc
    .record({
      audience: subset(PRINCIPALS).filter((a) => a.length > 0),
      wide: fc.boolean(),
    })
    .map(
      ({ audience, wide }): Subject => ({
        kind: 'room',
        roomId: '!room:org-a.example',
        audience,
        ceiling: wide ? WIDE : NARROW,
        notes: [],
      }),
    ),
  fc
    .record({
      policy: fc.constantFrom('org-b', 'org-c'),
      pick: fc.array(fc.nat(), { minLength: 1, maxLength: 3 }),
      wide: fc.boolean(),
    })
    .map(({ policy, pick, wide }): Subject => {
      const own = GROUPS.filter((g) => g.startsWith(`partner/${policy}/`));
      const groups = [...new Set(pick.map((n) => own[n % own.length]!))].sort();
      return { kind: 'partner', policyId: policy, groups, ceiling: wide ? WIDE : NARROW, notes: [] };
    }),
);

describe('differential: explain = the server search', () => {
  test('visible exactly when search returns it; reasons necessary and sufficient; summary = detail', async () => {
    let hidden = 0;
    let multiReason = 0;
    await fc.assert(
      fc.asyncProperty(
        rowsArb,
        subjectArb,
        fc.constantFrom<Plan | undefined>(undefined, 'hnsw'),
        fc.integer(),
        async (gen, subject, plan, seed) => {
          const rows: Row[] = gen
            .filter((g) => g.principals.length + g.groups.length > 0)
            .map((g, i) => ({
              id: `chunk-${i}`,
              m: {
                source: { id: g.source },
                classification: g.classification,
                allowed_principals: g.principals,
                allowed_groups: g.groups,
              },
            }));
          if (rows.length === 0) return;
          await load(rows, seed);

          const explained = await explain(subject);
          assert.equal(explained.length, rows.length);
          const returned = await searchable(subject, plan, seed);
          for (const c of explained) assert.equal(c.visible, returned.has(c.chunk_id), c.chunk_id);

          // The summary counts what the detail lists.
          const st = summaryStatement(subject, { kind: 'all' });
          const sum = summarize(subject, (await t.pool.query(st.text, st.values as unknown[])).rows);
          assert.equal(sum.total, rows.length);
          assert.equal(sum.visible, explained.filter((c) => c.visible).length);
          assert.equal(
            sum.outside_ceiling,
            explained.filter((c) => c.reasons.some((r) => r.rule === 'classification')).length,
          );
          if (subject.kind === 'room') {
            subject.audience.forEach((a, i) => {
              const only = explained.filter(
                (c) => c.reasons.length === 1 && c.reasons[0]?.rule === 'reader' && c.reasons[0].reader === a,
              ).length;
              assert.equal(sum.readers?.[i]?.blocks_alone, only, a.principal);
            });
          } else {
            assert.equal(
              sum.no_group_overlap,
              explained.filter((c) => c.reasons.length === 1 && c.reasons[0]?.rule === 'groups').length,
            );
          }

          // Each hidden chunk: all fixes make it visible; all fixes but one leave it hidden.
          for (const c of explained.filter((x) => !x.visible).slice(0, 6)) {
            hidden++;
            const original = rows.find((r) => r.id === c.chunk_id)!.m;
            const applyAll = (skip: number) => {
              let cur = { s: subject, m: original };
              c.reasons.forEach((r, k) => {
                if (k !== skip) cur = fix(r, cur.s, cur.m);
              });
              return cur;
            };
            const all = applyAll(-1);
            await setMetadata(c.chunk_id, all.m);
            assert.ok((await searchable(all.s, plan, seed)).has(c.chunk_id), `${c.chunk_id}: all reasons fixed`);
            if (c.reasons.length > 1) {
              multiReason++;
              for (let k = 0; k < c.reasons.length; k++) {
                const partial = applyAll(k);
                await setMetadata(c.chunk_id, partial.m);
                assert.ok(
                  !(await searchable(partial.s, plan, seed)).has(c.chunk_id),
                  `${c.chunk_id}: reason ${k} left in place`,
                );
              }
            }
            await setMetadata(c.chunk_id, original);
          }
        },
      ),
      { numRuns: 30 },
    );
    // The property must have exercised the interesting cases.
    assert.ok(hidden > 20, `hidden chunks checked: ${hidden}`);
    assert.ok(multiReason > 5, `chunks with several reasons: ${multiReason}`);
  });
});
