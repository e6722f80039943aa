/** Ingestion through the real database: stable ids, transactional upserts, tombstones, ACL-only updates, bundles. */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import fc from 'fast-check';
import type { MatrixPrincipal } from '../../contract/index.ts';
import { decodeFixture, matrixHeader, meta, P, startTestDatabase, type TestDatabase } from '../../testkit/retrieval.ts';
import { INGESTION_ROLE } from '../db/roles.ts';
import { createLocalEmbedder } from '../embeddings/local.ts';
import type { Embedder } from '../embeddings/types.ts';
import { searchKnowledge } from '../search.ts';
import { ingestCommand } from '../store-commands.ts';
import { bundleRecords, chunkMarkdown, ingestBundle } from './bundle.ts';
import { chunkId } from './chunk-id.ts';
import { fileProblem } from './errors.ts';
import {
  IngestError,
  type IngestRecord,
  ingestJsonlFile,
  ingestRecords,
  parseJsonl,
  prepareRecords,
  readJsonlFile,
} from './jsonl.ts';
import { createProgress } from './progress.ts';
import { StoreConflictError, type StoredChunk, writeChunks } from './store.ts';

let t: TestDatabase;
let embedCalls = 0;
const local = createLocalEmbedder();
const embedder: Embedder = {
  profile: local.profile,
  embed: async (texts) => {
    embedCalls += texts.length;
    return local.embed(texts);
  },
};
const dirs: string[] = [];

before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
beforeEach(async () => {
  await t.pool.query('DELETE FROM knowledge.chunks; DELETE FROM fgentic.chunks');
  embedCalls = 0;
});

const rows = async () =>
  (
    await t.pool.query(
      "SELECT chunk_id, content, metadata, embedding::text AS e FROM knowledge.chunks ORDER BY metadata #>> '{source,id}', content",
    )
  ).rows;

describe('JSONL ingestion', () => {
  test('chunk ids follow the origin formula and ignore ACL and provenance', () => {
    const a = chunkId('bge-m3-1024-v1', 'docs/a.md', 'hello', 0);
    assert.match(a, /^sha256:[0-9a-f]{64}$/);
    assert.equal(a, chunkId('bge-m3-1024-v1', 'docs/a.md', 'hello', 0));
    assert.notEqual(a, chunkId('bge-m3-1024-v1', 'docs/a.md', 'hello', 1));
    assert.notEqual(a, chunkId('local-hash-1024-v1', 'docs/a.md', 'hello', 0));
  });
  test('re-ingesting with only an ACL change keeps ids and vectors and calls no embedder', async () => {
    await ingestRecords(t.pool, embedder, [
      { content: 'one', metadata: meta({ principals: [P.alice] }) },
      { content: 'two', metadata: meta({ principals: [P.alice] }) },
      { content: 'one', metadata: meta({ principals: [P.alice] }) },
    ]);
    assert.equal(embedCalls, 3);
    const first = await rows();
    assert.equal(first.length, 3);
    const stats = await ingestRecords(t.pool, embedder, [
      { content: 'one', metadata: meta({ principals: [P.bob] }) },
      { content: 'two', metadata: meta({ principals: [P.bob] }) },
      { content: 'one', metadata: meta({ principals: [P.bob] }) },
    ]);
    assert.equal(embedCalls, 3, 'no new embedding calls');
    assert.equal(stats.aclOnly, 3);
    const second = await rows();
    assert.deepEqual(
      second.map((r) => [r.chunk_id, r.e]),
      first.map((r) => [r.chunk_id, r.e]),
    );
    assert.ok(second.every((r) => r.metadata.allowed_principals[0].principal === P.bob.principal));
  });
  test('after an ACL change an earlier grounded result is no longer returned (no result retention)', async () => {
    const alice = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));
    await ingestRecords(t.pool, embedder, [{ content: 'grounded fact', metadata: meta({ principals: [P.alice] }) }]);
    const [q] = await local.embed(['grounded fact']);
    const search = async () =>
      (await searchKnowledge(t.pool, { projection: alice, embedding: q ?? [], maxResults: 5 })).hits.map(
        (h) => h.content,
      );
    assert.deepEqual(await search(), ['grounded fact']);
    await ingestRecords(t.pool, embedder, [{ content: 'grounded fact', metadata: meta({ principals: [P.bob] }) }]);
    assert.deepEqual(await search(), []);
    await ingestRecords(t.pool, embedder, [
      {
        content: 'grounded fact',
        metadata: meta({ principals: [P.alice], classification: 'approved_non_public' }),
      },
    ]);
    assert.deepEqual(await search(), []);
  });
  test('a changed source replaces its stale rows; tombstones delete a source', async () => {
    await ingestRecords(t.pool, embedder, [
      { content: 'old text', metadata: meta({ source: 'docs/a.md', principals: [P.alice] }) },
      { content: 'keep', metadata: meta({ source: 'docs/b.md', principals: [P.alice] }) },
    ]);
    await ingestRecords(t.pool, embedder, [
      { content: 'new text', metadata: meta({ source: 'docs/a.md', principals: [P.alice] }) },
    ]);
    assert.deepEqual(
      (await rows()).map((r) => r.content),
      ['new text', 'keep'],
    );
    const stats = await ingestRecords(t.pool, embedder, [{ delete_source: 'docs/a.md' }]);
    assert.equal(stats.deleted, 1);
    assert.deepEqual(
      (await rows()).map((r) => r.content),
      ['keep'],
    );
  });
  test('one invalid record aborts the whole file before anything is written', async () => {
    await assert.rejects(
      ingestRecords(t.pool, embedder, [
        { content: 'fine', metadata: meta({ principals: [P.alice] }) },
        { content: 'bad', metadata: meta({}) },
      ]),
      (err: unknown) => err instanceof IngestError && err.line === 2 && !err.message.includes('bad'),
    );
    assert.equal((await rows()).length, 0);
  });
  test('an invalid supplied embedding aborts the file with nothing written', async () => {
    const vector = Array.from({ length: 1024 }, (_, i) => (i === 0 ? 1 : 0));
    await assert.rejects(
      ingestRecords(t.pool, embedder, [
        { chunk_id: 'a', content: 'x', metadata: meta({ principals: [P.alice] }), embedding: vector },
        {
          chunk_id: 'b',
          content: 'y',
          metadata: meta({ source: 'docs/b.md', principals: [P.alice] }),
          embedding: vector.map((x) => x * Number.NaN),
        },
      ]),
    );
    assert.equal((await rows()).length, 0);
  });
  test('the CLI ingests a JSONL file through --database-url', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fgentic-jsonl-'));
    dirs.push(dir);
    const file = join(dir, 'chunks.jsonl');
    writeFileSync(
      file,
      [
        JSON.stringify({ content: 'cli one', metadata: meta({ principals: [P.alice] }) }),
        JSON.stringify({ content: 'cli two', metadata: meta({ groups: ['partner/org-b/docs'] }) }),
      ].join('\n'),
    );
    const out = process.stdout.write;
    process.stdout.write = () => true;
    try {
      assert.equal(await ingestCommand(['--jsonl', file, '--database-url', t.db.urlAs(INGESTION_ROLE)]), 0);
    } finally {
      process.stdout.write = out;
    }
    assert.equal((await rows()).length, 2);
  });
});

describe('bundle ingestion', () => {
  test('Markdown is chunked at headings, outside code fences', () => {
    const chunks = chunkMarkdown('intro\n\n# One\nbody 1\n```\n# not a heading\n```\n## Two\nbody 2\n');
    assert.deepEqual(
      chunks.map((c) => c.heading ?? null),
      [null, 'One', 'Two'],
    );
  });
  test('a bundle applies its manifest ACL to every file and replaces removed files', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fgentic-bundle-'));
    dirs.push(dir);
    mkdirSync(join(dir, '.fgentic'));
    mkdirSync(join(dir, 'guides'));
    writeFileSync(
      join(dir, '.fgentic', 'knowledge-acl.json'),
      JSON.stringify({
        schema_version: 1,
        corpus: 'reference-docs',
        classification: 'public',
        allowed_principals: [],
        allowed_groups: ['partner/org-b/docs'],
      }),
    );
    writeFileSync(join(dir, 'readme.md'), '# Readme\nhello\n## Setup\nsteps\n');
    writeFileSync(join(dir, 'guides', 'a.md'), '# Guide A\ntext\n');
    await ingestBundle(t.pool, embedder, dir);
    let r = await rows();
    assert.equal(r.length, 3);
    assert.deepEqual([...new Set(r.map((x) => x.metadata.source.id))].sort(), [
      'reference-docs/bundle/guides/a.md',
      'reference-docs/bundle/readme.md',
    ]);
    assert.ok(r.every((x) => x.metadata.allowed_groups[0] === 'partner/org-b/docs'));
    rmSync(join(dir, 'guides', 'a.md'));
    await ingestBundle(t.pool, embedder, dir);
    r = await rows();
    assert.deepEqual([...new Set(r.map((x) => x.metadata.source.id))], ['reference-docs/bundle/readme.md']);
  });
  test('an empty or invalid manifest ACL is rejected', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fgentic-bundle-'));
    dirs.push(dir);
    mkdirSync(join(dir, '.fgentic'));
    writeFileSync(
      join(dir, '.fgentic', 'knowledge-acl.json'),
      JSON.stringify({
        schema_version: 1,
        corpus: 'docs',
        classification: 'public',
        allowed_principals: [],
        allowed_groups: [],
      }),
    );
    writeFileSync(join(dir, 'a.md'), '# A\ntext\n');
    await assert.rejects(ingestBundle(t.pool, embedder, dir), IngestError);
    assert.equal((await rows()).length, 0);
  });
});

const EXAMPLES = new URL('../examples/', import.meta.url).pathname;

describe('unchanged input and batched writes', () => {
  test('re-ingesting unchanged input writes nothing and reports it as unchanged', async () => {
    const input = [
      { content: 'same one', metadata: meta({ principals: [P.alice] }) },
      { content: 'same two', metadata: meta({ principals: [P.alice], groups: ['partner/org-b/docs'] }) },
    ];
    const first = await ingestRecords(t.pool, embedder, input);
    assert.equal(first.upserted, 2);
    // xmin changes whenever Postgres writes a new row version, so it proves the row was not rewritten.
    const versions = async () =>
      (await t.pool.query('SELECT chunk_id, xmin::text AS v FROM knowledge.chunks ORDER BY chunk_id')).rows;
    const before = await versions();
    embedCalls = 0;
    const again = await ingestRecords(t.pool, embedder, input);
    assert.deepEqual(
      {
        upserted: again.upserted,
        aclOnly: again.aclOnly,
        unchanged: again.unchanged,
        embedded: again.embedded,
      },
      { upserted: 0, aclOnly: 0, unchanged: 2, embedded: 0 },
    );
    assert.equal(embedCalls, 0);
    assert.deepEqual(await versions(), before, 'no row version was written');
    assert.equal((await rows()).length, 2, 'unchanged rows of a replaced source are kept');
  });

  test('rows given with their stored vector are skipped by Postgres and counted as unchanged', async () => {
    const vector = (await local.embed(['with vector']))[0] ?? [];
    const rec = {
      chunk_id: 'v1',
      content: 'with vector',
      metadata: meta({ principals: [P.alice] }),
      embedding: vector,
    };
    assert.equal((await ingestRecords(t.pool, embedder, [rec])).upserted, 1);
    const again = await ingestRecords(t.pool, embedder, [rec]);
    assert.equal(again.upserted, 0);
    assert.equal(again.unchanged, 1);
  });

  test('ACL-only changes spanning several UPDATE batches are applied, vectors kept', async () => {
    const n = 10;
    const mk = (who: MatrixPrincipal, withVector: boolean): StoredChunk[] =>
      Array.from({ length: n }, (_, i) => ({
        chunk_id: `bulk-${i}`,
        content: `bulk ${i}`,
        metadata: meta({ source: `docs/bulk-${i % 3}.md`, principals: [who] }),
        ...(withVector ? { embedding: Array.from({ length: 1024 }, (_, k) => (k === i ? 1 : 0.001)) } : {}),
      }));
    await writeChunks(t.pool, { chunks: mk(P.alice, true) });
    const vectors = async () =>
      (await t.pool.query('SELECT chunk_id, embedding::text AS e FROM knowledge.chunks ORDER BY chunk_id')).rows;
    const before = await vectors();
    const stats = await writeChunks(t.pool, { chunks: mk(P.bob, false) }, undefined, { updateBatch: 4 });
    assert.equal(stats.aclOnly, n);
    const { rows: r } = await t.pool.query(
      "SELECT count(*)::int AS n FROM knowledge.chunks WHERE metadata->'allowed_principals'->0->>'principal' = $1",
      [P.bob.principal],
    );
    assert.equal(r[0].n, n);
    assert.deepEqual(await vectors(), before);
    // A row that vanished between the lookup and the write aborts the whole batch set.
    await t.pool.query("DELETE FROM knowledge.chunks WHERE chunk_id = 'bulk-9'");
    await assert.rejects(
      writeChunks(t.pool, { chunks: mk(P.alice, false) }, undefined, { updateBatch: 4 }),
      StoreConflictError,
    );
    assert.equal(
      (
        await t.pool.query(
          "SELECT count(*)::int AS n FROM knowledge.chunks WHERE metadata->'allowed_principals'->0->>'principal' = $1",
          [P.bob.principal],
        )
      ).rows[0].n,
      n - 1,
    );
  });
});

describe('documented formats: the samples in retrieval/examples', () => {
  test('knowledge.jsonl and the bundle ingest as documented', async () => {
    const jsonl = await ingestJsonlFile(t.pool, embedder, join(EXAMPLES, 'knowledge.jsonl'));
    assert.deepEqual(
      { records: jsonl.records, upserted: jsonl.upserted, deleted: jsonl.deleted },
      { records: 4, upserted: 3, deleted: 0 },
    );
    const bundle = await ingestBundle(t.pool, embedder, join(EXAMPLES, 'bundle'));
    assert.equal(bundle.upserted, 4);
    const sources = [...new Set((await rows()).map((r) => r.metadata.source.id))].sort();
    assert.deepEqual(sources, [
      'engineering/incident-2026-03',
      'handbook/expenses',
      'partners/integration-guide',
      'reference-docs/bundle/README.md',
      'reference-docs/bundle/guides/integration.md',
    ]);
    const again = await ingestBundle(t.pool, embedder, join(EXAMPLES, 'bundle'));
    assert.equal(again.unchanged, 4);
  });
});

describe('errors say what failed, never what the input held', () => {
  const bad = (metadata: unknown) => [
    { content: 'fine', metadata: meta({ principals: [P.alice] }) },
    { content: 'hunter2 words', metadata },
  ];
  const cases: [unknown, string][] = [
    [
      {
        ...meta({}),
        allowed_principals: [P.alice, P.bob, P.carol, { kind: 'matrix', principal: 'secret-local' }],
      },
      'record 2: metadata.allowed_principals[3].principal: not a full MXID (@localpart:server)',
    ],
    [
      { ...meta({ principals: [P.alice] }), classification: 'hunter2-ish' },
      'record 2: metadata.classification: not a classification',
    ],
    [{ ...meta({}), allowed_groups: ['hunter2-group'] }, 'record 2: metadata.allowed_groups[0]: not a partner group'],
    [
      meta({}),
      'record 2: metadata.allowed_principals: must be an array of at most 64 principals; a chunk needs at least one principal or group',
    ],
    [{ ...meta({ principals: [P.alice] }), extra: 1 }, 'record 2: metadata.extra: unknown field'],
  ];
  for (const [metadata, expected] of cases)
    test(`bad metadata → ${expected}`, () => {
      assert.throws(
        () => prepareRecords(bad(metadata) as IngestRecord[], 'p'),
        (err: unknown) =>
          err instanceof IngestError &&
          err.message.startsWith(expected) &&
          !/hunter2/.test(err.message) &&
          err.line === 2,
      );
    });

  test('record-level problems name the field and the rule', () => {
    const check = (records: unknown[], expected: string) =>
      assert.throws(
        () => prepareRecords(records as IngestRecord[], 'p'),
        (err: unknown) => err instanceof IngestError && err.message === expected,
      );
    check(
      [{ content: 'x', metadata: meta({ principals: [P.alice] }), secretField: 1 }],
      'record 1: secretField: unknown field (allowed: chunk_id, content, metadata, embedding)',
    );
    check([{ metadata: meta({ principals: [P.alice] }) }], 'record 1: content: required');
    // Finite as a double, infinite once stored as float4: refused with the record, not at the write.
    check(
      [
        {
          content: 'x',
          metadata: meta({ principals: [P.alice] }),
          embedding: Array.from({ length: 1024 }, (_, i) => (i === 7 ? 1e39 : 0.01)),
        },
      ],
      'record 1: embedding: must be 1024 numbers finite as float4, not all zero (or omitted)',
    );
    check(
      [{ content: '   ', metadata: meta({ principals: [P.alice] }) }],
      'record 1: content: must be text of 1 byte to 64 KiB after trimming, without control characters other than newline and tab',
    );
    check(
      [
        { chunk_id: 'same', content: 'a', metadata: meta({ principals: [P.alice] }) },
        { chunk_id: 'same', content: 'b', metadata: meta({ principals: [P.alice] }) },
      ],
      'record 2: chunk_id: same id as record 1',
    );
    check(
      [{ content: 'a', metadata: meta({ principals: [P.alice] }) }, { delete_source: 'docs/a.md' }],
      'record 2: delete_source: names the source that record 1 writes',
    );
    check([{ delete_source: 'x', other: 1 }], 'record 1: delete_source: a tombstone has no other field');
    assert.throws(
      () => parseJsonl('{"content":"ok"}\n\n{"secret": tru}\n'),
      /^IngestError: record 3: not valid JSON \(at column \d+\)$/,
    );
    assert.throws(() => parseJsonl('{"a":1,"a":2}'), /record 1: not strict JSON: a member name appears twice/);
  });

  test('the JSONL parser only ever throws an IngestError that quotes no input', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.json(), fc.string()), { maxLength: 6 }), (lines) => {
        const text = lines.map((l) => `${l}SECRETMARK`).join('\n');
        try {
          parseJsonl(text);
        } catch (err) {
          assert.ok(err instanceof IngestError, String(err));
          assert.ok(!err.message.includes('SECRETMARK'));
          assert.match(err.message, /^record \d+: /);
        }
      }),
      { numRuns: 300 },
    );
  });

  test('missing file, unreadable directory, missing manifest', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fgentic-errors-'));
    dirs.push(dir);
    assert.throws(() => readJsonlFile(join(dir, 'absent.jsonl')), {
      message: `file ${join(dir, 'absent.jsonl')}: does not exist`,
    });
    assert.throws(() => readJsonlFile(dir), { message: `file ${dir}: is a directory, not a file` });
    assert.throws(() => bundleRecords(join(dir, 'absent')), {
      message: `directory ${join(dir, 'absent')}: does not exist`,
    });
    assert.throws(() => bundleRecords(dir), {
      message: `.fgentic/knowledge-acl.json missing in ${dir} (a bundle needs its ACL manifest)`,
    });
    mkdirSync(join(dir, '.fgentic'));
    writeFileSync(join(dir, '.fgentic', 'knowledge-acl.json'), '{"schema_version":1}');
    assert.throws(() => bundleRecords(dir), { message: '.fgentic/knowledge-acl.json: corpus: required' });
    if (process.getuid?.() !== 0) {
      // Root reads any directory, so the permission case only runs unprivileged.
      const locked = join(dir, 'locked');
      mkdirSync(locked, { mode: 0o000 });
      assert.throws(() => bundleRecords(locked), { message: `directory ${locked}: permission denied` });
    }
    assert.equal(
      fileProblem('directory', '/x', Object.assign(new Error(), { code: 'EACCES' })).message,
      'directory /x: permission denied',
    );
  });

  test('an unreachable database: connection refused at host:port, exit 1, nothing else said', async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const { port } = server.address() as AddressInfo;
    await new Promise<void>((r) => server.close(() => r()));
    const file = join(EXAMPLES, 'knowledge.jsonl');
    const err = process.stderr.write;
    let said = '';
    process.stderr.write = ((c: string) => {
      said += c;
      return true;
    }) as typeof process.stderr.write;
    try {
      assert.equal(
        await ingestCommand(['--jsonl', file, '--database-url', `postgres://u:hunter2@127.0.0.1:${port}/db`]),
        1,
      );
    } finally {
      process.stderr.write = err;
    }
    assert.equal(said, `ingest: database: connection refused at 127.0.0.1:${port}\n`);
  });
});

describe('progress', () => {
  test('a bar redrawn in place on a TTY; plain periodic lines otherwise', () => {
    let clock = 0;
    const lines: string[] = [];
    const plain = createProgress({ write: (s: string) => lines.push(s) > 0, isTTY: false } as never, {
      intervalMs: 1000,
      now: () => clock,
    });
    plain.start('writing', 100);
    for (let i = 1; i <= 100; i++) {
      clock += 50;
      plain.update(i);
    }
    plain.done();
    assert.ok(lines.length >= 4 && lines.length <= 6, `${lines.length} lines`);
    assert.ok(lines.every((l) => l.endsWith('\n') && !l.includes('\r')));
    assert.match(lines.at(-1) ?? '', /^writing: 100\/100 \(100%/);
    const drawn: string[] = [];
    const bar = createProgress({ write: (s: string) => drawn.push(s) > 0, isTTY: true } as never);
    bar.start('embedding', 10);
    bar.update(5);
    bar.done();
    assert.ok(drawn.slice(0, -1).every((d) => d.startsWith('\r')));
    assert.match(drawn.join(''), /embedding +\[#+ *\] 5\/10/);
  });
});
