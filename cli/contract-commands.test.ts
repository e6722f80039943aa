/** The CLI contract of `projection decode` and `snapshot digest`, run as a real process. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { encode, matrixExample, NOW, snapshotExample } from '../testkit/contract/fixtures.ts';

const bin = new URL('../bin/fgentic-retrieval.mjs', import.meta.url).pathname;
const run = (args: string[], input: string) => spawnSync(process.execPath, [bin, ...args], { input, encoding: 'utf8' });

describe('CLI: contract commands', () => {
  test('projection decode prints canonical JSON and exits 0', () => {
    const r = run(
      ['projection', 'decode', '--now', String(NOW), '--agent', 'kagent/knowledge-agent'],
      `${encode(matrixExample())}\n`,
    );
    assert.equal(r.status, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).principal, '@alice:org-a.example');
  });
  test('projection decode denies with a reason code on stderr and exits 1', () => {
    const wrongAgent = run(
      ['projection', 'decode', '--now', String(NOW), '--agent', 'kagent/other'],
      encode(matrixExample()),
    );
    assert.equal(wrongAgent.status, 1);
    assert.equal(wrongAgent.stderr.trim(), 'denied: agent_mismatch');
    assert.equal(wrongAgent.stdout, '');
    const expired = run(['projection', 'decode', '--now', '1784117400'], encode(matrixExample()));
    assert.equal(expired.stderr.trim(), 'denied: expired');
  });
  test('snapshot digest prints state_sha256', () => {
    const r = run(['snapshot', 'digest'], JSON.stringify(snapshotExample()));
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), '58e67efe5cd7f5ff2805eb0f35192ea90ef64244c896417b5504af8ad102be17');
    const dup = run(['snapshot', 'digest'], '{"room_id":"!a:b.c","room_id":"!a:b.c"}');
    assert.equal(dup.status, 1);
    assert.equal(dup.stderr.trim(), 'denied: duplicate_name');
  });
  test('unknown commands exit 2', () => {
    assert.equal(run(['frobnicate'], '').status, 2);
  });
});
