/**
 * The test runner finds tests in every folder (a test outside the original component folders used to
 * be skipped silently), applies a per-test timeout, and runs the database-facing files on both
 * engines, naming the engine in each of their tests.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { findPostgres } from '../testkit/common/postgres.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const runner = join(root, 'scripts', 'run-tests.ts');
const run = (args: string[], env: NodeJS.ProcessEnv) =>
  spawnSync(process.execPath, ['--import', 'tsx', runner, ...args], {
    cwd: root,
    encoding: 'utf8',
    env,
    timeout: 180_000,
  });
// node:test marks its children with NODE_TEST_CONTEXT; a nested runner would then skip its files.
const { NODE_TEST_CONTEXT: _, ...cleanEnv } = process.env;

test('a test file in a new folder is discovered and a hanging test fails by timeout', () => {
  const dir = join(root, `tmp-runner-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  try {
    writeFileSync(join(dir, 'a-pass.test.ts'), "import { test } from 'node:test';\ntest('probe passes', () => {});\n");
    writeFileSync(
      join(dir, 'b-hang.test.ts'),
      "import { test } from 'node:test';\ntest('probe hangs', () => new Promise(() => setInterval(() => {}, 1000)));\n",
    );
    const r = run([`tmp-runner-${process.pid}/`], { ...cleanEnv, FGENTIC_TEST_TIMEOUT_MS: '15000' });
    const out = `${r.stdout}${r.stderr}`;
    assert.match(out, /probe passes/);
    assert.match(out, /b-hang\.test\.ts/);
    assert.match(out, /timed out after 15000ms/);
    assert.notEqual(r.status, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a filter that matches nothing fails instead of passing with no tests', () => {
  const r = run(['no-such-test-file-anywhere'], cleanEnv);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /no test files match/);
});

// A database-facing probe: the runner recognises it by the helper it calls (named in a comment of the
// probe; written in two parts here so that this file itself is not database-facing) and runs it once
// per engine with FGENTIC_TEST_ENGINE set.
const HELPER = 'start' + 'TestDatabase';
const PROBE = `import { test } from 'node:test';
// ${HELPER}() is what makes this file database-facing.
test('engine probe', () => console.log('ENGINE=' + process.env.FGENTIC_TEST_ENGINE));
`;

function withProbe<T>(fn: (dir: string) => T): T {
  const dir = `tmp-engine-${process.pid}`;
  mkdirSync(join(root, dir), { recursive: true });
  try {
    writeFileSync(join(root, dir, 'probe.test.ts'), PROBE);
    return fn(dir);
  } finally {
    rmSync(join(root, dir), { recursive: true, force: true });
  }
}

test('without PostgreSQL the database files run on PGlite, and the runner says so once', () => {
  withProbe((dir) => {
    const r = run([`${dir}/`], { ...cleanEnv, PG_MAJOR: '99', FGENTIC_REQUIRE_POSTGRES: '' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /\[pglite\] engine probe/);
    assert.doesNotMatch(r.stdout, /\[postgres\]/);
    assert.equal(r.stdout.match(/database suites on PostgreSQL: not run/g)?.length, 1);
  });
});

test('FGENTIC_REQUIRE_POSTGRES=1 turns a missing PostgreSQL into a failure', () => {
  withProbe((dir) => {
    const r = run([`${dir}/`], { ...cleanEnv, PG_MAJOR: '99', FGENTIC_REQUIRE_POSTGRES: '1' });
    assert.equal(r.status, 1);
    assert.match(r.stdout, /REQUIRED but not run/);
  });
});

test('with PostgreSQL + pgvector the database files run on both engines, each test named by its engine', {
  skip: 'missing' in findPostgres() ? 'PostgreSQL + pgvector absent on this machine' : false,
}, () => {
  withProbe((dir) => {
    const r = run([`${dir}/`], cleanEnv);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /\[pglite\] engine probe/);
    assert.match(r.stdout, /\[postgres\] engine probe/);
    assert.match(r.stdout, /ENGINE=postgres/);
    assert.match(r.stdout, /database suites on PostgreSQL \d+\.\d+ \+ pgvector/);
  });
});
