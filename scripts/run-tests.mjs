#!/usr/bin/env node
// Runs every `*.test.ts` under the component folders with node's own test runner (through tsx).
// Node 20's `--test` does not expand globs, so the files are listed here.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const roots = [
  'contract',
  'retrieval',
  'projector',
  'controller',
  'webhook',
  'crds',
  'e2e',
  'cli',
  'deploy',
  'cluster',
];
const filter = process.argv.slice(2);
const files = [];
function walk(dir) {
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of entries.sort()) {
    if (name === 'node_modules') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p);
    else if (name.endsWith('.test.ts') && (filter.length === 0 || filter.some((f) => p.includes(f))))
      files.push(p);
  }
}
for (const r of roots) walk(r);
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}
const result = spawnSync(
  process.execPath,
  ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-concurrency=2', ...files],
  { stdio: 'inherit', env: { ...process.env, FGENTIC_LOG_LEVEL: process.env.FGENTIC_LOG_LEVEL ?? 'silent' } },
);
process.exit(result.status ?? 1);
