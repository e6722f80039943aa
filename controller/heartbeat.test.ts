/**
 * Revocation freshness end to end: the leading controller's heartbeat keeps the projector's registry
 * fresh; once the controller stops, the projector (its Kubernetes store and its HTTP check) denies
 * every check with `registry_stale` within the bound. API-server double, shipped RBAC for both.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startProjector } from '../projector/index.ts';
import { kubeConfigStore } from '../projector/kube-store.ts';
import { waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { serviceAccountUser } from '../testkit/controller/rbac.ts';
import { sendCheck } from '../testkit/projector/client.ts';
import { localRequest } from '../testkit/projector/fixtures.ts';
import { startController } from './cli.ts';

const BOUND_MS = 1_500;

describe('controller heartbeat → projector staleness', () => {
  const api = new ApiServerDouble();
  before(async () => {
    await api.start();
    const input = examples();
    for (const r of [...input.platforms, ...input.agents, ...input.rooms, ...input.partners]) api.put(r);
  });
  after(() => api.stop());

  it('a stopped controller makes the projector deny with registry_stale within the bound', async () => {
    const ctl = await startController({
      kubeConfig: api.kubeConfig(),
      port: 0,
      leaseNamespace: 'fgentic-system',
      identity: 'heartbeat',
      debounceMs: 20,
      heartbeatPeriodMs: 200,
    });
    const store = kubeConfigStore({
      kubeConfig: api.kubeConfig(serviceAccountUser('knowledge', 'fgentic-projector')),
      namespace: 'knowledge',
      maxHeartbeatAgeMs: BOUND_MS,
    });
    const projector = await startProjector({ store, host: '127.0.0.1', port: 0 });
    const reason = async () => {
      const res = await sendCheck(projector.url, localRequest());
      return res.status === 200 ? 'allowed' : JSON.parse(res.body).reason;
    };
    try {
      await waitFor('the registry served', () => store.current().ready, 20_000);
      // Fresh for longer than the bound while the controller beats.
      await new Promise((r) => setTimeout(r, BOUND_MS + 500));
      assert.ok(store.current().ready, 'fresh while the controller leads');
      assert.notEqual(await reason(), 'registry_stale');
      await ctl.stop();
      const stoppedAt = Date.now();
      await waitFor('denied as stale', async () => (await reason()) === 'registry_stale', 10_000);
      const after = Date.now() - stoppedAt;
      // Within the bound of the last heartbeat (at most one period before the stop), plus the
      // projector's 250 ms tick.
      assert.ok(after <= BOUND_MS + 250 + 500, `denied ${after} ms after the controller stopped`);
      const s = store.current();
      assert.ok(!s.ready && s.reason === 'registry_stale');
      assert.equal((await sendCheck(projector.url, localRequest())).status, 403);
    } finally {
      await ctl.stop();
      await projector.close();
      store.close();
    }
  });
});
