/** withTransaction: BEGIN with the asked modes, COMMIT on success, ROLLBACK and rethrow on a throw. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { beginStatement, withTransaction } from './transaction.ts';

function recorder(fail?: (text: string) => boolean) {
  const statements: string[] = [];
  return {
    statements,
    async query(text: string) {
      statements.push(text);
      if (fail?.(text)) throw new Error(`refused: ${text}`);
      return {};
    },
  };
}

describe('withTransaction', () => {
  test('commits what fn did and returns its value', async () => {
    const c = recorder();
    const v = await withTransaction(c, async (t) => {
      await t.query('SELECT 1');
      return 42;
    });
    assert.equal(v, 42);
    assert.deepEqual(c.statements, ['BEGIN', 'SELECT 1', 'COMMIT']);
  });

  test('rolls back and rethrows what fn threw, even when the rollback fails', async () => {
    const boom = new Error('boom');
    const c = recorder((t) => t === 'ROLLBACK');
    await assert.rejects(
      withTransaction(c, async () => {
        throw boom;
      }),
      (e) => e === boom,
    );
    assert.deepEqual(c.statements, ['BEGIN', 'ROLLBACK']);
  });

  test('a failed COMMIT rejects', async () => {
    const c = recorder((t) => t === 'COMMIT');
    await assert.rejects(
      withTransaction(c, async () => 1),
      /refused: COMMIT/,
    );
  });

  test('isolation level and read only', () => {
    assert.equal(beginStatement(), 'BEGIN');
    assert.equal(beginStatement({ readOnly: true }), 'BEGIN READ ONLY');
    assert.equal(
      beginStatement({ isolation: 'repeatable read', readOnly: true }),
      'BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY',
    );
    assert.equal(beginStatement({ isolation: 'serializable' }), 'BEGIN ISOLATION LEVEL SERIALIZABLE');
  });
});
