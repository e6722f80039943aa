/** Logged error fields are the class and the code only: never the message, whatever was thrown. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { errorFields } from './error-fields.ts';

describe('errorFields', () => {
  test('a real errno error gives its class and errno name', () => {
    let caught: unknown;
    try {
      readFileSync('/nonexistent/secret-token-value');
    } catch (err) {
      caught = err;
    }
    assert.deepEqual(errorFields(caught), { error: 'Error', code: 'ENOENT' });
  });

  test('a parse error gives its class; its message, which quotes the input, is not there', () => {
    let caught: unknown;
    try {
      JSON.parse('{"token": "syt_secret" oops');
    } catch (err) {
      caught = err;
    }
    const f = errorFields(caught);
    assert.deepEqual(f, { error: 'SyntaxError' });
    assert.doesNotMatch(JSON.stringify(f), /syt_secret/);
  });

  test('a Postgres-style error gives its SQLSTATE', () => {
    class DatabaseError extends Error {
      override name = 'DatabaseError';
      code = '22P02';
    }
    assert.deepEqual(errorFields(new DatabaseError('invalid input syntax: "alice"')), {
      error: 'DatabaseError',
      code: '22P02',
    });
  });

  test('non-errors and odd names or codes say nothing of their content', () => {
    assert.deepEqual(errorFields('secret'), { error: 'non-error' });
    assert.deepEqual(errorFields(undefined), { error: 'non-error' });
    const odd = Object.assign(new Error('x'), { name: 'has space secret', code: 'lower case secret' });
    assert.deepEqual(errorFields(odd), { error: 'Error' });
  });

  test('property: the fields never contain the message and are plain tokens', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 4 }), fc.string(), fc.string(), (message, name, code) => {
        const err = Object.assign(new Error(message), { name, code });
        const f = errorFields(err);
        assert.match(f.error, /^[A-Za-z_$][A-Za-z0-9_$]*$/);
        if (f.code !== undefined) assert.match(f.code, /^[A-Z0-9_]+$/);
        // The fields are tokens taken from name/code only; a message is never copied in.
        if (message !== name && message !== code) {
          assert.notEqual(f.error, message);
          assert.notEqual(f.code, message);
        }
        assert.deepEqual(Object.keys(f).sort(), f.code === undefined ? ['error'] : ['code', 'error']);
      }),
    );
  });
});
