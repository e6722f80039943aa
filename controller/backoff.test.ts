/**
 * The retry schedule (backoff.ts): capped exponential with jitter, as property tests, plus the
 * per-object bookkeeping the reconciler uses.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { type BackoffPolicy, backoffDelay, ITEM_BACKOFF, ItemBackoff, WATCH_BACKOFF } from './backoff.ts';

const policy = fc.record({
  baseMs: fc.integer({ min: 1, max: 10_000 }),
  capMs: fc.integer({ min: 1, max: 10_000_000 }),
  jitter: fc.double({ min: 0, max: 1, noNaN: true }),
});
const unit = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });

describe('backoff schedule', () => {
  it('defaults: per object 5 ms doubling to 1 s (controller-runtime schedule, capped for recovery); watches 800 ms to 30 s (client-go reflector)', () => {
    const none: BackoffPolicy = { ...ITEM_BACKOFF, jitter: 0 };
    assert.deepEqual(
      [1, 2, 3, 4, 5].map((n) => backoffDelay(n, none)),
      [5, 10, 20, 40, 80],
    );
    assert.equal(backoffDelay(100, none), 1_000);
    assert.equal(backoffDelay(1, { ...WATCH_BACKOFF, jitter: 0 }), 800);
    assert.equal(backoffDelay(20, { ...WATCH_BACKOFF, jitter: 0 }), 30_000);
  });

  it('every delay lies within [ceiling × (1 − jitter), ceiling], ceiling = min(base·2^(n−1), cap)', () => {
    fc.assert(
      fc.property(policy, fc.integer({ min: 1, max: 2000 }), unit, (p, n, r) => {
        const d = backoffDelay(n, p, () => r);
        const ceiling = Math.min(p.baseMs * 2 ** Math.min(n - 1, 60), p.capMs);
        assert.ok(Number.isFinite(d));
        assert.ok(d <= ceiling + 1e-9, `${d} > ${ceiling}`);
        assert.ok(d >= ceiling * (1 - p.jitter) - 1e-9, `${d} < ${ceiling * (1 - p.jitter)}`);
        assert.ok(d <= p.capMs + 1e-9);
      }),
    );
  });

  it('without jitter the schedule never decreases and reaches the cap', () => {
    fc.assert(
      fc.property(policy, fc.integer({ min: 1, max: 200 }), (p, n) => {
        const q = { ...p, jitter: 0 };
        assert.ok(backoffDelay(n + 1, q) >= backoffDelay(n, q));
        assert.equal(backoffDelay(200, q), Math.min(p.capMs, p.baseMs * 2 ** 60));
      }),
    );
  });

  it('jitter spreads retries: two random draws give different delays unless jitter is 0', () => {
    assert.notEqual(
      backoffDelay(5, ITEM_BACKOFF, () => 0),
      backoffDelay(5, ITEM_BACKOFF, () => 0.9),
    );
    assert.equal(
      backoffDelay(5, { ...ITEM_BACKOFF, jitter: 0 }, () => 0),
      backoffDelay(5, { ...ITEM_BACKOFF, jitter: 0 }, () => 0.9),
    );
  });

  it('no failure, no delay; nonsense failure counts are treated as none', () => {
    for (const n of [0, -1, Number.NaN, Number.NEGATIVE_INFINITY]) assert.equal(backoffDelay(n, ITEM_BACKOFF), 0);
  });
});

describe('per-object backoff', () => {
  it('counts failures per key, waits until due, and forgets on success', () => {
    const b = new ItemBackoff({ baseMs: 10, capMs: 1000, jitter: 0 });
    assert.equal(b.fail('a', 0), 10);
    assert.equal(b.fail('a', 10), 30); // second failure: 20 ms later
    assert.equal(b.fail('b', 0), 10);
    assert.equal(b.failuresOf('a'), 2);
    assert.equal(b.waiting('a', 29), true);
    assert.equal(b.waiting('a', 30), false);
    assert.equal(b.nextDue(), 10);
    b.forget('a');
    assert.equal(b.failuresOf('a'), 0);
    assert.equal(b.waiting('a', 0), false);
    assert.deepEqual(b.keys(), ['b']);
    b.forget('b');
    assert.equal(b.nextDue(), undefined);
    assert.equal(b.size, 0);
  });
});
