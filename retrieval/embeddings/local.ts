/**
 * Deterministic local embedder for the embedded default and tests. NOT semantic quality: it hashes
 * lower-cased word tokens and character trigrams into 1024 signed buckets and L2-normalises, so
 * texts sharing words land close together and identical texts embed identically — enough to exercise
 * ranking, never a stand-in for BGE-M3. Its vectors are not comparable with any model's, hence its own
 * profile id.
 */
import { createHash } from 'node:crypto';
import { LOCAL_PROFILE } from '../../rules/embeddings.ts';
import { EMBEDDING_DIMENSIONS, type Embedder } from './types.ts';

// The profile name is part of the configuration rule (a RetrievalPlatform may not name it).
export { LOCAL_PROFILE };

/**
 * Features repeat across texts (common words, trigrams), and one SHA-256 per feature was most of the
 * embedder's time; a bounded memo of bucket × sign keeps the vectors identical at a fraction of it.
 */
const MEMO_LIMIT = 1 << 16;
const memo = new Map<string, number>();

function bucket(feature: string): [number, number] {
  let packed = memo.get(feature);
  if (packed === undefined) {
    const h = createHash('sha256').update(feature).digest();
    packed = (h.readUInt32BE(0) % EMBEDDING_DIMENSIONS) * 2 + ((h[4] ?? 0) & 1);
    if (memo.size >= MEMO_LIMIT) memo.clear();
    memo.set(feature, packed);
  }
  return [packed >> 1, packed & 1 ? 1 : -1];
}

export function localEmbedding(text: string): number[] {
  const v = new Array<number>(EMBEDDING_DIMENSIONS).fill(0);
  const words =
    text
      .normalize('NFKC')
      .toLowerCase()
      .match(/[\p{L}\p{N}]+/gu) ?? [];
  for (const w of words) {
    const [i, s] = bucket(`w:${w}`);
    v[i] = (v[i] ?? 0) + 2 * s;
    const padded = `^${w}$`;
    for (let k = 0; k + 3 <= padded.length; k++) {
      const [j, t] = bucket(`g:${padded.slice(k, k + 3)}`);
      v[j] = (v[j] ?? 0) + t;
    }
  }
  let norm = Math.hypot(...v);
  if (norm === 0) {
    // Text without word characters: a fixed non-zero direction keeps the vector valid.
    v[0] = 1;
    norm = 1;
  }
  return v.map((x) => x / norm);
}

export function createLocalEmbedder(): Embedder {
  return {
    profile: LOCAL_PROFILE,
    async embed(texts) {
      return texts.map(localEmbedding);
    },
  };
}
