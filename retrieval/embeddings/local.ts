/**
 * Deterministic local embedder for the embedded default and tests. NOT semantic quality: it hashes
 * lower-cased word tokens and character trigrams into 1024 signed buckets and L2-normalises, so
 * texts sharing words land close together and identical texts embed identically — enough to exercise
 * ranking, never a stand-in for BGE-M3. Its vectors are not comparable with any model's, hence its own
 * profile id.
 */
import { createHash } from 'node:crypto';
import { EMBEDDING_DIMENSIONS, type Embedder } from './types.ts';

export const LOCAL_PROFILE = 'local-hash-1024-v1';

function bucket(feature: string): [number, number] {
  const h = createHash('sha256').update(feature).digest();
  return [h.readUInt32BE(0) % EMBEDDING_DIMENSIONS, (h[4] ?? 0) & 1 ? 1 : -1];
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
