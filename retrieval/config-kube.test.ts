/**
 * The retrieval server's configuration through the Kubernetes API, against the RBAC-enforcing
 * API-server double as the retrieval ServiceAccount (deploy/base/rbac-retrieval.yaml), with calls
 * through the official MCP SDK client: a new RetrievalAgent is served and a removed one denied
 * without a restart (latency recorded), a rejected configuration keeps the previous one, a deleted
 * one and a broken watch fail closed, and the server uses exactly its grants. The file source is
 * checked through the same server path at the end.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { AgentRef } from '../contract/index.ts';
import { render } from '../controller/render/index.ts';
import { waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { serviceAccountUser, unusedGrants } from '../testkit/controller/rbac.ts';
import {
  AGENT,
  matrixHeader,
  meta,
  NOW,
  P,
  seedTestCorpus,
  servingUrl,
  startTestDatabase,
  type TestDatabase,
} from '../testkit/retrieval.ts';
import {
  type KubeRetrievalConfigOptions,
  type KubeRetrievalConfigStore,
  kubeRetrievalConfigStore,
  RETRIEVAL_CONFIGMAP,
} from './config-kube.ts';
import { fileRetrievalConfigStore } from './config-store.ts';
import { createLocalEmbedder } from './embeddings/local.ts';
import { type RetrievalServer, startRetrievalServer } from './index.ts';

const RETRIEVAL_SA = serviceAccountUser('knowledge', 'knowledge-retrieval');
const NS = 'knowledge';
const LATE: AgentRef = { namespace: 'team-a', name: 'late-agent' };

/** retrieval.json as the controller renders it for the example resources. */
function renderedConfig(): Record<string, unknown> {
  const cm = render(examples()).objects.find(
    (o) => o.kind === 'ConfigMap' && o.metadata.name === RETRIEVAL_CONFIGMAP,
  ) as { data: Record<string, string> } | undefined;
  assert.ok(cm, 'the controller renders the retrieval ConfigMap');
  return JSON.parse(cm.data['retrieval.json'] as string) as Record<string, unknown>;
}

function configMap(config: unknown) {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: RETRIEVAL_CONFIGMAP, namespace: NS },
    data: { 'retrieval.json': typeof config === 'string' ? config : `${JSON.stringify(config)}\n` },
  };
}

const until = <T>(probe: () => Promise<T | undefined>, limitMs = 30_000): Promise<T> =>
  waitFor('the served configuration', probe, limitMs);

/** One search_knowledge call as `agent` through the MCP SDK client: 'ok' or the refusal's reason. */
async function callAs(server: RetrievalServer, agent: AgentRef): Promise<string> {
  const client = new Client({ name: 'test', version: '1.0.0' });
  const header = matrixHeader({ caller: P.alice, audience: [P.alice], agent });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(server.mcpUrl), {
      requestInit: {
        headers: { 'x-fgentic-identity': header, 'x-fgentic-agent': `${agent.namespace}/${agent.name}` },
      },
    }),
  );
  try {
    const r = await client.callTool({ name: 'search_knowledge', arguments: { query: 'alpha' } });
    if (r.isError !== true) return 'ok';
    return (JSON.parse((r.content as { text: string }[])[0]?.text ?? '{}') as { reason: string }).reason;
  } finally {
    await client.close();
  }
}

const metric = async (server: RetrievalServer, name: string): Promise<string | undefined> =>
  new RegExp(`^${name} (\\S+)$`, 'm').exec(await server.metrics.registry.metrics())?.[1];

let t: TestDatabase;
before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

async function startServer(
  api: ApiServerDouble,
  maxStalenessMs: number,
  clock: Pick<KubeRetrievalConfigOptions, 'now' | 'onWatchError'> = {},
) {
  const store = kubeRetrievalConfigStore({
    kubeConfig: api.kubeConfig(RETRIEVAL_SA),
    namespace: NS,
    maxStalenessMs,
    ...clock,
  });
  await store.synced;
  const server = await startRetrievalServer({
    config: store,
    embedder: createLocalEmbedder(),
    databaseUrl: servingUrl(t),
    pool: { max: 2 },
    port: 0,
    now: () => NOW,
  });
  return { store, server };
}

describe('retrieval configuration through the Kubernetes API', () => {
  let api: ApiServerDouble;
  let store: KubeRetrievalConfigStore;
  let server: RetrievalServer;
  const base = renderedConfig();

  before(async () => {
    api = await new ApiServerDouble().start();
    api.put(configMap({ ...base, agents: [AGENT] }));
    await seedTestCorpus(t, [
      { content: 'alpha notes', metadata: meta({ source: 'docs/a.md', principals: [P.alice] }) },
    ]);
    ({ store, server } = await startServer(api, 60_000));
  });
  after(async () => {
    await server?.close();
    store?.close();
    await api?.stop();
  });

  test('serves the agents the ConfigMap lists; ready; staleness 0 while the watch is open', async () => {
    assert.equal(await callAs(server, AGENT), 'ok');
    assert.equal(await callAs(server, LATE), 'agent_mismatch');
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
    assert.equal(await metric(server, 'fgentic_retrieval_config_staleness_seconds'), '0');
    assert.equal(await metric(server, 'fgentic_retrieval_config_agents'), '1');
  });

  test('a new RetrievalAgent is served without a restart (latency recorded)', async () => {
    const started = Date.now();
    api.put(configMap({ ...base, agents: [AGENT, LATE] }));
    await until(async () => ((await callAs(server, LATE)) === 'ok' ? true : undefined));
    process.stderr.write(`# agent added → served: ${Date.now() - started} ms\n`);
    assert.equal(await callAs(server, AGENT), 'ok');
  });

  test('a removed RetrievalAgent is denied from the next call (latency recorded)', async () => {
    const started = Date.now();
    api.put(configMap({ ...base, agents: [AGENT] }));
    await until(async () => ((await callAs(server, LATE)) === 'agent_mismatch' ? true : undefined));
    process.stderr.write(`# agent removed → denied: ${Date.now() - started} ms\n`);
    assert.equal(await callAs(server, AGENT), 'ok');
  });

  test('the last RetrievalAgent removed (agents: []): every call denied, not kept as invalid', async () => {
    api.put(configMap({ ...base, agents: [] }));
    await until(async () => ((await callAs(server, AGENT)) === 'agent_mismatch' ? true : undefined));
    assert.equal(await metric(server, 'fgentic_retrieval_config_rejected'), '0');
    api.put(configMap({ ...base, agents: [AGENT, LATE] }));
    await until(async () => ((await callAs(server, AGENT)) === 'ok' ? true : undefined));
  });

  test('a rejected configuration keeps the previous one, narrowed to the agents it lists; counted and shown', async () => {
    await until(async () => ((await callAs(server, LATE)) === 'ok' ? true : undefined));
    // Invalid (an unknown member) and without LATE: LATE goes at once, AGENT keeps being served.
    api.put(configMap({ ...base, agents: [AGENT], unexpected: true }));
    await until(async () => ((await callAs(server, LATE)) === 'agent_mismatch' ? true : undefined));
    assert.equal(await callAs(server, AGENT), 'ok');
    assert.equal(await metric(server, 'fgentic_retrieval_config_rejected'), '1');
    assert.match(
      await server.metrics.registry.metrics(),
      /fgentic_retrieval_config_reloads_total\{result="rejected"\} 1/,
    );
    const ready = await fetch(`${server.url}/readyz`);
    assert.equal(ready.status, 200);
    assert.match(await ready.text(), /rejected/);
    // An invalid text never adds an agent back.
    api.put(configMap({ ...base, agents: [AGENT, LATE], unexpected: true }));
    await until(async () =>
      /reloads_total\{result="rejected"\} 2/.test(await server.metrics.registry.metrics()) ? true : undefined,
    );
    assert.equal(await callAs(server, LATE), 'agent_mismatch');
    // Not even JSON: nothing can be read from it, the configuration serving so far stays.
    api.put(configMap('{"version":1,'));
    await until(async () =>
      /reloads_total\{result="rejected"\} 3/.test(await server.metrics.registry.metrics()) ? true : undefined,
    );
    assert.equal(await callAs(server, AGENT), 'ok');
    // A valid one replaces it.
    api.put(configMap({ ...base, agents: [AGENT, LATE] }));
    await until(async () => ((await callAs(server, LATE)) === 'ok' ? true : undefined));
    assert.equal(await metric(server, 'fgentic_retrieval_config_rejected'), '0');
  });

  test('the ConfigMap deleted: every call refused as config_unavailable, not ready; back when it returns', async () => {
    api.remove('v1', 'ConfigMap', NS, RETRIEVAL_CONFIGMAP);
    await until(async () => ((await callAs(server, AGENT)) === 'config_unavailable' ? true : undefined));
    const r = await fetch(`${server.url}/readyz`);
    assert.equal(r.status, 503);
    assert.match(await r.text(), /configuration missing/);
    assert.equal(await metric(server, 'fgentic_retrieval_config_agents'), '0');
    api.put(configMap({ ...base, agents: [AGENT] }));
    await until(async () => ((await callAs(server, AGENT)) === 'ok' ? true : undefined));
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);
  });

  test('as its ServiceAccount: nothing refused, no grant unused', () => {
    assert.deepEqual(api.denied, []);
    assert.deepEqual(unusedGrants(api.rbac, RETRIEVAL_SA, api.calls), []);
    // The one ConfigMap, by name: list and watch both carried the field selector.
    assert.ok(api.calls.some((c) => c.user === RETRIEVAL_SA && c.verb === 'watch' && c.name === RETRIEVAL_CONFIGMAP));
  });
});

describe('staleness rule', () => {
  test('a broken watch keeps the configuration for exactly the bound, then refuses every call and readiness fails', async () => {
    const api = await new ApiServerDouble().start();
    api.put(configMap({ ...renderedConfig(), agents: [AGENT] }));
    // The store's clock is held: only the test moves it (1,500 ms allowed, 1,501 ms refused).
    let clock = 1_000_000;
    const errors: string[] = [];
    const { store, server } = await startServer(api, 1_500, {
      now: () => clock,
      onWatchError: (kind) => errors.push(kind),
    });
    try {
      assert.equal(await callAs(server, AGENT), 'ok');
      await api.stop();
      // A failed re-list shows the watch has ended; the last contact is then fixed at `clock`.
      await until(async () => (errors.includes('list') ? true : undefined));
      clock += 1_500;
      assert.equal(await callAs(server, AGENT), 'ok', 'refused within the bound');
      assert.equal(await metric(server, 'fgentic_retrieval_config_staleness_seconds'), '1.5');
      clock += 1;
      assert.equal(await callAs(server, AGENT), 'config_unavailable', 'still served past the bound');
      const ready = await fetch(`${server.url}/readyz`);
      assert.equal(ready.status, 503);
      assert.match(await ready.text(), /stale/);
    } finally {
      await server.close();
      store.close();
    }
  });
});

describe('file source through the server', () => {
  test('retrieval.json rewritten: added served, removed denied, rejected kept, missing refused', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'retrieval-file-'));
    const path = join(dir, 'retrieval.json');
    const write = (v: unknown) => writeFileSync(path, typeof v === 'string' ? v : JSON.stringify(v));
    const base = renderedConfig();
    write({ ...base, agents: [AGENT] });
    const store = fileRetrievalConfigStore(path, { pollMs: 100 });
    const server = await startRetrievalServer({
      config: store,
      embedder: createLocalEmbedder(),
      databaseUrl: servingUrl(t),
      pool: { max: 2 },
      port: 0,
      now: () => NOW,
    });
    try {
      assert.equal(await callAs(server, LATE), 'agent_mismatch');
      write({ ...base, agents: [AGENT, LATE] });
      await until(async () => ((await callAs(server, LATE)) === 'ok' ? true : undefined));
      write({ ...base, agents: [AGENT] });
      await until(async () => ((await callAs(server, LATE)) === 'agent_mismatch' ? true : undefined));
      write('{"version": 1');
      await until(async () => ((await metric(server, 'fgentic_retrieval_config_rejected')) === '1' ? true : undefined));
      assert.equal(await callAs(server, AGENT), 'ok');
      assert.equal(await metric(server, 'fgentic_retrieval_config_staleness_seconds'), '0');
      rmSync(path);
      await until(async () => ((await callAs(server, AGENT)) === 'config_unavailable' ? true : undefined));
      assert.equal((await fetch(`${server.url}/readyz`)).status, 503);
    } finally {
      await server.close();
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
