/**
 * The ledger check's cheap path (retrieval/ledger.ts): folded into the search statement as a
 * one-time filter, so an unrecorded value never runs the search function and a recorded one costs
 * no extra statement; and the mint window, the bounded re-check before `unminted` that lets the
 * projector record after it answered. Real Postgres (PGlite) through `pg` where the database
 * decides; a recording timer where only the schedule is under test.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import {
  AGENT,
  decodeFixture,
  type MatrixFixture,
  matrixHeader,
  meta,
  NOW,
  P,
  seedTestCorpus,
  servingUrl,
  startTestDatabase,
  type TestDatabase,
} from '../testkit/retrieval.ts';
import { asRole, PROJECTOR_ROLE } from './db/roles.ts';
import { type RetrievalServer, startRetrievalServer } from './index.ts';
import {
  awaitRecorded,
  type CapabilityProof,
  capabilityDigest,
  foldCheck,
  isRecorded,
  RECORD_SQL,
  recheckDelays,
  recordBatchMessage,
  recordHorizon,
  UnmintedCapabilityError,
  withinMintWindow,
} from './ledger.ts';
import { DEFAULT_PLANNER, searchStatement } from './planner.ts';
import { searchArguments } from './predicate.ts';
import { searchKnowledge } from './search.ts';

const AGENT_KEY = `${AGENT.namespace}/${AGENT.name}`;

describe('the mint window: bounded by the real race, cheap to deny', () => {
  const W = fc.integer({ min: 200, max: 30_000 });
  /** A value's age at its first refusal, in ms from its issue second (may be negative: a forged iat). */
  const AGE = fc.integer({ min: -5_000, max: 60_000 });
  const T0 = 1_800_000_000; // iat, Unix seconds

  test('a value never recorded: at most 3 re-checks, waiting no longer than the window nor past iat + 1 s + window (property)', async () => {
    await fc.assert(
      fc.asyncProperty(W, AGE, async (windowMs, age) => {
        const nowMs = T0 * 1000 + age;
        let checks = 0;
        let slept = 0;
        const found = await awaitRecorded(
          async () => {
            checks++;
            return false;
          },
          {
            windowMs,
            issuedAt: T0,
            nowMs: () => nowMs,
            sleep: async (ms) => {
              slept += ms;
            },
          },
        );
        assert.equal(found, false);
        assert.ok(checks <= 3, `${checks} re-checks`);
        assert.ok(slept <= windowMs, `${slept} ms > window`);
        const horizon = (T0 + 1) * 1000 + windowMs - nowMs;
        assert.equal(slept, Math.max(0, Math.min(windowMs, horizon)));
        // A value older than its horizon costs no re-check at all.
        if (horizon <= 0) assert.equal(checks, 0);
      }),
    );
  });

  test('the whole denial is at most 5 statements, and 2 for a value past its horizon (property)', async () => {
    await fc.assert(
      fc.asyncProperty(W, AGE, async (windowMs, age) => {
        let statements = 0;
        // One refused attempt is the folded search and, its answer being empty, the check alone.
        const attempt = async () => {
          statements += 2;
          throw new UnmintedCapabilityError();
        };
        const recorded = async () => {
          statements++;
          return false;
        };
        const nowMs = T0 * 1000 + age;
        await assert.rejects(
          withinMintWindow(attempt, recorded, {
            windowMs,
            issuedAt: T0,
            nowMs: () => nowMs,
            sleep: async () => {},
          }),
          UnmintedCapabilityError,
        );
        assert.ok(statements <= 5, `${statements} statements`);
        if (age >= 1000 + windowMs) assert.equal(statements, 2);
      }),
    );
  });

  test('safety: a record visible at any moment up to iat + 1 s + window is found, and the search runs again (property)', async () => {
    await fc.assert(
      fc.asyncProperty(W, AGE, fc.double({ min: 0, max: 1, noNaN: true }), async (windowMs, age, at) => {
        const nowMs = T0 * 1000 + age;
        const horizon = recordHorizon(T0, nowMs, windowMs);
        fc.pre(horizon > 0);
        // The record becomes visible `visibleAfter` ms after the first refusal, within the horizon.
        const visibleAfter = at * horizon;
        let elapsed = 0;
        let attempts = 0;
        const served = await withinMintWindow(
          async () => {
            if (attempts++ === 0) throw new UnmintedCapabilityError();
            return 'served';
          },
          async () => elapsed >= visibleAfter,
          {
            windowMs,
            issuedAt: T0,
            nowMs: () => nowMs,
            sleep: async (ms) => {
              elapsed += ms;
            },
          },
        );
        assert.equal(served, 'served');
        assert.equal(attempts, 2);
      }),
    );
  });

  test('the schedule: 25 ms, 250 ms and the horizon, never past it', () => {
    assert.deepEqual(recheckDelays(2_000), [25, 225, 1_750]);
    assert.deepEqual(recheckDelays(100), [25, 75]);
    assert.deepEqual(recheckDelays(20), [20]);
    assert.deepEqual(recheckDelays(0), []);
    // A value that claims a later issue second (a forged iat) still waits at most the window.
    assert.equal(recordHorizon(T0, T0 * 1000 - 10_000, 2_000), 2_000);
  });

  test('a zero window refuses at once, without a re-check', async () => {
    let checks = 0;
    const found = await awaitRecorded(
      async () => {
        checks++;
        return true;
      },
      { windowMs: 0, sleep: async () => {} },
    );
    assert.equal(found, false);
    assert.equal(checks, 0);
  });

  test('a fault is never retried or turned into a wait', async () => {
    let faults = 0;
    await assert.rejects(
      withinMintWindow(
        async () => {
          faults++;
          throw new Error('connection lost');
        },
        async () => true,
        { windowMs: 100, sleep: async () => {} },
      ),
      /connection lost/,
    );
    assert.equal(faults, 1);
  });
});

describe('the record batch message', () => {
  test('refuses anything that could leave its literal (property)', () => {
    fc.assert(
      fc.property(fc.string(), fc.oneof(fc.integer(), fc.double()), (agent, exp) => {
        const entry = { digest: capabilityDigest(agent), agent, exp };
        try {
          const m = recordBatchMessage(PROJECTOR_ROLE, [entry]);
          return /^[a-z0-9-]+\/[a-z0-9-]+$/.test(agent) && Number.isSafeInteger(exp) && m.includes(agent);
        } catch (err) {
          return err instanceof RangeError;
        }
      }),
    );
    assert.throws(() => recordBatchMessage(PROJECTOR_ROLE, []), RangeError);
  });
});

describe('the folded check against the database', () => {
  let t: TestDatabase;
  let server: RetrievalServer;
  before(async () => {
    t = await startTestDatabase();
    await seedTestCorpus(t, [
      { content: 'alpha handbook for alice', metadata: meta({ source: 'docs/a.md', principals: [P.alice] }) },
      { content: 'beta notes for bob', metadata: meta({ source: 'docs/b.md', principals: [P.bob] }) },
    ]);
    server = await startRetrievalServer({
      agents: [AGENT],
      databaseUrl: servingUrl(t),
      pool: { max: 3 },
      port: 0,
      now: () => NOW,
      capability: 'ledger',
    });
  });
  after(async () => {
    await server?.close();
    await t?.close();
  });

  let serial = 0;
  const fresh = (caller: MatrixFixture['caller'] = P.alice) =>
    matrixHeader({ caller, audience: [caller], iat: NOW - 1 - (serial++ % 500) });
  const proofOf = (v: string): CapabilityProof => ({
    digest: capabilityDigest(v),
    agent: AGENT_KEY,
    now: NOW,
  });
  const record = (v: string) =>
    asRole(t.pool, PROJECTOR_ROLE).query(RECORD_SQL, [capabilityDigest(v), AGENT_KEY, NOW + 600]);
  const embedding = async () => (await server.embedder.embed(['alpha']))[0]!;
  const search = async (v: string, placement?: 'folded' | 'separate') =>
    searchKnowledge(server.servingPool, {
      projection: decodeFixture(v),
      embedding: await embedding(),
      maxResults: 5,
      capability: { ...proofOf(v), ...(placement ? { placement } : {}) },
    });

  type PlanNode = {
    'Node Type': string;
    'One-Time Filter'?: string;
    'Actual Loops'?: number;
    Plans?: PlanNode[];
  };
  const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

  async function explain(v: string): Promise<PlanNode> {
    const s = foldCheck(
      searchStatement(
        searchArguments(decodeFixture(v)),
        `[${(await embedding()).join(',')}]`,
        5,
        null,
        DEFAULT_PLANNER,
      ),
      proofOf(v),
    );
    const client = await server.servingPool.connect();
    try {
      await client.query('BEGIN READ ONLY');
      const r = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${s.text}`, s.values as unknown[]);
      await client.query('ROLLBACK');
      return r.rows[0]['QUERY PLAN'][0].Plan as PlanNode;
    } finally {
      client.release();
    }
  }

  test('the check is a one-time filter above the search function: an unrecorded value never runs the search', async () => {
    const v = fresh();
    const gate = (plan: PlanNode) => nodes(plan).find((n) => n['One-Time Filter']?.includes('check_v1'));
    const scan = (plan: PlanNode) => nodes(plan).find((n) => n['Node Type'] === 'Function Scan');
    const before = await explain(v);
    const g = gate(before);
    assert.ok(g, 'check_v1 is planned as a one-time filter');
    assert.ok(scan(g), 'the search function lies below it');
    assert.equal(scan(before)?.['Actual Loops'], 0, 'never executed while unrecorded');
    await record(v);
    assert.equal(scan(await explain(v))?.['Actual Loops'], 1);
  });

  test('recorded → rows in one statement; unrecorded → unminted; recorded with nothing authorized → empty, no denial', async () => {
    const v = fresh();
    await assert.rejects(search(v), UnmintedCapabilityError);
    await assert.rejects(search(v, 'separate'), UnmintedCapabilityError);
    await record(v);
    const folded = await search(v);
    const separate = await search(v, 'separate');
    assert.deepEqual(
      folded.hits.map((h) => h.chunk_id),
      separate.hits.map((h) => h.chunk_id),
    );
    assert.equal(folded.hits.length, 1);
    // Carol may read nothing: the empty answer is told apart from a denial by the check alone.
    const carol = fresh(P.carol);
    await assert.rejects(search(carol), UnmintedCapabilityError);
    await record(carol);
    assert.equal((await search(carol)).hits.length, 0);
  });

  test('a value recorded while its call waits in the window is served', async () => {
    const v = fresh();
    let recordedInWindow = false;
    const result = await withinMintWindow(
      () => search(v),
      () => isRecorded(server.servingPool, proofOf(v)),
      {
        windowMs: 2_000,
        // The record lands during the first pause, after the first attempt was refused.
        sleep: async () => {
          if (!recordedInWindow) {
            recordedInWindow = true;
            await record(v);
          }
        },
      },
    );
    assert.ok(recordedInWindow);
    assert.equal(result.hits.length, 1);
  });

  test('a forged value is still denied after the window', async () => {
    const v = fresh();
    let pauses = 0;
    await assert.rejects(
      withinMintWindow(
        () => search(v),
        () => isRecorded(server.servingPool, proofOf(v)),
        {
          windowMs: 2_000,
          sleep: async () => void pauses++,
        },
      ),
      UnmintedCapabilityError,
    );
    assert.equal(pauses, recheckDelays(2_000).length);
    assert.ok(pauses <= 3);
  });
});
