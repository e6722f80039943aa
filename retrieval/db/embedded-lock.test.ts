/**
 * One process per embedded data directory: a second opener (another `serve retrieval`, `npm start`,
 * an ingest) is refused with the holder's PID instead of silently working on its own copy.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { runCli, type Service, startCli } from '../../testkit/common/index.ts';
import { DatabaseInUseError, lockPath, readLock, startEmbeddedDatabase } from './embedded.ts';

const root = mkdtempSync(join(tmpdir(), 'fgentic-lock-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** `serve retrieval` on a data directory, as a real process; resolves once it listens. */
async function serve(dataDir: string): Promise<Service> {
  const config = join(root, 'retrieval.json');
  writeFileSync(
    config,
    JSON.stringify({
      version: 1,
      agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
      embeddings: { profile: 'local-hash-1024-v1' },
    }),
  );
  const service = startCli(['serve', 'retrieval', '--config', config, '--data-dir', dataDir, '--port', '0'], {
    ready: ({ stdout }) => stdout.includes('listening'),
    // A bound, not an expectation: PGlite's first start takes minutes on a saturated machine.
    readyTimeoutMs: 300_000,
  });
  await service.ready;
  return service;
}

describe('embedded data directory lock', () => {
  test('a second opener is refused with the holder PID and URL; the lock goes when the holder stops', async () => {
    const dataDir = join(root, 'held');
    const holder = await serve(dataDir);
    try {
      const lock = readLock(dataDir);
      assert.equal(lock?.pid, holder.child.pid);
      assert.match(lock?.url ?? '', /^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres/);

      // In this process: the API refuses.
      await assert.rejects(startEmbeddedDatabase({ dataDir }), (err: unknown) => {
        assert.ok(err instanceof DatabaseInUseError);
        assert.equal(err.holder.pid, holder.child.pid);
        assert.match(err.message, new RegExp(`in use by PID ${holder.child.pid}; ingest through the running`));
        assert.ok(err.message.includes(lock?.url ?? '?'));
        return true;
      });
      // Another real process: a second server on the same directory exits non-zero, naming the holder.
      const second = await runCli([
        'serve',
        'retrieval',
        '--config',
        join(root, 'retrieval.json'),
        '--data-dir',
        dataDir,
        '--port',
        '0',
      ]);
      assert.equal(second.code, 1);
      assert.match(second.stderr, new RegExp(`database .* in use by PID ${holder.child.pid}`));
    } finally {
      holder.child.kill('SIGTERM');
      assert.equal(await holder.stopped, 0);
    }
    assert.equal(existsSync(lockPath(dataDir)), false, 'a clean stop removes the lock');
    const db = await startEmbeddedDatabase({ dataDir });
    await db.close();
  });

  test('a lock left by a dead process is stale and taken over', async () => {
    const dataDir = join(root, 'stale');
    // A PID that existed and has exited: a finished child's.
    const gone = spawn(process.execPath, ['-e', '']);
    const pid = gone.pid;
    await new Promise((r) => gone.once('exit', r));
    writeFileSync(lockPath(dataDir), JSON.stringify({ pid, host: hostname(), url: 'postgres://x@127.0.0.1:1/' }));
    assert.equal(readLock(dataDir), undefined);
    const db = await startEmbeddedDatabase({ dataDir });
    try {
      assert.equal(JSON.parse(readFileSync(lockPath(dataDir), 'utf8')).pid, process.pid);
      // Held by this process now: a second open here is refused too.
      await assert.rejects(startEmbeddedDatabase({ dataDir }), DatabaseInUseError);
    } finally {
      await db.close();
    }
    assert.equal(existsSync(lockPath(dataDir)), false);
  });

  test('a lock from another host or one being written counts as held', async () => {
    const dataDir = join(root, 'remote');
    writeFileSync(lockPath(dataDir), JSON.stringify({ pid: 1, host: `not-${hostname()}` }));
    await assert.rejects(startEmbeddedDatabase({ dataDir }), /in use by PID 1 on not-/);
    writeFileSync(lockPath(dataDir), '');
    await assert.rejects(
      startEmbeddedDatabase({ dataDir }),
      /cannot be read; remove it if no process uses the directory/,
    );
    assert.equal(readFileSync(lockPath(dataDir), 'utf8'), '', 'a refused opener leaves the lock alone');
  });

  test('a lock that exists but cannot be read (here a directory: EISDIR) counts as held, not free', async () => {
    const dataDir = join(root, 'unreadable');
    mkdirSync(lockPath(dataDir), { recursive: true });
    assert.deepEqual(readLock(dataDir), { pid: 0, host: 'unknown' });
    await assert.rejects(startEmbeddedDatabase({ dataDir }), /cannot be read/);
  });
});
