/**
 * The role privileges documented in retrieval/README.md are exactly what the migrations grant on an
 * empty database, and the serving role's list holds nothing but schema usage and function execution.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startTestDatabase, type TestDatabase } from '../testing.ts';
import { describeGrants, GRANTS_BEGIN, GRANTS_END } from './grants.ts';
import { RETRIEVAL_ROLE } from './roles.ts';

const README = join(dirname(fileURLToPath(import.meta.url)), '..', 'README.md');

let t: TestDatabase;
before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

test('the README grant list is the one the migrations produce (npm run docs:grants)', async () => {
  const readme = readFileSync(README, 'utf8');
  const a = readme.indexOf(GRANTS_BEGIN);
  const b = readme.indexOf(GRANTS_END);
  assert.ok(a >= 0 && b > a, 'grants markers present');
  const documented = readme.slice(a + GRANTS_BEGIN.length, b).trim();
  assert.equal(documented, await describeGrants(t.pool));
});

test('the serving role may use the schema and execute functions, nothing else', async () => {
  const list = await describeGrants(t.pool, [RETRIEVAL_ROLE]);
  const items = list.split('\n').slice(1);
  assert.ok(items.length > 0);
  for (const line of items)
    assert.match(
      line,
      /^ {2}- (USAGE on schema `(knowledge|fgentic_ledger)`|EXECUTE on function `(knowledge\.fgentic_[a-z0-9_]+|fgentic_ledger\.check)_v1\()/,
    );
});
