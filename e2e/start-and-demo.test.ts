/** `fgentic-retrieval start` as a real process (ready, persistent corpus, clean Ctrl-C) and the walkthrough. */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { type DemoTarget, runDemo } from '../local/demo.ts';
import type { StackFile } from '../local/start.ts';
import { freePortBase, START_PORT_OFFSETS, startCli } from '../testkit/common/index.ts';

function startProcess(dataDir: string, portBase: number) {
  const service = startCli(['start', '--data-dir', dataDir, '--port-base', String(portBase)], {
    ready: ({ stderr }) => stderr.includes('is ready'),
    readyTimeoutMs: 150_000,
  });
  return { ...service, log: service.stderr };
}

describe('npm start', () => {
  test('reaches ready, serves the walkthrough, keeps its corpus, and stops cleanly on Ctrl-C', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'fgentic-start-'));
    const running: ReturnType<typeof startProcess>[] = [];
    try {
      // Ports that are free now, so parallel runs of the suite (several checkouts) do not meet.
      const portBase = await freePortBase(START_PORT_OFFSETS);
      const first = startProcess(dataDir, portBase);
      running.push(first);
      await first.ready;
      assert.match(first.log(), /\[1\/6\] render examples/);
      assert.match(first.log(), /seed demo corpus/);
      const info = JSON.parse(readFileSync(join(dataDir, 'stack.json'), 'utf8')) as StackFile;
      const health = await fetch(`${info.retrievalUrl}/readyz`);
      assert.equal(health.status, 200);
      // The walkthrough's explain step reads the running stack's database and projector configuration.
      assert.match(info.databaseUrl ?? '', /^postgres:\/\/postgres@127\.0\.0\.1:/);
      assert.ok(info.projectorConfigFile && existsSync(info.projectorConfigFile));
      assert.equal(await first.stop('SIGINT'), 0);
      assert.equal(existsSync(join(dataDir, 'stack.json')), false);
      assert.equal(existsSync(join(dataDir, 'projector.json')), false);

      const second = startProcess(dataDir, portBase);
      running.push(second);
      await second.ready;
      assert.doesNotMatch(second.log(), /seed demo corpus/, 'the corpus persisted in the data directory');
      assert.equal(await second.stop('SIGTERM'), 0);
    } finally {
      // Whatever failed above, no stack outlives the test (stop is a no-op for one already gone).
      await Promise.all(running.map((s) => s.stop('SIGKILL')));
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('npm run demo', () => {
  test('every scenario of the walkthrough behaves as described', async () => {
    const { startLocalStack } = await import('../local/stack.ts');
    const stack = await startLocalStack();
    try {
      const steps = await runDemo(stack as DemoTarget);
      const byTitle = Object.fromEntries(steps.map((s) => [s.title, s]));
      const alone = byTitle['Alice alone in the general room (public ceiling)']!;
      const withBob = byTitle['Alice with Bob from Slack: only what both may read']!;
      assert.equal(alone.outcome, 'answer');
      assert.ok(withBob.detail.length < alone.detail.length, 'the room with Bob grounds in fewer chunks');
      for (const s of steps.slice(-5)) assert.equal(s.outcome, 'denied', s.title);
      // A guest joins Alice and Bob: the room grounds in nothing, and explain names whom it lost access for.
      const guest = byTitle['Carol, a guest from org B, joins Alice and Bob in the general room']!;
      assert.equal(guest.outcome, 'answer');
      assert.match(guest.detail, /grounded in: \(nothing\)/);
      assert.match(withBob.detail, /handbook\/onboarding, handbook\/travel/);
      const explained = byTitle['explain --summary: whom the room lost access for']!;
      assert.equal(explained.outcome, 'report');
      // handbook/onboarding and handbook/travel list Alice and Bob; federation/org-b-room lists Alice and Carol.
      assert.equal(
        explained.detail,
        'without @slack-bob:org-a.example this room would see 1 more chunk(s); ' +
          'without @carol:org-b.example this room would see 2 more chunk(s)',
      );
      assert.match(byTitle['expired projection presented to the retrieval server']!.detail, /expired/);
    } finally {
      await stack.close();
    }
  });
});
