/**
 * Loads Kubernetes manifests from files and directories (*.yaml, *.yml, *.json; multi-document YAML,
 * `List` kinds flattened) for the offline admission check and the tests.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { isObject, type KubeObject } from './rules/types.ts';

export interface Manifest {
  source: string;
  /** 0-based document index within the file. */
  index: number;
  object?: KubeObject;
  /** Set when the document could not be parsed or is not a Kubernetes object. */
  error?: string;
}

const EXTENSIONS = new Set(['.yaml', '.yml', '.json']);

export function listManifestFiles(path: string): string[] {
  const st = statSync(path);
  if (!st.isDirectory()) return [path];
  const out: string[] = [];
  for (const name of readdirSync(path).sort()) {
    const p = join(path, name);
    const s = statSync(p);
    if (s.isDirectory()) out.push(...listManifestFiles(p));
    else if (EXTENSIONS.has(extname(name).toLowerCase())) out.push(p);
  }
  return out;
}

function flatten(source: string, index: number, value: unknown, out: Manifest[]): void {
  if (value === null || value === undefined) return;
  if (!isObject(value) || typeof value['apiVersion'] !== 'string' || typeof value['kind'] !== 'string') {
    out.push({ source, index, error: 'not a Kubernetes object (apiVersion and kind required)' });
    return;
  }
  if (value['kind'].endsWith('List') && Array.isArray(value['items'])) {
    for (const item of value['items']) flatten(source, index, item, out);
    return;
  }
  out.push({ source, index, object: value });
}

export function parseManifestText(source: string, text: string): Manifest[] {
  const out: Manifest[] = [];
  if (extname(source).toLowerCase() === '.json') {
    try {
      flatten(source, 0, JSON.parse(text), out);
    } catch {
      out.push({ source, index: 0, error: 'invalid JSON' });
    }
    return out;
  }
  const docs = parseAllDocuments(text, { uniqueKeys: true });
  const list = Array.isArray(docs) ? docs : [docs];
  list.forEach((doc, i) => {
    if (doc.errors.length > 0) {
      out.push({ source, index: i, error: `invalid YAML: ${doc.errors[0]?.code ?? 'parse error'}` });
      return;
    }
    flatten(source, i, doc.toJS({ maxAliasCount: 100 }), out);
  });
  return out;
}

export function loadManifests(paths: readonly string[]): Manifest[] {
  const out: Manifest[] = [];
  for (const p of paths)
    for (const file of listManifestFiles(p)) out.push(...parseManifestText(file, readFileSync(file, 'utf8')));
  return out;
}
