#!/usr/bin/env node
// Runs every `*.test.ts` in the repository with node's own test runner (through tsx).
// Node 20's `--test` does not expand globs, so the files are discovered here: every folder is walked
// except dependencies, build output and run-time data, so a test added anywhere always runs.
// A per-test timeout turns a hang into a named failure instead of a stuck CI run.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const SKIP = new Set(['node_modules', '.git', 'dist', 'data', 'results']);
// Node 20 applies --test-timeout to each test and to each file's run as a whole, so the default leaves
// room for the longest file on a loaded 2-core machine while still ending a hang.
const timeoutMs = Number(process.env.FGENTIC_TEST_TIMEOUT_MS ?? 600_000);
const filter = process.argv.slice(2);
const files = [];
function walk(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
    a.name.localeCompare(b.name),
  )) {
    if (entry.name.startsWith('.') || SKIP.has(entry.name)) continue;
    const p = join(dir, entry.name);
    if (entry.isDirectory()) walk(p);
    else if (entry.isFile() && entry.name.endsWith('.test.ts')) {
      const rel = relative(root, p);
      if (filter.length === 0 || filter.some((f) => rel.includes(f))) files.push(rel);
    }
  }
}
walk(root);
if (files.length === 0) {
  console.error(filter.length ? `no test files match ${filter.join(' ')}` : 'no test files found');
  process.exit(1);
}
if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
  console.error('FGENTIC_TEST_TIMEOUT_MS must be a positive integer (milliseconds)');
  process.exit(2);
}
const result = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    '--test-reporter=spec',
    '--test-concurrency=2',
    `--test-timeout=${timeoutMs}`,
    ...files,
  ],
  {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, FGENTIC_LOG_LEVEL: process.env.FGENTIC_LOG_LEVEL ?? 'silent' },
  },
);
process.exit(result.status ?? 1);
