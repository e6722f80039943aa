import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { admissionReview, plainAgent, platform, retrievalAgentCr } from '../testkit/webhook.ts';
import { review, reviewBytes } from './review.ts';
import { StaticClusterView } from './view.ts';

const view = new StaticClusterView([platform(), retrievalAgentCr()]);

function mutate(fn: (req: Record<string, unknown>, body: Record<string, unknown>) => void) {
  const body = admissionReview(plainAgent(), { uid: 'u-1' });
  fn(body['request'] as Record<string, unknown>, body);
  return review(JSON.parse(JSON.stringify(body)), view).review.response;
}

describe('malformed AdmissionReviews are answered, never thrown', () => {
  for (const [name, fn, text] of [
    [
      'wrong apiVersion',
      (_r: Record<string, unknown>, b: Record<string, unknown>) => {
        b['apiVersion'] = 'admission.k8s.io/v1beta1';
      },
      /apiVersion must be admission.k8s.io\/v1/,
    ],
    [
      'wrong kind',
      (_r: Record<string, unknown>, b: Record<string, unknown>) => {
        b['kind'] = 'Review';
      },
      /kind must be AdmissionReview/,
    ],
    [
      'no request',
      (_r: Record<string, unknown>, b: Record<string, unknown>) => {
        delete b['request'];
      },
      /request is missing/,
    ],
    [
      'no uid',
      (r: Record<string, unknown>) => {
        delete r['uid'];
      },
      /request.uid is missing/,
    ],
    [
      'bad kind',
      (r: Record<string, unknown>) => {
        r['kind'] = 'Agent';
      },
      /request.kind/,
    ],
    [
      'bad operation',
      (r: Record<string, unknown>) => {
        r['operation'] = 'PATCH';
      },
      /operation/,
    ],
    [
      'object not an object',
      (r: Record<string, unknown>) => {
        r['object'] = [1];
      },
      /request.object must be an object/,
    ],
    [
      'CREATE without object',
      (r: Record<string, unknown>) => {
        r['object'] = null;
      },
      /CREATE without request.object/,
    ],
    [
      'UPDATE without oldObject',
      (r: Record<string, unknown>) => {
        r['operation'] = 'UPDATE';
      },
      /UPDATE without request.oldObject/,
    ],
    [
      'subresource',
      (r: Record<string, unknown>) => {
        r['subResource'] = 'status';
      },
      /subresources/,
    ],
  ] as const) {
    test(name, () => {
      const r = mutate(fn);
      assert.equal(r.allowed, false);
      assert.equal(r.status?.code, 400);
      assert.equal(r.status?.reason, 'BadRequest');
      assert.match(r.status?.message ?? '', /^malformed AdmissionReview: /);
      assert.match(r.status?.message ?? '', text);
      if (name !== 'no uid' && name !== 'no request') assert.equal(r.uid, 'u-1');
    });
  }

  test('invalid JSON bytes', () => {
    const out = reviewBytes('{"apiVersion":', view);
    assert.equal(out.review.response.allowed, false);
    assert.equal(out.review.response.status?.code, 400);
    assert.equal(out.verdict, 'error');
  });

  test('arbitrary JSON bodies never throw and always deny unless well-formed', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const out = review(v, view);
        assert.equal(out.review.apiVersion, 'admission.k8s.io/v1');
        assert.equal(typeof out.review.response.uid, 'string');
        assert.equal(out.review.response.allowed, false);
      }),
      { numRuns: 2000 },
    );
  });

  test('arbitrary bytes never throw', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b).toString('latin1')),
        ),
        (s) => {
          const out = reviewBytes(s, view);
          assert.equal(out.review.response.allowed, false);
          assert.equal(out.verdict, 'error');
        },
      ),
      { numRuns: 1000 },
    );
  });

  test('arbitrary objects in a well-formed envelope never throw', () => {
    const anyObj = fc.dictionary(fc.string(), fc.jsonValue());
    fc.assert(
      fc.property(
        fc.constantFrom('CREATE', 'UPDATE', 'DELETE'),
        fc.constantFrom(
          ['kagent.dev', 'v1alpha2', 'Agent'],
          ['kagent.dev', 'v1alpha1', 'Agent'],
          ['kagent.dev', 'v1alpha2', 'RemoteMCPServer'],
          ['retrieval.fgentic.dev', 'v1alpha1', 'RetrievalRoom'],
          ['retrieval.fgentic.dev', 'v1alpha1', 'PartnerClient'],
          ['retrieval.fgentic.dev', 'v1alpha1', 'RetrievalPlatform'],
          ['retrieval.fgentic.dev', 'v1alpha1', 'RetrievalAgent'],
        ),
        anyObj,
        anyObj,
        fc.record({ spec: fc.jsonValue(), metadata: fc.jsonValue() }),
        (operation, [group, version, kind], object, oldObject, shaped) => {
          for (const obj of [object, shaped]) {
            const body = {
              apiVersion: 'admission.k8s.io/v1',
              kind: 'AdmissionReview',
              request: {
                uid: 'x',
                kind: { group, version, kind },
                operation,
                userInfo: { username: 'u' },
                object: obj,
                oldObject,
              },
            };
            const out = review(body, view);
            assert.equal(out.review.response.uid, 'x');
            assert.notEqual(out.review.response.status?.code, 500, out.review.response.status?.message);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });

  test('denials carry a 403 and a message naming the object', () => {
    const r = mutate((req) => {
      (
        (
          ((req['object'] as Record<string, unknown>)['spec'] as Record<string, unknown>)['declarative'] as Record<
            string,
            unknown
          >
        )['tools'] as Record<string, Record<string, unknown>>[]
      )[0]!['mcpServer']!['allowedHeaders'] = ['Cookie'];
    });
    assert.equal(r.uid, 'u-1');
    assert.equal(r.status?.code, 403);
    assert.equal(r.status?.reason, 'Forbidden');
    assert.match(r.status?.message ?? '', /^Agent team-a\/helper denied by fgentic-retrieval: /);
    assert.match(r.status?.message ?? '', /"Cookie": credential headers must never be propagated/);
  });
});

describe('a review that throws', () => {
  test('is denied with 500 (fail closed) and carries the thrown class and code, never the message', () => {
    const view = new StaticClusterView([platform()]);
    const thrown = Object.assign(new TypeError('content-that-must-not-be-logged'), { code: 'ERR_TEST' });
    // The cluster view fails mid-review, as a broken cache would.
    view.partners = () => {
      throw thrown;
    };
    const out = review(admissionReview(platform()), view);
    assert.equal(out.review.response.allowed, false);
    assert.equal(out.review.response.status?.code, 500);
    assert.equal(out.reason, 'internal');
    assert.deepEqual(out.error, { error: 'TypeError', code: 'ERR_TEST' });
    assert.ok(!JSON.stringify(out).includes('content-that-must-not-be-logged'));
  });
});
