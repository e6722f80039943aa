/**
 * The `worker` confirmation of the capability ledger (projector/ledger-worker.ts) against a real
 * database (PGlite through `pg`, reached by the writer thread over TCP): minted values are recorded
 * off the answering thread, and each of the deferred mode's fail-closed rules holds in the worker
 * design — the writer thread ends, the database hangs (a TCP relay that stops forwarding, the way a
 * hung server looks to `pg` before any statement timeout), the queue fills, the grant is withdrawn.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { PROJECTOR_ROLE } from '../retrieval/db/roles.ts';
import { CHECK_SQL, capabilityDigest } from '../retrieval/ledger.ts';
import { waitFor } from '../testkit/common/index.ts';
import { countHeader, sendCheck } from '../testkit/projector/client.ts';
import { config, localRequest, NOW } from '../testkit/projector/fixtures.ts';
import { startTestDatabase, type TestDatabase } from '../testkit/retrieval.ts';
import { type RunningProjector, startProjector } from './index.ts';
import { LedgerUnavailableError } from './ledger.ts';
import { createWorkerLedger, type WorkerLedger, type WorkerLedgerOptions } from './ledger-worker.ts';

const AGENT = 'kagent/knowledge-agent';
const QUIET = { purgeIntervalMs: 3_600_000, retryIntervalMs: 3_600_000 };

let t: TestDatabase;
before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

/** A TCP relay to the database that can stop forwarding (bytes wait, nothing fails). */
interface Relay {
  readonly url: string;
  hold(): void;
  release(): void;
  close(): Promise<void>;
}

async function startRelay(target: string): Promise<Relay> {
  const u = new URL(target);
  let held = false;
  const parked: (() => void)[] = [];
  const sockets = new Set<Socket>();
  const pipe = (from: Socket, to: Socket) =>
    from.on('data', (chunk) => {
      if (!held) to.write(chunk);
      else parked.push(() => to.write(chunk));
    });
  const server: Server = createServer((client) => {
    const upstream = connect(Number(u.port), u.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    pipe(client, upstream);
    pipe(upstream, client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    hold: () => {
      held = true;
    },
    release: () => {
      held = false;
      for (const f of parked.splice(0)) f();
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

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

const value = (i: number) => Buffer.from(`worker-test-${i}-${process.pid}-${Math.random()}`).toString('base64url');

async function recorded(v: string): Promise<boolean> {
  const r = await t.retrieval.query(CHECK_SQL, [capabilityDigest(v), AGENT, NOW]);
  return r.rows[0].ok === true;
}

function create(url: string, o: Omit<WorkerLedgerOptions, 'database'> = {}): WorkerLedger {
  return createWorkerLedger({ database: { connectionString: url, max: 2 }, ...QUIET, ...o });
}

const ready = (ledger: WorkerLedger) =>
  waitFor('the ledger to be reachable', () => ledger.healthy(), { timeoutMs: 30_000, intervalMs: 20 });
const down = (ledger: WorkerLedger, what: string) =>
  waitFor(what, () => !ledger.healthy(), { timeoutMs: 30_000, intervalMs: 5 });

async function withProjector(ledger: WorkerLedger, body: (p: RunningProjector) => Promise<void>) {
  const p = await startProjector({
    config: config((c) => (c['capability'] = 'ledger')),
    now: () => NOW,
    ledger,
  });
  try {
    await body(p);
  } finally {
    await p.close();
  }
}

async function assertRefused(p: RunningProjector): Promise<void> {
  const r = await sendCheck(p.url, localRequest());
  assert.equal(r.status, 403);
  assert.equal(countHeader(r, 'x-fgentic-identity'), 0);
  assert.equal(r.body, '{"error":"denied","reason":"ledger_unavailable"}');
}

describe('ledger mode (worker): the writer thread records what the projector answered', () => {
  test('a local-route allow is recorded, with readiness and metrics from the shared words', async () => {
    const ledger = create(t.db.urlAs(PROJECTOR_ROLE));
    await ready(ledger);
    await withProjector(ledger, async (p) => {
      const r = await sendCheck(p.url, localRequest());
      assert.equal(r.status, 200);
      await ledger.flush();
      assert.equal(await recorded(String(r.headers['x-fgentic-identity'])), true);
      const metrics = (await get(`${p.url}/metrics`)).body;
      assert.match(metrics, /fgentic_projector_ledger_writes_total\{result="ok"\} 1/);
      assert.match(metrics, /fgentic_projector_ledger_ready 1/);
      assert.equal((await get(`${p.url}/readyz`)).status, 200);
    });
    await ledger.close();
    assert.equal(ledger.thread(), undefined);
  });

  test('values admitted in one turn are all recorded; a malformed one is refused without a fault', async () => {
    const ledger = create(t.db.urlAs(PROJECTOR_ROLE));
    await ready(ledger);
    const values = Array.from({ length: 50 }, (_, i) => value(i));
    await Promise.all(values.map((v) => ledger.admit(v, AGENT, NOW + 600)));
    await assert.rejects(ledger.admit(value(99), 'not an agent key', NOW + 600), RangeError);
    await assert.rejects(ledger.admit(value(98), AGENT, 1.5), RangeError);
    await ledger.flush();
    for (const v of values) assert.equal(await recorded(v), true);
    assert.equal(ledger.healthy(), true);
    await ledger.close();
  });

  test('the ring wraps: records of several agents, many times its size, each recorded with its own agent', async () => {
    const ledger = create(t.db.urlAs(PROJECTOR_ROLE), { maxQueue: 8 });
    await ready(ledger);
    const agents = ['kagent/knowledge-agent', 'kagent/private-agent', 'team-b/helper'];
    const written: { v: string; agent: string }[] = [];
    for (let i = 0; i < 40; i++) {
      const v = value(1000 + i);
      const agent = agents[i % agents.length]!;
      // At most 8 unsettled: wait for the writer whenever the ring is full.
      await waitFor('room in the ring', () =>
        ledger.admit(v, agent, NOW + 600).then(
          () => true,
          (e) => {
            if (!(e instanceof LedgerUnavailableError)) throw e;
            return false;
          },
        ),
      );
      written.push({ v, agent });
    }
    await ledger.flush();
    for (const { v, agent } of written) {
      const r = await t.retrieval.query(CHECK_SQL, [capabilityDigest(v), agent, NOW]);
      assert.equal(r.rows[0].ok, true, agent);
      // Bound to its own agent only.
      const other = agents.find((a) => a !== agent)!;
      assert.equal((await t.retrieval.query(CHECK_SQL, [capabilityDigest(v), other, NOW])).rows[0].ok, false);
    }
    assert.equal(ledger.healthy(), true);
    await ledger.close();
  });
});

describe('ledger mode (worker): fail closed at mint', () => {
  test('the writer thread ends: refused at once, its records count as failed, a new writer restores minting', async () => {
    const relay = await startRelay(t.db.urlAs(PROJECTOR_ROLE));
    const ledger = create(relay.url, { respawnMs: 50 });
    const errors: number[] = [];
    ledger.onWrite((result, n) => {
      if (result === 'error') errors.push(n);
    });
    await ready(ledger);
    await withProjector(ledger, async (p) => {
      // One record held in the writer (the database does not answer) when the thread ends.
      relay.hold();
      assert.equal((await sendCheck(p.url, localRequest())).status, 200);
      const first = ledger.thread();
      await first?.terminate();
      assert.equal(ledger.healthy(), false);
      await assertRefused(p);
      assert.equal((await get(`${p.url}/readyz`)).status, 503);
      assert.deepEqual(errors, [1]);
      relay.release();
      // The replacement is a new thread that must pass its own probe first.
      await waitFor('a new writer', () => ledger.thread() !== undefined && ledger.thread() !== first);
      await ready(ledger);
      const r = await sendCheck(p.url, localRequest());
      assert.equal(r.status, 200);
      await ledger.flush();
      assert.equal(await recorded(String(r.headers['x-fgentic-identity'])), true);
    });
    await ledger.close();
    await relay.close();
  });

  test('a hung database: the record deadline stops minting, a late success does not restore it, a probe does', async () => {
    const relay = await startRelay(t.db.urlAs(PROJECTOR_ROLE));
    const ledger = create(relay.url, { recordDeadlineMs: 50 });
    await ready(ledger);
    await withProjector(ledger, async (p) => {
      relay.hold();
      const r = await sendCheck(p.url, localRequest());
      assert.equal(r.status, 200);
      await down(ledger, 'the overdue record to stop minting');
      await assertRefused(p);
      assert.equal((await get(`${p.url}/readyz`)).status, 503);
      assert.match((await get(`${p.url}/metrics`)).body, /fgentic_projector_ledger_ready 0/);
      relay.release();
      await ledger.flush();
      // Recorded late: the value reads, but minting waits for the probe.
      assert.equal(await recorded(String(r.headers['x-fgentic-identity'])), true);
      assert.equal(ledger.healthy(), false);
      await ledger.purge();
      assert.equal(ledger.healthy(), true);
      assert.equal((await sendCheck(p.url, localRequest())).status, 200);
    });
    await ledger.close();
    await relay.close();
  });

  test('a writer that does not take its records in time: the answering thread stops minting on its own', async () => {
    // The writer lingers past the deadline, so no batch (and no watchdog of its own) is running:
    // only the age of the record in the ring can tell, and the answering thread judges it.
    const ledger = create(t.db.urlAs(PROJECTOR_ROLE), { recordDeadlineMs: 50, lingerMs: 3_600_000 });
    await ready(ledger);
    await withProjector(ledger, async (p) => {
      const r = await sendCheck(p.url, localRequest());
      assert.equal(r.status, 200);
      await down(ledger, 'the record older than the deadline to stop minting');
      await assertRefused(p);
      await ledger.flush();
      assert.equal(await recorded(String(r.headers['x-fgentic-identity'])), true);
      assert.equal(ledger.healthy(), false, 'a late record does not vouch for the writer');
      await ledger.purge();
      assert.equal(ledger.healthy(), true);
    });
    await ledger.close();
  });

  test('a full queue refuses until the writer settles what it holds', async () => {
    const relay = await startRelay(t.db.urlAs(PROJECTOR_ROLE));
    const ledger = create(relay.url, { maxQueue: 3, recordDeadlineMs: 3_600_000 });
    await ready(ledger);
    relay.hold();
    const values = Array.from({ length: 3 }, (_, i) => value(i));
    for (const v of values) await ledger.admit(v, AGENT, NOW + 600);
    await assert.rejects(ledger.admit(value(3), AGENT, NOW + 600), LedgerUnavailableError);
    assert.equal(ledger.healthy(), true, 'a full queue is back-pressure, not a ledger fault');
    relay.release();
    await ledger.flush();
    for (const v of values) assert.equal(await recorded(v), true);
    const later = value(4);
    await ledger.admit(later, AGENT, NOW + 600);
    await ledger.flush();
    assert.equal(await recorded(later), true);
    await ledger.close();
    await relay.close();
  });

  test('the grant is withdrawn: the failed batch stops minting; the probe restores it only once granted again', async () => {
    const ledger = create(t.db.urlAs(PROJECTOR_ROLE));
    await ready(ledger);
    await withProjector(ledger, async (p) => {
      await t.pool.query(
        'REVOKE EXECUTE ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) FROM knowledge_projector',
      );
      try {
        const r = await sendCheck(p.url, localRequest());
        assert.equal(r.status, 200);
        await ledger.flush();
        assert.equal(await recorded(String(r.headers['x-fgentic-identity'])), false);
        assert.equal(ledger.healthy(), false);
        await assertRefused(p);
        assert.match((await get(`${p.url}/metrics`)).body, /fgentic_projector_ledger_writes_total\{result="error"\} 1/);
        await assert.rejects(ledger.purge(), LedgerUnavailableError);
        await assertRefused(p);
      } finally {
        await t.pool.query(
          'GRANT EXECUTE ON FUNCTION fgentic_ledger.record_v1(bytea, text, bigint) TO knowledge_projector',
        );
      }
      await ledger.purge();
      assert.equal((await sendCheck(p.url, localRequest())).status, 200);
    });
    await ledger.close();
  });

  test('a database nobody answers at: never ready, every mint refused', async () => {
    const ledger = create('postgres://127.0.0.1:1/knowledge');
    await withProjector(ledger, async (p) => {
      await assertRefused(p);
      assert.equal((await get(`${p.url}/readyz`)).status, 503);
      await assert.rejects(ledger.purge(), LedgerUnavailableError);
      assert.equal(ledger.healthy(), false);
    });
    await ledger.close();
  });
});
