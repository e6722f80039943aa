/** The typed readers answer undefined for anything not of the asked type, and read own members only. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { asArray, asObject, field, isObject, objectField, stringField, stringsOf } from './json-read.ts';

test('objects are neither null nor arrays', () => {
  assert.equal(isObject({}), true);
  for (const v of [null, [], 'x', 1, undefined, true]) assert.equal(isObject(v), false);
  assert.equal(asObject([]), undefined);
});

test('members are own members of the asked type', () => {
  const o = JSON.parse('{"a":"x","b":1,"c":{"d":2},"__proto__":{"e":"y"}}');
  assert.equal(stringField(o, 'a'), 'x');
  assert.equal(stringField(o, 'b'), undefined);
  assert.deepEqual(objectField(o, 'c'), { d: 2 });
  assert.equal(field(o, 'toString'), undefined);
  assert.equal(stringField(o, 'e'), undefined);
  assert.equal(field('not an object', 'length'), undefined);
});

test('arrays', () => {
  assert.deepEqual(asArray([1]), [1]);
  assert.equal(asArray({ length: 1 }), undefined);
  assert.deepEqual(stringsOf(['a', 1, 'b', null]), ['a', 'b']);
  assert.deepEqual(stringsOf('a'), []);
});
