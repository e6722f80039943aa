/**
 * Minting in ledger mode against a real database (PGlite through `pg`), in both confirmations: the
 * value is recorded (sync: before the 2xx leaves; deferred: right after, in batches), and every way
 * the ledger can fail refuses the mint from the moment it is observed (fail closed), with readiness
 * and metrics showing it. The gateway-shaped check client sends what agentgateway v1.3.1 sends.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type pg from 'pg';
import { createPool } from '../retrieval/db/pool.ts';
import { CHECK_SQL, capabilityDigest } from '../retrieval/ledger.ts';
import { waitFor } from '../testkit/common/index.ts';
import { countHeader, sendCheck } from '../testkit/projector/client.ts';
import { config, fixedRandom, localRequest, NOW, publicRequest } from '../testkit/projector/fixtures.ts';
import { startTestDatabase, type TestDatabase } from '../testkit/retrieval.ts';
import { boundOf } from './http.ts';
import { type RunningProjector, startProjector } from './index.ts';
import { type CapabilityLedger, createLedger, type LedgerOptions, LedgerUnavailableError } from './ledger.ts';

const AGENT = 'kagent/knowledge-agent';
const ledgerConfig = () => config((c) => (c['capability'] = 'ledger'));
// Long enough that no scheduled purge runs during a test (the fixtures' clock lies in the past).
const QUIET = { purgeIntervalMs: 3_600_000, retryIntervalMs: 3_600_000 };

let t: TestDatabase;
before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

function get(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, { agent: false }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on('error', reject)
      .end();
  });
}

/** A distinct value per seed (any bytes hash; the ledger never decodes them). */
const matrixValue = (i: number) => Buffer.from(`batch-test-${i}-${process.pid}`).toString('base64url');

async function recorded(value: string): Promise<boolean> {
  const r = await t.retrieval.query(CHECK_SQL, [capabilityDigest(value), AGENT, NOW]);
  return r.rows[0].ok === true;
}

async function ready(ledger: CapabilityLedger): Promise<void> {
  await waitFor('the ledger to be reachable', () => ledger.healthy(), { timeoutMs: 30_000, intervalMs: 50 });
}

async function withProjector(
  options: { ledger?: CapabilityLedger; capability?: 'ledger' | 'plain'; random?: boolean },
  body: (p: RunningProjector) => Promise<void>,
): Promise<void> {
  const p = await startProjector({
    config: options.capability === 'plain' ? config() : ledgerConfig(),
    now: () => NOW,
    // Fresh randomness where a test must not meet a value an earlier test already recorded.
    ...(options.random ? {} : { randomBytes: fixedRandom }),
    ...(options.ledger ? { ledger: options.ledger } : {}),
  });
  try {
    await body(p);
  } finally {
    await p.close();
  }
}

for (const confirm of ['deferred', 'sync'] as const) {
  const create = (o: Omit<LedgerOptions, 'confirm'>) => createLedger({ ...o, confirm });
  /** Deferred: the record follows the answer; wait for it before looking. */
  const settled = (ledger: CapabilityLedger) => (confirm === 'deferred' ? ledger.flush() : Promise.resolve());

  describe(`ledger mode (${confirm}): minting records the value`, () => {
    test('a local-route allow is recorded with its agent and exp', async () => {
      const ledger = create({ pool: t.pool, ...QUIET });
      await ready(ledger);
      await withProjector({ ledger, random: true }, async (p) => {
        const r = await sendCheck(p.url, localRequest());
        assert.equal(r.status, 200);
        const value = String(r.headers['x-fgentic-identity']);
        assert.equal(countHeader(r, 'x-fgentic-identity'), 1);
        // Sync confirmation: recorded before the 2xx left.
        if (confirm === 'sync') assert.equal(await recorded(value), true);
        await settled(ledger);
        assert.equal(await recorded(value), true);
        assert.deepEqual(boundOf(value), { agent: AGENT, exp: NOW + 600 });
        const metrics = (await get(`${p.url}/metrics`)).body;
        assert.match(metrics, /fgentic_projector_ledger_writes_total\{result="ok"\} 1/);
        assert.match(metrics, /fgentic_projector_ledger_ready 1/);
        assert.equal((await get(`${p.url}/readyz`)).status, 200);
      });
      await ledger.close();
    });

    test('a public-route allow is recorded too', async () => {
      const ledger = create({ pool: t.pool, ...QUIET });
      await ready(ledger);
      await withProjector({ ledger, random: true }, async (p) => {
        const r = await sendCheck(p.url, publicRequest());
        assert.equal(r.status, 200);
        await settled(ledger);
        assert.equal(await recorded(String(r.headers['x-fgentic-identity'])), true);
      });
      await ledger.close();
    });

    test('plain mode writes nothing to the ledger, even with one configured', async () => {
      const count = async () =>
        Number((await t.pool.query('SELECT count(*)::int AS n FROM fgentic_ledger.capabilities')).rows[0].n);
      const ledger = create({ pool: t.pool, ...QUIET });
      await ready(ledger);
      const before = await count();
      await withProjector({ ledger, capability: 'plain', random: true }, async (p) => {
        const r = await sendCheck(p.url, localRequest());
        assert.equal(r.status, 200);
        await settled(ledger);
        assert.equal(await recorded(String(r.headers['x-fgentic-identity'])), false);
        assert.match((await get(`${p.url}/metrics`)).body, /fgentic_projector_ledger_ready -1/);
      });
      assert.equal(await count(), before);
      await ledger.close();
    });
  });

  describe(`ledger mode (${confirm}): fail closed at mint`, () => {
    test('database unreachable: every mint is refused, /readyz 503, the gauge reads 0', async () => {
      // A port nothing listens on: connection refused, the way a database outage looks to `pg`.
      const probe = createPool({
        connectionString: 'postgres://127.0.0.1:1/knowledge',
        connectionTimeoutMs: 1000,
      });
      const ledger = create({ pool: probe, ownsPool: true, ...QUIET });
      await withProjector({ ledger }, async (p) => {
        await assertRefused(p);
        assert.equal(ledger.healthy(), false);
        assert.equal((await get(`${p.url}/readyz`)).status, 503);
        const metrics = (await get(`${p.url}/metrics`)).body;
        assert.match(metrics, /fgentic_projector_ledger_ready 0/);
        // Sync tries the write and counts its failure; deferred refuses before writing anything.
        if (confirm === 'sync') assert.match(metrics, /fgentic_projector_ledger_writes_total\{result="error"\} 1/);
        assert.doesNotMatch(metrics, /fgentic_projector_ledger_writes_total\{result="ok"\}/);
        assert.match(
          metrics,
          /fgentic_projector_decisions_total\{route="local",decision="deny",reason="ledger_unavailable"\} 1/,
        );
      });
      await ledger.close();
    });

    test('ledger mode with no ledger configured refuses every mint and is not ready', async () => {
      await withProjector({}, async (p) => {
        await assertRefused(p);
        assert.equal((await get(`${p.url}/readyz`)).status, 503);
      });
    });

    test('a ledger that has not answered yet is not ready and refuses', async () => {
      // A pool whose first connection never completes within the test: health stays unknown (false).
      const pending = {
        connect: () => new Promise(() => {}),
        query: () => new Promise(() => {}),
        end: async () => {},
      } as unknown as pg.Pool;
      const ledger = create({ pool: pending, ...QUIET });
      await withProjector({ ledger }, async (p) => {
        assert.equal((await get(`${p.url}/readyz`)).status, 503);
        // Deferred refuses at once; sync would wait on the stalled write (the CLI's statement timeout).
        if (confirm === 'deferred') await assertRefused(p);
      });
      await ledger.close();
    });
  });
}

async function assertRefused(p: RunningProjector): Promise<void> {
  const r = await sendCheck(p.url, localRequest());
  assert.equal(r.status, 403);
  assert.equal(countHeader(r, 'x-fgentic-identity'), 0);
  assert.equal(r.body, '{"error":"denied","reason":"ledger_unavailable"}');
}

const revokeRecord = () =>
  t.pool.query('REVOKE EXECUTE ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) FROM knowledge_projector');
const grantRecord = () =>
  t.pool.query('GRANT EXECUTE ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) TO knowledge_projector');

describe('ledger mode (sync): a refused write', () => {
  test('the database refuses the write (grant withdrawn): refused, and ready again once it accepts', async () => {
    const ledger = createLedger({ pool: t.pool, confirm: 'sync', ...QUIET });
    await ready(ledger);
    await withProjector({ ledger, random: true }, async (p) => {
      await revokeRecord();
      try {
        await assertRefused(p);
        assert.equal((await get(`${p.url}/readyz`)).status, 503);
      } finally {
        await grantRecord();
      }
      await ledger.purge();
      assert.equal((await get(`${p.url}/readyz`)).status, 200);
      assert.equal((await sendCheck(p.url, localRequest())).status, 200);
    });
    await ledger.close();
  });
});

describe('ledger mode (deferred): records after the answer', () => {
  test('a record that fails after the answer: that value stays unrecorded, minting stops, /readyz 503 until a probe succeeds', async () => {
    const ledger = createLedger({ pool: t.pool, ...QUIET });
    await ready(ledger);
    await withProjector({ ledger, random: true }, async (p) => {
      await revokeRecord();
      try {
        // Answered while the ledger was last seen healthy …
        const r = await sendCheck(p.url, localRequest());
        assert.equal(r.status, 200);
        const value = String(r.headers['x-fgentic-identity']);
        await ledger.flush();
        // … its record failed: the retrieval server's check finds nothing, so the value reads nothing.
        assert.equal(await recorded(value), false);
        assert.equal(ledger.healthy(), false);
        await assertRefused(p);
        assert.equal((await get(`${p.url}/readyz`)).status, 503);
        const metrics = (await get(`${p.url}/metrics`)).body;
        assert.match(metrics, /fgentic_projector_ledger_writes_total\{result="error"\} 1/);
        assert.match(metrics, /fgentic_projector_ledger_ready 0/);
        // The probe does not restore minting while the role still may not record.
        await assert.rejects(ledger.purge());
        await assertRefused(p);
      } finally {
        await grantRecord();
      }
      await ledger.purge();
      assert.equal((await get(`${p.url}/readyz`)).status, 200);
      const again = await sendCheck(p.url, localRequest());
      assert.equal(again.status, 200);
      await ledger.flush();
      assert.equal(await recorded(String(again.headers['x-fgentic-identity'])), true);
    });
    await ledger.close();
  });

  test('a batch past its deadline stops minting before the database answers', async () => {
    // A connection that stalls on the record (a hung database, as `pg` sees one before any
    // statement timeout): nothing fails, only time passes.
    let release: () => void = () => {};
    const stalled = new Promise<void>((r) => (release = r));
    const pool = new Proxy(t.pool, {
      get(target, prop) {
        if (prop === 'query')
          return async (text: string, values?: unknown[]) => {
            if (typeof text === 'string' && text.includes('record_v1(v.d')) await stalled;
            return target.query(text, values);
          };
        const v = Reflect.get(target, prop, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const ledger = createLedger({ pool, ...QUIET, recordDeadlineMs: 20 });
    await ready(ledger);
    await withProjector({ ledger, random: true }, async (p) => {
      const r = await sendCheck(p.url, localRequest());
      assert.equal(r.status, 200);
      await waitFor('the overdue batch to mark the ledger down', () => !ledger.healthy(), {
        timeoutMs: 6_000,
        intervalMs: 10,
      });
      await assertRefused(p);
      assert.equal((await get(`${p.url}/readyz`)).status, 503);
      // The late answer records the value but does not vouch for the ledger; the probe does.
      release();
      await ledger.flush();
      assert.equal(await recorded(String(r.headers['x-fgentic-identity'])), true);
      assert.equal(ledger.healthy(), false);
      await ledger.purge();
      assert.equal(ledger.healthy(), true);
    });
    await ledger.close();
  });

  test('mints of one turn share one batch, and a full queue refuses', async () => {
    let batches = 0;
    let release: () => void = () => {};
    const stalled = new Promise<void>((r) => (release = r));
    const pool = new Proxy(t.pool, {
      get(target, prop) {
        if (prop === 'query')
          return async (text: string, values?: unknown[]) => {
            if (typeof text === 'string' && text.includes('record_v1(v.d')) {
              batches++;
              await stalled;
            }
            return target.query(text, values);
          };
        const v = Reflect.get(target, prop, target);
        return typeof v === 'function' ? v.bind(target) : v;
      },
    });
    const ledger = createLedger({ pool, ...QUIET, recordDeadlineMs: 3_600_000, maxQueue: 3 });
    await ready(ledger);
    const values = Array.from({ length: 3 }, (_, i) => matrixValue(i));
    for (const v of values) await ledger.admit(v, AGENT, NOW + 600);
    // Three admitted in one turn: the queue is full until the batch leaves.
    await assert.rejects(ledger.admit(matrixValue(3), AGENT, NOW + 600), LedgerUnavailableError);
    await new Promise((r) => setImmediate(r));
    assert.equal(batches, 1);
    // The batch is in flight (stalled); the queue has room again.
    await ledger.admit(matrixValue(4), AGENT, NOW + 600);
    release();
    await ledger.flush();
    assert.equal(batches, 2);
    for (const v of [...values, matrixValue(4)]) assert.equal(await recorded(v), true);
    assert.equal(await recorded(matrixValue(3)), false);
    await ledger.close();
  });

  test('a value of the wrong shape is refused without touching the ledger or its health', async () => {
    const ledger = createLedger({ pool: t.pool, ...QUIET });
    await ready(ledger);
    await assert.rejects(ledger.admit('x', 'not an agent key', NOW + 600), RangeError);
    await assert.rejects(ledger.admit('x', AGENT, 1.5), RangeError);
    assert.equal(ledger.healthy(), true);
    await ledger.close();
  });
});

describe('boundOf reads agent and exp back from the minted value', () => {
  test('anything but a projection-shaped value yields undefined (the mint is refused)', () => {
    for (const v of ['', 'not base64 json', Buffer.from('{"agent":{},"exp":1}').toString('base64url')])
      assert.equal(boundOf(v), undefined);
    assert.equal(
      boundOf(Buffer.from('{"agent":{"namespace":"a","name":"b"},"exp":1.5}').toString('base64url')),
      undefined,
    );
  });

  test('never throws, and whatever it returns is an agent key and an integer exp (property)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v)).toString('base64url')),
        ),
        (v) => {
          const b = boundOf(v);
          return b === undefined || (b.agent.includes('/') && Number.isSafeInteger(b.exp));
        },
      ),
    );
  });
});
