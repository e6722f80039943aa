import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseStrictJson } from './strict-json.ts';

const rejects = (text: string, error = 'json') => {
  const r = parseStrictJson(text);
  assert.equal(r.ok, false, `accepted ${JSON.stringify(text)}`);
  assert.equal(r.ok ? undefined : r.error, error);
};

describe('strict JSON parser', () => {
  test('rejects duplicate member names, also after unescaping', () => {
    rejects('{"a":1,"a":2}', 'duplicate_name');
    rejects('{"a":1,"\\u0061":2}', 'duplicate_name');
    rejects('{"x":{"b":1,"b":1}}', 'duplicate_name');
  });
  test('rejects lone surrogates, escaped or raw', () => {
    rejects('"\\ud800"');
    rejects('"\\udc00x"');
    rejects('"\ud800"');
    assert.ok(parseStrictJson('"\\ud83d\\ude00"').ok);
  });
  test('rejects trailing data and empty input', () => {
    rejects('{} {}');
    rejects('1 2');
    rejects('');
    rejects('   ');
  });
  test('rejects non-finite and malformed numbers', () => {
    for (const n of ['1e400', '-1e400', 'NaN', 'Infinity', '01', '+1', '.5', '1.', '1e', '-', '0x10']) rejects(n);
  });
  test('rejects what JSON.parse would not accept either', () => {
    for (const t of ["{'a':1}", '{"a":1,}', '[1,]', '{a:1}', '"\t"', '"\\x41"', 'tru', 'nul', '[', '{"a"}']) rejects(t);
  });
  test('bounds depth and length', () => {
    assert.ok(parseStrictJson('[[[[1]]]]', { maxDepth: 4 }).ok);
    assert.equal(parseStrictJson('[[[[[1]]]]]', { maxDepth: 4 }).ok, false);
    assert.equal(parseStrictJson('"abcdef"', { maxLength: 5 }).ok, false);
    assert.equal(parseStrictJson(`${'['.repeat(100000)}${']'.repeat(100000)}`).ok, false);
  });
  test('keeps __proto__ as an ordinary member', () => {
    const r = parseStrictJson('{"__proto__":{"polluted":true}}');
    assert.ok(r.ok);
    assert.equal(Object.getPrototypeOf(r.value), Object.prototype);
    assert.deepEqual(Object.keys(r.value as object), ['__proto__']);
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  });
  test('property: agrees with JSON.parse on JSON.stringify output', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const text = JSON.stringify(v);
        const r = parseStrictJson(text);
        assert.ok(r.ok);
        assert.deepEqual(r.value, JSON.parse(text));
      }),
      { numRuns: 500 },
    );
  });
  test('property: arbitrary strings never throw', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const r = parseStrictJson(s);
        assert.equal(typeof r.ok, 'boolean');
      }),
      { numRuns: 2000 },
    );
  });
});
