/**
 * The test plumbing never ships: no module the CLI reaches (the set `npm run build` keeps) imports
 * `testkit/`. The walk follows relative imports as scripts/build.mjs does, skipping local/ (the
 * stack behind `npm start`, which the build prunes).
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const IMPORT_RE = /(?:\bfrom\s*|\bimport\s*\(\s*|^import\s*)'(\.{1,2}\/[^']+)'/gm;

function reachedFrom(entry: string): Set<string> {
  const reached = new Set<string>();
  const queue = [resolve(root, entry)];
  while (queue.length > 0) {
    const file = queue.pop()!;
    if (reached.has(file) || !existsSync(file)) continue;
    reached.add(file);
    for (const m of readFileSync(file, 'utf8').matchAll(IMPORT_RE)) {
      const target = resolve(dirname(file), m[1]!);
      if (relative(root, target).split('/')[0] !== 'local') queue.push(target);
    }
  }
  return reached;
}

test('no module the CLI reaches is in testkit/', () => {
  const reached = [...reachedFrom('cli/main.ts')].map((f) => relative(root, f));
  assert.ok(reached.length > 50, `the walk found the CLI's modules (${reached.length})`);
  assert.deepEqual(
    reached.filter((f) => f.startsWith('testkit/')),
    [],
  );
});
