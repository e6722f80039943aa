/**
 * `serve projector --registry-source kubernetes` as a child process against the API-server double:
 * the configuration comes from the labelled ConfigMaps, readiness follows it, and the staleness
 * gauge is exported.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { waitFor } from '../common/testing/index.ts';
import { render } from '../controller/render/index.ts';
import { ApiServerDouble } from '../controller/testsupport/apiserver.ts';
import { examples } from '../controller/testsupport/fixtures.ts';
import { serviceAccountUser } from '../controller/testsupport/rbac.ts';

const bin = new URL('../bin/fgentic-retrieval.mjs', import.meta.url).pathname;

async function until(probe: () => Promise<boolean>, limitMs = 180_000, onFail?: () => string): Promise<void> {
  try {
    await waitFor('the condition', probe, { timeoutMs: limitMs, intervalMs: 50 });
  } catch (err) {
    throw new Error(`${(err as Error).message}${onFail ? `: ${onFail()}` : ''}`);
  }
}

test('serve projector reads its registry through the API and follows it', async () => {
  const api = await new ApiServerDouble().start();
  const dir = mkdtempSync(join(tmpdir(), 'projector-kube-'));
  let child: ChildProcess | undefined;
  try {
    for (const o of render(examples()).objects)
      if (o.kind === 'ConfigMap' && o.metadata.name.startsWith('fgentic-projector-')) api.put(o);
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        // client-node refuses plain HTTP unless TLS verification is explicitly off (the double has no TLS).
        'clusters: [{name: double, cluster: {server: "http://127.0.0.1:' +
          api.port +
          '", insecure-skip-tls-verify: true}}]',
        `users: [{name: projector, user: {token: ${api.token(serviceAccountUser('knowledge', 'fgentic-projector'))}}}]`,
        'contexts: [{name: double, context: {cluster: double, user: projector}}]',
        'current-context: double',
        '',
      ].join('\n'),
    );
    child = spawn(
      process.execPath,
      [
        bin,
        'serve',
        'projector',
        '--registry-source',
        'kubernetes',
        '--namespace',
        'knowledge',
        '--port',
        '0',
        '--host',
        '127.0.0.1',
      ],
      {
        env: { ...process.env, KUBECONFIG: kubeconfig, FGENTIC_LOG_LEVEL: 'silent' },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let err = '';
    child.stderr?.on('data', (c: Buffer) => {
      err += c.toString();
    });
    await until(async () => /listening on (http:\/\/\S+)/.test(err));
    const url = /listening on (http:\/\/\S+)/.exec(err)![1]!;
    await until(
      async () => (await fetch(`${url}/readyz`)).status === 200,
      180_000,
      () => err,
    );
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /fgentic_projector_registry_staleness_seconds 0/);
    assert.ok(api.requests.some((r) => r.includes('/namespaces/knowledge/configmaps?watch=true')));
    // The base configuration deleted (platform removed): every check denies, readiness goes false.
    api.remove('v1', 'ConfigMap', 'knowledge', 'fgentic-projector-config');
    await until(async () => (await fetch(`${url}/readyz`)).status === 503);
  } finally {
    child?.kill('SIGTERM');
    await api.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('serve projector refuses an unknown registry source and a bad staleness bound', async () => {
  const run = (args: string[]) =>
    new Promise<{ code: number | null; err: string }>((resolve) => {
      const c = spawn(process.execPath, [bin, 'serve', 'projector', ...args], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let err = '';
      c.stderr?.on('data', (d: Buffer) => {
        err += d.toString();
      });
      c.on('exit', (code) => resolve({ code, err }));
    });
  const a = await run(['--registry-source', 'etcd']);
  assert.equal(a.code, 2);
  assert.match(a.err, /--registry-source must be file or kubernetes/);
  const b = await run(['--registry-source', 'kubernetes', '--max-staleness', '0']);
  assert.equal(b.code, 2);
  assert.match(b.err, /--max-staleness/);
});
