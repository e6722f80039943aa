/**
 * The README's pre-deploy commands work as written: the `node fgentic-retrieval/bin/…` lines of its
 * Deploy section run in a directory that holds a checkout (`fgentic-retrieval/`) next to the
 * operator's resources (`my-resources/`, here a copy of examples/), outside the checkout itself.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';

const repo = resolve(import.meta.dirname, '..');
const readme = readFileSync(join(repo, 'README.md'), 'utf8');
const deploySection = readme.slice(
  readme.indexOf('## Deploy'),
  readme.indexOf('\n## ', readme.indexOf('## Deploy') + 1),
);
const commands = deploySection
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l.startsWith('node fgentic-retrieval/bin/fgentic-retrieval.mjs '));

describe('README deploy commands, from a checkout next to the resources', () => {
  let dir = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'fgentic-readme-'));
    symlinkSync(repo, join(dir, 'fgentic-retrieval'), 'dir');
    cpSync(join(repo, 'examples'), join(dir, 'my-resources'), { recursive: true });
  });
  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the Deploy section has the three checks: render, admission check, admission check --as-controller', () => {
    assert.deepEqual(
      commands.map((c) => c.split(' ').slice(2, 4).join(' ')),
      ['render -f', 'admission check', 'admission check'],
    );
    assert.ok(commands[2]?.includes('--as-controller'));
    assert.ok(!/^\s*npx fgentic-retrieval/m.test(deploySection), 'no bare npx line: the package is not published');
  });

  for (const [i, command] of commands.entries())
    it(`runs as written: ${command}`, () => {
      // In order: the last command reads the rendered.yaml the first one wrote.
      const r = spawnSync('sh', ['-c', command], {
        cwd: dir,
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, FGENTIC_LOG_LEVEL: 'silent' },
      });
      assert.equal(r.status, 0, `exit ${r.status}\n${r.stderr}`);
      if (i === 0) {
        const docs = parseAllDocuments(readFileSync(join(dir, 'rendered.yaml'), 'utf8')).map((d) => d.toJSON());
        assert.ok(docs.length > 20, `${docs.length} rendered objects`);
        assert.ok(docs.some((d) => d?.kind === 'Agent' && d?.apiVersion?.startsWith('kagent.dev/')));
      }
    });
});
