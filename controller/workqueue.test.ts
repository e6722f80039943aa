/**
 * The work queue (workqueue.ts) and the client-side token bucket (kube/rate-limit.ts), on a fake
 * clock: dedup, one worker per key, priorities, per-key backoff that `forget` resets, and a request
 * rate that never exceeds burst + QPS × elapsed, with the most urgent waiter served first and a
 * Retry-After pause honoured.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TokenBucket } from './kube/rate-limit.ts';
import { NORMAL, RESYNC, runWorkers, URGENT, WorkQueue } from './workqueue.ts';

/** A fake clock: timers fire only when `advance` passes them. */
function fakeClock() {
  let t = 0;
  let timers: { at: number; fn: () => void; id: number }[] = [];
  let id = 0;
  return {
    now: () => t,
    setTimeout: (fn: () => void, ms: number) => {
      timers.push({ at: t + ms, fn, id: ++id });
      return id;
    },
    clearTimeout: (h: unknown) => {
      timers = timers.filter((x) => x.id !== h);
    },
    sleep(ms: number) {
      return new Promise<void>((r) => this.setTimeout(r, ms));
    },
    async advance(ms: number) {
      const end = t + ms;
      for (;;) {
        await new Promise((r) => setImmediate(r));
        timers.sort((a, b) => a.at - b.at);
        const next = timers[0];
        if (!next || next.at > end) break;
        timers.shift();
        t = next.at;
        next.fn();
      }
      t = end;
      await new Promise((r) => setImmediate(r));
    },
  };
}

describe('work queue', () => {
  it('a key is queued once, and one worker at a time processes it; an add meanwhile runs it again after', async () => {
    const q = new WorkQueue({ timers: fakeClock() });
    q.add('a');
    q.add('a');
    q.add('b');
    assert.equal(q.length, 2);
    const k = await q.get();
    assert.equal(k, 'a');
    q.add('a'); // while processing: not handed to another worker
    assert.equal(await q.get(), 'b');
    assert.equal(q.length, 0);
    q.done('a');
    assert.equal(await q.get(), 'a');
  });

  it('priorities: urgent before normal before resync, FIFO within each; a re-add can raise a priority (to the end of its new lane)', async () => {
    const q = new WorkQueue({ timers: fakeClock() });
    for (let i = 0; i < 5; i++) q.add(`resync-${i}`, RESYNC);
    q.add('event', NORMAL);
    q.add('revocation', URGENT);
    q.add('resync-3', URGENT);
    const order: string[] = [];
    for (let i = 0; i < 7; i++) order.push((await q.get()) as string);
    assert.deepEqual(order, ['revocation', 'resync-3', 'event', 'resync-0', 'resync-1', 'resync-2', 'resync-4']);
  });

  it('a failing key backs off on its own (5 ms doubling, capped at 1 s); forget resets it and cancels the wait', async () => {
    const clock = fakeClock();
    const q = new WorkQueue({ timers: clock, random: () => 0 });
    const delays = Array.from({ length: 12 }, () => {
      const d = q.addRateLimited('x');
      q.forget('other');
      return d;
    });
    assert.deepEqual(delays.slice(0, 4), [5, 10, 20, 40]);
    assert.equal(Math.max(...delays), 1000);
    assert.equal(q.length, 0);
    await clock.advance(5);
    assert.equal(q.length, 1, 'back after its delay');
    await q.get();
    q.done('x');
    q.addRateLimited('x');
    assert.equal(q.retrying, 1);
    // A new desired state: forget and add now, not after the backoff.
    q.forget('x');
    assert.equal(q.retrying, 0);
    assert.equal(q.numRequeues('x'), 0);
    q.add('x');
    assert.equal(q.length, 1);
  });

  it('runWorkers: n workers, never the same key twice at once', async () => {
    const q = new WorkQueue({ timers: fakeClock() });
    const active = new Set<string>();
    let overlap = false;
    let handled = 0;
    const run = runWorkers(q, 4, async (key) => {
      if (active.has(key)) overlap = true;
      active.add(key);
      await new Promise((r) => setImmediate(r));
      if (handled++ < 50) q.add(key); // re-added while processing
      active.delete(key);
    });
    for (const k of ['a', 'b', 'c']) q.add(k);
    while (handled < 50) await new Promise((r) => setImmediate(r));
    q.shutDown();
    await run;
    assert.equal(overlap, false);
  });
});

describe('token bucket', () => {
  it('never lets more than burst + qps × elapsed through; the most urgent waiter goes first', async () => {
    const clock = fakeClock();
    const b = new TokenBucket(20, 30, clock);
    const through: { at: number; who: string }[] = [];
    for (let i = 0; i < 200; i++) void b.acquire(1).then(() => through.push({ at: clock.now(), who: `bulk-${i}` }));
    await clock.advance(0);
    assert.equal(through.length, 30, 'the burst at once');
    void b.acquire(0).then(() => through.push({ at: clock.now(), who: 'revocation' }));
    await clock.advance(60);
    // The next token after the burst goes to the revocation, though 170 bulk requests were waiting.
    assert.equal(through[30]?.who, 'revocation');
    await clock.advance(10_000);
    assert.equal(through.length, 201);
    for (const x of through) {
      const allowed = 30 + (x.at * 20) / 1000;
      const sent = through.filter((y) => y.at <= x.at).length;
      assert.ok(sent <= allowed + 1e-9, `${sent} requests by ${x.at} ms, allowed ${allowed}`);
    }
  });

  it('a Retry-After pause holds every request until it ends', async () => {
    const clock = fakeClock();
    const b = new TokenBucket(20, 30, clock);
    b.pauseUntil(1000);
    let done = false;
    void b.acquire(0).then(() => {
      done = true;
    });
    await clock.advance(999);
    assert.equal(done, false);
    await clock.advance(1);
    assert.equal(done, true);
  });
});
