/**
 * The projector's registry read through the Kubernetes API (list + watch), against the API-server
 * double: revocations reach the decisions within the bound, and the staleness rule holds when the
 * watch breaks or the shards disagree with the manifest.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { render } from '../controller/render/index.ts';
import type { K8sObject, Resources } from '../controller/types.ts';
import { staysTrue, waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { serviceAccountUser } from '../testkit/controller/rbac.ts';
import type { ConfigState } from './config-store.ts';
import { type KubeConfigStore, kubeConfigStore } from './kube-store.ts';

/** The projector's ServiceAccount: the double enforces the shipped RBAC (deploy/base/rbac-projector.yaml). */
const PROJECTOR = serviceAccountUser('knowledge', 'fgentic-projector');

const NS = 'knowledge';

function bigRegistry(rooms: number): Resources {
  const input = examples();
  for (let i = 0; i < rooms; i++)
    input.rooms.push({
      apiVersion: 'retrieval.fgentic.dev/v1alpha1',
      kind: 'RetrievalRoom',
      metadata: { name: `r${i}` },
      spec: {
        roomId: `!r${i}abcdefghijklmnopq:org-a.example`,
        allowedClassifications: ['approved_non_public', 'public'],
        agreementRef: 'adr-0015/org-a-engineering-2026-01',
      },
    });
  return input;
}

function configMaps(input: Resources): K8sObject[] {
  const r = render(input);
  assert.deepEqual(r.conflicts, []);
  return r.objects.filter((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('fgentic-projector-'));
}

const until = <T>(probe: () => T | undefined, limitMs = 15_000): Promise<T> =>
  waitFor('the store state', probe, { timeoutMs: limitMs, intervalMs: 10 });

const classesOf = (s: ConfigState, room: string) =>
  s.ready ? s.config.rooms.get(room)?.allowedClassifications.join(',') : undefined;

describe('registry through the Kubernetes API', () => {
  let api: ApiServerDouble;
  let store: KubeConfigStore;
  const input = bigRegistry(20_000);
  const ROOM = '!r777abcdefghijklmnopq:org-a.example';

  before(async () => {
    api = await new ApiServerDouble().start();
    for (const cm of configMaps(input)) api.put(cm);
    store = kubeConfigStore({
      kubeConfig: api.kubeConfig(PROJECTOR),
      namespace: NS,
      maxStalenessMs: 60_000,
      maxHeartbeatAgeMs: 0,
    });
    await store.synced;
  });
  after(async () => {
    store?.close();
    await api?.stop();
  });

  test('the sharded registry assembles from the API: every room is known', async () => {
    const s = await until(() => (store.current().ready ? store.current() : undefined));
    assert.ok(s.ready && s.config.rooms.size === input.rooms.length);
    assert.equal(classesOf(s, ROOM), 'approved_non_public,public');
  });

  test('a room downgrade reaches the store through the watch (latency recorded)', async () => {
    const room = input.rooms.find((r) => r.metadata.name === 'r777')!;
    room.spec = { roomId: room.spec.roomId, allowedClassifications: ['public'] };
    // The controller writes the changed shard, then the manifest; the double emits each as an event.
    const next = configMaps(input);
    const started = Date.now();
    for (const cm of next.filter((o) => o.metadata.name !== 'fgentic-projector-config')) api.put(cm);
    api.put(next.find((o) => o.metadata.name === 'fgentic-projector-config')!);
    await until(() => (classesOf(store.current(), ROOM) === 'public' ? true : undefined));
    const ms = Date.now() - started;
    process.stderr.write(`# revocation through the watch: ${ms} ms\n`);
    assert.ok(store.current().ready);
  });

  test('a deleted room disappears from the registry', async () => {
    input.rooms = input.rooms.filter((r) => r.metadata.name !== 'r778');
    const next = configMaps(input);
    for (const cm of next) api.put(cm);
    await until(() => {
      const s = store.current();
      return s.ready && !s.config.rooms.has('!r778abcdefghijklmnopq:org-a.example') ? true : undefined;
    });
  });
});

describe('staleness rule', () => {
  test('a broken watch keeps the last good registry for exactly the bound (1,500 ms served, 1,501 ms denied)', async () => {
    const api = await new ApiServerDouble().start();
    for (const cm of configMaps(examples())) api.put(cm);
    // The store's clock is held: only the test moves it, so the bound is checked to the millisecond.
    let clock = 1_000_000;
    const errors: string[] = [];
    const store = kubeConfigStore({
      maxHeartbeatAgeMs: 0,
      kubeConfig: api.kubeConfig(PROJECTOR),
      namespace: NS,
      maxStalenessMs: 1_500,
      now: () => clock,
      onWatchError: (kind) => errors.push(kind),
    });
    try {
      await store.synced;
      await until(() => (store.current().ready ? true : undefined));
      await api.stop();
      // A failed re-list shows the watch has ended; the last contact is then fixed at `clock`.
      await until(() => (errors.includes('list') ? true : undefined));
      assert.ok(store.current().ready);
      clock += 1_500;
      assert.ok(store.current().ready, 'denied within the bound');
      assert.equal(store.stalenessSeconds(), 1.5);
      clock += 1;
      const s = store.current();
      assert.ok(!s.ready && /stale/.test(s.error), 'still served past the bound');
    } finally {
      store.close();
    }
  });

  test('shards inconsistent with the manifest: last good registry, bounded, then deny', async () => {
    const api = await new ApiServerDouble().start();
    const input = bigRegistry(20_000);
    for (const cm of configMaps(input)) api.put(cm);
    const store = kubeConfigStore({
      maxHeartbeatAgeMs: 0,
      kubeConfig: api.kubeConfig(PROJECTOR),
      namespace: NS,
      maxStalenessMs: 1_500,
    });
    try {
      await store.synced;
      await until(() => (store.current().ready ? true : undefined));
      const room = input.rooms.find((r) => r.metadata.name === 'r5')!;
      room.spec = { roomId: room.spec.roomId, allowedClassifications: ['public'] };
      // Only the manifest arrives; its shard never does.
      api.put(configMaps(input).find((o) => o.metadata.name === 'fgentic-projector-config')!);
      await staysTrue('the last good registry serves while in transit', () => store.current().ready);
      const s = await until(() => (store.current().ready ? undefined : store.current()));
      assert.ok(!s.ready && /inconsistent/.test(s.error));
    } finally {
      store.close();
      await api.stop();
    }
  });

  test('a deleted base configuration denies at once', async () => {
    const api = await new ApiServerDouble().start();
    for (const cm of configMaps(examples())) api.put(cm);
    const store = kubeConfigStore({
      maxHeartbeatAgeMs: 0,
      kubeConfig: api.kubeConfig(PROJECTOR),
      namespace: NS,
      maxStalenessMs: 60_000,
    });
    try {
      await store.synced;
      await until(() => (store.current().ready ? true : undefined));
      api.remove('v1', 'ConfigMap', NS, 'fgentic-projector-config');
      const s = await until(() => (store.current().ready ? undefined : store.current()), 5_000);
      assert.ok(!s.ready && /missing/.test(s.error));
    } finally {
      store.close();
      await api.stop();
    }
  });
});
