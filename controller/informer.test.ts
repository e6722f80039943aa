/**
 * The controller's list+watch caches (kube/informer.ts) against the API-server double, as the
 * controller's ServiceAccount: one list, then watch; a watch the server ends resumes from the last
 * resourceVersion without listing; bookmarks move that version forward; 410 Gone re-lists (and finds
 * what was deleted meanwhile); a refused watch is retried on the capped exponential schedule.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { waitFor as waitUntil } from '../testkit/common/index.ts';
import { ADMIN_USER, ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { room } from '../testkit/controller/fixtures.ts';
import { RbacAuthorizer, serviceAccountUser } from '../testkit/controller/rbac.ts';
import { Informer, type InformerEvent } from './kube/informer.ts';

const RV = 'retrieval.fgentic.dev/v1alpha1';

const waitFor = <T>(what: string, f: () => T | undefined | false, ms = 8000): Promise<T> => waitUntil(what, f, ms);

describe('informer: list once, then watch from the list resourceVersion', () => {
  const api = new ApiServerDouble();
  const events: [InformerEvent, string][] = [];
  let inf: Informer;
  before(async () => {
    await api.start();
    api.put(room('a', '!a:org-a.example'));
    api.put(room('b', '!b:org-a.example'));
    inf = new Informer({
      kubeConfig: api.kubeConfig(),
      apiVersion: RV,
      kind: 'RetrievalRoom',
      plural: 'retrievalrooms',
      onEvent: (type, obj) => events.push([type, obj.metadata.name]),
    });
    inf.start();
    await inf.synced();
  });
  after(async () => {
    inf.stop();
    await api.stop();
  });

  it('fills the cache from one list and follows watch events', async () => {
    assert.deepEqual(
      inf
        .list()
        .map((o) => o.metadata.name)
        .sort(),
      ['a', 'b'],
    );
    assert.equal(inf.get(undefined, 'a')?.kind, 'RetrievalRoom');
    await waitFor('watch open', () => inf.watches === 1 && api.requests.some((r) => r.includes('watch=true')));
    api.put(room('c', '!c:org-a.example'));
    api.put({ ...room('a', '!a:org-a.example'), spec: { roomId: '!a:org-a.example', description: 'x' } });
    api.remove(RV, 'RetrievalRoom', undefined, 'b');
    await waitFor('events', () => inf.size === 2 && inf.get(undefined, 'c') && events.length >= 5);
    assert.equal((inf.get(undefined, 'a')?.['spec'] as { description?: string } | undefined)?.description, 'x');
    assert.deepEqual(events.slice(2), [
      ['ADDED', 'c'],
      ['MODIFIED', 'a'],
      ['DELETED', 'b'],
    ]);
    assert.equal(inf.lists, 1);
  });

  it('a watch the server ends resumes from the last resourceVersion, without listing again', async () => {
    const watches = inf.watches;
    api.endWatches();
    api.put(room('d', '!d:org-a.example')); // while no watch is open: replayed on resume
    await waitFor('resumed', () => inf.get(undefined, 'd'));
    assert.equal(inf.lists, 1);
    assert.ok(inf.watches > watches);
    const resumed = api.requests.filter((r) => r.includes('watch=true')).at(-1) ?? '';
    assert.match(resumed, /resourceVersion=\d+/);
    assert.match(resumed, /allowWatchBookmarks=true/);
  });

  it('bookmarks move the resume point, so a compaction behind it needs no re-list', async () => {
    await waitFor('watch open', () => api.openWatches === 1);
    // Changes to another kind move the store's resourceVersion past everything the informer saw.
    for (let i = 0; i < 5; i++)
      api.put({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `x${i}`, namespace: 'knowledge' } });
    api.bookmark();
    const head = api.resourceVersion;
    await waitFor('bookmark seen', () => inf.lastSyncResourceVersion === String(head));
    api.compact(head);
    api.endWatches();
    api.put(room('e', '!e:org-a.example'));
    await waitFor('resumed after the bookmark', () => inf.get(undefined, 'e'));
    assert.equal(inf.lists, 1, 'no 410: the watch resumed from the bookmark');
  });

  it('410 Gone (the version was compacted away) re-lists and drops what was deleted meanwhile', async () => {
    const before = events.length;
    api.endWatches();
    api.remove(RV, 'RetrievalRoom', undefined, 'c');
    api.put(room('f', '!f:org-a.example'));
    api.compact(); // everything the informer could resume from is gone
    await waitFor('re-listed', () => inf.lists === 2 && !inf.get(undefined, 'c') && inf.get(undefined, 'f'));
    assert.deepEqual(
      events.slice(before).sort(),
      [
        ['ADDED', 'f'],
        ['DELETED', 'c'],
      ].sort(),
    );
    assert.deepEqual(
      inf
        .list()
        .map((o) => o.metadata.name)
        .sort(),
      ['a', 'd', 'e', 'f'],
    );
    // And it watches again.
    api.put(room('g', '!g:org-a.example'));
    await waitFor('watching after the re-list', () => inf.get(undefined, 'g'));
  });
});

describe('informer: a refused watch backs off', () => {
  it('retries on the capped exponential schedule (jitter drawn from the injected source)', async () => {
    const sa = serviceAccountUser('team', 'reader');
    const rbac = new RbacAuthorizer([
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'list-only' },
        rules: [{ apiGroups: ['retrieval.fgentic.dev'], resources: ['retrievalrooms'], verbs: ['list'] }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'list-only' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'list-only' },
        subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: 'team' }],
      },
    ]);
    const api = await new ApiServerDouble({ rbac }).start();
    const delays: number[] = [];
    const inf = new Informer({
      kubeConfig: api.kubeConfig(sa),
      apiVersion: RV,
      kind: 'RetrievalRoom',
      plural: 'retrievalrooms',
      backoff: { baseMs: 10, capMs: 80, jitter: 0.5 },
      random: () => 0.5,
      onRetry: (what, delay, error) => {
        assert.equal(what, 'watch');
        assert.equal(error, 'HTTP 403');
        delays.push(delay);
      },
    });
    try {
      inf.start();
      await inf.synced();
      await waitFor('five retries', () => delays.length >= 5);
      // ceiling × (1 − 0.5 × 0.5): 10, 20, 40, 80, 80 → 7.5, 15, 30, 60, 60
      assert.deepEqual(delays.slice(0, 5), [7.5, 15, 30, 60, 60]);
      assert.equal(inf.lists, 1);
    } finally {
      inf.stop();
      await api.stop();
    }
  });
});

describe('informer: watches that hang or end at once', () => {
  it('a watch ended at once with 200 backs off (the shared guard); a hung one is ended by its watchdog', async () => {
    const api = await new ApiServerDouble().start();
    const errors: string[] = [];
    const inf = new Informer({
      kubeConfig: api.kubeConfig(ADMIN_USER),
      apiVersion: RV,
      kind: 'RetrievalRoom',
      plural: 'retrievalrooms',
      backoff: { baseMs: 100, capMs: 400, jitter: 0 },
      listTimeoutMs: 200,
      onRetry: (what, _delay, error) => errors.push(`${what} ${error}`),
    });
    try {
      api.fault = (r) => (r.watch ? { endAtOnce: true } : undefined);
      inf.start();
      await inf.synced();
      await new Promise((r) => setTimeout(r, 1_500));
      // 100, 200, 400, 400 ms: about five watches in 1.5 s; without the guard, hundreds.
      assert.ok(inf.watches <= 7, `${inf.watches} watches in 1.5 s`);
      assert.ok(errors.some((e) => e.startsWith('watch')));
      api.fault = (r) => (r.watch ? { hang: true } : undefined);
      errors.length = 0;
      await waitUntil('the hung watch abandoned by its watchdog', () => errors.includes('watch EWATCHDOG'), 5_000);
      api.fault = undefined;
      const opened = inf.watches;
      await waitUntil('a watch open again', () => api.openWatches === 1 && inf.watches > opened, 5_000);
    } finally {
      inf.stop();
      api.fault = undefined;
      await api.stop();
    }
  });
});

describe('informer: a large list in pages, as client-go pages it', () => {
  it('lists 1,234 objects in pages of 500 (limit, continue), one list at one resourceVersion, then watches', async () => {
    const api = await new ApiServerDouble().start();
    for (let i = 0; i < 1234; i++) api.put(room(`r-${i}`, `!r${i}:org-a.example`));
    const rv = String(api.resourceVersion);
    const inf = new Informer({
      kubeConfig: api.kubeConfig(),
      apiVersion: RV,
      kind: 'RetrievalRoom',
      plural: 'retrievalrooms',
    });
    try {
      inf.start();
      await inf.synced();
      assert.equal(inf.size, 1234);
      assert.equal(inf.lists, 1);
      assert.equal(inf.lastSyncResourceVersion, rv);
      const lists = api.requests.filter((r) => r.includes('/retrievalrooms') && !r.includes('watch=true'));
      assert.equal(lists.length, 3);
      assert.match(lists[0] as string, /limit=500/);
      assert.doesNotMatch(lists[0] as string, /continue=/);
      for (const r of lists.slice(1)) assert.match(r, /limit=500.*continue=|continue=.*limit=500/);
      await waitFor('watch from the list resourceVersion', () =>
        api.requests.some((r) => r.includes('watch=true') && r.includes(`resourceVersion=${rv}`)),
      );
    } finally {
      inf.stop();
      await api.stop();
    }
  });

  it('a continue token the server no longer serves (410 Expired) falls back to one unpaged list', async () => {
    const api = await new ApiServerDouble().start();
    for (let i = 0; i < 1100; i++) api.put(room(`r-${i}`, `!r${i}:org-a.example`));
    api.fault = (r) => (r.query.has('continue') ? { status: 410, reason: 'Expired', message: 'too old' } : undefined);
    const inf = new Informer({
      kubeConfig: api.kubeConfig(),
      apiVersion: RV,
      kind: 'RetrievalRoom',
      plural: 'retrievalrooms',
    });
    try {
      inf.start();
      await inf.synced();
      assert.equal(inf.size, 1100);
      assert.equal(inf.lists, 1);
      const lists = api.requests.filter((r) => r.includes('/retrievalrooms') && !r.includes('watch=true'));
      assert.equal(lists.length, 3, 'first page, the expired continue, one list without limit');
      assert.doesNotMatch(lists[2] as string, /limit=/);
    } finally {
      inf.stop();
      api.fault = undefined;
      await api.stop();
    }
  });
});
