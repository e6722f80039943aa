/**
 * `serve retrieval --config-source kubernetes` as a child process against the API-server double, as
 * the retrieval ServiceAccount: it waits for its ConfigMap, then serves; readiness follows the
 * ConfigMap; the staleness gauge is exported; bad flags are usage errors.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { writeKubeconfig } from '../testkit/controller/kubeconfig.ts';
import { AGENT } from '../testkit/retrieval.ts';

const bin = new URL('../bin/fgentic-retrieval.mjs', import.meta.url).pathname;

/** Children start under load: generous bounds, never expectations. */
const SERVE_WAIT = { timeoutMs: 180_000, intervalMs: 50 };

const status = async (url: string) => {
  try {
    return (await fetch(url)).status;
  } catch {
    return 0;
  }
};

test('serve retrieval waits for its ConfigMap, then serves and follows it', async () => {
  const api = await new ApiServerDouble().start();
  const dir = mkdtempSync(join(tmpdir(), 'retrieval-kube-'));
  let child: ChildProcess | undefined;
  try {
    const kubeconfig = writeKubeconfig(dir, api, 'knowledge', 'knowledge-retrieval');
    child = spawn(
      process.execPath,
      [
        bin,
        'serve',
        'retrieval',
        '--config-source',
        'kubernetes',
        '--namespace',
        'knowledge',
        '--port',
        '0',
        '--host',
        '127.0.0.1',
        '--data-dir',
        'memory',
      ],
      {
        env: { ...process.env, KUBECONFIG: kubeconfig, FGENTIC_LOG_LEVEL: 'info', DATABASE_URL: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      err += c.toString();
    });
    // No ConfigMap yet: it waits (and says so) instead of serving without a configuration.
    await waitFor(
      'the child to wait for its configuration',
      async () => /waiting for a valid configuration/.test(err + out),
      { ...SERVE_WAIT, detail: () => err },
    );
    assert.doesNotMatch(out, /listening/);
    api.put({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'fgentic-retrieval-config', namespace: 'knowledge' },
      data: {
        'retrieval.json': JSON.stringify({
          version: 1,
          agents: [AGENT],
          embeddings: { profile: 'local-hash-1024-v1' },
        }),
      },
    });
    await waitFor('the child to log its address', async () => /listening on (http:\/\/\S+)\/mcp/.test(out), {
      ...SERVE_WAIT,
      detail: () => err,
    });
    const url = /listening on (http:\/\/\S+)\/mcp/.exec(out)![1]!;
    await waitFor('/readyz to answer 200', async () => (await status(`${url}/readyz`)) === 200, {
      ...SERVE_WAIT,
      detail: () => err,
    });
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /fgentic_retrieval_config_staleness_seconds 0/);
    assert.match(metrics, /fgentic_retrieval_config_agents 1/);
    assert.ok(api.requests.some((r) => r.includes('fieldSelector=metadata.name%3Dfgentic-retrieval-config')));
    // The ConfigMap deleted (platform removed): not ready.
    api.remove('v1', 'ConfigMap', 'knowledge', 'fgentic-retrieval-config');
    await waitFor('/readyz to answer 503', async () => (await status(`${url}/readyz`)) === 503, SERVE_WAIT);
    assert.deepEqual(api.denied, []);
    // Logs carry no configuration content.
    assert.doesNotMatch(err + out, /knowledge-agent/);
  } finally {
    child?.kill('SIGTERM');
    await api.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('serve retrieval refuses a bad configuration source, staleness bound or flag mix', () => {
  for (const args of [
    ['--config-source', 'etcd'],
    ['--config-source', 'kubernetes', '--max-staleness', '0'],
    ['--config-source', 'kubernetes', '--max-staleness', '3601'],
    ['--namespace', 'knowledge'],
    ['--config-source', 'kubernetes', '--config', '/etc/fgentic/retrieval.json'],
  ]) {
    const r = spawnSync(process.execPath, [bin, 'serve', 'retrieval', ...args, '--port', '0'], {
      encoding: 'utf8',
      env: { ...process.env, FGENTIC_LOG_LEVEL: 'silent' },
      timeout: 60_000,
    });
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /serve retrieval/);
  }
});
