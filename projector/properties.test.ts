/** fast-check properties: arbitrary check requests never throw and never allow without a valid room context. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { decodeRoomContext } from '../contract/index.ts';
import { config, fixedRandom, localRequest, NOW, publicRequest } from '../testkit/projector/fixtures.ts';
import { decide } from './decide.ts';
import type { CheckRequest } from './request.ts';

const cfg = config();
const NAMES = [
  ...Object.keys(localRequest().headers),
  ...Object.keys(publicRequest().headers),
  'x-fgentic-identity',
  'x-fgentic-check-identity-count',
  'authorization',
  'cookie',
  'content-length',
  'x-envoy-auth-partial-body',
  'x-other',
];
const validLocal = localRequest();
const validPublic = publicRequest();

const headerValue = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom('1', '2', '0', 'local', 'public', 'kagent', 'knowledge-agent', 'matrix-a2a-bridge'),
  fc.constantFrom(
    ...Object.values(validLocal.headers).flat(),
    ...Object.values(validPublic.headers).flat(),
  ) as fc.Arbitrary<string>,
);
const headerMap = fc.dictionary(
  fc.oneof(fc.constantFrom(...NAMES), fc.string({ maxLength: 12 })),
  fc.array(headerValue, { maxLength: 3 }),
);
const request = fc.record({
  method: fc.constantFrom('POST', 'GET', 'PUT', ''),
  path: fc.constantFrom(validLocal.path, validPublic.path, '/', '/healthz'),
  headers: headerMap,
});

function allowedWithoutValidContext(req: CheckRequest): boolean {
  const d = decide(req, cfg, { now: NOW, randomBytes: fixedRandom });
  if (!d.allow) return false;
  if (d.route === 'public') return false; // checked separately below
  return !decodeRoomContext(req.headers['x-fgentic-room-context']).ok;
}

describe('projector properties', () => {
  test('arbitrary header maps never throw and never allow without a valid room context', () => {
    fc.assert(
      fc.property(request, (req) => {
        const d = decide(req, cfg, { now: NOW, randomBytes: fixedRandom });
        assert.equal(typeof d.allow, 'boolean');
        if (d.allow) {
          assert.equal(d.route, req.headers['x-fgentic-check-route']?.[0]);
          if (d.route === 'local') assert.ok(decodeRoomContext(req.headers['x-fgentic-room-context']).ok);
        }
        assert.equal(allowedWithoutValidContext(req), false);
      }),
      { numRuns: 3000 },
    );
  });

  test('mutating a valid local request (drop, duplicate, replace, add a header) never yields an allow with other identity', () => {
    const mutation = fc.record({
      name: fc.constantFrom(...NAMES),
      op: fc.constantFrom('drop', 'dup', 'replace', 'add'),
      value: headerValue,
    });
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 1, maxLength: 3 }), (muts) => {
        const headers: Record<string, string[]> = {};
        for (const [k, v] of Object.entries(validLocal.headers)) headers[k] = [...(v ?? [])];
        for (const m of muts) {
          if (m.op === 'drop') delete headers[m.name];
          else if (m.op === 'dup') headers[m.name] = [...(headers[m.name] ?? []), ...(headers[m.name] ?? [m.value])];
          else if (m.op === 'replace') headers[m.name] = [m.value];
          else headers[m.name] = [...(headers[m.name] ?? []), m.value];
        }
        const req = { ...validLocal, headers };
        const d = decide(req, cfg, { now: NOW, randomBytes: fixedRandom });
        if (d.allow) {
          // Only possible when the mutations were no-ops on every identity input.
          assert.deepEqual(
            d.headers,
            (decide(validLocal, cfg, { now: NOW, randomBytes: fixedRandom }) as { headers: unknown }).headers,
          );
          for (const name of [
            'x-user-id',
            'x-fgentic-room-context',
            'x-fgentic-check-workload',
            'x-fgentic-check-user-id-count',
          ]) {
            assert.deepEqual(headers[name], validLocal.headers[name]);
          }
        }
      }),
      { numRuns: 2000 },
    );
  });

  test('without a configuration everything denies', () => {
    fc.assert(
      fc.property(request, (req) => {
        const d = decide(req, undefined, { now: NOW, randomBytes: fixedRandom });
        assert.equal(d.allow, false);
      }),
      { numRuns: 300 },
    );
    assert.equal(decide(validLocal, undefined, { now: NOW, randomBytes: fixedRandom }).allow, false);
  });
});
