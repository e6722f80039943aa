/**
 * Stable chunk ids and text normalisation of the origin ingestion (docs/upstream.md#origin-ingestion):
 * `sha256:` + SHA-256 over NUL-joined ["fgentic.chunk.v1", profile, source_id, sha256hex(content),
 * occurrence]. ACL and provenance are excluded, so an ACL-only change keeps the id and the vector.
 * The origin does not state the occurrence base; we count from 0 within a source.
 */
import { createHash } from 'node:crypto';

export function sha256hex(s: string): string {
  return createHash('sha256').update(s, 'utf8').digest('hex');
}

export function chunkId(profile: string, sourceId: string, content: string, occurrence: number): string {
  const parts = ['fgentic.chunk.v1', profile, sourceId, sha256hex(content), String(occurrence)];
  return `sha256:${sha256hex(parts.join('\u0000'))}`;
}

/** NFC, CRLF→LF, trimmed; undefined when empty, over 64 KiB, or holding control characters. */
export function normalizeContent(raw: string): string | undefined {
  const s = raw.normalize('NFC').replace(/\r\n?/g, '\n').trim();
  if (s === '' || Buffer.byteLength(s, 'utf8') > 65536) return undefined;
  // Unicode category C except \n and \t (origin rule).
  if (/[^\P{C}\n\t]/u.test(s)) return undefined;
  return s;
}

/** Assigns occurrence numbers per (source, content) in input order. */
export class OccurrenceCounter {
  private readonly seen = new Map<string, number>();
  next(sourceId: string, content: string): number {
    const key = `${sourceId}\u0000${sha256hex(content)}`;
    const n = this.seen.get(key) ?? 0;
    this.seen.set(key, n + 1);
    return n;
  }
}
