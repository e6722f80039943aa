#!/usr/bin/env node
// Runs every `*.test.ts` in the repository with node's own test runner (through tsx), and the
// database-facing ones a second time on real PostgreSQL + pgvector when this machine has them.
//
// Node 20's `--test` does not expand globs, so the files are discovered here: every folder is walked
// except dependencies, build output and run-time data, so a test added anywhere always runs. A file is
// database-facing when it takes its database from the engine-aware helpers (`startTestDatabase`,
// `startEmptyTestDatabase`, testkit/retrieval.ts) or imports `ENGINE` from there; those run once with FGENTIC_TEST_ENGINE=pglite
// (with every other file) and once with FGENTIC_TEST_ENGINE=postgres against a throwaway cluster that
// this runner starts on loopback and removes at the end, whatever the outcome. Without PostgreSQL +
// pgvector the second run is skipped with one line saying so; FGENTIC_REQUIRE_POSTGRES=1 (.ci/run)
// makes that a failure.
//
// Usage: run-tests.ts [--engine pglite|postgres] [PATH-SUBSTRING...]
// A per-test timeout turns a hang into a named failure instead of a stuck CI run.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Cluster, clusterEnv, findPostgres, startCluster } from '../testkit/common/postgres.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const SKIP = new Set(['node_modules', '.git', 'dist', 'data', 'results']);
// Node 20 applies --test-timeout to each test and to each file's run as a whole, so the default leaves
// room for the longest file on a loaded 2-core machine while still ending a hang.
const timeoutMs = Number(process.env['FGENTIC_TEST_TIMEOUT_MS'] ?? 600_000);
// A file is on the matrix when it takes a database from the helpers or imports the engine under test.
const ENGINE_FILE = /\bstart(Empty)?TestDatabase\(|\bimport\s*\{[^}]*\bENGINE\b[^}]*\}\s*from/;

const args = process.argv.slice(2);
let only: 'pglite' | 'postgres' | undefined;
const filter: string[] = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i] as string;
  if (a === '--engine') {
    const v = args[++i];
    if (v !== 'pglite' && v !== 'postgres') {
      console.error('--engine must be pglite or postgres');
      process.exit(2);
    }
    only = v;
  } else filter.push(a);
}

const files: string[] = [];
function walk(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
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
const engineFiles = files.filter((f) => ENGINE_FILE.test(readFileSync(join(root, f), 'utf8')));

function runNodeTest(list: readonly string[], env: Record<string, string>, label: string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--test',
        `--test-reporter=${join(root, 'scripts', 'engine-reporter.mjs')}`,
        '--test-concurrency=2',
        `--test-timeout=${timeoutMs}`,
        ...list,
      ],
      {
        cwd: root,
        stdio: 'inherit',
        env: {
          ...process.env,
          FGENTIC_LOG_LEVEL: process.env['FGENTIC_LOG_LEVEL'] ?? 'silent',
          FGENTIC_TEST_ENGINE_LABEL: label,
          FGENTIC_TEST_ENGINE_FILES: JSON.stringify(engineFiles.map((f) => join(root, f))),
          ...env,
        },
      },
    );
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

let cluster: Cluster | undefined;
const cleanup = () => {
  cluster?.stop();
  cluster = undefined;
};
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    cleanup();
    process.exit(130);
  });
}

let status = 0;
try {
  if (only !== 'postgres') {
    status = await runNodeTest(files, { FGENTIC_TEST_ENGINE: 'pglite' }, 'pglite');
  }
  if (only !== 'pglite' && engineFiles.length > 0) {
    const found = findPostgres();
    if ('missing' in found) {
      const required = process.env['FGENTIC_REQUIRE_POSTGRES'] === '1';
      console.log(
        `\n# database suites on PostgreSQL: ${required ? 'REQUIRED but ' : ''}not run: ${found.missing}` +
          (required ? '' : '. They ran on PGlite only; FGENTIC_REQUIRE_POSTGRES=1 makes this a failure.'),
      );
      if (required) status = 1;
    } else {
      const { version, vector } = found.install;
      const started = performance.now();
      cluster = await startCluster(found.install);
      console.log(
        `\n# database suites on PostgreSQL ${version} + pgvector ${vector} (${engineFiles.length} files; cluster on 127.0.0.1:${cluster.port}, started in ${Math.round(performance.now() - started)} ms)`,
      );
      const pgStatus = await runNodeTest(
        engineFiles,
        { FGENTIC_TEST_ENGINE: 'postgres', ...clusterEnv(cluster) },
        'postgres',
      );
      status = status || pgStatus;
    }
  }
} finally {
  cleanup();
}
process.exit(status);
