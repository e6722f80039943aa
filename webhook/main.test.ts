import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger } from '../common/log.ts';
import { waitFor } from '../testkit/common/index.ts';
import {
  admissionReview,
  CONTROLLER,
  partner,
  platform,
  retrievalAgent,
  retrievalAgentCr,
  room,
} from '../testkit/webhook.ts';
import { KubeClusterView } from './kube-view.ts';
import { handleReview, parseWebhookConfig } from './main.ts';
import { DEFAULT_RULES_CONFIG, type KubeObject } from './rules/types.ts';
import { StaticClusterView } from './view.ts';

const body = (o: Record<string, unknown>) => Buffer.from(JSON.stringify(o));

describe('serve webhook: configuration and request handling', () => {
  test('config: defaults, overrides, unknown keys rejected', () => {
    const c = parseWebhookConfig('{"port": 9443, "controllerUser": "system:serviceaccount:x:y"}');
    assert.equal(c.port, 9443);
    assert.equal(c.controllerUser, 'system:serviceaccount:x:y');
    assert.equal(c.certDir, '/etc/fgentic/webhook-tls');
    assert.throws(() => parseWebhookConfig('{"prot": 1}'), /unknown key "prot"/);
    assert.throws(() => parseWebhookConfig('{"port": "x"}'), /port/);
    assert.throws(() => parseWebhookConfig('[]'), /JSON object/);
  });

  test('fails closed with the request uid while the cluster cache is not synced', async () => {
    const out = await handleReview(
      body(admissionReview(retrievalAgent(), { uid: 'u-ns' })),
      new StaticClusterView(),
      DEFAULT_RULES_CONFIG,
      () => false,
    );
    assert.equal(out.review.response.uid, 'u-ns');
    assert.equal(out.review.response.allowed, false);
    assert.equal(out.review.response.status?.code, 503);
    assert.match(out.review.response.status?.message ?? '', /not synced/);
  });

  test('a retrieval Agent rendered before the cache saw its RetrievalAgent is confirmed live', async () => {
    const view = new StaticClusterView([platform()]);
    const b = body(admissionReview(retrievalAgent(), { user: CONTROLLER }));
    const denied = await handleReview(
      b,
      view,
      DEFAULT_RULES_CONFIG,
      () => true,
      async () => false,
    );
    assert.equal(denied.reason, 'retrieval-agent-undeclared');
    const asked: string[] = [];
    const confirm = async (ns: string, name: string) => {
      asked.push(`${ns}/${name}`);
      view.add(retrievalAgentCr(name, ns));
      return true;
    };
    const ok = await handleReview(b, view, DEFAULT_RULES_CONFIG, () => true, confirm);
    assert.equal(ok.review.response.allowed, true, ok.review.response.status?.message);
    assert.deepEqual(asked, ['kagent/knowledge-agent']);
  });
});

/** A fake API server: LIST answers from `items`, watches stay open, GET by name answers from `live`. */
function fakeApiServer(items: Record<string, KubeObject[]>, live: Record<string, KubeObject>) {
  const watches: ServerResponse[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const path = url.pathname;
    if (url.searchParams.get('watch') === 'true') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.flushHeaders();
      watches.push(res);
      return;
    }
    if (path in items) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'List',
          metadata: { resourceVersion: '1' },
          items: items[path],
        }),
      );
      return;
    }
    if (path in live) {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(live[path]));
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', code: 404 }));
  });
  return { server, watches };
}

describe('in-cluster ClusterView (informers against a fake API server)', () => {
  test('lists, watches, answers lookups and confirms a RetrievalAgent live', async () => {
    const base = '/apis/retrieval.fgentic.dev/v1alpha1';
    const { server, watches } = fakeApiServer(
      {
        [`${base}/retrievalagents`]: [retrievalAgentCr()],
        [`${base}/retrievalrooms`]: [room('r', '!r:org-a.example')],
        [`${base}/partnerclients`]: [partner('p')],
        [`${base}/retrievalplatforms`]: [platform()],
        '/apis/kagent.dev/v1alpha2/agents': [retrievalAgent()],
      },
      { [`${base}/namespaces/team-a/retrievalagents/late`]: retrievalAgentCr('late', 'team-a') },
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'c', cluster: 'fake', user: 'u' }],
      currentContext: 'c',
    });
    const view = new KubeClusterView(kc, createLogger('test'));
    try {
      await view.start();
      await waitFor('informers synced', () => view.ready());
      assert.ok(view.retrievalAgent('kagent', 'knowledge-agent'));
      assert.ok(view.agent('kagent', 'knowledge-agent'));
      assert.equal(view.rooms().length, 1);
      assert.equal(view.partners().length, 1);
      assert.equal(view.platform()?.['kind'], 'RetrievalPlatform');
      assert.equal(view.retrievalAgent('team-a', 'late'), undefined);
      assert.equal(await view.confirmRetrievalAgent('team-a', 'late'), true);
      assert.ok(view.retrievalAgent('team-a', 'late'));
      assert.equal(await view.confirmRetrievalAgent('team-a', 'missing'), false);
    } finally {
      await view.stop();
      for (const w of watches) w.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
