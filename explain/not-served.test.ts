/**
 * `explain` lists and counts rows a caller cannot read, so it must stay an operator command: no
 * server reaches it. Checked two ways — statically (no server module imports it, directly or
 * through other modules, eagerly or lazily; only the CLI wiring, the local walkthrough and the
 * benchmark do) and
 * at run time (the retrieval server's MCP tool list is exactly `search_knowledge`, its HTTP routes
 * are exactly /mcp, /healthz, /readyz and /metrics).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type RetrievalServer, startRetrievalServer } from '../retrieval/index.ts';
import { TOOL } from '../retrieval/mcp/tool.ts';
import { AGENT } from '../testkit/retrieval.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const EXPLAIN_DIR = join(ROOT, 'explain') + '/';

/** Every server's entry module (and the local stack that wires them for `npm start`). */
const SERVER_ENTRIES = [
  'retrieval/index.ts',
  'retrieval/http.ts',
  'retrieval/mcp/server.ts',
  'retrieval/cli.ts',
  'projector/index.ts',
  'projector/cli.ts',
  'webhook/server.ts',
  'webhook/cli.ts',
  'controller/cli.ts',
  'local/stack.ts',
  'local/start.ts',
];

/** Relative TypeScript imports of a file: static `from '…'`, side-effect `import '…'` and `import('…')`. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const re of [/\bfrom\s+'(\.[^']+)'/g, /\bimport\s+'(\.[^']+)'/g, /\bimport\(\s*'(\.[^']+)'\s*\)/g]) {
    for (const m of text.matchAll(re)) out.push(resolve(dirname(file), m[1]!));
  }
  return out.filter((p) => p.endsWith('.ts'));
}

function reachable(entry: string): Set<string> {
  const seen = new Set<string>();
  const stack = [join(ROOT, entry)];
  while (stack.length > 0) {
    const f = stack.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    stack.push(...importsOf(f));
  }
  return seen;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name.startsWith('.') || name === 'data') continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sourceFiles(p));
    else if (name.endsWith('.ts')) out.push(p);
  }
  return out;
}

describe('explain is not reachable from any server', () => {
  test('no server entry module reaches explain/ through its imports', () => {
    for (const entry of SERVER_ENTRIES) {
      const files = reachable(entry);
      assert.ok(files.size > 1, `${entry} has imports (the walk works)`);
      const hit = [...files].filter((f) => f.startsWith(EXPLAIN_DIR));
      assert.deepEqual(hit, [], `${entry} reaches ${hit.map((f) => relative(ROOT, f)).join(', ')}`);
    }
    // The walk does find it where it is wired, so an empty result above means something.
    assert.ok([...reachable('cli/main.ts')].some((f) => f.startsWith(EXPLAIN_DIR)));
  });

  test('only the CLI wiring, the walkthrough and its benchmark import it', () => {
    const importers = sourceFiles(ROOT)
      .filter((f) => !f.startsWith(EXPLAIN_DIR) && !f.endsWith('.test.ts'))
      .filter((f) => importsOf(f).some((i) => i.startsWith(EXPLAIN_DIR)))
      .map((f) => relative(ROOT, f))
      .sort();
    assert.deepEqual(importers, ['bench/explain.ts', 'cli/main.ts', 'local/demo.ts']);
  });
});

describe('the retrieval server exposes exactly what it did before', () => {
  let server: RetrievalServer;
  before(async () => {
    server = await startRetrievalServer({ agents: [AGENT], port: 0 });
  });
  after(async () => {
    await server?.close();
  });

  test('MCP tools/list is exactly search_knowledge, unchanged', async () => {
    const client = new Client({ name: 'explain-check', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.mcpUrl)));
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(
        tools.map((x) => x.name),
        [TOOL.name],
      );
      assert.deepEqual(tools[0]?.inputSchema, JSON.parse(JSON.stringify(TOOL.inputSchema)));
    } finally {
      await client.close();
    }
  });

  test('HTTP routes are /mcp, /healthz, /readyz, /metrics and nothing else', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      assert.equal((await fetch(`${server.url}${path}`)).status, 200, path);
    }
    for (const path of ['/explain', '/explain/summary', '/v1/explain', '/debug/explain', '/mcp/explain', '/']) {
      const res = await fetch(`${server.url}${path}?room=!room:org-a.example&summary=1`);
      assert.equal(res.status, 404, path);
      await res.body?.cancel();
    }
  });
});
