/**
 * The ConfigMap watch shared by both servers (common/kube-watch.ts), against the RBAC-enforcing
 * API-server double: a re-watch whose request cannot even be prepared (client-node's
 * `applyToFetchOptions` rejects before its own error handling, e.g. an exec credential plugin or a
 * token file that fails) is reported as a watch failure and retried through a fresh list, instead of
 * escaping as an unhandled rejection that would end the process.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type * as k8s from '@kubernetes/client-node';
import { ApiServerDouble } from '../controller/testsupport/apiserver.ts';
import { serviceAccountUser } from '../controller/testsupport/rbac.ts';
import { type ConfigMapWatch, watchConfigMaps } from './kube-watch.ts';
import { waitFor } from './testing/index.ts';

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
  const prepare = kc.applyToFetchOptions.bind(kc);
  (kc as { applyToFetchOptions: k8s.KubeConfig['applyToFetchOptions'] }).applyToFetchOptions = async (
    opts,
  ) => {
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
