/**
 * An operator ingests while `npm start` runs. Before the data directory was locked, the CLI opened a
 * second PGlite on the same directory, reported success, and the rows never reached the running
 * stack and were gone after a restart. Now the ingest writes through the running stack's database:
 * the next search through the gateway grounds in the new chunk, and it survives a restart. A second
 * `start` on the same directory is refused.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { AgentCard } from '@a2a-js/sdk';
import { bridgeSend } from './doubles/bridge.ts';
import { ALICE, GENERAL_ROOM, groundedSources, roomSnapshot } from './helpers.ts';
import type { StackFile } from './start.ts';

const bin = new URL('../bin/fgentic-retrieval.mjs', import.meta.url).pathname;
const env = { ...process.env, FGENTIC_LOG_LEVEL: 'silent', DATABASE_URL: '' };

function start(dataDir: string, portBase: number) {
  const child: ChildProcess = spawn(
    process.execPath,
    [bin, 'start', '--data-dir', dataDir, '--port-base', String(portBase), '--no-webhook'],
    { env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr?.on('data', (c: Buffer) => {
    log += c.toString();
  });
  const stopped = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // Generous: creating and migrating PGlite takes minutes on a saturated shared machine.
  const ready = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`not ready:\n${log}`)), 480_000);
    child.stderr?.on('data', () => {
      if (log.includes('is ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code}:\n${log}`));
    });
  });
  return { child, ready, stopped, log: () => log };
}

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

async function search(info: StackFile): Promise<string[]> {
  const { task } = await bridgeSend({
    routeUrl: info.localRouteUrl,
    card: info.card as AgentCard,
    apiKey: info.bridgeApiKey,
    snapshot: roomSnapshot(GENERAL_ROOM, [ALICE]),
    caller: ALICE,
    text: 'zebra census savanna quarterly',
  });
  return groundedSources(task);
}

test('an ingest while the stack runs is searchable at once and survives a restart; a second start is refused', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fgentic-live-ingest-'));
  const dataDir = join(dir, 'data');
  const portBase = 20000 + Math.floor(Math.random() * 3000) * 10;
  const file = join(dir, 'zebra.jsonl');
  writeFileSync(
    file,
    `${JSON.stringify({
      content: 'Zebra census: the quarterly zebra census in the savanna counted more zebras than last year.',
      metadata: {
        source: { id: 'field/zebra-census', title: 'Zebra census' },
        classification: 'public',
        allowed_principals: [ALICE],
        allowed_groups: [],
      },
    })}\n`,
  );
  let first = start(dataDir, portBase);
  try {
    await first.ready;
    const info = JSON.parse(readFileSync(join(dataDir, 'stack.json'), 'utf8')) as StackFile;
    assert.ok(!(await search(info)).includes('field/zebra-census'));

    // The operator's step: ingest into the data directory the stack is using.
    const ingest = await cli(['ingest', '--jsonl', file, '--data-dir', join(dataDir, 'pglite')]);
    assert.equal(ingest.code, 0, ingest.stderr);
    assert.equal(JSON.parse(ingest.stdout).upserted, 1);
    assert.ok((await search(info)).includes('field/zebra-census'), 'the running stack sees the new chunk');
    assert.match(ingest.stderr, new RegExp(`open by PID ${first.child.pid}; writing through its database`));

    // Unchanged input: nothing to write.
    const again = await cli(['ingest', '--jsonl', file, '--data-dir', join(dataDir, 'pglite')]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(JSON.parse(again.stdout).unchanged, 1);
    assert.equal(JSON.parse(again.stdout).upserted, 0);

    // A second stack on another port base, same data directory: refused, naming the holder.
    const second = start(dataDir, portBase + 5000 > 29990 ? portBase - 5000 : portBase + 5000);
    second.ready.catch(() => {});
    assert.equal(await second.stopped, 1);
    assert.match(
      second.log(),
      new RegExp(`database .* in use by PID ${first.child.pid}; ingest through the running stack`),
    );
    assert.match(info.databaseUrl ?? '', /^postgres:\/\/postgres@127\.0\.0\.1:\d+\//);
    assert.ok(first.log().includes(info.databaseUrl ?? '?'), 'the banner prints the database URL');

    first.child.kill('SIGINT');
    assert.equal(await first.stopped, 0);
    first = start(dataDir, portBase);
    await first.ready;
    const restarted = JSON.parse(readFileSync(join(dataDir, 'stack.json'), 'utf8')) as StackFile;
    assert.ok((await search(restarted)).includes('field/zebra-census'), 'the chunk survived the restart');
  } finally {
    first.child.kill('SIGTERM');
    await first.stopped;
    rmSync(dir, { recursive: true, force: true });
  }
});
