/**
 * The committed conformance vectors are exactly what their generators write today. Other
 * implementations read these files, so a generator or fixture change that is not followed by a
 * regeneration (or a hand edit of a vector file) would leave them testing something else.
 * Each generator runs as its own process into a temporary folder; the files must match byte for byte.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runProcess } from '../testkit/common/index.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'fgentic-vectors-'));
after(() => rmSync(work, { recursive: true, force: true }));

const GENERATORS = [
  { generator: 'testkit/contract/generate-vectors.ts', committed: 'contract/vectors' },
  { generator: 'testkit/webhook-vectors.ts', committed: 'webhook/vectors' },
];

describe('committed vectors are fresh', { concurrency: 2 }, () => {
  for (const { generator, committed } of GENERATORS) {
    test(`${generator} reproduces ${committed}/*.json byte for byte`, async () => {
      const out = mkdtempSync(join(work, 'out-'));
      const r = await runProcess(process.execPath, ['--import', 'tsx', generator, '--out-dir', out], {
        cwd: root,
      });
      assert.equal(r.code, 0, r.stderr);
      const written = readdirSync(out).sort();
      const json = readdirSync(join(root, committed))
        .filter((f) => f.endsWith('.json'))
        .sort();
      assert.ok(written.length > 0, 'the generator wrote files');
      assert.deepEqual(written, json, 'the same set of files');
      for (const f of written) {
        const fresh = readFileSync(join(out, f));
        const kept = readFileSync(join(root, committed, f));
        assert.ok(
          fresh.equals(kept),
          `${committed}/${f} differs from what ${generator} writes; regenerate it and commit the result`,
        );
      }
    });
  }
});
