/**
 * OpenAI-compatible `/v1/embeddings` client for BGE-M3 as the origin deploys it
 * (docs/upstream.md#origin-ingestion): body {model, input, encoding_format: "float"}, no
 * query/passage prefix, exactly 1024 finite non-zero floats, no client-side normalisation, Bearer
 * token read from a mounted file on every call (rotation without restart). Timeouts per attempt;
 * retries with full jitter on 5xx only — 4xx and malformed answers fail at once.
 */

import { readFile } from 'node:fs/promises';
import { errorFields } from '../../common/error-fields.ts';
import { checkVector, type Embedder, EmbeddingError } from './types.ts';

export const BGE_M3_PROFILE = 'bge-m3-1024-v1';

export interface OpenAIEmbedderOptions {
  readonly url: string;
  readonly model: string;
  readonly profile?: string;
  readonly tokenFile?: string;
  readonly timeoutMs?: number;
  readonly retries?: number;
  readonly baseDelayMs?: number;
  readonly batchSize?: number;
  readonly fetch?: typeof fetch;
}

async function bearer(tokenFile: string | undefined): Promise<string | undefined> {
  if (tokenFile === undefined) return undefined;
  const raw = (await readFile(tokenFile, 'utf8')).trim();
  if (raw === '') throw new EmbeddingError('embedding_unavailable');
  // The mounted file may hold the bare token or the whole header value.
  return /^bearer /i.test(raw) ? raw : `Bearer ${raw}`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function createOpenAIEmbedder(options: OpenAIEmbedderOptions): Embedder {
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const retries = options.retries ?? 2;
  const baseDelay = options.baseDelayMs ?? 200;
  const batchSize = options.batchSize ?? 8;

  async function embedBatch(input: readonly string[], signal?: AbortSignal): Promise<number[][]> {
    const auth = await bearer(options.tokenFile).catch((e: unknown) => {
      throw new EmbeddingError('embedding_unavailable', errorFields(e));
    });
    const body = JSON.stringify({ model: options.model, input, encoding_format: 'float' });
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        const timeout = AbortSignal.timeout(timeoutMs);
        res = await doFetch(options.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
          body,
          signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        });
      } catch (e) {
        // fetch reports a transport failure as TypeError('fetch failed') with the errno on its cause.
        throw new EmbeddingError('embedding_unavailable', errorFields(e instanceof TypeError && e.cause ? e.cause : e));
      }
      if (res.status >= 500 && attempt < retries) {
        await res.body?.cancel().catch(() => {});
        await sleep(Math.random() * baseDelay * 2 ** attempt);
        continue;
      }
      if (!res.ok) {
        await res.body?.cancel().catch(() => {});
        throw new EmbeddingError('embedding_unavailable');
      }
      let json: unknown;
      try {
        json = await res.json();
      } catch {
        throw new EmbeddingError('embedding_invalid');
      }
      const data = (json as { data?: unknown })?.data;
      if (!Array.isArray(data) || data.length !== input.length) throw new EmbeddingError('embedding_invalid');
      const out = new Array<number[]>(input.length);
      for (const item of data) {
        const idx = (item as { index?: unknown })?.index;
        const emb = (item as { embedding?: unknown })?.embedding;
        if (typeof idx !== 'number' || !Number.isInteger(idx) || idx < 0 || idx >= input.length || out[idx])
          throw new EmbeddingError('embedding_invalid');
        if (!checkVector(emb)) throw new EmbeddingError('embedding_invalid');
        out[idx] = emb;
      }
      return out;
    }
  }

  return {
    profile: options.profile ?? BGE_M3_PROFILE,
    async embed(texts, signal) {
      const out: number[][] = [];
      for (let i = 0; i < texts.length; i += batchSize) {
        out.push(...(await embedBatch(texts.slice(i, i + batchSize), signal)));
      }
      return out;
    },
  };
}
