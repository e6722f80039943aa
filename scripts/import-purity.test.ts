/**
 * Pure cores import no I/O. The identity contract, the render, the predicate and planner, the
 * projector's decisions and the webhook's rules are what the tests hammer and what a reviewer reads
 * as "the rule"; they must not reach the file system, the network, processes or a database, directly
 * or through anything they import. The check follows relative imports transitively.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Modules that perform I/O (or load code that does). A bare name matches the package and its subpaths. */
const IO_MODULES = [
  'fs',
  'fs/promises',
  'http',
  'https',
  'http2',
  'net',
  'tls',
  'dgram',
  'dns',
  'child_process',
  'cluster',
  'worker_threads',
  'pg',
  'pgvector',
  '@electric-sql/pglite',
  '@electric-sql/pglite-socket',
  '@electric-sql/pglite-pgvector',
  '@kubernetes/client-node',
  'matrix-js-sdk',
  'express',
  'prom-client',
];

function isIo(spec: string): boolean {
  const name = spec.startsWith('node:') ? spec.slice(5) : spec;
  return IO_MODULES.some((m) => name === m || name.startsWith(`${m}/`));
}

/** Entry points of the pure cores, as paths relative to the repository root (folders: every module). */
export const PURE_CORES = [
  'contract',
  'controller/render',
  'rules',
  'retrieval/predicate.ts',
  'retrieval/planner.ts',
  'projector/matrix.ts',
  'projector/oauth.ts',
  'projector/decide.ts',
  'projector/request.ts',
  'projector/classify.ts',
  'projector/config.ts',
  'projector/reasons.ts',
  'retrieval/config.ts',
  'webhook/rules',
];

function modulesOf(entry: string): string[] {
  const p = join(root, entry);
  if (entry.endsWith('.ts')) return [p];
  const out: string[] = [];
  for (const e of readdirSync(p, { withFileTypes: true })) {
    if (e.isDirectory() && e.name !== 'test' && e.name !== 'vectors') out.push(...modulesOf(join(entry, e.name)));
    else if (e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')) out.push(join(p, e.name));
  }
  return out;
}

const IMPORT_RE =
  /(?:^|\n)\s*(?:import|export)\s(?:[^'"]*?\sfrom\s)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** Every I/O import reachable from `file`, as "chain → module" strings. */
export function ioImports(file: string, seen = new Set<string>(), chain: string[] = []): string[] {
  if (seen.has(file)) return [];
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  const found: string[] = [];
  for (const m of text.matchAll(IMPORT_RE)) {
    const spec = m[1] ?? m[2];
    if (spec === undefined) continue;
    const here = [...chain, relative(root, file)];
    if (spec.startsWith('.')) {
      const target = resolve(dirname(file), spec);
      if (existsSync(target)) found.push(...ioImports(target, seen, here));
    } else if (isIo(spec)) {
      found.push(`${here.join(' → ')} → ${spec}`);
    }
  }
  return found;
}

describe('pure cores import no I/O', () => {
  for (const entry of PURE_CORES) {
    test(`${entry} and everything it imports stay free of file, network, process and database modules`, () => {
      const files = modulesOf(entry);
      assert.ok(files.length > 0, `${entry} has modules`);
      const seen = new Set<string>();
      const offending = files.flatMap((f) => ioImports(f, seen));
      assert.deepEqual(offending, []);
    });
  }

  test('the check follows imports and catches a file-system import two modules away', () => {
    const dir = mkdtempSync(join(tmpdir(), 'purity-'));
    try {
      writeFileSync(join(dir, 'a.ts'), "export { b } from './b.ts';\n");
      writeFileSync(join(dir, 'b.ts'), "import { readFileSync } from 'node:fs';\nexport const b = readFileSync;\n");
      writeFileSync(join(dir, 'c.ts'), "import type { X } from './a.ts';\nexport const c = await import('pg');\n");
      assert.deepEqual(
        ioImports(join(dir, 'a.ts')).map((x) => x.split(' → ').at(-1)),
        ['node:fs'],
      );
      assert.deepEqual(
        ioImports(join(dir, 'c.ts')).map((x) => x.split(' → ').at(-1)),
        ['node:fs', 'pg'],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
