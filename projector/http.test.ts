/**
 * Drives the real HTTP server with the requests agentgateway v1.3.1 sends for the rendered policy
 * (docs/upstream.md#agentgateway-ext-auth-request; docs/interfaces.md): original method and path, Host = the
 * projector, only the allowlisted raw headers plus the x-fgentic-check-* CEL headers, no body.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { decodeProjection, encodeRoomContext } from '../contract/index.ts';
import { waitFor } from '../testkit/common/index.ts';
import { countHeader, sendCheck } from '../testkit/projector/client.ts';
import {
  ALICE,
  config,
  configJson,
  fixedRandom,
  localRequest,
  NOW,
  publicRequest,
  roomContext,
} from '../testkit/projector/fixtures.ts';
import { type RunningProjector, startProjector } from './index.ts';

let p: RunningProjector;

function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request(url, { headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on('error', reject)
      .end();
  });
}

describe('ext-auth HTTP server (agentgateway v1.3.1 wire contract)', () => {
  before(async () => {
    p = await startProjector({ config: config(), now: () => NOW, randomBytes: fixedRandom });
  });
  after(() => p.close());

  test('local route: 200 with exactly one x-fgentic-identity and one x-user-id, empty body', async () => {
    const r = await sendCheck(p.url, localRequest());
    assert.equal(r.status, 200);
    assert.equal(countHeader(r, 'x-fgentic-identity'), 1);
    assert.equal(countHeader(r, 'x-user-id'), 1);
    assert.equal(r.headers['x-user-id'], ALICE);
    assert.equal(r.body, '');
    const d = decodeProjection(String(r.headers['x-fgentic-identity']), {
      now: NOW,
      agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
    });
    assert.ok(d.ok);
  });

  test('public route: 200 with exactly one x-fgentic-identity and one x-user-id', async () => {
    const r = await sendCheck(p.url, publicRequest());
    assert.equal(r.status, 200);
    assert.equal(countHeader(r, 'x-fgentic-identity'), 1);
    assert.equal(countHeader(r, 'x-user-id'), 1);
    assert.match(String(r.headers['x-user-id']), /^oidc:org-b:[0-9a-f]{64}$/);
  });

  test('response always carries both headers: every 2xx in a mixed run has both, exactly once', async () => {
    const reqs = [
      localRequest(),
      publicRequest(),
      localRequest({ headers: { 'x-fgentic-check-user-id-count': ['2'] } }),
      publicRequest({ exp: NOW + 60 }),
      localRequest({ userId: 'alice' }),
    ];
    let allowed = 0;
    for (const q of reqs) {
      const r = await sendCheck(p.url, q);
      if (r.status >= 200 && r.status < 300) {
        allowed += 1;
        assert.equal(countHeader(r, 'x-fgentic-identity'), 1);
        assert.equal(countHeader(r, 'x-user-id'), 1);
      } else {
        assert.equal(countHeader(r, 'x-fgentic-identity'), 0);
        assert.equal(countHeader(r, 'x-user-id'), 0);
      }
    }
    assert.equal(allowed, 2);
  });

  test('denial: 403 JSON with the reason code and no echo of inputs', async () => {
    const r = await sendCheck(p.url, localRequest({ userId: '@mallory:org-a.example' }));
    assert.equal(r.status, 403);
    assert.equal(r.headers['content-type'], 'application/json');
    assert.equal(r.body, '{"error":"denied","reason":"caller_mismatch"}');
    assert.ok(!r.body.includes('mallory') && !r.body.includes('alice'));
  });

  test('missing raw identity header (count header removed by CEL error): 401 missing', async () => {
    const r = await sendCheck(
      p.url,
      localRequest({ headers: { 'x-fgentic-check-user-id-count': undefined, 'x-user-id': undefined } }),
    );
    assert.equal(r.status, 401);
    assert.equal(r.body, '{"error":"denied","reason":"missing"}');
  });

  test('duplicate raw identity header (count 2; ext-auth forwards only the first value): 403 duplicate', async () => {
    const r = await sendCheck(p.url, localRequest({ headers: { 'x-fgentic-check-room-context-count': ['2'] } }));
    assert.equal(r.status, 403);
    assert.equal(r.body, '{"error":"denied","reason":"duplicate"}');
  });

  test('repeated header lines on the wire are seen as repeated, not joined', async () => {
    const r = await sendCheck(p.url, localRequest({ headers: { 'x-user-id': [ALICE, ALICE] } }));
    assert.equal(r.body, '{"error":"denied","reason":"duplicate"}');
  });

  test('any method reaches the decision; non-POST denies as method (no 405, no body parsing)', async () => {
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']) {
      const r = await sendCheck(p.url, { ...localRequest(), method });
      assert.equal(r.status, 403, method);
      assert.equal(r.body, '{"error":"denied","reason":"method"}');
    }
  });

  test('a forwarded content-type without a body is not parsed and still allows', async () => {
    const r = await sendCheck(p.url, localRequest({ headers: { 'content-type': ['application/json'] } }));
    assert.equal(r.status, 200);
  });

  test('a body (or x-envoy-auth-partial-body) denies without being parsed', async () => {
    const r = await sendCheck(
      p.url,
      localRequest({ headers: { 'content-type': ['application/json'] } }),
      '{"not":"parsed"',
    );
    assert.equal(r.body, '{"error":"denied","reason":"body"}');
    const r2 = await sendCheck(p.url, localRequest({ headers: { 'x-envoy-auth-partial-body': ['false'] } }));
    assert.equal(r2.body, '{"error":"denied","reason":"body"}');
  });

  test('chunked framing: an empty chunked body is no body (allow); any chunked byte denies', async () => {
    const empty = await sendCheck(p.url, localRequest({ headers: { 'transfer-encoding': ['chunked'] } }));
    assert.equal(empty.status, 200);
    assert.equal(countHeader(empty, 'x-fgentic-identity'), 1);
    const full = await sendCheck(p.url, localRequest({ headers: { 'transfer-encoding': ['chunked'] } }), 'x');
    assert.equal(full.body, '{"error":"denied","reason":"body"}');
  });

  test('no credential/cookie ever read: Authorization or Cookie on the check request denies', async () => {
    for (const h of [{ authorization: ['Bearer abc'] }, { cookie: ['sid=1'] }]) {
      const local = await sendCheck(p.url, localRequest({ headers: h }));
      assert.equal(local.body, '{"error":"denied","reason":"credential_header"}');
      const pub = await sendCheck(p.url, publicRequest({ headers: h }));
      assert.equal(pub.body, '{"error":"denied","reason":"credential_header"}');
    }
  });

  test('client-sent X-Fgentic-Identity (or its count) denies', async () => {
    const r = await sendCheck(p.url, publicRequest({ headers: { 'x-fgentic-check-identity-count': ['1'] } }));
    assert.equal(r.body, '{"error":"denied","reason":"identity_present"}');
  });

  test('header-size boundary: the largest valid room context reaches the decision; no oversized identity is ever emitted', async () => {
    // 16 native members with long localparts; grow them until the carrier no longer encodes.
    let largest: { ctx: string; caller: string } | undefined;
    for (let pad = 100; pad <= 240; pad += 1) {
      const members = Array.from({ length: 16 }, (_, k) => ({
        principal: `@u${String(k).padStart(2, '0')}${'x'.repeat(pad)}:org-a.example`,
        kind: 'matrix' as const,
        event_id: `$m${k}`,
      }));
      let ctx: ReturnType<typeof roomContext>;
      try {
        ctx = roomContext({ members, caller: { kind: 'matrix', principal: members[0]!.principal } });
      } catch {
        break;
      }
      const encoded = encodeRoomContext(ctx);
      if (!encoded.ok) break;
      largest = { ctx: encoded.value, caller: members[0]!.principal };
    }
    assert.ok(largest);
    // 16 MXIDs of 255 bytes: close to, not at, the 8,192-byte ceiling (the contract tests own the exact edge).
    assert.ok(largest.ctx.length > 6500 && largest.ctx.length <= 8192, String(largest.ctx.length));
    const r = await sendCheck(p.url, localRequest({ ctx: largest.ctx, userId: largest.caller }));
    // Node's default 16 KiB header limit admits it: the answer comes from the decision, not a 431.
    assert.ok(r.status === 200 || r.body.startsWith('{"error":"denied"'), String(r.status));
    if (r.status === 200) assert.ok(String(r.headers['x-fgentic-identity']).length <= 8192);
    else assert.match(r.body, /"reason":"(oversized|decoded_oversized)"/);
  });

  test('operations endpoints: /healthz, /readyz, /metrics with decision counters and latency', async () => {
    assert.equal((await get(`${p.url}/healthz`)).status, 200);
    assert.equal((await get(`${p.url}/readyz`)).status, 200);
    const m = await get(`${p.url}/metrics`);
    assert.equal(m.status, 200);
    assert.match(m.body, /fgentic_projector_decisions_total\{route="local",decision="allow",reason="ok"\} \d+/);
    assert.match(
      m.body,
      /fgentic_projector_decisions_total\{route="local",decision="deny",reason="caller_mismatch"\} \d+/,
    );
    assert.match(m.body, /fgentic_projector_check_duration_seconds_bucket/);
    assert.match(m.body, /fgentic_projector_config_ready 1/);
    assert.ok(!m.body.includes('alice'));
  });

  test('an ops path carrying identity inputs is a check, never a header-less 2xx', async () => {
    const r = await get(`${p.url}/healthz`, { 'x-fgentic-check-route': 'local' });
    assert.equal(r.status, 403);
  });
});

describe('configuration reload through the server', () => {
  test('invalid or missing file: deny-all (config) and /readyz 503; valid file: serves again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'projector-http-'));
    const file = join(dir, 'projector.json');
    const write = (text: string) => {
      writeFileSync(join(dir, 'tmp'), text);
      renameSync(join(dir, 'tmp'), file);
    };
    const s = await startProjector({ configPath: file, now: () => NOW, pollMs: 20 });
    try {
      assert.equal((await get(`${s.url}/readyz`)).status, 503);
      assert.equal((await sendCheck(s.url, localRequest())).body, '{"error":"denied","reason":"config"}');
      write(JSON.stringify(configJson()));
      await waitFor('ready', async () => (await get(`${s.url}/readyz`)).status === 200);
      assert.equal((await sendCheck(s.url, localRequest())).status, 200);
      // Invalid timeout setting: deny everything (both routes) and not ready.
      const bad = configJson() as Record<string, unknown>;
      bad['publicRetrievalTimeoutSeconds'] = 61;
      write(JSON.stringify(bad));
      await waitFor('not ready', async () => (await get(`${s.url}/readyz`)).status === 503);
      assert.equal((await sendCheck(s.url, localRequest())).body, '{"error":"denied","reason":"config"}');
      assert.equal((await sendCheck(s.url, publicRequest())).body, '{"error":"denied","reason":"config"}');
      write(JSON.stringify(configJson()));
      await waitFor('ready', async () => (await get(`${s.url}/readyz`)).status === 200);
      rmSync(file);
      await waitFor('not ready', async () => (await get(`${s.url}/readyz`)).status === 503);
      assert.equal((await sendCheck(s.url, publicRequest())).status, 403);
    } finally {
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
