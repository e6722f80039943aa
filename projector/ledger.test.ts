/**
 * Minting in ledger mode against a real database (PGlite through `pg`): the value is recorded before
 * the 2xx leaves, and every way the ledger can fail refuses the mint (fail closed), with readiness
 * and metrics showing it. The gateway-shaped check client sends what agentgateway v1.3.1 sends.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type pg from 'pg';
import { waitFor } from '../common/testing/index.ts';
import { createPool } from '../retrieval/db/pool.ts';
import { CHECK_SQL, capabilityDigest } from '../retrieval/ledger.ts';
import { startTestDatabase, type TestDatabase } from '../retrieval/testing.ts';
import { boundOf } from './http.ts';
import { type RunningProjector, startProjector } from './index.ts';
import { type CapabilityLedger, createLedger } from './ledger.ts';
import { countHeader, sendCheck } from './test-doubles/client.ts';
import { config, fixedRandom, localRequest, NOW, publicRequest } from './test-doubles/fixtures.ts';

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

async function recorded(value: string): Promise<boolean> {
  const r = await t.retrieval.query(CHECK_SQL, [capabilityDigest(value), AGENT, NOW]);
  return r.rows[0].ok === true;
}

async function ready(ledger: CapabilityLedger): Promise<void> {
  await waitFor('the ledger to be reachable', () => ledger.healthy(), { timeoutMs: 30_000, intervalMs: 50 });
}

async function withProjector(
  options: { ledger?: CapabilityLedger; capability?: 'ledger' | 'plain' },
  body: (p: RunningProjector) => Promise<void>,
): Promise<void> {
  const p = await startProjector({
    config: options.capability === 'plain' ? config() : ledgerConfig(),
    now: () => NOW,
    randomBytes: fixedRandom,
    ...(options.ledger ? { ledger: options.ledger } : {}),
  });
  try {
    await body(p);
  } finally {
    await p.close();
  }
}

describe('ledger mode: minting records the value first', () => {
  test('a local-route allow is recorded with its agent and exp before the 2xx', async () => {
    const ledger = createLedger({ pool: t.pool, ...QUIET });
    await ready(ledger);
    await withProjector({ ledger }, async (p) => {
      const r = await sendCheck(p.url, localRequest());
      assert.equal(r.status, 200);
      const value = String(r.headers['x-fgentic-identity']);
      assert.equal(countHeader(r, 'x-fgentic-identity'), 1);
      assert.equal(await recorded(value), true);
      assert.deepEqual(boundOf(value), { agent: AGENT, exp: NOW + 600 });
      const metrics = (await get(`${p.url}/metrics`)).body;
      assert.match(metrics, /fgentic_projector_ledger_writes_total\{result="ok"\} 1/);
      assert.match(metrics, /fgentic_projector_ledger_ready 1/);
      assert.equal((await get(`${p.url}/readyz`)).status, 200);
    });
  });

  test('a public-route allow is recorded too', async () => {
    const ledger = createLedger({ pool: t.pool, ...QUIET });
    await ready(ledger);
    await withProjector({ ledger }, async (p) => {
      const r = await sendCheck(p.url, publicRequest());
      assert.equal(r.status, 200);
      assert.equal(await recorded(String(r.headers['x-fgentic-identity'])), true);
    });
  });

  test('plain mode writes nothing to the ledger, even with one configured', async () => {
    const count = async () =>
      Number((await t.pool.query('SELECT count(*)::int AS n FROM fgentic_ledger.capabilities')).rows[0].n);
    const ledger = createLedger({ pool: t.pool, ...QUIET });
    await ready(ledger);
    const before = await count();
    await withProjector({ ledger, capability: 'plain' }, async (p) => {
      const r = await sendCheck(p.url, localRequest());
      assert.equal(r.status, 200);
      assert.equal(await recorded(String(r.headers['x-fgentic-identity'])), false);
      assert.match((await get(`${p.url}/metrics`)).body, /fgentic_projector_ledger_ready -1/);
    });
    assert.equal(await count(), before);
  });
});

describe('ledger mode: fail closed at mint', () => {
  async function assertRefused(p: RunningProjector): Promise<void> {
    const r = await sendCheck(p.url, localRequest());
    assert.equal(r.status, 403);
    assert.equal(countHeader(r, 'x-fgentic-identity'), 0);
    assert.equal(r.body, '{"error":"denied","reason":"ledger_unavailable"}');
  }

  test('database unreachable: every mint is refused, /readyz 503, the gauge reads 0', async () => {
    // A port nothing listens on: connection refused, the way a database outage looks to `pg`.
    const probe = createPool({
      connectionString: 'postgres://127.0.0.1:1/knowledge',
      connectionTimeoutMs: 1000,
    });
    const ledger = createLedger({ pool: probe, ownsPool: true, ...QUIET });
    await withProjector({ ledger }, async (p) => {
      await assertRefused(p);
      assert.equal(ledger.healthy(), false);
      assert.equal((await get(`${p.url}/readyz`)).status, 503);
      const metrics = (await get(`${p.url}/metrics`)).body;
      assert.match(metrics, /fgentic_projector_ledger_ready 0/);
      assert.match(metrics, /fgentic_projector_ledger_writes_total\{result="error"\} 1/);
      assert.match(
        metrics,
        /fgentic_projector_decisions_total\{route="local",decision="deny",reason="ledger_unavailable"\} 1/,
      );
    });
  });

  test('the database refuses the write (grant withdrawn): refused, and ready again once it accepts', async () => {
    const ledger = createLedger({ pool: t.pool, ...QUIET });
    await ready(ledger);
    await withProjector({ ledger }, async (p) => {
      await t.pool.query(
        'REVOKE EXECUTE ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) FROM knowledge_projector',
      );
      try {
        await assertRefused(p);
        assert.equal((await get(`${p.url}/readyz`)).status, 503);
      } finally {
        await t.pool.query(
          'GRANT EXECUTE ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) TO knowledge_projector',
        );
      }
      await ledger.purge();
      assert.equal((await get(`${p.url}/readyz`)).status, 200);
      assert.equal((await sendCheck(p.url, localRequest())).status, 200);
    });
  });

  test('ledger mode with no ledger configured refuses every mint and is not ready', async () => {
    await withProjector({}, async (p) => {
      await assertRefused(p);
      assert.equal((await get(`${p.url}/readyz`)).status, 503);
    });
  });

  test('a ledger that has not answered yet is not ready', async () => {
    // A pool whose first connection never completes within the test: health stays unknown (false).
    const pending = { connect: () => new Promise(() => {}), end: async () => {} } as unknown as pg.Pool;
    const ledger = createLedger({ pool: pending, ...QUIET });
    await withProjector({ ledger }, async (p) => {
      assert.equal((await get(`${p.url}/readyz`)).status, 503);
    });
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
