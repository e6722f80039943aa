import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { decodeBase64url, encodeBase64url } from './base64url.ts';

describe('unpadded base64url', () => {
  test('round-trips every byte string', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const text = encodeBase64url(bytes);
        assert.match(text, /^[A-Za-z0-9_-]*$/);
        assert.deepEqual(decodeBase64url(text), bytes);
      }),
      { numRuns: 500 },
    );
  });
  test('rejects padding, the standard alphabet and whitespace', () => {
    for (const t of ['eyJ2IjoxfQ==', 'eyJ2IjoxfQ=', 'ab+c', 'ab/c', 'ab c', 'abc\n', ' abc', 'abc\t'])
      assert.equal(decodeBase64url(t), undefined, t);
  });
  test('rejects an impossible length', () => {
    assert.equal(decodeBase64url('abcde'), undefined);
    assert.equal(decodeBase64url('a'), undefined);
  });
  test('rejects non-zero trailing bits, so each byte string has one encoding', () => {
    assert.deepEqual(decodeBase64url('QQ'), new Uint8Array([0x41]));
    assert.equal(decodeBase64url('QR'), undefined);
    assert.deepEqual(decodeBase64url('QUE'), new Uint8Array([0x41, 0x41]));
    assert.equal(decodeBase64url('QUF'), undefined);
  });
  test('property: only canonical text decodes', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...'ABCDEFabcdef0123456789-_=+/ '.split('')) }), (s) => {
        const bytes = decodeBase64url(s);
        if (bytes !== undefined) assert.equal(encodeBase64url(bytes), s);
      }),
      { numRuns: 2000 },
    );
  });
});
