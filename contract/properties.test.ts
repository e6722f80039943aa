/** Property tests over the projection decoder: round-trips, mutations, arbitrary input. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { AGENT, encode, IAT, matrixExample, NOW, oauthExample } from '../testkit/contract/fixtures.ts';
import { decodeProjection, encodeCarrier, encodeProjection, jcs, type Projection } from './index.ts';

const opts = { now: NOW, agents: [AGENT] };
const local = fc.stringMatching(/^[a-z0-9._=/+-]{1,20}$/);
const label = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/);

const principal = fc.oneof(
  fc.record({ kind: fc.constant('matrix' as const), principal: local.map((l) => `@${l}:org-a.example`) }),
  fc.record({
    kind: fc.constant('bridged_matrix' as const),
    network: label,
    principal: local.map((l) => `@${l}:org-a.example`),
  }),
);
const cmp = (a: { kind: string; network?: string; principal: string }, b: typeof a) =>
  Buffer.compare(
    Buffer.from(`${a.kind}\0${a.network ?? ''}\0${a.principal}`),
    Buffer.from(`${b.kind}\0${b.network ?? ''}\0${b.principal}`),
  );

const matrixProjection: fc.Arbitrary<Projection> = fc
  .record({
    audience: fc.uniqueArray(principal, { minLength: 1, maxLength: 16, selector: (p) => jcs(p) }),
    callerIndex: fc.nat(),
    lifetime: fc.integer({ min: 1, max: 600 }),
    cls: fc.constantFrom(['public'], ['approved_non_public', 'public']),
    delegation: fc.stringMatching(/^[0-9a-f]{64}$/),
  })
  .map(({ audience, callerIndex, lifetime, cls, delegation }) => {
    const sorted = [...audience].sort(cmp);
    const caller = sorted[callerIndex % sorted.length]!;
    return {
      ...(matrixExample() as unknown as Projection),
      ...caller,
      audience: sorted,
      allowed_classifications: cls,
      delegation_id: delegation,
      iat: IAT,
      exp: IAT + lifetime,
    } as unknown as Projection;
  })
  .filter((p) => NOW < p.exp);

const oauthProjection: fc.Arbitrary<Projection> = fc.uniqueArray(label, { minLength: 1, maxLength: 16 }).map((gs) => {
  const groups = gs.map((g) => `partner/org-b/${g}`).sort();
  return { ...(oauthExample() as unknown as Projection), groups } as Projection;
});

describe('projection properties', () => {
  test('encode → decode round-trips Matrix and OAuth projections', () => {
    fc.assert(
      fc.property(fc.oneof(matrixProjection, oauthProjection), (p) => {
        const enc = encodeProjection(p);
        assert.ok(enc.ok, enc.ok ? '' : enc.reason);
        const dec = decodeProjection(enc.value, opts);
        assert.ok(dec.ok, dec.ok ? '' : dec.reason);
        assert.equal(jcs(dec.value), jcs(p));
      }),
      { numRuns: 300 },
    );
  });

  // A mutation may land inside a free-form string and still decode; what must never happen is a second
  // encoding of the same object, or an accepted value that is not the canonical encoding of its content.
  test('any single-character mutation of a valid header is rejected or is the canonical encoding of a different object', () => {
    const header = encode(matrixExample());
    const original = jcs(matrixExample());
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/ ';
    fc.assert(
      fc.property(fc.nat({ max: header.length - 1 }), fc.constantFrom(...alphabet.split('')), (at, ch) => {
        const mutated = header.slice(0, at) + ch + header.slice(at + 1);
        const dec = decodeProjection(mutated, opts);
        if (dec.ok) {
          assert.equal(encodeCarrier(dec.value), mutated);
          assert.equal(jcs(dec.value) === original, mutated === header);
        }
      }),
      { numRuns: 3000 },
    );
  });

  test('any byte mutation of the decoded JSON is rejected or yields a canonical, different object', () => {
    const bytes = new TextEncoder().encode(jcs(oauthExample()));
    fc.assert(
      fc.property(fc.nat({ max: bytes.length - 1 }), fc.integer({ min: 0, max: 255 }), (at, b) => {
        const copy = bytes.slice();
        copy[at] = b;
        const mutated = Buffer.from(copy).toString('base64url');
        const dec = decodeProjection(mutated, opts);
        if (dec.ok) {
          assert.equal(encodeCarrier(dec.value), mutated);
          assert.equal(jcs(dec.value) === jcs(oauthExample()), b === bytes[at]);
        }
      }),
      { numRuns: 3000 },
    );
  });

  test('arbitrary strings and header shapes never throw', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.string({ unit: 'binary' }),
          fc.array(fc.string()),
          fc.constant(undefined),
          fc.constant(null),
          fc.jsonValue().map((v) => encode(v)),
        ),
        fc.integer(),
        (h, now) => {
          const dec = decodeProjection(h as string, { now, agents: [AGENT] });
          assert.equal(typeof dec.ok, 'boolean');
        },
      ),
      { numRuns: 3000 },
    );
  });

  test('encoder refuses invalid projections', () => {
    const bad = {
      ...(matrixExample() as unknown as Projection),
      groups: ['partner/org-b/docs'],
    } as unknown as Projection;
    const r = encodeProjection(bad);
    assert.equal(r.ok ? 'ok' : r.reason, 'groups');
  });

  test('encoder refuses a projection over 8,192 encoded bytes', () => {
    const audience = [
      ...Array.from({ length: 15 }, (_, k) => ({
        kind: 'bridged_matrix',
        network: `n${String(k).padStart(2, '0')}${'x'.repeat(60)}`,
        principal: `@p${String(k).padStart(2, '0')}${'x'.repeat(237)}:org-a.example`,
      })),
      { kind: 'matrix', principal: '@alice:org-a.example' },
    ];
    const base = matrixExample();
    const room = { ...(base['room'] as object), event_id: `$${'e'.repeat(254)}` };
    const p = { ...(base as unknown as Projection), audience, room } as unknown as Projection;
    const r = encodeProjection(p);
    assert.equal(r.ok ? 'ok' : r.reason, 'oversized');
  });

  test('an empty agent list denies everything', () => {
    const r = decodeProjection(encode(matrixExample()), { now: NOW, agents: [] });
    assert.equal(r.ok ? 'ok' : r.reason, 'agent_mismatch');
  });
});
