/**
 * Fail closed on identity, not on plumbing: a service mesh, proxy or tracing setup between the gateway
 * and the projector adds headers the rendered policy never sends. Those are ignored and counted; every
 * identity-bearing or credential header still denies. The rule lives in `classifyHeader`
 * (projector/request.ts); these tests show that no ignored header can change any decision.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { sendCheck } from '../testkit/projector/client.ts';
import { config, fixedRandom, localRequest, NOW, publicRequest, roomContext } from '../testkit/projector/fixtures.ts';
import { type Decision, decide } from './decide.ts';
import { startProjector } from './index.ts';
import { type CheckRequest, classifyHeader, ignoredHeaderLabel, type RouteName } from './request.ts';

const cfg = config();
const run = (req: CheckRequest): Decision => decide(req, cfg, { now: NOW, randomBytes: fixedRandom });

function withHeaders(req: CheckRequest, extra: Record<string, string[]>): CheckRequest {
  return { ...req, headers: { ...req.headers, ...extra } };
}

/** Header families real meshes and tracers add, with realistic values. */
const FAMILIES: Record<string, Record<string, string[]>> = {
  'W3C trace context / OpenTelemetry': {
    traceparent: ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
    tracestate: ['rojo=00f067aa0ba902b7'],
    baggage: ['userId=alice,serverNode=DF%2028'],
  },
  'Zipkin B3': {
    'x-b3-traceid': ['80f198ee56343ba864fe8b2a57d3eff7'],
    'x-b3-spanid': ['e457b5a2e4d86bd1'],
    'x-b3-parentspanid': ['05e3ac9a4f6e3b90'],
    'x-b3-sampled': ['1'],
    b3: ['80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1'],
  },
  'Istio sidecar / Envoy': {
    'x-request-id': ['3e8a4f0c-7d1b-4b7e-9f1a-2c3d4e5f6a7b'],
    'x-forwarded-client-cert': [
      'By=spiffe://cluster.local/ns/knowledge/sa/projector;URI=spiffe://cluster.local/ns/agentgateway-system/sa/proxy',
    ],
    'x-envoy-attempt-count': ['1'],
    'x-envoy-external-address': ['10.0.0.7'],
    'x-envoy-expected-rq-timeout-ms': ['1000'],
    'x-envoy-peer-metadata-id': ['sidecar~10.0.0.7~proxy.agentgateway-system~cluster.local'],
    'x-istio-attributes': ['Cj8KGGRlc3RpbmF0aW9uLnNlcnZpY2UuaG9zdBIjEiFmZ2VudGlj'],
  },
  Linkerd: { 'l5d-client-id': ['proxy.agentgateway-system.serviceaccount.identity.linkerd.cluster.local'] },
  'forwarding proxies': {
    'x-forwarded-for': ['10.0.0.1, 10.0.0.2'],
    'x-forwarded-proto': ['http'],
    'x-forwarded-host': ['gateway.example'],
    'x-forwarded-port': ['8080'],
    'x-real-ip': ['10.0.0.1'],
    forwarded: ['for=10.0.0.1;proto=http'],
    via: ['1.1 envoy'],
  },
  'vendor tracers': {
    'x-datadog-trace-id': ['1234567890'],
    'x-datadog-parent-id': ['987654321'],
    'x-amzn-trace-id': ['Root=1-5759e988-bd862e3fe1be46a994272793'],
    'x-cloud-trace-context': ['105445aa7843bc8bf206b120001000/1;o=1'],
    'uber-trace-id': ['4bf92f3577b34da6:00f067aa0ba902b7:0:1'],
  },
};

const REQUESTS: Record<string, () => CheckRequest> = {
  'allowed local': () => localRequest(),
  'allowed public': () => publicRequest(),
  'denied local (duplicate x-user-id)': () => localRequest({ headers: { 'x-fgentic-check-user-id-count': ['2'] } }),
  'denied local (unregistered room)': () =>
    localRequest({ ctx: roomContext({ roomId: '!unknown:org-a.example' } as never) }),
  'denied public (unknown client)': () => publicRequest({ azp: 'someone-else' }),
};

describe('plumbing headers are ignored and cannot change a decision', () => {
  for (const [family, extra] of Object.entries(FAMILIES)) {
    test(`${family}: every decision is identical with and without them`, () => {
      for (const [name, make] of Object.entries(REQUESTS)) {
        const route: RouteName = make().headers['x-fgentic-check-route']?.[0] === 'public' ? 'public' : 'local';
        for (const h of Object.keys(extra)) assert.equal(classifyHeader(h, route), 'ignored', h);
        assert.deepEqual(run(withHeaders(make(), extra)), run(make()), `${family} on ${name}`);
      }
      assert.ok(run(withHeaders(localRequest(), extra)).allow);
      assert.ok(run(withHeaders(publicRequest(), extra)).allow);
    });
  }

  test('property: any header the rule ignores, with any values, leaves every decision unchanged', () => {
    const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,30}$/);
    const values = fc.array(fc.string({ maxLength: 40 }), { minLength: 1, maxLength: 3 });
    fc.assert(
      fc.property(
        fc.dictionary(name, values, { maxKeys: 6 }),
        fc.constantFrom(...Object.keys(REQUESTS)),
        (extra, which) => {
          const base = REQUESTS[which]!();
          const route: RouteName = base.headers['x-fgentic-check-route']?.[0] === 'public' ? 'public' : 'local';
          const ignored: Record<string, string[]> = {};
          for (const [k, v] of Object.entries(extra))
            if (base.headers[k] === undefined && classifyHeader(k, route) === 'ignored') ignored[k] = v;
          assert.deepEqual(run(withHeaders(base, ignored)), run(base));
        },
      ),
      { numRuns: 300 },
    );
  });

  test('the metric label is bounded: known names, families, or "other"', () => {
    assert.equal(ignoredHeaderLabel('traceparent'), 'traceparent');
    assert.equal(ignoredHeaderLabel('x-b3-traceid'), 'x-b3-*');
    assert.equal(ignoredHeaderLabel('x-envoy-attempt-count'), 'x-envoy-*');
    assert.equal(ignoredHeaderLabel('x-something-made-up-1234'), 'other');
  });
});

describe('identity-bearing and credential headers still deny', () => {
  const cases: [string, string[], RouteName[], string][] = [
    ['x-fgentic-unknown', ['1'], ['local', 'public'], 'unexpected_header'],
    ['x-fgentic-data-classification', ['public'], ['local', 'public'], 'unexpected_header'],
    ['x-fgentic-check-jwt-issuer', ['https://idp.example'], ['local'], 'unexpected_header'],
    ['x-fgentic-check-workload', ['matrix-a2a-bridge'], ['public'], 'unexpected_header'],
    ['x-user-id', ['@alice:org-a.example'], ['public'], 'unexpected_header'],
    ['x-forwarded-user', ['alice'], ['local', 'public'], 'unexpected_header'],
    ['x-auth-request-email', ['alice@org-a.example'], ['local', 'public'], 'unexpected_header'],
    ['x-remote-group', ['admins'], ['local', 'public'], 'unexpected_header'],
    ['x-ms-client-principal-name', ['alice'], ['local', 'public'], 'unexpected_header'],
    ['authorization', ['Bearer x'], ['local', 'public'], 'credential_header'],
    ['proxy-authorization', ['Basic x'], ['local', 'public'], 'credential_header'],
    ['cookie', ['s=1'], ['local', 'public'], 'credential_header'],
    ['x-api-key', ['k'], ['local', 'public'], 'credential_header'],
    ['x-forwarded-access-token', ['t'], ['local', 'public'], 'credential_header'],
    ['x-amzn-oidc-data', ['eyJ'], ['local', 'public'], 'credential_header'],
    ['x-goog-iap-jwt-assertion', ['eyJ'], ['local', 'public'], 'credential_header'],
    ['x-csrf-token', ['t'], ['local', 'public'], 'credential_header'],
    ['x-fgentic-identity', ['e30'], ['local', 'public'], 'identity_present'],
  ];
  for (const [header, value, routes, reason] of cases) {
    for (const route of routes) {
      test(`${header} on the ${route} route denies ${reason}`, () => {
        const base = route === 'local' ? localRequest() : publicRequest();
        const d = run(withHeaders(base, { [header]: value }));
        assert.equal(d.allow, false);
        if (!d.allow) assert.equal(d.reason, reason);
      });
    }
  }

  test('plumbing beside a duplicated projected input still denies duplicate', () => {
    const d = run(
      withHeaders(
        localRequest({ headers: { 'x-fgentic-check-room-context-count': ['2'] } }),
        FAMILIES['Istio sidecar / Envoy']!,
      ),
    );
    assert.equal(d.allow, false);
    if (!d.allow) assert.equal(d.reason, 'duplicate');
  });
});

describe('ignored headers are counted by name, never by value', () => {
  test('the HTTP server allows with mesh headers and exports the counter without values', async () => {
    const p = await startProjector({ config: config(), now: () => NOW, randomBytes: fixedRandom });
    try {
      const r = await sendCheck(
        p.url,
        withHeaders(localRequest(), {
          traceparent: ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
          'x-b3-traceid': ['secretlookingvalue0001'],
          'x-made-up-plumbing': ['zzz-value'],
        }),
      );
      assert.equal(r.status, 200);
      const metrics = await (await fetch(`${p.url}/metrics`)).text();
      assert.match(metrics, /fgentic_projector_ignored_headers_total\{route="local",header="traceparent"\} 1/);
      assert.match(metrics, /fgentic_projector_ignored_headers_total\{route="local",header="x-b3-\*"\} 1/);
      assert.match(metrics, /fgentic_projector_ignored_headers_total\{route="local",header="other"\} 1/);
      assert.doesNotMatch(metrics, /secretlookingvalue0001|zzz-value|x-made-up-plumbing/);
    } finally {
      await p.close();
    }
  });
});
