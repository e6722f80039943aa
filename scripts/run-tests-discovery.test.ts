/**
 * The test runner finds tests in every folder (a test outside the original component folders used to
 * be skipped silently) and applies a per-test timeout.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const runner = join(root, 'scripts', 'run-tests.mjs');
// node:test marks its children with NODE_TEST_CONTEXT; a nested runner would then skip its files.
const { NODE_TEST_CONTEXT: _, ...cleanEnv } = process.env;

test('a test file in a new folder is discovered and a hanging test fails by timeout', () => {
  const dir = join(root, `tmp-runner-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  try {
    writeFileSync(
      join(dir, 'a-pass.test.ts'),
      "import { test } from 'node:test';\ntest('probe passes', () => {});\n",
    );
    writeFileSync(
      join(dir, 'b-hang.test.ts'),
      "import { test } from 'node:test';\ntest('probe hangs', () => new Promise(() => setInterval(() => {}, 1000)));\n",
    );
    const r = spawnSync(process.execPath, [runner, `tmp-runner-${process.pid}/`], {
      cwd: root,
      encoding: 'utf8',
      env: { ...cleanEnv, FGENTIC_TEST_TIMEOUT_MS: '15000' },
      timeout: 120_000,
    });
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
  const r = spawnSync(process.execPath, [runner, 'no-such-test-file-anywhere'], {
    cwd: root,
    encoding: 'utf8',
    env: cleanEnv,
  });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /no test files match/);
});
