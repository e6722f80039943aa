/**
 * `start` tells a missing installation apart from a broken local stack. The errors here are real:
 * each case imports a module written to a temporary folder outside the repository (where no
 * node_modules resolves), and the end-to-end cases run the binary with a module hook that swaps the
 * stack module for a broken one.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { runCli } from '../testkit/common/index.ts';
import { devDependencies, NEEDS_DEV_DEPENDENCIES, startLoadFailure } from './load-error.ts';

const dir = mkdtempSync(join(tmpdir(), 'fgentic-load-error-'));
after(() => rmSync(dir, { recursive: true, force: true }));
mkdirSync(join(dir, 'local'));
const MODULES: Record<string, string> = {
  'dev-package.mjs': "import 'fast-check';\n",
  'prod-package.mjs': "import 'pg';\n",
  'scoped-dev-package.mjs': "import '@a2a-js/sdk/client';\n",
  'relative.mjs': "import './missing.mjs';\n",
  'throws.mjs': "throw new TypeError('broken on purpose');\n",
  'syntax.mjs': 'export const = 1;\n',
};
for (const [name, text] of Object.entries(MODULES)) writeFileSync(join(dir, name), text);

/** The error a real `import()` of the module raises. */
async function loadError(file: string): Promise<unknown> {
  try {
    await import(pathToFileURL(join(dir, file)).href);
  } catch (err) {
    return err;
  }
  assert.fail(`${file} loaded; the case needs it to fail`);
}

const DEV = devDependencies();

describe('start: load failures', { concurrency: 2 }, () => {
  test('the package.json beside the CLI lists the dev dependencies the cases rely on', () => {
    for (const p of ['fast-check', '@a2a-js/sdk', 'tsx']) assert.ok(DEV.includes(p), p);
    assert.ok(!DEV.includes('pg'), 'pg is a production dependency');
  });

  test('a missing dev dependency or a missing stack module means "install the dev dependencies"', async () => {
    for (const file of ['dev-package.mjs', 'scoped-dev-package.mjs', 'local/start.js']) {
      const f = startLoadFailure(await loadError(file), DEV);
      assert.deepEqual(f, { exitCode: 2, message: NEEDS_DEV_DEPENDENCIES }, file);
    }
  });

  test('every other load failure is shown as the fault it is, exit 1', async () => {
    const want: Record<string, RegExp> = {
      'prod-package.mjs': /Cannot find package 'pg'/,
      'relative.mjs': /Cannot find module '.*missing\.mjs'/,
      'throws.mjs': /TypeError: broken on purpose/,
      'syntax.mjs': /SyntaxError/,
    };
    for (const [file, re] of Object.entries(want)) {
      const f = startLoadFailure(await loadError(file), DEV);
      assert.equal(f.exitCode, 1, file);
      assert.match(f.message, /^start: the local stack failed to load: /, file);
      assert.match(f.message, re, file);
    }
    // Not even an Error: still a fault, never the installation hint.
    assert.equal(startLoadFailure('odd', DEV).exitCode, 1);
  });

  /** A module hook that resolves the CLI's `../local/start.ts` to `target` instead. */
  function hookTo(target: string): string {
    const hooks = `export async function resolve(specifier, context, next) {
  if (specifier.endsWith('/local/start.ts')) return { url: ${JSON.stringify(pathToFileURL(join(dir, target)).href)}, shortCircuit: true };
  return next(specifier, context);
}`;
    const file = join(dir, `hook-${target.replace(/\W/g, '_')}.mjs`);
    writeFileSync(
      file,
      `import { register } from 'node:module';\nregister(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});\n`,
    );
    return file;
  }

  test('the binary: a broken local stack is reported as a load error with its class, exit 1', async () => {
    const r = await runCli(['start', '--data-dir', join(dir, 'data')], {
      env: { NODE_OPTIONS: `--import ${hookTo('throws.mjs')}` },
    });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /start: the local stack failed to load: TypeError: broken on purpose/);
    assert.doesNotMatch(r.stderr, /dev dependencies/);
  });

  test('the binary: a missing dev dependency still says to install the dev dependencies, exit 2', async () => {
    const r = await runCli(['start', '--data-dir', join(dir, 'data')], {
      env: { NODE_OPTIONS: `--import ${hookTo('dev-package.mjs')}` },
    });
    assert.equal(r.code, 2, r.stderr);
    assert.equal(r.stderr, `${NEEDS_DEV_DEPENDENCIES}\n`);
  });
});
