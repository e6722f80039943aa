/**
 * Refreshes testkit/controller/upstream/ from release files of agentgateway, Gateway API and
 * kagent (a folder laid out as `<project>-<tag>/…`, the default is `../shared/upstream` beside the
 * checkout), or with `--check` only reports whether the committed files still match.
 *
 * What is kept is what a kube-apiserver enforces: each CRD's structural schema, defaults and CEL
 * rules, with every `description` dropped (prose, not schema). From agentgateway's API test data only
 * the objects are kept, without the `_err` annotations; the schema test needs to know which file is
 * valid and which invalid, not the upstream's wording of each error.
 *
 *   node --import tsx testkit/controller/vendor-upstream.ts [--from DIR] [--check]
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { UPSTREAM_DIR, UPSTREAM_FILES } from './schema.ts';

/** Drops every string-valued `description` key; a property *named* description is an object, kept. */
function withoutDescriptions(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(withoutDescriptions);
  if (x !== null && typeof x === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(x)) {
      if (k === 'description' && typeof v === 'string') continue;
      out[k] = withoutDescriptions(v);
    }
    return out;
  }
  return x;
}

function vendored(from: string, source: string, kind: 'crd' | 'objects'): string {
  const docs = parseAllDocuments(readFileSync(join(from, source), 'utf8'))
    .map((d) => d.toJS() as Record<string, unknown> | null)
    .filter((d): d is Record<string, unknown> => d !== null && typeof d['kind'] === 'string');
  if (kind === 'crd') {
    const crds = docs.filter((d) => d['kind'] === 'CustomResourceDefinition');
    if (crds.length !== 1) throw new Error(`${source}: expected one CRD, found ${crds.length}`);
    return `${JSON.stringify(withoutDescriptions(crds[0]))}\n`;
  }
  return `${JSON.stringify(
    docs.map(({ _err, ...o }) => o),
    null,
    1,
  )}\n`;
}

const { values } = parseArgs({
  options: { from: { type: 'string' }, check: { type: 'boolean', default: false } },
});
const from = resolve(values.from ?? join(import.meta.dirname, '../../../shared/upstream'));
if (!existsSync(from)) {
  console.error(`no upstream release folder at ${from}`);
  process.exit(2);
}
const stale: string[] = [];
for (const f of UPSTREAM_FILES) {
  const text = vendored(from, f.source, f.kind);
  const target = join(UPSTREAM_DIR, f.file);
  if (values.check) {
    if (!existsSync(target) || readFileSync(target, 'utf8') !== text) stale.push(f.file);
  } else writeFileSync(target, text);
}
if (stale.length > 0) {
  console.error(`stale: ${stale.join(', ')}`);
  process.exit(1);
}
console.log(values.check ? 'up to date' : `wrote ${UPSTREAM_FILES.length} files to ${UPSTREAM_DIR}`);
