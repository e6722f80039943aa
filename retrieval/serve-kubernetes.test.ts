/**
 * `serve retrieval --config-source kubernetes` as a child process against the API-server double, as
 * the retrieval ServiceAccount: it waits for its ConfigMap, then serves; readiness follows the
 * ConfigMap; the staleness gauge is exported; bad flags are usage errors.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { waitFor } from '../common/testing/index.ts';
import { ApiServerDouble } from '../controller/testsupport/apiserver.ts';
import { serviceAccountUser } from '../controller/testsupport/rbac.ts';
import { AGENT } from './testing.ts';

const bin = new URL('../bin/fgentic-retrieval.mjs', import.meta.url).pathname;

async function until(probe: () => Promise<boolean>, limitMs = 180_000, onFail?: () => string): Promise<void> {
  try {
    await waitFor('the condition', probe, { timeoutMs: limitMs, intervalMs: 50 });
  } catch (err) {
    throw new Error(`${(err as Error).message}${onFail ? `: ${onFail()}` : ''}`);
  }
}

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
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        // client-node refuses plain HTTP unless TLS verification is explicitly off (the double has no TLS).
        `clusters: [{name: double, cluster: {server: "http://127.0.0.1:${api.port}", insecure-skip-tls-verify: true}}]`,
        `users: [{name: retrieval, user: {token: ${api.token(serviceAccountUser('knowledge', 'knowledge-retrieval'))}}}]`,
        'contexts: [{name: double, context: {cluster: double, user: retrieval}}]',
        'current-context: double',
        '',
      ].join('\n'),
    );
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
    await until(
      async () => /waiting for a valid configuration/.test(err + out),
      180_000,
      () => err,
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
    await until(
      async () => /listening on (http:\/\/\S+)\/mcp/.test(out),
      180_000,
      () => err,
    );
    const url = /listening on (http:\/\/\S+)\/mcp/.exec(out)![1]!;
    await until(
      async () => (await status(`${url}/readyz`)) === 200,
      180_000,
      () => err,
    );
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /fgentic_retrieval_config_staleness_seconds 0/);
    assert.match(metrics, /fgentic_retrieval_config_agents 1/);
    assert.ok(api.requests.some((r) => r.includes('fieldSelector=metadata.name%3Dfgentic-retrieval-config')));
    // The ConfigMap deleted (platform removed): not ready.
    api.remove('v1', 'ConfigMap', 'knowledge', 'fgentic-retrieval-config');
    await until(async () => (await status(`${url}/readyz`)) === 503);
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
