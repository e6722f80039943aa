import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { sendCheck } from '../testkit/projector/client.ts';
import {
  ALICE,
  config,
  configJson,
  encodeContext,
  localRequest,
  NOW,
  publicRequest,
  roomContext,
} from '../testkit/projector/fixtures.ts';
import { serveProjector } from './cli.ts';
import { startProjector } from './index.ts';

async function captureStderr(fn: () => Promise<void>): Promise<string[]> {
  const lines: string[] = [];
  const original = process.stderr.write.bind(process.stderr);
  const level = process.env['FGENTIC_LOG_LEVEL'];
  process.env['FGENTIC_LOG_LEVEL'] = 'info';
  process.stderr.write = ((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  }) as typeof process.stderr.write;
  try {
    await fn();
  } finally {
    process.stderr.write = original;
    if (level === undefined) delete process.env['FGENTIC_LOG_LEVEL'];
    else process.env['FGENTIC_LOG_LEVEL'] = level;
  }
  return lines;
}

describe('audit log', () => {
  test('one content-free line per decision: route, configured agent, decision, reason, status', async () => {
    const p = await startProjector({ config: config(), now: () => NOW });
    const ctx = encodeContext(roomContext());
    let identity = '';
    const lines = await captureStderr(async () => {
      const ok = await sendCheck(p.url, localRequest());
      identity = String(ok.headers['x-fgentic-identity']);
      await sendCheck(p.url, localRequest({ userId: '@mallory:org-a.example' }));
      await sendCheck(p.url, publicRequest());
      await sendCheck(p.url, publicRequest({ headers: { 'x-fgentic-check-agent-name': ['@alice:org-a.example'] } }));
    });
    await p.close();
    const decisions = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'decision');
    assert.equal(decisions.length, 4);
    assert.deepEqual(
      decisions.map((d) => [d.route, d.agent, d.decision, d.reason, d.status]),
      [
        ['local', 'kagent/knowledge-agent', 'allow', 'ok', 200],
        ['local', 'kagent/knowledge-agent', 'deny', 'caller_mismatch', 403],
        ['public', 'kagent/knowledge-agent', 'allow', 'ok', 200],
        ['public', undefined, 'deny', 'agent', 403],
      ],
    );
    const all = lines.join('');
    for (const secret of [ALICE, 'mallory', ctx, identity, 'org-b-a2a', 'oidc:'])
      assert.ok(!all.includes(secret), secret);
  });
});

describe('audit log of an unexpected throw', () => {
  test('the decision is internal, logged at warn with the class and code, never the message', async () => {
    const thrown = Object.assign(new RangeError('content-that-must-not-be-logged'), {
      code: 'ERR_OUT_OF_RANGE',
    });
    // The registry read throws mid-decision; the rest of the configuration is normal.
    const broken = new Proxy(config(), {
      get: (target, key, receiver) => {
        if (key === 'rooms') throw thrown;
        return Reflect.get(target, key, receiver);
      },
    });
    const p = await startProjector({ config: broken, now: () => NOW });
    const lines = await captureStderr(async () => {
      const r = await sendCheck(p.url, localRequest());
      assert.equal(r.status, 403);
    });
    await p.close();
    const decisions = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'decision');
    assert.deepEqual(
      decisions.map((d) => [d.level, d.reason, d.thrown, d.code]),
      [['warn', 'internal', 'RangeError', 'ERR_OUT_OF_RANGE']],
    );
    assert.ok(!lines.join('').includes('content-that-must-not-be-logged'));
  });
});

describe('serveProjector CLI entry', () => {
  test('bad arguments exit 2 without starting a server', async () => {
    const lines = await captureStderr(async () => {
      assert.equal(await serveProjector(['--bogus']), 2);
      assert.equal(await serveProjector(['--port', 'eighty']), 2);
      assert.equal(await serveProjector(['--port', '70000']), 2);
      const busy = await startProjector({ config: config() });
      try {
        const port = new URL(busy.url).port;
        assert.equal(await serveProjector(['--config', '/nonexistent', '--port', port, '--host', '127.0.0.1']), 1);
      } finally {
        await busy.close();
      }
    });
    assert.ok(lines.length >= 3);
  });

  test('serves on --port/--host with --config, answers checks, and exits 0 on SIGTERM', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'projector-cli-'));
    const file = join(dir, 'projector.json');
    writeFileSync(file, JSON.stringify(configJson()));
    const code = `import('./projector/cli.ts').then(async (m) => process.exit(await m.serveProjector(['--config', ${JSON.stringify(file)}, '--port', '0', '--host', '127.0.0.1'])))`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
      cwd: join(import.meta.dirname, '..'),
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, FGENTIC_LOG_LEVEL: 'silent' },
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let buf = '';
        child.stderr!.on('data', (d) => {
          buf += d;
          const m = /listening on (http:\/\/\S+)/.exec(buf);
          if (m) resolve(m[1]!);
        });
        child.once('exit', () => reject(new Error(`exited early: ${buf}`)));
      });
      const r = await sendCheck(url, publicRequest({ exp: Math.floor(Date.now() / 1000) + 3600 }));
      assert.equal(r.status, 200);
      const exited = new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
      child.kill('SIGTERM');
      assert.equal(await exited, 0);
    } finally {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
