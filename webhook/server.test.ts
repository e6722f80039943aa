import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeSelfSignedCert } from '../common/dev-tls.ts';
import { waitFor } from '../testkit/common/index.ts';
import { admissionReview, plainAgent, platform, retrievalAgentCr } from '../testkit/webhook.ts';
import { reviewBytes } from './review.ts';
import { startWebhookServer, type WebhookServer } from './server.ts';
import { StaticClusterView } from './view.ts';

const hasOpenssl = spawnSync('openssl', ['version']).status === 0;
const skip = hasOpenssl ? false : 'openssl CLI not found; it is needed to make a test certificate';

const dir = mkdtempSync(join(tmpdir(), 'fgentic-webhook-tls-'));
const secretDir = join(dir, 'secret');

/** A self-signed serving certificate for localhost/127.0.0.1 in `out/`. */
function makeCert(out: string, cn: string): { cert: string; key: string } {
  return makeSelfSignedCert(out, { cn });
}

/** Lays a Secret volume out the way the kubelet does: ..data -> timestamped dir, files -> ..data/. */
function publish(version: string, from: string): void {
  const target = join(secretDir, `..${version}`);
  mkdirSync(target);
  for (const f of ['tls.crt', 'tls.key']) writeFileSync(join(target, f), readFileSync(join(from, f)));
  symlinkSync(`..${version}`, join(secretDir, '..data_tmp'));
  renameSync(join(secretDir, '..data_tmp'), join(secretDir, '..data'));
}

interface Reply {
  status: number;
  body: string;
  fingerprint: string;
  headers: Record<string, unknown>;
}

function call(
  port: number,
  ca: string[],
  method: string,
  path: string,
  body?: string,
  ct = 'application/json',
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        ca,
        servername: 'localhost',
        agent: false,
        headers: body ? { 'content-type': ct } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        const fingerprint = (res.socket as import('node:tls').TLSSocket).getPeerCertificate().fingerprint256;
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            fingerprint,
            headers: res.headers,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('HTTPS webhook server', { skip }, () => {
  let srv: WebhookServer;
  let first: { cert: string; key: string };
  let ready = false;
  before(async () => {
    if (!hasOpenssl) return;
    first = makeCert(join(dir, 'gen1'), 'fgentic-webhook-1');
    mkdirSync(secretDir);
    publish('v1', join(dir, 'gen1'));
    for (const f of ['tls.crt', 'tls.key']) symlinkSync(join('..data', f), join(secretDir, f));
    const view = new StaticClusterView([platform(), retrievalAgentCr()]);
    srv = await startWebhookServer({
      certDir: secretDir,
      port: 0,
      host: '127.0.0.1',
      certPollMs: 200,
      maxBodyBytes: 64 * 1024,
      ready: () => ready,
      handler: (b) => reviewBytes(b, view),
    });
  });
  after(async () => {
    await srv?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('answers AdmissionReviews with the request uid', async () => {
    const a = plainAgent();
    (((a['spec'] as never)['declarative'] as never)['tools'] as Record<string, Record<string, unknown>>[])[0]![
      'mcpServer'
    ]!['allowedHeaders'] = ['Authorization'];
    const body = admissionReview(a, { uid: 'uid-https-1' });
    const r = await call(srv.port, [first.cert], 'POST', '/validate/agents', JSON.stringify(body));
    assert.equal(r.status, 200);
    const out = JSON.parse(r.body);
    assert.equal(out.apiVersion, 'admission.k8s.io/v1');
    assert.equal(out.response.uid, 'uid-https-1');
    assert.equal(out.response.allowed, false);
    assert.match(out.response.status.message, /header-credential/);
    const ok = await call(
      srv.port,
      [first.cert],
      'POST',
      '/validate',
      JSON.stringify(admissionReview(plainAgent(), { uid: 'u2' })),
    );
    assert.equal(JSON.parse(ok.body).response.allowed, true);
  });

  test('malformed bodies get a clear AdmissionReview error; transport errors get HTTP codes', async () => {
    const r = await call(srv.port, [first.cert], 'POST', '/validate', '{not json');
    assert.equal(r.status, 200);
    const out = JSON.parse(r.body);
    assert.equal(out.response.allowed, false);
    assert.equal(out.response.status.code, 400);
    assert.match(out.response.status.message, /malformed AdmissionReview: body is not valid JSON/);
    assert.equal((await call(srv.port, [first.cert], 'POST', '/validate', '{}', 'text/plain')).status, 415);
    assert.equal((await call(srv.port, [first.cert], 'GET', '/validate')).status, 405);
    assert.equal((await call(srv.port, [first.cert], 'GET', '/nope')).status, 404);
    const big = await call(srv.port, [first.cert], 'POST', '/validate', `"${'x'.repeat(100 * 1024)}"`).catch(() => ({
      status: 413,
    }));
    assert.equal(big.status, 413);
  });

  test('healthz, readyz and metrics', async () => {
    assert.equal((await call(srv.port, [first.cert], 'GET', '/healthz')).status, 200);
    assert.equal((await call(srv.port, [first.cert], 'GET', '/readyz')).status, 503);
    ready = true;
    assert.equal((await call(srv.port, [first.cert], 'GET', '/readyz')).status, 200);
    const m = await call(srv.port, [first.cert], 'GET', '/metrics');
    assert.equal(m.status, 200);
    assert.match(
      m.body,
      /fgentic_webhook_reviews_total\{kind="Agent",verdict="denied",reason="allowed-headers-forbidden"\} 1/,
    );
    assert.match(m.body, /fgentic_webhook_reviews_total\{kind="unknown",verdict="error",reason="malformed"\} 1/);
    assert.match(m.body, /fgentic_webhook_reviews_total\{kind="unknown",verdict="error",reason="too-large"\} 1/);
    assert.match(m.body, /fgentic_webhook_review_duration_seconds_bucket/);
    assert.match(m.body, /fgentic_webhook_certificate_not_after_seconds \d/);
  });

  test('a rotated certificate is picked up without a restart; a broken pair is ignored', async () => {
    const before = await call(srv.port, [first.cert], 'GET', '/healthz');
    assert.equal(before.fingerprint, new X509Certificate(first.cert).fingerprint256);
    const second = makeCert(join(dir, 'gen2'), 'fgentic-webhook-2');
    publish('v2', join(dir, 'gen2'));
    const want = new X509Certificate(second.cert).fingerprint256;
    await waitFor(
      'new certificate served after rotation',
      async () => (await call(srv.port, [first.cert, second.cert], 'GET', '/healthz')).fingerprint === want,
      { intervalMs: 100 },
    );
    // A certificate that does not match its key (a half-written rotation) keeps the current pair.
    mkdirSync(join(dir, 'gen3'));
    const third = makeCert(join(dir, 'gen3x'), 'fgentic-webhook-3');
    writeFileSync(join(dir, 'gen3', 'tls.crt'), third.cert);
    writeFileSync(join(dir, 'gen3', 'tls.key'), second.key);
    publish('v3', join(dir, 'gen3'));
    assert.equal(srv.reloadCertificate(), false);
    const still = await call(srv.port, [second.cert], 'GET', '/healthz');
    assert.equal(still.fingerprint, want);
    const m = await call(srv.port, [second.cert], 'GET', '/metrics');
    assert.match(m.body, /fgentic_webhook_certificate_reloads_total\{result="reloaded"\} 1/);
    assert.match(m.body, /fgentic_webhook_certificate_reloads_total\{result="failed"\} [1-9]/);
  });
});
