/**
 * Fenced leadership (leader.ts), with client-go's timing: one failed renewal does not end a term; a
 * term that cannot be renewed within renewDeadline ends, and from that moment every write is refused
 * by the fence (even before the renew loop notices); a lost term is reported once; a stopped leader
 * releases the Lease. Then, against the API-server double: no write after a lost term, and the
 * controller reports the loss (so `serve controller` exits).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { startController } from './cli.ts';
import { LeaderElection, LeaderTerm } from './leader.ts';

describe('leader election timing', () => {
  it('the fence refuses a write once the renewal deadline passes, before anyone notices', () => {
    let now = 1_000;
    const t = new LeaderTerm(1, now, 10_000, () => now);
    t.check();
    now += 9_999;
    t.check();
    t.renewed(5_000);
    now = 14_999;
    t.check();
    now = 15_000;
    assert.throws(() => t.check(), /term 1 is over/);
    const u = new LeaderTerm(2, 0, 10_000, () => 0);
    u.end();
    assert.throws(() => u.check(), /write refused/);
  });

  it('one failed renewal keeps the term; renewals failing past renewDeadline end it once', async () => {
    let now = 0;
    let answer: 'ok' | 'fail' = 'ok';
    const events: string[] = [];
    const e = new LeaderElection(
      {
        tryAcquireOrRenew: async () => {
          if (answer === 'fail') throw new Error('timeout');
          return true;
        },
        release: async () => undefined,
      },
      {
        leaseDurationMs: 1_500,
        renewDeadlineMs: 1_000,
        retryPeriodMs: 200,
        now: () => now,
        onStarted: (t) => events.push(`started ${t.id}`),
        onStopped: (t, reason) => events.push(`stopped ${t.id}: ${reason}`),
      },
    );
    // Drive the loop with real timers but a fake clock for the deadline.
    e.start();
    await waitFor('leader', () => events.includes('started 1'));
    answer = 'fail';
    now += 500; // one failed renewal within the deadline
    await new Promise((r) => setTimeout(r, 250));
    assert.deepEqual(events, ['started 1']);
    assert.ok(e.current(), 'still leading after one failed renewal');
    now += 600; // past the deadline
    await waitFor('lost', () => events.length === 2, 3000);
    assert.equal(events[1], 'stopped 1: renew deadline passed');
    assert.equal(e.current(), undefined);
    await e.stop(false);
  });

  it('client-go requires leaseDuration > renewDeadline > 1.2 × retryPeriod', () => {
    const el = { tryAcquireOrRenew: async () => true, release: async () => undefined };
    const cb = { onStarted: () => undefined, onStopped: () => undefined };
    assert.throws(() => new LeaderElection(el, { ...cb, leaseDurationMs: 10_000, renewDeadlineMs: 10_000 }));
    const ok = new LeaderElection(el, cb);
    assert.deepEqual(ok.timings, { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 });
  });
});

describe('a controller that loses its Lease', () => {
  it('writes nothing after the term is lost, reports the loss, and a stopped leader releases the Lease', async () => {
    const api = await new ApiServerDouble().start();
    const input = examples();
    for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners]) api.put(r);
    const lost: { at?: number } = {};
    const ctl = await startController({
      kubeConfig: api.kubeConfig(),
      port: 0,
      leaseNamespace: 'fgentic-system',
      identity: 'fenced',
      leaseDurationSeconds: 6,
      renewIntervalMs: 300,
      renewDeadlineMs: 3_000,
      debounceMs: 20,
      heartbeatPeriodMs: 100,
      onLostLeadership: () => {
        lost.at = Date.now();
      },
    });
    try {
      await waitFor('leader with the registry written', () =>
        api.get('v1', 'ConfigMap', 'knowledge', 'fgentic-controller-heartbeat'),
      );
      assert.equal(lost.at, undefined, 'the term was not lost before the fault');
      // The Lease API fails from now on; writes to everything else still succeed.
      const writesAfter: { at: number; what: string }[] = [];
      api.fault = (r) => {
        if (r.path.includes('/leases')) return { status: 500, reason: 'InternalError' };
        if (r.method !== 'GET') writesAfter.push({ at: Date.now(), what: `${r.method} ${r.path}` });
        return undefined;
      };
      const failedAt = Date.now();
      // Keep giving it work: room changes, each of which would be written at once.
      const r = api.get('retrieval.fgentic.dev/v1alpha1', 'RetrievalRoom', undefined, 'org-a-general') as any;
      const churn = setInterval(() => {
        api.put({ ...r, spec: { ...r.spec, description: `c${Date.now()}` } });
      }, 50);
      await waitFor('the loss reported', () => lost.at !== undefined, 10_000);
      clearInterval(churn);
      assert.equal(ctl.isLeader(), false);
      // The term ended at most renewDeadline after its last renewal (which was before the fault).
      assert.ok(Number(lost.at) - failedAt <= 3_000 + 1_000, `lost ${Number(lost.at) - failedAt} ms after`);
      await new Promise((res) => setTimeout(res, 500));
      // Arrival times: a write the fence let through just before the deadline may arrive a little later.
      const late = writesAfter.filter((w) => w.at > failedAt + 3_000 + 250 && !w.what.includes('/leases'));
      assert.deepEqual(late, [], 'no write once the renewal deadline has passed');
    } finally {
      api.fault = undefined;
      await ctl.stop();
      await api.stop();
    }
  });

  it('ReleaseOnCancel: a leader that stops hands the Lease back', async () => {
    const api = await new ApiServerDouble().start();
    const ctl = await startController({
      kubeConfig: api.kubeConfig(),
      port: 0,
      leaseNamespace: 'fgentic-system',
      identity: 'releasing',
      renewIntervalMs: 200,
      leaseDurationSeconds: 15,
    });
    await waitFor('leader', () => ctl.isLeader());
    await ctl.stop();
    const lease = api.get('coordination.k8s.io/v1', 'Lease', 'fgentic-system', 'fgentic-retrieval-controller');
    assert.equal(lease?.['spec'].holderIdentity, '');
    assert.equal(lease?.['spec'].leaseDurationSeconds, 1);
    await api.stop();
  });
});
