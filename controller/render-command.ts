/** `fgentic-retrieval render -f PATH... [-o DIR [--replace]]`: custom resources → every rendered manifest (offline, for GitOps). */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { parseFlags, UsageError, usageError } from '../common/args.ts';
import { fsErrorPath, fsProblem } from '../common/fs-problem.ts';
import { render } from './render/index.ts';
import { MANAGED_LABELS } from './render/model.ts';
import type { Conflict, K8sObject, OwnResource, Resources } from './types.ts';
import { API_VERSION } from './types.ts';

/** No anchors/aliases in output: every document stands alone for kubectl, Flux and reviewers. */
const YAML_OPTIONS = { lineWidth: 0, aliasDuplicateObjects: false } as const;

export interface LoadedDocument {
  file: string;
  object: K8sObject;
}

/** Every document of every `*.yaml`/`*.yml`/`*.json` file named (or inside a named directory), in path order. */
export function loadDocuments(paths: string[]): LoadedDocument[] {
  const files: string[] = [];
  for (const p of paths) {
    if (statSync(p).isDirectory()) {
      for (const name of readdirSync(p).sort())
        if (/\.(ya?ml|json)$/.test(name) && statSync(join(p, name)).isFile()) files.push(join(p, name));
    } else files.push(p);
  }
  const out: LoadedDocument[] = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    let docs: unknown[];
    if (file.endsWith('.json')) {
      try {
        docs = [JSON.parse(text) as unknown];
      } catch {
        // JSON.parse quotes the input around the error; say where only.
        throw new Error(`${file}: not valid JSON`);
      }
    } else
      docs = parseAllDocuments(text).map((d) => {
        const e = d.errors[0];
        if (e) {
          // The first line of yaml's message names the problem and its line and column; the rest
          // quotes the input, which may be a Secret.
          const where = e.linePos?.[0] ? ` at line ${e.linePos[0].line}, column ${e.linePos[0].col}` : '';
          const what = (e.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
          throw new Error(`${file}: ${what}${where}`);
        }
        return d.toJS() as unknown;
      });
    for (const d of docs) {
      if (d === null || d === undefined) continue;
      const items = (d as { kind?: string; items?: unknown[] }).kind?.endsWith('List')
        ? ((d as { items?: unknown[] }).items ?? [])
        : [d];
      for (const item of items) {
        const o = item as K8sObject;
        if (!o || typeof o !== 'object' || typeof o.kind !== 'string' || typeof o.metadata?.name !== 'string')
          throw new Error(`${file}: a document without kind or metadata.name`);
        out.push({ file, object: o });
      }
    }
  }
  return out;
}

/** Our four kinds from the given paths; other kinds are ignored. */
export function loadResources(paths: string[]): Resources {
  return toResources(loadDocuments(paths).map((d) => d.object));
}

export function toResources(objects: K8sObject[]): Resources {
  const r: Resources = { platforms: [], agents: [], rooms: [], partners: [] };
  for (const o of objects) {
    if (o.apiVersion !== API_VERSION) continue;
    const res = o as unknown as OwnResource;
    if (res.kind === 'RetrievalPlatform') r.platforms.push(res);
    else if (res.kind === 'RetrievalAgent') {
      res.metadata.namespace ??= 'default';
      r.agents.push(res);
    } else if (res.kind === 'RetrievalRoom') r.rooms.push(res);
    else if (res.kind === 'PartnerClient') r.partners.push(res);
  }
  return r;
}

export function toYaml(objects: K8sObject[]): string {
  return objects.map((o) => `---\n${stringify(o, YAML_OPTIONS)}`).join('');
}

export function formatConflict(c: Conflict): string {
  return `conflict: ${c.kind} ${c.namespace ? `${c.namespace}/` : ''}${c.name}: ${c.reason}: ${c.message}`;
}

export const RENDER_USAGE = 'fgentic-retrieval render -f PATH... [-o DIR [--replace]]';

/** The file an object is written to under -o. */
export function outputFileName(o: K8sObject): string {
  return `${o.kind.toLowerCase()}-${o.metadata.namespace ? `${o.metadata.namespace}-` : ''}${o.metadata.name}.yaml`;
}

/** Whether a file in the output directory holds one object this command rendered (by its labels). */
function isRenderedFile(path: string): boolean {
  try {
    const docs = parseAllDocuments(readFileSync(path, 'utf8'));
    if (docs.length !== 1 || docs[0]?.errors.length) return false;
    const labels = (docs[0]?.toJS() as K8sObject | null)?.metadata?.labels ?? {};
    return Object.entries(MANAGED_LABELS).every(([k, v]) => labels[k] === v);
  } catch {
    return false;
  }
}

/**
 * Writes one file per object into dir. A non-empty dir is refused unless `replace`; then files this
 * command rendered before (recognised by the managed labels) that are no longer rendered are removed,
 * so a GitOps commit never keeps an orphaned route or Agent. Other files (a kustomization.yaml, a
 * README) are left alone. Each file is written to a temporary name and renamed into place.
 */
function writeOutputDir(dir: string, objects: K8sObject[], replace: boolean): string | undefined {
  let existing: string[] = [];
  try {
    existing = readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
      return `${dir}: cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
  if (existing.length > 0 && !replace)
    return `${dir} is not empty; pass --replace to overwrite it and remove files no longer rendered`;
  mkdirSync(dir, { recursive: true });
  const names = new Set<string>();
  for (const o of objects) {
    const name = outputFileName(o);
    names.add(name);
    const tmp = join(dir, `.${name}.tmp`);
    writeFileSync(tmp, stringify(o, YAML_OPTIONS));
    renameSync(tmp, join(dir, name));
  }
  for (const name of existing) {
    const path = join(dir, name);
    if (names.has(name) || !/\.ya?ml$/.test(name) || !statSync(path).isFile()) continue;
    if (isRenderedFile(path)) rmSync(path);
  }
  return undefined;
}

export async function renderCommand(argv: string[]): Promise<number> {
  let values: { file?: string[]; output?: string; replace?: boolean };
  try {
    // `-f a b c` (the documented form) and `-f a -f b` both work: positionals are more paths.
    const parsed = parseFlags(
      argv,
      {
        file: { type: 'string', short: 'f', multiple: true },
        output: { type: 'string', short: 'o' },
        replace: { type: 'boolean' },
      },
      true,
    );
    values = parsed.values as typeof values;
    if (parsed.positionals.length) {
      if (!values.file?.length) throw new UsageError('paths must follow -f');
      values.file = [...values.file, ...parsed.positionals];
    }
    if (!values.file?.length) throw new UsageError('-f PATH is required');
    if (values.replace && values.output === undefined) throw new UsageError('--replace needs -o DIR');
  } catch (e) {
    return usageError('render', RENDER_USAGE, e);
  }
  let resources: Resources;
  try {
    resources = loadResources(values.file);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    process.stderr.write(`render: ${err.code ? `${fsErrorPath(err) ?? 'a path'}: ${fsProblem(err)}` : err.message}\n`);
    return 2;
  }
  if (resources.platforms.length + resources.agents.length + resources.rooms.length + resources.partners.length === 0) {
    process.stderr.write(`render: no resources found (kinds of ${API_VERSION}) in ${values.file.join(', ')}\n`);
    return 1;
  }
  const { objects, conflicts } = render(resources);
  // Any conflict (including RegistryTooLarge) means the rendered set is incomplete: write nothing.
  if (conflicts.length > 0) {
    for (const c of conflicts) process.stderr.write(`${formatConflict(c)}\n`);
    process.stderr.write(`render: ${conflicts.length} conflict(s); nothing written\n`);
    return 1;
  }
  if (values.output !== undefined) {
    const problem = writeOutputDir(values.output, objects, values.replace === true);
    if (problem) {
      process.stderr.write(`render: ${problem}\n`);
      return 1;
    }
  } else process.stdout.write(toYaml(objects));
  return 0;
}
