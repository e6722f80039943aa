#!/usr/bin/env node
// Binary shim. In a source checkout with dev dependencies the TypeScript CLI runs through tsx, so an
// edit is always what runs (a stale dist/ cannot shadow it). Otherwise — the container image, a copy of
// the build output, a checkout installed with --omit=dev — it runs the compiled dist/ with plain Node.
import { existsSync } from 'node:fs';

const source = new URL('../cli/main.ts', import.meta.url);
const compiled = new URL('../dist/cli/main.js', import.meta.url);

async function loadTsx() {
  if (!existsSync(source)) return false;
  try {
    (await import('tsx/esm/api')).register();
    return true;
  } catch (err) {
    if (err?.code === 'ERR_MODULE_NOT_FOUND') return false;
    throw err;
  }
}

if (await loadTsx()) await import(source.href);
else if (existsSync(compiled)) await import(compiled.href);
else {
  process.stderr.write(
    'fgentic-retrieval: no compiled CLI (dist/cli/main.js) and no TypeScript runtime; run `npm install` or `npm run build`\n',
  );
  process.exitCode = 2;
}
