/**
 * The role privileges documented in retrieval/README.md are exactly what the migrations grant on an
 * empty database, and the serving role's list holds nothing but schema usage and function execution.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startTestDatabase, type TestDatabase } from '../../testkit/retrieval.ts';
import { describeGrants, GRANT_SCHEMAS, GRANTS_BEGIN, GRANTS_END, PUBLIC_GRANTEE } from './grants.ts';
import { RETRIEVAL_ROLE } from './roles.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
const README = join(HERE, '..', 'README.md');
const MIGRATIONS = join(HERE, 'migrations');

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
      /^ {2}- (USAGE on schema `(fgentic|fgentic_ledger)`|EXECUTE on function `(fgentic\.(search_matrix|search_groups|embedding_profile)|fgentic_ledger\.check)_v1\()/,
    );
});

test('the list covers every schema a migration creates, and each appears in it', async () => {
  const created = new Set<string>();
  for (const file of readdirSync(MIGRATIONS).filter((f) => f.endsWith('.sql')))
    for (const m of readFileSync(join(MIGRATIONS, file), 'utf8').matchAll(
      /^\s*CREATE\s+SCHEMA\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)/gim,
    ))
      created.add((m[1] as string).toLowerCase());
  assert.ok(created.size > 0);
  // The migrations may assume `knowledge` exists (the origin creates it); it is listed all the same.
  assert.deepEqual(
    [...created].filter((s) => !GRANT_SCHEMAS.includes(s)),
    [],
  );
  const schemas = (
    await t.pool.query(
      `SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'public')
       ORDER BY 1`,
    )
  ).rows.map((r: { nspname: string }) => r.nspname);
  assert.deepEqual(
    schemas.filter((s: string) => !GRANT_SCHEMAS.includes(s)),
    [],
    'every schema of a migrated database is listed',
  );
  const list = await describeGrants(t.pool);
  for (const schema of GRANT_SCHEMAS) assert.ok(list.includes(`schema \`${schema}\``), schema);
  // Nothing for PUBLIC: the origin revokes everything from it, and so does every object here.
  const publicPart = list.slice(list.indexOf(`- \`${PUBLIC_GRANTEE}\``));
  assert.equal(publicPart.split('\n')[1], '  - nothing');
});
