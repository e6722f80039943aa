/** Embedders: the local deterministic one and the OpenAI-compatible client against a local HTTP double. */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { localEmbedding } from './local.ts';
import { createOpenAIEmbedder } from './openai.ts';
import { checkVector, EMBEDDING_DIMENSIONS, EmbeddingError } from './types.ts';

describe('local embedder (not semantic quality)', () => {
  test('deterministic, 1024-d, unit length, never zero', () => {
    const a = localEmbedding('Alpha release notes');
    assert.deepEqual(a, localEmbedding('Alpha release notes'));
    assert.equal(a.length, 1024);
    assert.ok(Math.abs(Math.hypot(...a) - 1) < 1e-9);
    const empty = localEmbedding('!!!');
    assert.ok(Math.hypot(...empty) > 0);
  });
  test('vectors are those of its profile: stored data stays comparable across versions', () => {
    // Digest of these vectors as the profile first defined them (before the feature memo).
    const texts = [
      'Alpha release notes',
      'Section 12: the policy notes for team 3 cover budget and travel.',
      'Ünïcödé ﬁle naïve 東京 42',
      '!!!',
    ];
    const digest = () =>
      createHash('sha256')
        .update(JSON.stringify(texts.map(localEmbedding)))
        .digest('hex');
    assert.equal(digest(), '8bfb0878fe7462c88b771da34f12be3c16208d8d850d26d416b7887ce785d86d');
    assert.equal(digest(), '8bfb0878fe7462c88b771da34f12be3c16208d8d850d26d416b7887ce785d86d', 'memo hit');
  });
});

describe('OpenAI-compatible client', () => {
  let server: Server;
  let url = '';
  let plan: number[] = [];
  const seen: { auth?: string; body: unknown }[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'fgentic-emb-'));
  const tokenFile = join(dir, 'authorization');
  writeFileSync(tokenFile, 'secret-token\n');

  before(async () => {
    server = createServer(async (req: IncomingMessage, res) => {
      let body = '';
      for await (const c of req) body += c;
      const parsed = JSON.parse(body);
      seen.push({ ...(req.headers.authorization ? { auth: req.headers.authorization } : {}), body: parsed });
      const status = plan.shift() ?? 200;
      if (status === 999) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ data: [{ index: 0, embedding: [1, 2, 3] }] }));
        return;
      }
      if (status !== 200) {
        res.writeHead(status);
        res.end('{}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          data: (parsed.input as string[]).map((_, i) => ({
            index: i,
            embedding: Array.from({ length: 1024 }, (_, d) => (d === i ? 1 : 0.01)),
          })),
        }),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/embeddings`;
  });
  after(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(dir, { recursive: true, force: true });
  });

  const client = () => createOpenAIEmbedder({ url, model: 'BAAI/bge-m3', tokenFile, baseDelayMs: 1, retries: 2 });

  test('sends the origin request shape with a Bearer token from the file, no prefix', async () => {
    seen.length = 0;
    const v = await client().embed(['what is alpha?']);
    assert.equal(v.length, 1);
    assert.equal(v[0]?.length, 1024);
    assert.equal(seen[0]?.auth, 'Bearer secret-token');
    assert.deepEqual(seen[0]?.body, {
      model: 'BAAI/bge-m3',
      input: ['what is alpha?'],
      encoding_format: 'float',
    });
  });
  test('retries 5xx, then succeeds', async () => {
    seen.length = 0;
    plan = [503, 502];
    await client().embed(['x']);
    assert.equal(seen.length, 3);
  });
  test('an unreachable model fails as unavailable and keeps the errno for the log', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((r) => closed.close(() => r()));
    const embedder = createOpenAIEmbedder({
      url: `http://127.0.0.1:${port}/v1/embeddings`,
      model: 'm',
      profile: 'p',
      retries: 0,
    });
    await assert.rejects(embedder.embed(['x']), (e: unknown) => {
      assert.ok(e instanceof EmbeddingError);
      assert.equal(e.reason, 'embedding_unavailable');
      assert.deepEqual(e.cause, { error: 'Error', code: 'ECONNREFUSED' });
      return true;
    });
  });
  test('4xx is not retried; exhausted retries and malformed vectors fail with reason codes', async () => {
    seen.length = 0;
    plan = [400];
    await assert.rejects(
      client().embed(['x']),
      (e: unknown) => e instanceof EmbeddingError && e.reason === 'embedding_unavailable',
    );
    assert.equal(seen.length, 1);
    plan = [500, 500, 500];
    await assert.rejects(client().embed(['x']), EmbeddingError);
    plan = [999];
    await assert.rejects(
      client().embed(['x']),
      (e: unknown) => e instanceof EmbeddingError && e.reason === 'embedding_invalid',
    );
  });
  test('batches of at most 8 inputs keep order', async () => {
    seen.length = 0;
    plan = [];
    const v = await client().embed(Array.from({ length: 10 }, (_, i) => `t${i}`));
    assert.equal(v.length, 10);
    assert.equal(seen.length, 2);
    assert.equal(v[9]?.[1], 1);
  });
});

describe('checkVector: a vector the database can store as given', () => {
  const vec = (at: number, x: number, rest = 0.01) =>
    Array.from({ length: EMBEDDING_DIMENSIONS }, (_, i) => (i === at ? x : rest));
  test('finite float4 components, not all zero', () => {
    assert.equal(checkVector(vec(0, 0.5)), true);
    assert.equal(checkVector(vec(0, 3.4e38)), true);
    assert.equal(checkVector(vec(0, 1e-40, 0)), true, 'a float4 subnormal is not zero');
  });
  test('refused: beyond float4, non-finite, zero once rounded, wrong length or type', () => {
    assert.equal(checkVector(vec(0, 1e39)), false, 'finite as a double, infinite as a float4');
    assert.equal(checkVector(vec(0, Number.NaN)), false);
    assert.equal(checkVector(vec(0, Number.POSITIVE_INFINITY)), false);
    assert.equal(checkVector(vec(0, 1e-50, 0)), false, 'rounds to the zero vector');
    assert.equal(checkVector(vec(0, 0, 0)), false);
    assert.equal(checkVector(vec(0, 0.5).slice(1)), false);
    assert.equal(checkVector([...vec(0, 0.5).slice(1), '0.5']), false);
  });
});
