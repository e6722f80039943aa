import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { plainAgent, platform, retrievalAgent, retrievalAgentCr, room } from '../testkit/webhook.ts';
import { admissionCheck } from './cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'fgentic-admission-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function capture(argv: string[]): Promise<{ code: number; out: string }> {
  const write = process.stdout.write.bind(process.stdout);
  const ewrite = process.stderr.write.bind(process.stderr);
  let out = '';
  process.stdout.write = ((s: string) => {
    out += s;
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = ((s: string) => {
    out += s;
    return true;
  }) as typeof process.stderr.write;
  try {
    return { code: await admissionCheck(argv), out };
  } finally {
    process.stdout.write = write;
    process.stderr.write = ewrite;
  }
}

function writeDocs(name: string, docs: unknown[]): string {
  const p = join(dir, name);
  writeFileSync(p, docs.map((d) => stringify(d)).join('---\n'));
  return p;
}

describe('fgentic-retrieval admission check', () => {
  const rendered = writeDocs('rendered.yaml', [
    platform(),
    retrievalAgentCr(),
    retrievalAgent(),
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } },
  ]);

  test('rendered retrieval Agents pass as the controller (Flux pre-check)', async () => {
    const { code, out } = await capture(['-f', rendered, '--as-controller']);
    assert.equal(code, 0, out);
    assert.match(out, /ALLOW Agent kagent\/knowledge-agent/);
    assert.match(out, /SKIP {2}ConfigMap x/);
  });

  test('the same manifests as an ordinary user are denied (exit 1)', async () => {
    const { code, out } = await capture(['-f', rendered]);
    assert.equal(code, 1);
    assert.match(out, /DENY {2}Agent kagent\/knowledge-agent .*\[retrieval-agent-owner\]/);
  });

  test('a directory of mixed files, duplicates, JSON and warnings', async () => {
    const sub = join(dir, 'tree');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(sub);
    const bad = plainAgent('bad', 'team-a');
    (((bad['spec'] as never)['declarative'] as never)['tools'] as Record<string, Record<string, unknown>>[])[0]![
      'mcpServer'
    ]!['allowedHeaders'] = ['Authorization'];
    writeFileSync(join(sub, 'a.json'), JSON.stringify(bad));
    writeDocs('tree/rooms.yml', [room('a', '!a:org-a.example'), room('a', '!b:org-a.example')]);
    writeFileSync(join(sub, 'notes.txt'), 'ignored');
    const { code, out } = await capture(['-f', sub, '--json']);
    assert.equal(code, 1);
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(lines.length, 3);
    assert.equal(lines[0].verdict, 'denied');
    assert.match(lines[0].message, /header-credential/);
    assert.equal(lines[1].verdict, 'allowed');
    assert.equal(lines[2].verdict, 'denied');
    assert.match(lines[2].message, /duplicate-object/);
  });

  test('-f takes several paths, as in the CLI contract: resources and rendered output together', async () => {
    const resources = writeDocs('resources.yaml', [platform(), retrievalAgentCr()]);
    const renderedOnly = writeDocs('rendered-only.yaml', [retrievalAgent()]);
    const { code, out } = await capture(['--as-controller', '-f', resources, renderedOnly]);
    assert.equal(code, 0, out);
    assert.match(out, /ALLOW Agent kagent\/knowledge-agent/);
    assert.equal((await capture([renderedOnly])).code, 2, 'paths need -f');
  });

  test('unreadable YAML is an error; usage errors exit 2', async () => {
    const p = join(dir, 'broken.yaml');
    writeFileSync(p, 'a: [1\n');
    assert.equal((await capture(['-f', p])).code, 1);
    assert.equal((await capture([])).code, 2);
    assert.equal((await capture(['-f', p, '--user', 'x', '--as-controller'])).code, 2);
    assert.equal((await capture(['-f', join(dir, 'missing.yaml')])).code, 2);
  });
});
