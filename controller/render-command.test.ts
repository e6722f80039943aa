/** `fgentic-retrieval render -f PATH... [-o DIR]`: file/dir loading, multi-doc YAML, output, conflicts → exit 1. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { EXAMPLES, REPO } from '../testkit/controller/fixtures.ts';
import { loadResources, renderCommand } from './render-command.ts';

function run(args: string[]) {
  const code = `import('./controller/render-command.ts').then(async (m) => { process.exitCode = await m.renderCommand(${JSON.stringify(args)}); })`;
  return spawnSync(process.execPath, ['--import', 'tsx', '-e', code], { cwd: REPO, encoding: 'utf8' });
}

describe('render command', () => {
  it('loads a directory of multi-document YAML', () => {
    const r = loadResources([EXAMPLES]);
    assert.equal(r.platforms.length, 1);
    assert.equal(r.agents.length, 1);
    assert.equal(r.rooms.length, 2);
    assert.equal(r.partners.length, 2);
  });

  it('prints the golden multi-document YAML on stdout and exits 0', () => {
    const r = run(['-f', 'examples']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, readFileSync(join(REPO, 'controller/testdata/examples.golden.yaml'), 'utf8'));
    assert.ok(parseAllDocuments(r.stdout).length > 20);
  });

  it('writes one file per object with -o, accepts files and JSON', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'render-'));
    const json = join(dir, 'room.json');
    writeFileSync(
      json,
      JSON.stringify({
        apiVersion: 'retrieval.fgentic.dev/v1alpha1',
        kind: 'RetrievalRoom',
        metadata: { name: 'extra' },
        spec: { roomId: '!extra:org-a.example' },
      }),
    );
    const out = join(dir, 'out');
    const files = readdirSync(EXAMPLES).map((f) => join(EXAMPLES, f));
    assert.equal(await renderCommand(['-f', ...files.slice(0, 1), '-f', ...files.slice(1), '-f', json, '-o', out]), 0);
    const written = readdirSync(out);
    assert.ok(written.includes('configmap-knowledge-fgentic-projector-config.yaml'));
    assert.ok(written.includes('agent-kagent-knowledge-agent.yaml'));
    assert.match(
      readFileSync(join(out, 'configmap-knowledge-fgentic-projector-config.yaml'), 'utf8'),
      /!extra:org-a\.example/,
    );
  });

  it('reports conflicts on stderr and exits 1', () => {
    const dir = mkdtempSync(join(tmpdir(), 'render-'));
    writeFileSync(
      join(dir, 'dup.yaml'),
      `apiVersion: retrieval.fgentic.dev/v1alpha1\nkind: RetrievalRoom\nmetadata: {name: dup}\nspec: {roomId: '!room:org-a.example'}\n`,
    );
    const r = run(['-f', 'examples', '-f', dir]);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /conflict: RetrievalRoom dup: DuplicateRoom/);
    assert.match(r.stderr, /conflict: RetrievalRoom org-a-general: DuplicateRoom/);
    assert.doesNotMatch(r.stdout, /!room:org-a\.example/);
  });

  it('usage errors exit 2', async () => {
    assert.equal(await renderCommand([]), 2);
    assert.equal(await renderCommand(['--bogus']), 2);
    assert.equal(await renderCommand(['-f', '/nonexistent/path']), 2);
  });
});
