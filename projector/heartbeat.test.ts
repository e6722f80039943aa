/**
 * The controller heartbeat rule (projector/heartbeat.ts, projector/kube-store.ts): measured on the
 * projector's clock, fresh only while it advances; a heartbeat older than the bound denies with
 * `registry_stale`, and an advancing one serves the registry again. Fake clock, API-server double.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { render } from '../controller/render/index.ts';
import { waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { serviceAccountUser } from '../testkit/controller/rbac.ts';
import { heartbeatConfigMap } from '../testkit/projector/fixtures.ts';
import { HeartbeatClock, heartbeatText, parseHeartbeat } from './heartbeat.ts';
import { kubeConfigStore } from './kube-store.ts';

const text = (timeMs: number) => heartbeatText({ holder: 'c', timeMs, periodSeconds: 5 });

describe('heartbeat clock', () => {
  it('counts from when the projector saw it advance, not from the time written in it', () => {
    const c = new HeartbeatClock();
    assert.equal(c.ageMs(0), Infinity);
    // First sight: the written time, never later than now (a dead controller's old heartbeat is old).
    c.observe(text(1_000), 61_000);
    assert.equal(c.ageMs(61_000), 60_000);
    // An advance is fresh on the projector's clock even when the controller's clock is far behind.
    c.observe(text(2_000), 62_000);
    assert.equal(c.ageMs(62_500), 500);
    // The same text again is no advance.
    c.observe(text(2_000), 90_000);
    assert.equal(c.ageMs(90_000), 28_000);
    // A written time in the future counts from now.
    const d = new HeartbeatClock();
    d.observe(text(500_000), 10_000);
    assert.equal(d.ageMs(10_000), 0);
    // Absent or unreadable: no heartbeat.
    c.observe(undefined, 91_000);
    assert.equal(c.ageMs(91_000), Infinity);
    c.observe('{"version":1}', 92_000);
    assert.equal(c.ageMs(92_000), Infinity);
    assert.equal(parseHeartbeat(text(5))?.timeMs, 5);
  });
});

describe('heartbeat in the Kubernetes store', () => {
  let api: ApiServerDouble;
  before(async () => {
    api = await new ApiServerDouble().start();
    for (const o of render(examples()).objects)
      if (o.kind === 'ConfigMap' && o.metadata.name.startsWith('fgentic-projector-')) api.put(o);
  });
  after(() => api.stop());

  it('a heartbeat older than the bound denies with registry_stale; an advancing one serves again', async () => {
    let clock = Date.now();
    api.put(heartbeatConfigMap('knowledge', clock));
    const store = kubeConfigStore({
      kubeConfig: api.kubeConfig(serviceAccountUser('knowledge', 'fgentic-projector')),
      namespace: 'knowledge',
      maxHeartbeatAgeMs: 10_000,
      now: () => clock,
    });
    try {
      await store.synced;
      await waitFor('ready', async () => store.current().ready);
      clock += 9_000;
      assert.ok(store.current().ready, 'within the bound');
      clock += 2_000;
      const s = store.current();
      assert.ok(!s.ready && s.reason === 'registry_stale', JSON.stringify(s));
      api.put(heartbeatConfigMap('knowledge', clock));
      await waitFor('served again once the heartbeat advances', async () => store.current().ready);
      // With no heartbeat at all, the registry is stale from the start.
      api.remove('v1', 'ConfigMap', 'knowledge', 'fgentic-controller-heartbeat');
      await waitFor('denied without a heartbeat', async () => {
        const x = store.current();
        return !x.ready && x.reason === 'registry_stale';
      });
    } finally {
      store.close();
    }
  });
});
