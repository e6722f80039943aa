/**
 * The API-server double refuses what kube-apiserver refuses: one test per behaviour, each failing if
 * the double stops enforcing it. (RBAC: rbac.test.ts; CRD schema + CEL: crds/validate.test.ts.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { waitFor, within } from '../testkit/common/index.ts';
import { ADMIN_USER, ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { room } from '../testkit/controller/fixtures.ts';

type Y = any;
const RV = 'retrieval.fgentic.dev/v1alpha1';

describe('API-server double: write semantics of kube-apiserver', () => {
  const api = new ApiServerDouble();
  let token = '';
  before(async () => {
    await api.start();
    token = api.token(ADMIN_USER);
  });
  after(() => api.stop());

  const url = (path: string) => `http://127.0.0.1:${api.port}${path}`;
  const cm = (name: string) => `/api/v1/namespaces/ns/configmaps/${name}`;
  async function call(method: string, path: string, body?: unknown, contentType = 'application/json') {
    const r = await fetch(url(path), {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': contentType },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: r.status, body: (await r.json()) as Y };
  }
  const applyAs = (manager: string, path: string, obj: unknown, force = false) =>
    call('PATCH', `${path}?fieldManager=${manager}${force ? '&force=true' : ''}`, obj, 'application/apply-patch+yaml');
  const configMap = (name: string, data: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name },
    data,
  });

  it('server-side apply: a field another manager owns is a 409 naming that manager, unless forced', async () => {
    assert.equal((await applyAs('alpha', cm('owned'), configMap('owned', { x: '1' }))).status, 201);
    const refused = await applyAs('beta', cm('owned'), configMap('owned', { x: '2' }));
    assert.equal(refused.status, 409);
    assert.equal(refused.body.reason, 'Conflict');
    assert.equal(refused.body.message, 'Apply failed with 1 conflict: conflict with "alpha" using v1: .data.x');
    assert.deepEqual(refused.body.details.causes, [
      { reason: 'FieldManagerConflict', message: 'conflict with "alpha" using v1', field: '.data.x' },
    ]);
    assert.equal(api.get('v1', 'ConfigMap', 'ns', 'owned')?.['data'].x, '1');
    // The same value is shared ownership, not a conflict.
    assert.equal((await applyAs('beta', cm('owned'), configMap('owned', { x: '1' }))).status, 200);
    const forced = await applyAs('gamma', cm('owned'), configMap('owned', { x: '3' }), true);
    assert.equal(forced.status, 200);
    assert.equal(forced.body.data.x, '3');
    const managers = forced.body.metadata.managedFields.map((f: Y) => f.manager);
    assert.deepEqual(managers, ['gamma'], 'forcing takes the field from every other manager');
  });

  it('server-side apply: a field the applier stops sending is removed, unless another manager owns it', async () => {
    await applyAs('alpha', cm('prune'), configMap('prune', { keep: 'k', drop: 'd', shared: 's' }));
    await applyAs('beta', cm('prune'), configMap('prune', { shared: 's' }));
    const r = await applyAs('alpha', cm('prune'), configMap('prune', { keep: 'k' }));
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.data, { keep: 'k', shared: 's' });
  });

  it('server-side apply: an apply that changes nothing keeps the resourceVersion', async () => {
    const a = await applyAs('alpha', cm('noop'), configMap('noop', { x: '1' }));
    const b = await applyAs('alpha', cm('noop'), configMap('noop', { x: '1' }));
    assert.equal(b.body.metadata.resourceVersion, a.body.metadata.resourceVersion);
  });

  it('update with a stale resourceVersion is a 409 Conflict', async () => {
    const created = await applyAs('alpha', cm('rv'), configMap('rv', { x: '1' }));
    const stale = created.body.metadata.resourceVersion;
    assert.equal((await call('PUT', cm('rv'), { ...created.body, data: { x: '2' } })).status, 200);
    const r = await call('PUT', cm('rv'), {
      ...created.body,
      metadata: { ...created.body.metadata, resourceVersion: stale },
      data: { x: '3' },
    });
    assert.equal(r.status, 409);
    assert.match(r.body.message, /^Operation cannot be fulfilled on configmaps "rv": the object has been modified/);
    assert.equal(api.get('v1', 'ConfigMap', 'ns', 'rv')?.['data'].x, '2');
  });

  const roomPath = (n: string) => `/apis/retrieval.fgentic.dev/v1alpha1/retrievalrooms/${n}`;

  it("size limits: ConfigMap data above 1 MiB is 422, a body above 3 MiB is 413, an object above 1.5 MiB is etcd's 500", async () => {
    const mib = 1024 * 1024;
    // Exactly at the limit (key + value bytes) is accepted, one byte more is not.
    const fits = configMap('limit', { k: 'x'.repeat(mib - 1) });
    assert.equal((await applyAs('alpha', cm('limit'), fits, true)).status, 201);
    const over = await applyAs('alpha', cm('limit'), configMap('limit', { k: 'x'.repeat(mib) }), true);
    assert.equal(over.status, 422);
    assert.match(over.body.message, /Too long: must have at most 1048576 bytes/);
    const huge = await call('POST', '/api/v1/namespaces/ns/configmaps', configMap('huge', { k: 'x'.repeat(3 * mib) }));
    assert.equal(huge.status, 413);
    assert.equal(huge.body.reason, 'RequestEntityTooLarge');
    // A Secret is not bound by the ConfigMap rule, but etcd still refuses what exceeds its request limit.
    const secret = await call('POST', '/api/v1/namespaces/ns/secrets', {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'big' },
      data: { k: 'x'.repeat(1.6 * mib) },
    });
    assert.equal(secret.status, 500);
    assert.equal(secret.body.message, 'etcdserver: request is too large');
    assert.equal(api.get('v1', 'ConfigMap', 'ns', 'limit')?.['data'].k.length, mib - 1);
  });

  it('fault injection: an error Status with Retry-After, a held request, a watch ended at once', async () => {
    api.fault = (r) =>
      r.method === 'PATCH' ? { status: 429, reason: 'TooManyRequests', retryAfterSeconds: 1 } : undefined;
    const r = await fetch(url(`${cm('faulty')}?fieldManager=m`), {
      method: 'PATCH',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/apply-patch+yaml' },
      body: JSON.stringify(configMap('faulty', { a: '1' })),
    });
    assert.equal(r.status, 429);
    assert.equal(r.headers.get('retry-after'), '1');
    api.fault = (r) => (r.method === 'GET' && !r.watch ? { hang: true } : undefined);
    const held = fetch(url('/api/v1/namespaces/ns/configmaps'), {
      headers: { authorization: `Bearer ${token}` },
    });
    await waitFor('the request held', async () => (api.hanging === 1 ? true : undefined));
    api.release();
    await assert.rejects(held);
    api.fault = (r) => (r.watch ? { endAtOnce: true } : undefined);
    const w = await fetch(url('/api/v1/namespaces/ns/configmaps?watch=true'), {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(w.status, 200);
    assert.equal(await w.text(), '');
    api.fault = undefined;
  });

  it('a list in pages (limit, continue) is one snapshot; a continue token whose snapshot is gone is 410 Expired', async () => {
    for (let i = 0; i < 5; i++)
      assert.equal((await call('POST', '/api/v1/namespaces/paged/configmaps', configMap(`p-${i}`, {}))).status, 201);
    const path = '/api/v1/namespaces/paged/configmaps';
    const first = await call('GET', `${path}?limit=2`);
    assert.equal(first.body.items.length, 2);
    assert.equal(first.body.metadata.remainingItemCount, 3);
    const token = first.body.metadata.continue as string;
    // Written after the first page: not in the rest of this list.
    await call('POST', path, configMap('p-late', {}));
    await call('DELETE', `${path}/p-4`);
    const second = await call('GET', `${path}?limit=2&continue=${token}`);
    const third = await call('GET', `${path}?limit=2&continue=${second.body.metadata.continue}`);
    assert.equal(third.body.metadata.continue, undefined);
    assert.deepEqual(
      [first, second, third].flatMap((p) => p.body.items.map((o: Y) => o.metadata.name)),
      ['p-0', 'p-1', 'p-2', 'p-3', 'p-4'],
    );
    for (const p of [second, third]) assert.equal(p.body.metadata.resourceVersion, first.body.metadata.resourceVersion);
    // The snapshot is gone once the last page was served (and, as etcd's, once compacted).
    const again = await call('GET', `${path}?limit=2&continue=${second.body.metadata.continue}`);
    assert.equal(again.status, 410);
    assert.equal(again.body.reason, 'Expired');
    const next = await call('GET', `${path}?limit=2`);
    await call('POST', path, configMap('p-later', {}));
    api.compact(); // the snapshot's revision is compacted away
    assert.equal((await call('GET', `${path}?limit=2&continue=${next.body.metadata.continue}`)).status, 410);
    // Without limit, or with all items on one page: one list, no token.
    assert.equal((await call('GET', `${path}?limit=100`)).body.metadata.continue, undefined);
  });

  it('metadata.generation bumps on spec changes only (not labels, not status)', async () => {
    const r0 = await applyAs('alpha', roomPath('gen'), room('gen', '!gen:org-a.example'));
    assert.equal(r0.body.metadata.generation, 1);
    const labelled = { ...room('gen', '!gen:org-a.example'), metadata: { name: 'gen', labels: { a: 'b' } } };
    assert.equal((await applyAs('alpha', roomPath('gen'), labelled)).body.metadata.generation, 1);
    const st = await call(
      'PATCH',
      `${roomPath('gen')}/status`,
      { status: { observedGeneration: 1 } },
      'application/merge-patch+json',
    );
    assert.equal(st.body.metadata.generation, 1);
    const changed = { ...labelled, spec: { ...labelled.spec, description: 'new' } };
    assert.equal((await applyAs('alpha', roomPath('gen'), changed)).body.metadata.generation, 2);
  });

  it('status is a subresource: writes to the object keep status; status writes keep spec', async () => {
    await applyAs('alpha', roomPath('st'), room('st', '!st:org-a.example'));
    await call(
      'PATCH',
      `${roomPath('st')}/status`,
      { status: { observedGeneration: 1 }, spec: { description: 'sneaky' } },
      'application/merge-patch+json',
    );
    const o = api.get(RV, 'RetrievalRoom', undefined, 'st') as Y;
    assert.equal(o.spec.description, undefined, 'spec through /status is ignored');
    const put = await call('PUT', roomPath('st'), { ...o, status: { observedGeneration: 99 } });
    assert.equal(put.status, 200);
    assert.equal(put.body.status.observedGeneration, 1, 'status through the object is ignored');
    const applied = await applyAs('alpha', roomPath('st'), {
      ...room('st', '!st:org-a.example'),
      status: { observedGeneration: 7 },
    });
    assert.equal(applied.body.status.observedGeneration, 1);
  });

  it('finalizers: DELETE sets deletionTimestamp and keeps the object until the last finalizer goes', async () => {
    const withFinalizer = {
      ...configMap('fin', { x: '1' }),
      metadata: { name: 'fin', finalizers: ['example.dev/hold'] },
    };
    await applyAs('alpha', cm('fin'), withFinalizer);
    const d = await call('DELETE', cm('fin'));
    assert.equal(d.status, 200);
    const held = api.get('v1', 'ConfigMap', 'ns', 'fin') as Y;
    assert.ok(held?.metadata.deletionTimestamp, 'still there, marked for deletion');
    const more = await call('PUT', cm('fin'), {
      ...held,
      metadata: { ...held.metadata, finalizers: ['example.dev/hold', 'x/y'] },
    });
    assert.equal(more.status, 422, 'no new finalizers while deleting');
    const fresh = api.get('v1', 'ConfigMap', 'ns', 'fin') as Y;
    assert.equal(
      (await call('PUT', cm('fin'), { ...fresh, metadata: { ...fresh.metadata, finalizers: [] } })).status,
      200,
    );
    assert.equal(api.get('v1', 'ConfigMap', 'ns', 'fin'), undefined, 'gone with its last finalizer');
  });

  it('watch: resumes after a resourceVersion, sends bookmarks, and answers 410 Expired once compacted', async () => {
    const start = (await call('GET', '/api/v1/namespaces/ns/configmaps')).body.metadata.resourceVersion;
    await applyAs('alpha', cm('w1'), configMap('w1', { x: '1' }));
    /** The first `count` events of a watch from `rv` (fewer if the server ends it), parsed. */
    const read = async (rv: string, bookmark: boolean, count: number) => {
      const ac = new AbortController();
      const watches = api.openWatches;
      const r = await fetch(
        url(
          `/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=${rv}${bookmark ? '&allowWatchBookmarks=true' : ''}`,
        ),
        {
          headers: { authorization: `Bearer ${token}` },
          signal: ac.signal,
        },
      );
      // A bookmark reaches only a registered watch: send it once this one is.
      if (bookmark) {
        await waitFor('the watch to be registered', () => api.openWatches > watches);
        api.bookmark();
      }
      const reader = (r.body as ReadableStream<Uint8Array>).getReader();
      let buf = '';
      const lines = () => buf.split('\n').slice(0, -1);
      await within(
        `${count} watch events`,
        (async () => {
          while (lines().length < count) {
            const { value, done } = await reader.read();
            if (value) buf += Buffer.from(value).toString('utf8');
            if (done) return;
          }
        })(),
        10_000,
      );
      ac.abort();
      return lines().map((line) => JSON.parse(line) as Y);
    };
    const resumed = await read(start, true, 2);
    assert.deepEqual(
      resumed.map((e) => [e.type, e.object.metadata?.name]),
      [
        ['ADDED', 'w1'],
        ['BOOKMARK', undefined],
      ],
    );
    api.compact();
    const gone = await read(start, false, 2);
    assert.equal(gone.length, 1);
    assert.equal(gone[0].type, 'ERROR');
    assert.equal(gone[0].object.code, 410);
    assert.equal(gone[0].object.reason, 'Expired');
  });
});
