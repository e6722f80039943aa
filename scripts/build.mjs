#!/usr/bin/env node
// Compiles the CLI and everything it imports to JavaScript (`dist/` by default) so the image runs
// plain Node without a runtime transpiler. `--out-dir DIR` builds elsewhere (the image test uses it).
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { 'out-dir': { type: 'string', default: 'dist' } } });
const out = resolve(root, values['out-dir']);

// Files the compiled code reads at run time from a path relative to its own module.
const ASSET_DIRS = ['retrieval/db/migrations'];
// The local stack (`start`) runs test doubles of the gateway, kagent and Matrix; tsc follows the CLI's
// guarded dynamic import into it, but it is a development flow and never ships: the prune below does
// not follow imports into these folders, so nothing only they use stays in the output.
const DEV_ONLY_DIRS = ['local'];
const ENTRY = 'cli/main.js';

rmSync(out, { recursive: true, force: true });
const tsc = spawnSync(
  process.execPath,
  [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.build.json'), '--outDir', out],
  { stdio: 'inherit', cwd: root },
);
if (tsc.status !== 0) {
  process.stderr.write(`build: tsc exited with ${tsc.status ?? tsc.signal}\n`);
  process.exit(1);
}

// Keep exactly the modules the CLI reaches through relative imports (static and dynamic).
const reached = new Set();
const queue = [join(out, ENTRY)];
while (queue.length > 0) {
  const file = queue.pop();
  if (reached.has(file) || !existsSync(file)) continue;
  reached.add(file);
  for (const m of readFileSync(file, 'utf8').matchAll(
    /(?:\bfrom\s*|\bimport\s*\(\s*|^import\s*)'(\.{1,2}\/[^']+)'/gm,
  )) {
    const target = resolve(dirname(file), m[1]);
    const top = relative(out, target).split('/')[0];
    if (!DEV_ONLY_DIRS.includes(top)) queue.push(target);
  }
}
const prune = (dir) => {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      prune(p);
      if (readdirSync(p).length === 0) rmSync(p, { recursive: true });
    } else if (!reached.has(p)) rmSync(p);
  }
};
prune(out);
for (const dir of ASSET_DIRS) {
  const src = join(root, dir);
  if (!existsSync(src)) continue;
  for (const name of readdirSync(src))
    if (!name.endsWith('.ts')) cpSync(join(src, name), join(out, dir, name), { recursive: true });
}
if (!existsSync(join(out, ENTRY))) {
  process.stderr.write('build: cli/main.js was not emitted\n');
  process.exit(1);
}
process.stdout.write(`build: ${out}\n`);
