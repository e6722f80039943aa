/**
 * Search failures classified by SQLSTATE: caller input in the keyword query is invalid arguments,
 * everything else is a database fault. The real-database case shows why the rule exists.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeFixture, matrixHeader, P, startTestDatabase, type TestDatabase } from '../../testkit/retrieval.ts';
import { searchKnowledge } from '../search.ts';
import { classifySearchError, sqlstateOf } from './db-errors.ts';

const pgError = (code: string) => Object.assign(new Error('x'), { code });

describe('classifySearchError', () => {
  test('class 22 and 54 in hybrid mode are input; the same in vector mode is a database fault', () => {
    for (const code of ['22021', '22P02', '54000']) {
      assert.deepEqual(classifySearchError(pgError(code), 'hybrid'), { kind: 'input', sqlstate: code });
      assert.deepEqual(classifySearchError(pgError(code), 'vector'), { kind: 'database', sqlstate: code });
    }
  });
  test('connection, resource, operator, system and schema faults are database faults in both modes', () => {
    for (const code of ['08006', '53300', '57P01', '58000', 'XX000', '42P01', '40001', '25006']) {
      for (const mode of ['vector', 'hybrid'] as const)
        assert.deepEqual(classifySearchError(pgError(code), mode), { kind: 'database', sqlstate: code });
    }
  });
  test('errors without a well-formed SQLSTATE (socket errors, timeouts) are database faults', () => {
    const refused = Object.assign(new Error('connect'), { code: 'ECONNREFUSED' });
    assert.equal(sqlstateOf(refused), undefined);
    for (const err of [refused, new Error('timeout'), undefined, 'text', { code: 22021 }])
      assert.deepEqual(classifySearchError(err, 'hybrid'), { kind: 'database', sqlstate: undefined });
  });
});

describe('real database: NUL in the keyword query', () => {
  let t: TestDatabase;
  before(async () => {
    t = await startTestDatabase();
  });
  after(async () => {
    await t?.close();
  });
  test('Postgres rejects it with a class-22 SQLSTATE, which the classifier calls input', async () => {
    const projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    const embedding = Array.from({ length: 1024 }, (_, i) => (i === 0 ? 1 : 0));
    let caught: unknown;
    try {
      await searchKnowledge(t.pool, {
        projection,
        embedding,
        maxResults: 5,
        mode: 'hybrid',
        queryText: 'a\u0000b',
      });
    } catch (err) {
      caught = err;
    }
    assert.ok(caught, 'the database accepted U+0000 in text');
    assert.equal(sqlstateOf(caught)?.slice(0, 2), '22');
    assert.equal(classifySearchError(caught, 'hybrid').kind, 'input');
  });
});
