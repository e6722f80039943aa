/**
 * An operator ingests while `npm start` runs. Before the data directory was locked, the CLI opened a
 * second PGlite on the same directory, reported success, and the rows never reached the running
 * stack and were gone after a restart. Now the ingest writes through the running stack's database:
 * the next search through the gateway grounds in the new chunk, and it survives a restart. A second
 * `start` on the same directory is refused.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { AgentCard } from '@a2a-js/sdk';
import { bridgeSend } from '../local/doubles/bridge.ts';
import { ALICE, GENERAL_ROOM, groundedSources, roomSnapshot } from '../local/helpers.ts';
import type { StackFile } from '../local/start.ts';
import { runCli as cli, freePortBase, START_PORT_OFFSETS, startCli } from '../testkit/common/index.ts';

function start(dataDir: string, portBase: number) {
  const service = startCli(
    ['start', '--data-dir', dataDir, '--port-base', String(portBase), '--no-webhook'],
    // Generous: creating and migrating PGlite takes minutes on a saturated shared machine.
    { ready: ({ stderr }) => stderr.includes('is ready'), readyTimeoutMs: 480_000 },
  );
  return { ...service, log: service.stderr };
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
  const portBase = await freePortBase(START_PORT_OFFSETS);
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
    const second = start(dataDir, await freePortBase(START_PORT_OFFSETS));
    assert.equal(await second.stopped, 1);
    assert.match(
      second.log(),
      new RegExp(`database .* in use by PID ${first.child.pid}; ingest through the running stack`),
    );
    assert.match(info.databaseUrl ?? '', /^postgres:\/\/postgres@127\.0\.0\.1:\d+\//);
    assert.ok(first.log().includes(info.databaseUrl ?? '?'), 'the banner prints the database URL');

    assert.equal(await first.stop('SIGINT'), 0);
    first = start(dataDir, portBase);
    await first.ready;
    const restarted = JSON.parse(readFileSync(join(dataDir, 'stack.json'), 'utf8')) as StackFile;
    assert.ok((await search(restarted)).includes('field/zebra-census'), 'the chunk survived the restart');
  } finally {
    await first.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
