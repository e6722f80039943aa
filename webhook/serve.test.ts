// `serve webhook` end to end in a child process: config file, certificate directory, offline cluster
// objects, a review over HTTPS, readiness, and a clean exit on SIGTERM.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { makeSelfSignedCert } from '../common/dev-tls.ts';
import { admissionReview, CONTROLLER, platform, retrievalAgent, retrievalAgentCr } from '../testkit/webhook.ts';

const hasOpenssl = spawnSync('openssl', ['version']).status === 0;
const dir = mkdtempSync(join(tmpdir(), 'fgentic-serve-webhook-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function post(port: number, ca: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((res, rej) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: body ? 'POST' : 'GET',
        ca,
        servername: 'localhost',
        agent: false,
        headers: body ? { 'content-type': 'application/json' } : {},
      },
      (r) => {
        let b = '';
        r.on('data', (c) => {
          b += c;
        });
        r.on('end', () => res({ status: r.statusCode ?? 0, body: b }));
      },
    );
    req.on('error', rej);
    req.end(body);
  });
}

describe('serve webhook (child process)', { skip: hasOpenssl ? false : 'openssl CLI not found' }, () => {
  test('serves reviews from a config file and exits 0 on SIGTERM', async () => {
    makeSelfSignedCert(dir);
    const ca = readFileSync(join(dir, 'tls.crt'), 'utf8');
    writeFileSync(join(dir, 'cluster.yaml'), [platform(), retrievalAgentCr()].map((o) => stringify(o)).join('---\n'));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ offlineObjects: [join(dir, 'cluster.yaml')] }));
    const script = `import(${JSON.stringify(resolve(import.meta.dirname, 'cli.ts'))}).then((m) => m.serveWebhook(process.argv.slice(1))).then((c) => process.exit(c))`;
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '-e', script, '--', '--config', join(dir, 'config.json'), '--cert-dir', dir, '--port', '0'],
      { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, FGENTIC_LOG_LEVEL: 'info' } },
    );
    let stderr = '';
    const port = await new Promise<number>((res, rej) => {
      child.stderr!.on('data', (c: Buffer) => {
        stderr += c.toString();
        const m = stderr.match(/"msg":"webhook listening","port":(\d+)/);
        if (m) res(Number(m[1]));
      });
      child.once('exit', (code) => rej(new Error(`exited ${code}: ${stderr}`)));
    });
    try {
      assert.equal((await post(port, ca, '/readyz')).status, 200);
      const ok = await post(
        port,
        ca,
        '/validate',
        JSON.stringify(admissionReview(retrievalAgent(), { user: CONTROLLER, uid: 'e2e-1' })),
      );
      assert.equal(JSON.parse(ok.body).response.allowed, true);
      const no = await post(port, ca, '/validate', JSON.stringify(admissionReview(retrievalAgent(), { uid: 'e2e-2' })));
      const r = JSON.parse(no.body).response;
      assert.equal(r.uid, 'e2e-2');
      assert.equal(r.allowed, false);
      assert.match(stderr + '', /listening/);
    } finally {
      const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
      child.kill('SIGTERM');
      assert.equal(await exited, 0);
    }
    // The denial was logged with kind/namespace/name/reason only, never object content.
    assert.match(
      stderr,
      /"msg":"admission","kind":"Agent","namespace":"kagent","name":"knowledge-agent","verdict":"denied","reason":"retrieval-agent-owner"/,
    );
    assert.doesNotMatch(stderr, /systemMessage|Answer from the knowledge base/);
  });
});
