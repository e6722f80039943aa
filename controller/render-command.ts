/** `fgentic-retrieval render -f PATH... [-o DIR]`: custom resources → every rendered manifest (offline, for GitOps). */
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';
import { render } from './render/index.ts';
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
    const docs = file.endsWith('.json')
      ? [JSON.parse(text) as unknown]
      : parseAllDocuments(text).map((d) => {
          if (d.errors.length) throw new Error(`${file}: ${d.errors[0]?.message}`);
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

export async function renderCommand(argv: string[]): Promise<number> {
  let values: { file?: string[]; output?: string };
  try {
    // `-f a b c` (the documented form) and `-f a -f b` both work: positionals are more paths.
    const parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        file: { type: 'string', short: 'f', multiple: true },
        output: { type: 'string', short: 'o' },
      },
    });
    values = parsed.values;
    if (parsed.positionals.length) {
      if (!values.file?.length) throw new Error('paths must follow -f');
      values.file = [...values.file, ...parsed.positionals];
    }
  } catch (e) {
    process.stderr.write(
      `render: ${(e as Error).message}\nusage: fgentic-retrieval render -f PATH... [-o DIR]\n`,
    );
    return 2;
  }
  if (!values.file?.length) {
    process.stderr.write('usage: fgentic-retrieval render -f PATH... [-o DIR]\n');
    return 2;
  }
  let resources: Resources;
  try {
    resources = loadResources(values.file);
  } catch (e) {
    process.stderr.write(`render: ${(e as Error).message}\n`);
    return 2;
  }
  const { objects, conflicts } = render(resources);
  if (values.output) {
    mkdirSync(values.output, { recursive: true });
    for (const o of objects) {
      const file = `${o.kind.toLowerCase()}-${o.metadata.namespace ? `${o.metadata.namespace}-` : ''}${o.metadata.name}.yaml`;
      writeFileSync(join(values.output, file), stringify(o, YAML_OPTIONS));
    }
  } else process.stdout.write(toYaml(objects));
  for (const c of conflicts) process.stderr.write(`${formatConflict(c)}\n`);
  return conflicts.length ? 1 : 0;
}
