/** The shared test plumbing: waits name what they waited for, ports are free, children never leak. */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import {
  freePort,
  freePortBase,
  liveIoHandles,
  runProcess,
  START_PORT_OFFSETS,
  startProcess,
  staysTrue,
  waitFor,
  within,
} from './index.ts';

const node = process.execPath;
const idle = ['-e', 'setInterval(() => {}, 1000)'];

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => s.close(() => resolve(true)));
  });
}

describe('waitFor', () => {
  test('returns the first truthy value of the probe', async () => {
    let n = 0;
    assert.equal(await waitFor('third probe', () => (++n >= 3 ? n : undefined), { intervalMs: 1 }), 3);
  });

  test('a timeout names what it waited for and the last error class of the probe', async () => {
    await assert.rejects(
      waitFor(
        'the moon',
        () => {
          throw Object.assign(new Error('refused'), { code: 'ECONNREFUSED' });
        },
        { timeoutMs: 30, intervalMs: 5 },
      ),
      /waiting for the moon \(last error: Error ECONNREFUSED: refused\)/,
    );
  });
});

describe('ports', () => {
  test('freePort hands out a port that can be bound', async () => {
    const port = await freePort();
    assert.ok(port > 0);
    assert.equal(await canBind(port), true);
  });

  test('freePortBase returns a base whose every offset can be bound', async () => {
    const base = await freePortBase(START_PORT_OFFSETS);
    for (const off of START_PORT_OFFSETS) assert.equal(await canBind(base + off), true, `offset ${off}`);
  });
});

describe('child processes', () => {
  test('runProcess collects stdout, stderr, stdin and the exit code', async () => {
    const r = await runProcess(
      node,
      ['-e', 'process.stdin.pipe(process.stdout); process.stderr.write("e"); process.exitCode = 3'],
      { input: 'in' },
    );
    assert.deepEqual({ code: r.code, stdout: r.stdout, stderr: r.stderr }, { code: 3, stdout: 'in', stderr: 'e' });
  });

  test('ready resolves on the readiness line and stop ends the process', async () => {
    const s = startProcess(node, ['-e', 'console.log("listening"); setInterval(() => {}, 1000)'], {
      ready: ({ stdout }) => stdout.includes('listening'),
    });
    await s.ready;
    assert.equal(await s.stop('SIGTERM'), 'SIGTERM');
  });

  test('a process that never gets ready is killed, not left behind', async () => {
    const s = startProcess(node, idle, { ready: () => false, readyTimeoutMs: 200 });
    await assert.rejects(s.ready, /not ready after 200 ms/);
    assert.equal(await s.stopped, 'SIGKILL');
  });

  test('a process that exits before ready rejects with its exit code', async () => {
    const s = startProcess(node, ['-e', 'process.stderr.write("no config"); process.exit(2)'], {
      ready: () => false,
    });
    await assert.rejects(s.ready, /exited 2 before ready:\nno config/);
  });
});

describe('negative checks and bounded teardown', () => {
  test('staysTrue fails at the first probe that no longer holds, naming the check', async () => {
    let n = 0;
    await assert.rejects(
      staysTrue('nothing written', () => ++n < 3, 10_000, 1),
      /nothing written: no longer true/,
    );
    assert.equal(n, 3);
  });

  test('staysTrue returns once the bound has passed with the probe holding', async () => {
    let n = 0;
    await staysTrue('quiet', () => ++n > 0, 30, 1);
    assert.ok(n >= 2);
  });

  test('within names the step that did not finish, and passes a result through', async () => {
    assert.equal(await within('quick step', Promise.resolve(7), 1000), 7);
    await assert.rejects(within('stuck step', new Promise(() => {}), 20), /stuck step did not finish within 20 ms/);
  });

  test('liveIoHandles sees a listening server until it is closed', async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    assert.ok(liveIoHandles().includes('TCPServerWrap'));
    await new Promise<void>((r) => server.close(() => r()));
    await waitFor('the server handle to go', () => !liveIoHandles().includes('TCPServerWrap'), 5000);
  });
});
