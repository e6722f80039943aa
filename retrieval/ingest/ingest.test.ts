/** Ingestion through the real database: stable ids, transactional upserts, tombstones, ACL-only updates, bundles. */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { ingestCommand } from '../cli.ts';
import { createLocalEmbedder } from '../embeddings/local.ts';
import type { Embedder } from '../embeddings/types.ts';
import { searchKnowledge } from '../search.ts';
import { decodeFixture, matrixHeader, meta, P, startTestDatabase, type TestDatabase } from '../testing.ts';
import { chunkMarkdown, ingestBundle } from './bundle.ts';
import { chunkId } from './chunk-id.ts';
import { IngestError, ingestRecords } from './jsonl.ts';

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
  await t.pool.query('DELETE FROM knowledge.chunks');
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
    await ingestRecords(t.pool, embedder, [
      { content: 'grounded fact', metadata: meta({ principals: [P.alice] }) },
    ]);
    const [q] = await local.embed(['grounded fact']);
    const search = async () =>
      (await searchKnowledge(t.pool, { projection: alice, embedding: q ?? [], maxResults: 5 })).hits.map(
        (h) => h.content,
      );
    assert.deepEqual(await search(), ['grounded fact']);
    await ingestRecords(t.pool, embedder, [
      { content: 'grounded fact', metadata: meta({ principals: [P.bob] }) },
    ]);
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
      assert.equal(await ingestCommand(['--jsonl', file, '--database-url', t.db.url]), 0);
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
