/**
 * `serve projector --registry-source kubernetes` as a child process against the API-server double:
 * the configuration comes from the labelled ConfigMaps, readiness follows it, and the staleness
 * gauge is exported.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { render } from '../controller/render/index.ts';
import { waitFor } from '../testkit/common/index.ts';
import { ApiServerDouble } from '../testkit/controller/apiserver.ts';
import { examples } from '../testkit/controller/fixtures.ts';
import { writeKubeconfig } from '../testkit/controller/kubeconfig.ts';
import { heartbeatConfigMap } from '../testkit/projector/fixtures.ts';

const bin = new URL('../bin/fgentic-retrieval.mjs', import.meta.url).pathname;

/** Children start under load: generous bounds, never expectations. */
const SERVE_WAIT = { timeoutMs: 180_000, intervalMs: 50 };

test('serve projector reads its registry through the API and follows it', async () => {
  const api = await new ApiServerDouble().start();
  const dir = mkdtempSync(join(tmpdir(), 'projector-kube-'));
  let child: ChildProcess | undefined;
  try {
    for (const o of render(examples()).objects)
      if (o.kind === 'ConfigMap' && o.metadata.name.startsWith('fgentic-projector-')) api.put(o);
    api.put(heartbeatConfigMap('knowledge', Date.now()));
    const kubeconfig = writeKubeconfig(dir, api, 'knowledge', 'fgentic-projector');
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
    await waitFor('the child to log its address', async () => /listening on (http:\/\/\S+)/.test(err), SERVE_WAIT);
    const url = /listening on (http:\/\/\S+)/.exec(err)![1]!;
    await waitFor('/readyz to answer 200', async () => (await fetch(`${url}/readyz`)).status === 200, {
      ...SERVE_WAIT,
      detail: () => err,
    });
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /fgentic_projector_registry_staleness_seconds 0/);
    assert.match(metrics, /fgentic_projector_controller_heartbeat_age_seconds \d/);
    assert.ok(api.requests.some((r) => r.includes('/namespaces/knowledge/configmaps?watch=true')));
    // The base configuration deleted (platform removed): every check denies, readiness goes false.
    api.remove('v1', 'ConfigMap', 'knowledge', 'fgentic-projector-config');
    await waitFor('/readyz to answer 503', async () => (await fetch(`${url}/readyz`)).status === 503, SERVE_WAIT);
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
