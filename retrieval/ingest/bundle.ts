/**
 * Markdown bundle ingestion: a directory with `.fgentic/knowledge-acl.json` (the origin's repo-wide
 * manifest shape, docs/upstream.md#origin-ingestion: schema_version 1, corpus, one classification,
 * principal and group arrays applied to every file; no per-file override, no implicit default) and
 * `*.md` files, chunked at headings. Source ids are `<corpus>/bundle/<relative path>`; the whole
 * bundle replaces its previous ingest (files removed since are deleted).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import type pg from 'pg';
import { isDns1123Label, parseStrictJson, validateChunkMetadata } from '../../contract/index.ts';
import type { Embedder } from '../embeddings/types.ts';
import { normalizeContent, sha256hex } from './chunk-id.ts';
import { describeMetadataDenial, fileProblem, IngestError } from './errors.ts';
import { type IngestRecord, type IngestStats, ingestRecords } from './jsonl.ts';
import type { Progress } from './progress.ts';

export interface BundleManifest {
  readonly corpus: string;
  readonly classification: unknown;
  readonly allowed_principals: unknown;
  readonly allowed_groups: unknown;
}

const MANIFEST = '.fgentic/knowledge-acl.json';
const MANIFEST_FIELDS = ['schema_version', 'corpus', 'classification', 'allowed_principals', 'allowed_groups'];

export function readManifest(dir: string): BundleManifest {
  try {
    if (!statSync(dir).isDirectory()) throw Object.assign(new Error(), { code: 'ENOTDIR' });
  } catch (err) {
    throw fileProblem('directory', dir, err);
  }
  const path = join(dir, '.fgentic', 'knowledge-acl.json');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT')
      throw new IngestError(0, `${MANIFEST} missing in ${dir} (a bundle needs its ACL manifest)`);
    throw fileProblem('file', path, err);
  }
  const parsed = parseStrictJson(text, { maxDepth: 8 });
  if (!parsed.ok || typeof parsed.value !== 'object' || parsed.value === null || Array.isArray(parsed.value))
    throw new IngestError(0, `${MANIFEST}: not a strict JSON object`);
  const m = parsed.value as Record<string, unknown>;
  for (const k of Object.keys(m))
    if (!MANIFEST_FIELDS.includes(k))
      throw new IngestError(0, `${MANIFEST}: unknown field (allowed: ${MANIFEST_FIELDS.join(', ')})`);
  for (const k of MANIFEST_FIELDS) if (!Object.hasOwn(m, k)) throw new IngestError(0, `${MANIFEST}: ${k}: required`);
  if (m['schema_version'] !== 1) throw new IngestError(0, `${MANIFEST}: schema_version: must be 1`);
  if (!isDns1123Label(m['corpus']))
    throw new IngestError(0, `${MANIFEST}: corpus: must be a DNS-1123 label (lower-case, digits, '-', ≤ 63)`);
  return {
    corpus: m['corpus'],
    classification: m['classification'],
    allowed_principals: m['allowed_principals'],
    allowed_groups: m['allowed_groups'],
  };
}

function markdownFiles(dir: string, root = dir): string[] {
  const out: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch (err) {
    throw fileProblem('directory', dir, err);
  }
  for (const name of names) {
    if (name.startsWith('.')) continue;
    const p = join(dir, name);
    let st: ReturnType<typeof statSync>;
    try {
      st = statSync(p);
    } catch (err) {
      throw fileProblem('file', p, err);
    }
    if (st.isDirectory()) out.push(...markdownFiles(p, root));
    else if (st.isFile() && name.endsWith('.md')) out.push(relative(root, p).split(sep).join('/'));
  }
  return out;
}

const MAX_CHUNK_BYTES = 16 * 1024;

/** Split at ATX headings (outside fences); oversized sections split further at blank lines. */
export function chunkMarkdown(text: string): { heading?: string; content: string }[] {
  const sections: { heading?: string; lines: string[] }[] = [{ lines: [] }];
  let fenced = false;
  for (const line of text.replace(/\r\n?/g, '\n').split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    const h = !fenced ? /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(line) : null;
    if (h) sections.push({ heading: h[1] ?? '', lines: [line] });
    else sections[sections.length - 1]?.lines.push(line);
  }
  const out: { heading?: string; content: string }[] = [];
  for (const s of sections) {
    const body = s.lines.join('\n').trim();
    if (body === '') continue;
    const pieces: string[] = [];
    let cur = '';
    for (const para of body.split(/\n{2,}/)) {
      const next = cur === '' ? para : `${cur}\n\n${para}`;
      if (Buffer.byteLength(next) > MAX_CHUNK_BYTES && cur !== '') {
        pieces.push(cur);
        cur = para;
      } else cur = next;
    }
    if (cur !== '') pieces.push(cur);
    for (const p of pieces) out.push({ ...(s.heading !== undefined ? { heading: s.heading } : {}), content: p });
  }
  return out;
}

export function bundleRecords(dir: string): { records: IngestRecord[]; prefix: string; sources: string[] } {
  const manifest = readManifest(dir);
  const prefix = `${manifest.corpus}/bundle/`;
  const records: IngestRecord[] = [];
  const sources: string[] = [];
  for (const rel of markdownFiles(dir)) {
    let text: string;
    try {
      text = readFileSync(join(dir, rel), 'utf8');
    } catch (err) {
      throw fileProblem('file', join(dir, rel), err);
    }
    const sourceId = `${prefix}${rel}`;
    const firstHeading = /^#\s+(.+?)\s*#*\s*$/m.exec(text)?.[1];
    const source = {
      id: sourceId,
      title: (firstHeading ?? rel).slice(0, 200).trim() || rel,
      locator: `file:${rel}`,
      revision: `sha256:${sha256hex(text)}`,
    };
    const metadata = {
      source,
      classification: manifest.classification,
      allowed_principals: manifest.allowed_principals,
      allowed_groups: manifest.allowed_groups,
    };
    // Validate once per file so a bad manifest fails before any embedding work.
    const check = validateChunkMetadata(metadata);
    if (!check.ok)
      throw new IngestError(
        0,
        `${MANIFEST}: ${describeMetadataDenial(check.reason, check.path, '').replace(/^\./, '')}`,
      );
    sources.push(sourceId);
    for (const chunk of chunkMarkdown(text)) {
      if (normalizeContent(chunk.content) === undefined) continue;
      records.push({ content: chunk.content, metadata });
    }
  }
  return { records, prefix, sources };
}

export async function ingestBundle(
  pool: pg.Pool,
  embedder: Embedder,
  dir: string,
  progress?: Progress,
): Promise<IngestStats> {
  const { records, prefix, sources } = bundleRecords(dir);
  return ingestRecords(pool, embedder, records, progress, { replacePrefix: prefix, replaceSources: sources });
}
