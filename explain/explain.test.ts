/**
 * `explain` through its CLI entry point against the embedded Postgres: one named test per reason,
 * the summary arithmetic, what never appears in the output, the audience sources (snapshot file,
 * homeserver through the projector's client), and the guards that make it refuse rather than guess.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import type { ChunkMetadata, MatrixPrincipal } from '../contract/index.ts';
import type { ProjectorConfig } from '../projector/config.ts';
import { matrixSdkReader } from '../projector/homeserver.ts';
import { startEmbeddedDatabase } from '../retrieval/db/embedded.ts';
import { writeChunks } from '../retrieval/ingest/store.ts';
import { configJson, snapshot } from '../testkit/projector/fixtures.ts';
import { HomeserverDouble } from '../testkit/projector/homeserver.ts';
import { prng, randomVector, startTestDatabase, type TestDatabase } from '../testkit/retrieval.ts';
import { type ExplainIo, explainCommand } from './command.ts';
import { ExplainError, explainRows, type Subject } from './core.ts';

const ROOM = '!room:org-a.example';
const WIDE_ROOM = '!wide:org-a.example';
const ALICE: MatrixPrincipal = { kind: 'matrix', principal: '@alice:org-a.example' };
const BOB: MatrixPrincipal = {
  kind: 'bridged_matrix',
  network: 'slack',
  principal: '@slack-bob:org-a.example',
};
const GUEST: MatrixPrincipal = { kind: 'matrix', principal: '@guest:org-b.example' };
// Bob's MXID typed as a native user: the classic mismatch between an ACL and the bridge's classification.
const BOB_NATIVE: MatrixPrincipal = { kind: 'matrix', principal: BOB.principal };
const SECRET_TEXT = 'SECRET-CHUNK-CONTENT-7731';
const SECRET_TITLE = 'Confidential Title 4412';

let t: TestDatabase;
let dir: string;
let configFile: string;

function m(o: {
  source?: string;
  classification?: ChunkMetadata['classification'];
  principals?: MatrixPrincipal[];
  groups?: string[];
}): ChunkMetadata {
  return {
    source: { id: o.source ?? 'docs/a.md', title: SECRET_TITLE },
    classification: o.classification ?? 'public',
    allowed_principals: o.principals ?? [],
    allowed_groups: o.groups ?? [],
  };
}

const CORPUS: [string, ChunkMetadata][] = [
  ['c-all', m({ principals: [ALICE, BOB, GUEST], groups: ['partner/org-b/docs'] })],
  ['c-no-guest-1', m({ principals: [ALICE, BOB] })],
  ['c-no-guest-2', m({ source: 'docs/b.md', principals: [ALICE, BOB] })],
  ['c-bob-native', m({ source: 'docs/b.md', principals: [ALICE, BOB_NATIVE, GUEST] })],
  ['c-anp', m({ classification: 'approved_non_public', principals: [ALICE, BOB, GUEST] })],
  ['c-restricted', m({ classification: 'restricted', principals: [ALICE], groups: ['partner/org-b/docs'] })],
  ['c-partner-other', m({ groups: ['partner/org-c/docs'], principals: [ALICE] })],
  ['c-partner-eng', m({ classification: 'approved_non_public', groups: ['partner/org-b/eng'] })],
];

before(async () => {
  t = await startTestDatabase();
  const rand = prng(7);
  await writeChunks(t.pool, {
    chunks: CORPUS.map(([id, metadata]) => ({
      chunk_id: id,
      content: `${SECRET_TEXT} ${id}`,
      metadata,
      embedding: randomVector(rand),
    })),
  });
  dir = mkdtempSync(join(tmpdir(), 'explain-'));
  configFile = join(dir, 'projector.json');
  const cfg = configJson() as Record<string, any>;
  cfg['partners'].push({
    issuer: 'https://issuer.example',
    audience: 'fgentic-a2a',
    azp: 'org-b-eng-a2a',
    policyId: 'org-b',
    groups: ['partner/org-b/eng'],
    allowedClassifications: ['approved_non_public', 'public'],
    agents: [{ namespace: 'kagent', name: 'knowledge-agent' }],
  });
  writeFileSync(configFile, JSON.stringify(cfg));
});
after(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

function snapshotFile(
  readers: MatrixPrincipal[],
  opts: { roomId?: string; classifications?: ['public'] | ['approved_non_public', 'public'] } = {},
): string {
  const file = join(dir, `snap-${Math.random().toString(36).slice(2)}.json`);
  const s = snapshot({
    ...(opts.roomId ? { roomId: opts.roomId } : {}),
    ...(opts.classifications ? { classifications: opts.classifications } : {}),
    members: [
      { principal: '@agent-docs:org-a.example', kind: 'bridge_service', event_id: '$m0' },
      ...readers.map((r, i) => ({ ...r, event_id: `$m${i + 1}` })),
    ],
    serverAcl: {
      allow: ['org-a.example', 'org-b.example'],
      allow_ip_literals: false,
      deny: [],
      event_id: '$acl',
    },
  });
  writeFileSync(file, JSON.stringify(s));
  return file;
}

async function run(argv: string[], io: Partial<ExplainIo> = {}): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await explainCommand([...argv, '--config', configFile, '--database-url', t.db.url], {
    stdout: (s) => {
      out += s;
    },
    stderr: (s) => {
      err += s;
    },
    env: {},
    ...io,
  });
  return { code, out, err };
}

async function json(argv: string[]): Promise<any> {
  const r = await run([...argv, '--json']);
  assert.equal(r.code, 0, r.err);
  return JSON.parse(r.out);
}

const room = (readers: MatrixPrincipal[], wide = false) => [
  '--room',
  wide ? WIDE_ROOM : ROOM,
  '--snapshot',
  snapshotFile(readers, wide ? { roomId: WIDE_ROOM, classifications: ['approved_non_public', 'public'] } : {}),
];

// The bridge's own user (serviceUserRegex) typed as a native reader.
const BRIDGE_AS_READER: MatrixPrincipal = { kind: 'matrix', principal: '@a2a-bridge:org-a.example' };

describe("explain runs the projector's own decision on the room", () => {
  test('a Slack user listed as a native reader: refused: audience_kind, and nothing is visible', async () => {
    // The row lists Bob as native too, so the predicate alone would say visible.
    const r = await json([...room([ALICE, BOB_NATIVE]), '--chunk', 'c-bob-native']);
    assert.equal(r.refused, 'audience_kind');
    assert.equal(r.chunks[0].visible, false);
    assert.deepEqual(r.chunks[0].reasons, [{ rule: 'refused', reason: 'audience_kind' }]);
    const table = await run([...room([ALICE, BOB_NATIVE]), '--chunk', 'c-bob-native']);
    assert.match(table.out, /refused: audience_kind/);
    assert.match(table.out, /0 visible/);
  });

  test("the bridge's own user as a reader: refused: audience_service, nothing retrievable", async () => {
    const r = await json([...room([ALICE, BRIDGE_AS_READER]), '--summary']);
    assert.equal(r.refused, 'audience_service');
    assert.equal(r.summary.visible, 0);
    assert.ok(r.summary.by_classification.every((c: { visible: number }) => c.visible === 0));
  });

  test('a room the projector accepts carries no refusal', async () => {
    const r = await json([...room([ALICE, BOB, GUEST]), '--chunk', 'c-all']);
    assert.equal(r.refused, undefined);
  });
});

describe('explain: one reason per rule', () => {
  test('a chunk every reader may read, in the ceiling, is visible with no reason', async () => {
    const r = await json([...room([ALICE, BOB, GUEST]), '--chunk', 'c-all']);
    assert.deepEqual(r.chunks, [
      { chunk_id: 'c-all', source_id: 'docs/a.md', classification: 'public', visible: true, reasons: [] },
    ]);
  });

  test('a classification outside the ceiling is reported with the ceiling', async () => {
    const r = await json([...room([ALICE, BOB, GUEST]), '--chunk', 'c-anp']);
    assert.deepEqual(r.chunks[0].reasons, [
      { rule: 'classification', classification: 'approved_non_public', ceiling: ['public'] },
    ]);
    const wide = await json([...room([ALICE, BOB, GUEST], true), '--chunk', 'c-anp']);
    assert.equal(wide.chunks[0].visible, true);
  });

  test('each reader missing from allowed_principals is reported, kind and network shown', async () => {
    const r = await json([...room([ALICE, BOB, GUEST]), '--source', 'docs/b.md']);
    const byId = Object.fromEntries(r.chunks.map((c: any) => [c.chunk_id, c]));
    assert.deepEqual(byId['c-no-guest-2'].reasons, [{ rule: 'reader', reader: GUEST, row_lists_as: [] }]);
    // The row lists Bob's MXID as a native user; the room has him as a bridged Slack user.
    assert.deepEqual(byId['c-bob-native'].reasons, [
      { rule: 'reader', reader: BOB, row_lists_as: [{ kind: 'matrix' }] },
    ]);
  });

  test('the table spells out a native vs bridged mismatch', async () => {
    const r = await run([...room([ALICE, BOB, GUEST]), '--chunk', 'c-bob-native']);
    assert.equal(r.code, 0, r.err);
    assert.match(
      r.out,
      /reader @slack-bob:org-a\.example \(bridged_matrix\/slack\) is not in allowed_principals; the row lists this MXID as matrix/,
    );
  });

  test('every reason of a chunk is listed, not only the first', async () => {
    const r = await json([...room([ALICE, BOB, GUEST]), '--chunk', 'c-restricted']);
    assert.deepEqual(
      r.chunks[0].reasons.map((x: any) => x.rule + (x.reader ? `:${x.reader.principal}` : '')),
      ['classification', 'reader:@slack-bob:org-a.example', 'reader:@guest:org-b.example'],
    );
  });

  test('a partner without group overlap: the row groups and the partner groups are shown; principals never count', async () => {
    const r = await json(['--partner', 'org-b', '--azp', 'org-b-a2a', '--chunk', 'c-partner-other']);
    assert.deepEqual(r.chunks[0].reasons, [
      { rule: 'groups', row_groups: ['partner/org-c/docs'], partner_groups: ['partner/org-b/docs'] },
    ]);
    const ok = await json(['--partner', 'org-b', '--azp', 'org-b-a2a', '--chunk', 'c-all']);
    assert.equal(ok.chunks[0].visible, true);
  });

  test('a policy id with two registry entries needs --azp', async () => {
    const r = await run(['--partner', 'org-b', '--summary']);
    assert.equal(r.code, 1);
    assert.match(r.err, /choose one with --azp/);
    const eng = await json(['--partner', 'org-b', '--azp', 'org-b-eng-a2a', '--chunk', 'c-partner-eng']);
    assert.equal(eng.chunks[0].visible, true);
  });
});

describe('explain --summary', () => {
  test('what the room retrieves, what each reader blocks on their own, and by classification', async () => {
    const r = await json([...room([ALICE, BOB, GUEST]), '--summary']);
    assert.equal(r.summary.total, 8);
    assert.equal(r.summary.visible, 1); // c-all
    assert.equal(r.summary.outside_ceiling, 3); // c-anp, c-restricted, c-partner-eng
    const readers = Object.fromEntries(r.summary.readers.map((x: any) => [x.reader.principal, x]));
    // Without the guest the room would also see c-no-guest-1 and c-no-guest-2.
    assert.equal(readers['@guest:org-b.example'].blocks_alone, 2);
    // Bob alone blocks c-bob-native (listed as native) — the guest is in that row.
    assert.equal(readers['@slack-bob:org-a.example'].blocks_alone, 1);
    assert.equal(readers['@alice:org-a.example'].blocks_alone, 0);
    // c-partner-other lists only Alice: both Bob and the guest miss it, so neither blocks it alone.
    assert.equal(readers['@guest:org-b.example'].missing_from, 3);
    assert.deepEqual(r.summary.by_classification, [
      { classification: 'public', in_ceiling: true, total: 5, visible: 1 },
      { classification: 'approved_non_public', in_ceiling: false, total: 2, visible: 0 },
      { classification: 'restricted', in_ceiling: false, total: 1, visible: 0 },
    ]);
  });

  test('the table names whom the room lost access for', async () => {
    const r = await run([...room([ALICE, BOB, GUEST]), '--summary']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /without @guest:org-b\.example this room would see 2 more chunk\(s\)/);
    assert.match(r.out, /without @slack-bob:org-a\.example this room would see 1 more chunk\(s\)/);
    assert.doesNotMatch(r.out, /without @alice/);
  });

  test('scoped to one source', async () => {
    const r = await json([...room([ALICE, BOB, GUEST]), '--summary', '--source', 'docs/b.md']);
    assert.equal(r.summary.total, 2);
  });

  test('a partner summary counts chunks outside the ceiling and without group overlap', async () => {
    const r = await json(['--partner', 'org-b', '--azp', 'org-b-a2a', '--summary']);
    assert.equal(r.summary.visible, 1); // c-all
    assert.equal(r.summary.outside_ceiling, 3);
    assert.equal(r.summary.no_group_overlap, 4);
  });
});

describe('explain output is content-free', () => {
  test('never chunk content; titles only with --titles', async () => {
    for (const argv of [
      [...room([ALICE, BOB, GUEST]), '--source', 'docs/a.md'],
      [...room([ALICE, BOB, GUEST]), '--source', 'docs/a.md', '--json'],
      [...room([ALICE, BOB, GUEST]), '--summary'],
      [...room([ALICE, BOB, GUEST]), '--summary', '--json'],
      ['--partner', 'org-b', '--azp', 'org-b-a2a', '--source', 'docs/a.md', '--json'],
    ]) {
      const r = await run(argv);
      assert.equal(r.code, 0, r.err);
      assert.doesNotMatch(r.out + r.err, /SECRET-CHUNK-CONTENT/);
      assert.doesNotMatch(r.out + r.err, /Confidential Title/);
    }
    const titled = await run([...room([ALICE, BOB, GUEST]), '--chunk', 'c-all', '--titles']);
    assert.match(titled.out, /Confidential Title 4412/);
    assert.doesNotMatch(titled.out, /SECRET-CHUNK-CONTENT/);
  });
});

describe('explain: where the audience comes from', () => {
  test('the homeserver, through the projector live-check client and its configuration', async () => {
    const token = 'syt_explain_token';
    const hs = new HomeserverDouble(token);
    await hs.start();
    try {
      hs.seedAdrRoom(
        ROOM,
        [
          { principal: ALICE.principal, event_id: '$alice' },
          { principal: BOB.principal, event_id: '$bob' },
        ],
        ALICE.principal,
      );
      const reader = (c: ProjectorConfig) =>
        matrixSdkReader({ baseUrl: hs.url, accessToken: token, timeoutMs: c.liveRoomCheck.timeoutMs * 20 });
      const before = await run(['--room', ROOM, '--summary', '--json'], { reader });
      assert.equal(before.code, 0, before.err);
      const b = JSON.parse(before.out);
      assert.deepEqual(b.audience, [BOB, ALICE]); // the ADR order: kind first
      assert.equal(b.summary.visible, 3);
      hs.join(ROOM, GUEST.principal);
      const afterJoin = JSON.parse((await run(['--room', ROOM, '--summary', '--json'], { reader })).out);
      assert.equal(afterJoin.summary.visible, 1);
      assert.ok(hs.requests >= 4, 'the live state was read each time');
      hs.mode = 'error';
      const down = await run(['--room', ROOM, '--summary'], { reader });
      assert.equal(down.code, 1);
      assert.match(down.err, /homeserver did not answer/);
    } finally {
      await hs.stop();
    }
  });

  test('without --snapshot and without a usable token file it refuses', async () => {
    const r = await run(['--room', ROOM, '--summary']);
    assert.equal(r.code, 1);
    assert.match(r.err, /access token file/);
  });

  test('a room outside the registry is refused: the projector denies it', async () => {
    const r = await run([
      '--room',
      '!other:org-a.example',
      '--snapshot',
      snapshotFile([ALICE], { roomId: '!other:org-a.example' }),
      '--summary',
    ]);
    assert.equal(r.code, 1);
    assert.match(r.err, /not in the room registry/);
  });

  test("a snapshot whose ceiling differs from the registry's is noted, and the registry's ceiling is used", async () => {
    const file = snapshotFile([ALICE], { classifications: ['approved_non_public', 'public'] });
    const r = await json(['--room', ROOM, '--snapshot', file, '--summary']);
    assert.deepEqual(r.ceiling, ['public']);
    assert.match(r.notes[0], /differs from the registry/);
  });

  test('a snapshot of another room is refused', async () => {
    const r = await run(['--room', WIDE_ROOM, '--snapshot', snapshotFile([ALICE]), '--summary']);
    assert.equal(r.code, 1);
    assert.match(r.err, /another room/);
  });
});

describe('explain: usage and guards', () => {
  test('usage errors exit 2', async () => {
    for (const argv of [
      ['--summary'],
      ['--room', ROOM, '--partner', 'org-b', '--summary'],
      ['--room', ROOM],
      ['--room', ROOM, '--chunk', 'a', '--source', 'b'],
      ['--partner', 'org-b', '--snapshot', 'x', '--summary'],
      ['--room', ROOM, '--summary', '--limit', '0'],
      ['--room', ROOM, '--summary', '--bogus'],
    ]) {
      const r = await run(argv);
      assert.equal(r.code, 2, argv.join(' '));
    }
  });

  test('--limit cuts the list and says so', async () => {
    const r = await json([...room([ALICE]), '--source', 'docs/a.md', '--limit', '2']);
    assert.equal(r.chunks.length, 2);
    assert.equal(r.truncated, true);
  });

  test('an explanation whose rules disagree with the predicate is refused, not printed', () => {
    const s: Subject = { kind: 'room', roomId: ROOM, audience: [ALICE], ceiling: ['public'], notes: [] };
    const row = {
      chunk_id: 'x',
      source_id: 's',
      classification: 'public',
      class_ok: true,
      reader_0: true,
      listed_0: [],
    };
    assert.equal(explainRows(s, [{ ...row, visible: true }], 10).chunks.length, 1);
    assert.throws(() => explainRows(s, [{ ...row, visible: false }], 10), ExplainError);
    assert.throws(() => explainRows(s, [{ ...row, reader_0: false, visible: true }], 10), ExplainError);
  });

  test('a data directory the running stack holds is read through its database, as ingest writes through it', async () => {
    const held = join(dir, 'held');
    const stack = await startEmbeddedDatabase({ dataDir: held });
    try {
      let err = '';
      const code = await explainCommand([...room([ALICE]), '--summary', '--config', configFile, '--data-dir', held], {
        stdout: () => {},
        stderr: (s) => (err += s),
        env: {},
      });
      // The holder's database was reached (it is empty here: no knowledge store yet).
      assert.match(
        err,
        new RegExp(
          `explain: ${held} is open by PID ${process.pid}; reading through its database at 127\\.0\\.0\\.1:\\d+`,
        ),
      );
      assert.match(err, /no knowledge store in this database/);
      assert.doesNotMatch(err, /database query failed/);
      assert.equal(code, 1);
    } finally {
      await stack.close();
    }
  });

  test('no embedded database is created where none exists', async () => {
    let err = '';
    const code = await explainCommand(
      [...room([ALICE]), '--summary', '--config', configFile, '--data-dir', join(dir, 'absent')],
      { stdout: () => {}, stderr: (s) => (err += s), env: {} },
    );
    assert.equal(code, 1);
    assert.match(err, /no embedded database/);
  });
});

describe('explain is a command of the binary', () => {
  test('fgentic-retrieval explain runs through cli/main.ts', async () => {
    const bin = new URL('../bin/fgentic-retrieval.mjs', import.meta.url).pathname;
    const argv = [
      ...room([ALICE, BOB, GUEST]),
      '--summary',
      '--json',
      '--config',
      configFile,
      '--database-url',
      t.db.url,
    ];
    const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [bin, 'explain', ...argv],
        { env: { ...process.env, FGENTIC_LOG_LEVEL: 'silent' } },
        (_e, out) => resolve({ code: child.exitCode, stdout: out }),
      );
    });
    assert.equal(code, 0);
    assert.equal(JSON.parse(stdout).summary.visible, 1);
  });
});

describe('explain: argument handling (property)', () => {
  test('any argument list: exit 0, 1 or 2, output only on success, and no argument value echoed', async () => {
    const flags = ['--room', '--partner', '--azp', '--snapshot', '--chunk', '--source', '--limit', '--data-dir'];
    const bools = ['--summary', '--json', '--titles', '--bogus'];
    // Values carry a marker so an echo in an error line would be seen.
    const value = fc.oneof(
      fc.constantFrom(ROOM, '!other:org-a.example', 'org-b', 'c-all', '5', '0', join(dir, 'absent')),
      fc.string({ maxLength: 12 }).map((x) => `ECHO${x.replace(/\s/g, '')}`),
    );
    const arg = fc.oneof(
      fc.tuple(fc.constantFrom(...flags), value).map(([f, v]) => [f, v]),
      fc.constantFrom(...bools).map((b) => [b]),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(arg, { maxLength: 6 }), async (parts) => {
        const argv = parts.flat();
        let out = '';
        let err = '';
        // No database URL and a data directory that does not exist: nothing here reaches a database.
        const code = await explainCommand([...argv, '--config', configFile, '--data-dir', join(dir, 'absent')], {
          stdout: (s) => {
            out += s;
          },
          stderr: (s) => {
            err += s;
          },
          env: {},
        });
        assert.ok(code === 1 || code === 2, `exit ${code}`);
        assert.equal(out, '');
        assert.doesNotMatch(err, /ECHO/);
        assert.equal(err.split('\n').filter(Boolean).length, 1, 'one error line');
      }),
      { numRuns: 200 },
    );
  });
});
