/**
 * The ConfigMap watch shared by both servers (common/kube-watch.ts), against the RBAC-enforcing
 * API-server double: a re-watch whose request cannot even be prepared (client-node's
 * `applyToHTTPSOptions` rejects, e.g. an exec credential plugin or a token file that fails) is
 * reported as a watch failure and retried through a fresh list, instead of escaping as an unhandled
 * rejection that would end the process. Then the faults a watch must survive: a hung list, a hung
 * watch request, and a watch the server ends at once.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type * as k8s from '@kubernetes/client-node';
import { waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { serviceAccountUser } from '../testkit/controller/rbac.ts';
import { type ConfigMapWatch, watchConfigMaps } from './kube-watch.ts';

const NS = 'knowledge';
const NAME = 'fgentic-retrieval-config';
let api: ApiServerDouble;

before(async () => {
  api = await new ApiServerDouble().start();
  api.put({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: NAME, namespace: NS }, data: { k: 'v' } });
});
after(() => api.stop());

test('a re-watch that fails before its request is sent is a reported watch error, then listed again', async () => {
  const kc = api.kubeConfig(serviceAccountUser(NS, 'knowledge-retrieval'));
  let refuse = false;
  const prepare = kc.applyToHTTPSOptions.bind(kc);
  (kc as { applyToHTTPSOptions: k8s.KubeConfig['applyToHTTPSOptions'] }).applyToHTTPSOptions = async (opts) => {
    if (refuse) {
      refuse = false; // one failure: the retry that follows must succeed
      throw Object.assign(new Error('credential plugin failed'), { code: 'EPLUGIN' });
    }
    return prepare(opts);
  };
  const errors: string[] = [];
  let lists = 0;
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  let w: ConfigMapWatch | undefined;
  try {
    w = watchConfigMaps({
      kubeConfig: kc,
      namespace: NS,
      fieldSelector: `metadata.name=${NAME}`,
      onObjects: () => lists++,
      onWatchError: (kind, error) => errors.push(`${kind} ${error}`),
    });
    await w.synced;
    await waitFor('the first watch', async () => (api.openWatches === 1 ? true : undefined));
    const listsBefore = lists;
    refuse = true;
    api.bookmark(); // a sign of life: the end that follows is the server's timeout, not a spin
    await new Promise((r) => setTimeout(r, 50));
    api.endWatches(); // the server-side timeout: the client re-watches from its resourceVersion
    await waitFor('the failure reported', async () => (errors.length > 0 ? true : undefined));
    assert.deepEqual(errors, ['watch EPLUGIN']);
    await waitFor('a fresh list and an open watch', async () =>
      lists > listsBefore && api.openWatches === 1 ? true : undefined,
    );
    assert.deepEqual(unhandled, []);
  } finally {
    w?.close();
    process.off('unhandledRejection', onUnhandled);
  }
});

const watchRequests = () => api.requests.filter((r) => r.includes('watch=true')).length;
const lists = () =>
  api.requests.filter((r) => r.startsWith('GET /api/v1/namespaces/knowledge/configmaps?') && !r.includes('watch=true'))
    .length;

test('a hung list is abandoned at its deadline and retried: the store recovers once the API answers', async () => {
  const kc = api.kubeConfig(serviceAccountUser(NS, 'knowledge-retrieval'));
  api.fault = (r) => (r.method === 'GET' && !r.watch ? { hang: true } : undefined);
  const seen: number[] = [];
  const w = watchConfigMaps({
    kubeConfig: kc,
    namespace: NS,
    fieldSelector: `metadata.name=${NAME}`,
    listTimeoutMs: 200,
    onObjects: (o) => seen.push(o.size),
  });
  try {
    await waitFor('a list held', async () => (api.hanging > 0 ? true : undefined));
    assert.equal(w.contactAgeMs(), Infinity);
    api.fault = undefined; // the API recovers; the held request stays held
    await waitFor('the objects listed', async () => (seen.length > 0 ? true : undefined), 3000);
    assert.deepEqual(seen, [1]);
  } finally {
    w.close();
    api.fault = undefined;
    api.release();
  }
});

test('a watch request that never answers is ended by the watchdog armed at its send', async () => {
  const kc = api.kubeConfig(serviceAccountUser(NS, 'knowledge-retrieval'));
  const errors: string[] = [];
  api.fault = (r) => (r.watch ? { hang: true } : undefined);
  const w = watchConfigMaps({
    kubeConfig: kc,
    namespace: NS,
    fieldSelector: `metadata.name=${NAME}`,
    listTimeoutMs: 200,
    onObjects: () => {},
    onWatchError: (kind, error) => errors.push(`${kind} ${error}`),
  });
  try {
    await w.synced;
    await waitFor(
      'the hung watch abandoned',
      async () => (errors.includes('watch EWATCHDOG') ? true : undefined),
      3000,
    );
    api.fault = undefined;
    await waitFor('a watch open', async () => (w.contactAgeMs() === 0 ? true : undefined), 5000);
  } finally {
    w.close();
    api.fault = undefined;
    api.release();
  }
});

test('a watch the server ends at once with 200 is retried after a backoff and is no contact', async () => {
  const kc = api.kubeConfig(serviceAccountUser(NS, 'knowledge-retrieval'));
  api.fault = (r) => (r.watch ? { endAtOnce: true } : undefined);
  const before = watchRequests();
  const w = watchConfigMaps({
    kubeConfig: kc,
    namespace: NS,
    fieldSelector: `metadata.name=${NAME}`,
    onObjects: () => {},
  });
  try {
    await w.synced;
    await new Promise((r) => setTimeout(r, 2000));
    const opened = watchRequests() - before;
    // 250 ms doubling, half of it random: at most 1 + 2000/125 opens even at the shortest delays;
    // without the guard it is hundreds.
    assert.ok(opened >= 2 && opened <= 8, `${opened} watches in 2 s`);
    assert.ok(w.contactAgeMs() >= 1000, `contact age ${w.contactAgeMs()} ms while every watch ends at once`);
    assert.ok(lists() > 0);
  } finally {
    w.close();
    api.fault = undefined;
  }
});
