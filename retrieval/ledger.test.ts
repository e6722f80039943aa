/**
 * The capability ledger in the database (migration 0008): what each role may do with it, what the
 * check answers, what the purge deletes. Real Postgres (PGlite) through `pg`, each role by `asRole`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { startTestDatabase, type TestDatabase } from '../testkit/retrieval.ts';
import { asRole, PROJECTOR_ROLE, RETRIEVAL_ROLE } from './db/roles.ts';
import { CHECK_SQL, capabilityDigest, PURGE_SQL, RECORD_SQL, recordMessage } from './ledger.ts';

let t: TestDatabase;
let dbNow: number;
before(async () => {
  t = await startTestDatabase();
  const r = await t.pool.query('SELECT extract(epoch FROM now())::bigint AS s');
  dbNow = Number(r.rows[0].s);
});
after(async () => {
  await t?.close();
});

const projector = () => asRole(t.pool, PROJECTOR_ROLE);
const AGENT = 'kagent/knowledge-agent';
let n = 0;
const fresh = () => capabilityDigest(`value-${n++}-${Math.random()}`);

async function check(digest: Buffer, agent: string, at: number): Promise<boolean> {
  const r = await t.retrieval.query(CHECK_SQL, [digest, agent, at]);
  return r.rows[0].ok === true;
}

async function sqlstate(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  }
}

describe('ledger privileges: each role holds only its grant', () => {
  test('the projector role cannot read, change or delete entries, nor call the check', async () => {
    const p = projector();
    for (const sql of [
      'SELECT count(*) FROM fgentic_ledger.capabilities',
      "INSERT INTO fgentic_ledger.capabilities VALUES ('\\x00'::bytea, 'a/b', 1)",
      'DELETE FROM fgentic_ledger.capabilities',
      'UPDATE fgentic_ledger.capabilities SET exp = exp + 1',
    ])
      assert.equal(await sqlstate(p.query(sql)), '42501', sql);
    assert.equal(await sqlstate(p.query(CHECK_SQL, [fresh(), AGENT, dbNow])), '42501');
  });

  test('the retrieval role may only ask the check: no table access, no record, no purge', async () => {
    for (const sql of ['SELECT count(*) FROM fgentic_ledger.capabilities', 'DELETE FROM fgentic_ledger.capabilities'])
      assert.equal(await sqlstate(t.retrieval.query(sql)), '42501', sql);
    assert.equal(await sqlstate(t.retrieval.query(RECORD_SQL, [fresh(), AGENT, dbNow + 60])), '42501');
    assert.equal(await sqlstate(t.retrieval.query(PURGE_SQL)), '42501');
  });

  test('the ingestion role has nothing on the ledger', async () => {
    const ingestion = t.ingestion;
    assert.equal(await sqlstate(ingestion.query(CHECK_SQL, [fresh(), AGENT, dbNow])), '42501');
    assert.equal(await sqlstate(ingestion.query(RECORD_SQL, [fresh(), AGENT, dbNow + 60])), '42501');
  });
});

describe('ledger check', () => {
  test('a recorded value is found for its agent until exp, and for no other agent', async () => {
    const d = fresh();
    assert.equal(await check(d, AGENT, dbNow), false, 'not yet recorded');
    await projector().query(RECORD_SQL, [d, AGENT, dbNow + 600]);
    assert.equal(await check(d, AGENT, dbNow), true);
    assert.equal(await check(d, AGENT, dbNow + 599), true);
    assert.equal(await check(d, AGENT, dbNow + 600), false, 'now >= exp denies, as in the contract');
    assert.equal(await check(d, 'kagent/other-agent', dbNow), false, 'bound to its agent');
    assert.equal(await check(fresh(), AGENT, dbNow), false, 'a value nobody minted');
  });

  test('recording the same value twice is a no-op, not an error', async () => {
    const d = fresh();
    await projector().query(RECORD_SQL, [d, AGENT, dbNow + 600]);
    await projector().query(RECORD_SQL, [d, AGENT, dbNow + 600]);
    assert.equal(await check(d, AGENT, dbNow), true);
  });

  test('record refuses malformed entries and lifetimes beyond the contract (SQLSTATE 22023)', async () => {
    const p = projector();
    const cases: unknown[][] = [
      [Buffer.alloc(31), AGENT, dbNow + 60],
      [null, AGENT, dbNow + 60],
      [fresh(), 'Kagent/x', dbNow + 60],
      [fresh(), 'kagent', dbNow + 60],
      [fresh(), null, dbNow + 60],
      [fresh(), AGENT, null],
      [fresh(), AGENT, dbNow + 3600],
    ];
    for (const args of cases)
      assert.equal(await sqlstate(p.query(RECORD_SQL, args)), '22023', JSON.stringify(args.slice(1)));
  });
});

describe('ledger purge', () => {
  test('deletes entries expired by the database clock (30 s skew allowance) and keeps live ones', async () => {
    const gone = fresh();
    const skew = fresh();
    const live = fresh();
    const p = projector();
    await p.query(RECORD_SQL, [gone, AGENT, dbNow - 100]);
    await p.query(RECORD_SQL, [skew, AGENT, dbNow + 10]);
    await p.query(RECORD_SQL, [live, AGENT, dbNow + 600]);
    assert.equal(await check(gone, AGENT, dbNow - 200), true, 'present before the purge');
    const r = await p.query(PURGE_SQL);
    assert.ok(Number(r.rows[0].purged) >= 1);
    assert.equal(await check(gone, AGENT, dbNow - 200), false, 'purged');
    assert.equal(await check(skew, AGENT, dbNow), true, 'within the skew allowance: kept');
    assert.equal(await check(live, AGENT, dbNow), true);
  });

  test('migrate grants the ledger in ledger mode only: --capability plain revokes, ledger restores', async () => {
    const { migrate } = await import('./db/migrate.ts');
    const retrieval = asRole(t.pool, RETRIEVAL_ROLE);
    // Plain mode: neither role may reach the ledger.
    await migrate(t.pool, { capability: 'plain' });
    assert.equal(await sqlstate(projector().query(RECORD_SQL, [fresh(), AGENT, dbNow + 60])), '42501');
    assert.equal(
      await sqlstate(retrieval.query('SELECT fgentic_ledger.check_v1($1, $2, $3)', [fresh(), AGENT, dbNow])),
      '42501',
    );
    // Ledger mode: each gets its functions again, nothing more.
    await migrate(t.pool, { capability: 'ledger' });
    await projector().query(RECORD_SQL, [fresh(), AGENT, dbNow + 60]);
    await retrieval.query('SELECT fgentic_ledger.check_v1($1, $2, $3)', [fresh(), AGENT, dbNow]);
    assert.equal(
      await sqlstate(retrieval.query(RECORD_SQL, [fresh(), AGENT, dbNow + 60])),
      '42501',
      'the serving role may not record',
    );
  });
});

describe('recordMessage (the one-round-trip record)', () => {
  test('records as the projector role: a withdrawn grant refuses it even from a superuser session', async () => {
    const d = fresh();
    await t.pool.query(recordMessage(PROJECTOR_ROLE, d, AGENT, dbNow + 600));
    assert.equal(await check(d, AGENT, dbNow), true);
    await t.pool.query('REVOKE EXECUTE ON FUNCTION fgentic_ledger.purge_v1() FROM knowledge_projector');
    await t.pool.query(
      'REVOKE EXECUTE ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) FROM knowledge_projector',
    );
    try {
      assert.equal(await sqlstate(t.pool.query(recordMessage(PROJECTOR_ROLE, fresh(), AGENT, dbNow + 60))), '42501');
    } finally {
      const { migrate } = await import('./db/migrate.ts');
      await migrate(t.pool);
    }
    // The role change ended with the message: the session is the superuser again.
    const r = await t.pool.query('SELECT current_user = session_user AS same');
    assert.equal(r.rows[0].same, true);
  });

  test('only values of the checked shapes reach the message (property)', () => {
    fc.assert(
      fc.property(fc.string(), fc.oneof(fc.integer(), fc.double()), (agent, exp) => {
        let text: string;
        try {
          text = recordMessage(PROJECTOR_ROLE, Buffer.alloc(32), agent, exp);
        } catch {
          return true;
        }
        return (
          /^[a-z0-9-]+\/[a-z0-9-]+$/.test(agent) &&
          Number.isSafeInteger(exp) &&
          !text.includes(';', text.indexOf('record_v1'))
        );
      }),
    );
    assert.throws(() => recordMessage(PROJECTOR_ROLE, Buffer.alloc(31), AGENT, 1), RangeError);
    assert.throws(() => recordMessage("x'; DROP", Buffer.alloc(32), AGENT, 1), RangeError);
  });
});
