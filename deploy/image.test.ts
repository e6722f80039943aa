/**
 * The image's contents without a container engine: production code imports production dependencies
 * only, every dependency is pinned and used, and the compiled dist/ runs with nothing but the
 * production dependency tree installed (`npm ci --omit=dev` from the lockfile, as the deps stage of
 * deploy/Dockerfile does): every command the image's entrypoint serves does what the checkout does.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { loadMigrations } from '../retrieval/db/migrate.ts';
import { TOOL } from '../retrieval/mcp/tool.ts';
import { freePort, startProcess, waitFor } from '../testkit/common/index.ts';

const repo = resolve(import.meta.dirname, '..');
const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const lock = JSON.parse(readFileSync(join(repo, 'package-lock.json'), 'utf8')) as {
  packages: Record<
    string,
    {
      version?: string;
      dev?: boolean;
      dependencies?: Record<string, string>;
      devDependencies?: Record<string, string>;
    }
  >;
};

const packageName = (spec: string) =>
  spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] ?? spec);
const builtins = new Set(builtinModules);
const isBuiltin = (spec: string) => spec.startsWith('node:') || builtins.has(packageName(spec));

/** Value imports (not `import type`) of a TypeScript or JavaScript module: relative and bare. */
function importsOf(src: string): string[] {
  const out: string[] = [];
  const re =
    /^\s*(import|export)\s+(type\s+)?[^'";]*?\bfrom\s*'([^']+)'|^\s*import\s*'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/gm;
  for (const m of src.matchAll(re)) {
    if (m[2]) continue; // type-only: erased by the compiler
    const spec = m[3] ?? m[4] ?? m[5];
    if (spec) out.push(spec);
  }
  return out;
}

/**
 * The production graph: everything the CLI entry reaches through relative imports, minus the folders
 * the build leaves out (`start`'s local stack in local/). Returns bare imports with their importers.
 */
function productionImports(entry: string, devOnlyDirs: string[]) {
  const files = new Set<string>();
  const bare = new Map<string, string[]>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (files.has(file)) continue;
    files.add(file);
    for (const spec of importsOf(readFileSync(file, 'utf8'))) {
      if (spec.startsWith('.')) {
        const target = resolve(dirname(file), spec);
        if (!devOnlyDirs.includes(relative(repo, target).split('/')[0] ?? '')) queue.push(target);
      } else if (!isBuiltin(spec)) {
        const name = packageName(spec);
        bare.set(name, [...(bare.get(name) ?? []), relative(repo, file)]);
      }
    }
  }
  return { files, bare };
}

const ENTRY = join(repo, 'cli/main.ts');
const EXACT = /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/;
/** Required peers of production dependencies that our code does not import itself. */
const REQUIRED_PEERS: Record<string, string> = { zod: '@modelcontextprotocol/sdk' };

describe('dependencies', () => {
  const prod = productionImports(ENTRY, ['local']);

  it('production modules import only node builtins and production dependencies', () => {
    assert.ok(prod.files.size > 50, `only ${prod.files.size} production modules reached`);
    const wrong = [...prod.bare].filter(([name]) => !(name in pkg.dependencies));
    assert.deepEqual(wrong, [], 'imported but not a production dependency');
  });

  it('the check sees a devDependency when the graph includes the local stack (local/)', () => {
    const withE2e = productionImports(ENTRY, []);
    const dev = [...withE2e.bare.keys()].filter((n) => n in pkg.devDependencies);
    assert.ok(dev.includes('jose') && dev.includes('@a2a-js/sdk'), `found only ${dev.join(', ')}`);
  });

  it('every production dependency is imported by production code or is a required peer of one', () => {
    for (const name of Object.keys(pkg.dependencies)) {
      if (prod.bare.has(name)) continue;
      const host = REQUIRED_PEERS[name];
      assert.ok(host, `${name} is a dependency no production module imports`);
      assert.ok(prod.bare.has(host), `${name}: its host ${host} is not used`);
      const hostPkg = JSON.parse(readFileSync(join(repo, 'node_modules', host, 'package.json'), 'utf8'));
      assert.ok(hostPkg.peerDependencies?.[name], `${host} does not declare ${name} as a peer`);
      assert.notEqual(hostPkg.peerDependenciesMeta?.[name]?.optional, true, `${name} is an optional peer`);
    }
  });

  it('test-only packages are devDependencies', () => {
    // ajv and @bufbuild/cel are production dependencies: the offline admission check validates
    // resources against our CRDs' schemas and CEL rules (crds/validate.ts), as the API server does.
    for (const name of ['@a2a-js/sdk', 'express', 'jose', 'kubernetes-models', 'tsx', 'fast-check']) {
      assert.equal(pkg.dependencies[name], undefined, `${name} is a production dependency`);
      assert.ok(pkg.devDependencies[name], `${name} is not a devDependency`);
    }
  });

  it('every dependency and devDependency is pinned to one exact version, as the lockfile records', () => {
    const root = lock.packages[''] ?? {};
    for (const [field, deps] of [
      ['dependencies', pkg.dependencies],
      ['devDependencies', pkg.devDependencies],
    ] as const) {
      assert.deepEqual(root[field], deps, `package-lock.json is out of date (${field}): run npm install`);
      for (const [name, range] of Object.entries(deps)) {
        assert.match(range, EXACT, `${name}@${range} is not an exact version`);
        assert.equal(lock.packages[`node_modules/${name}`]?.version, range, `${name}: lockfile version`);
      }
    }
  });
});

describe('compiled dist/ with production dependencies only', () => {
  let app = '';
  const node = (args: string[], input?: string) =>
    spawnSync(process.execPath, args, {
      cwd: app,
      encoding: 'utf8',
      input: input ?? '',
      timeout: 120_000,
      env: { PATH: process.env.PATH ?? '', HOME: app, FGENTIC_LOG_LEVEL: 'silent' },
    });

  before(() => {
    // The image layout: /app/{package.json, bin, dist, node_modules (production tree), examples}.
    app = mkdtempSync(join(tmpdir(), 'fgentic-image-'));
    const build = spawnSync(process.execPath, [join(repo, 'scripts/build.mjs'), '--out-dir', join(app, 'dist')], {
      cwd: repo,
      encoding: 'utf8',
      timeout: 300_000,
    });
    assert.equal(build.status, 0, `npm run build failed:\n${build.stdout}\n${build.stderr}`);
    for (const f of ['package.json', 'package-lock.json', 'bin', 'examples'])
      cpSync(join(repo, f), join(app, f), { recursive: true });
    // The deps stage of deploy/Dockerfile: production dependencies only, from the lockfile. From
    // npm's cache when it holds them (CI installed the same lockfile just before), else the registry.
    const ci = spawnSync(
      'npm',
      ['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund'],
      {
        cwd: app,
        encoding: 'utf8',
        timeout: 300_000,
        env: { ...process.env, NODE_ENV: 'production', npm_config_update_notifier: 'false' },
      },
    );
    assert.equal(ci.status, 0, `npm ci --omit=dev failed:\n${ci.stdout}\n${ci.stderr}`);
  });
  after(() => {
    if (app) rmSync(app, { recursive: true, force: true });
  });

  it('the build emits JavaScript only, no TypeScript and no local-stack code', () => {
    const walk = (d: string): string[] =>
      readdirSync(d).flatMap((n) => (statSync(join(d, n)).isDirectory() ? walk(join(d, n)) : [join(d, n)]));
    const files = walk(join(app, 'dist')).map((f) => relative(join(app, 'dist'), f));
    assert.ok(files.includes('cli/main.js'));
    assert.ok(files.includes('retrieval/db/migrations/0001_baseline.sql'), 'SQL migrations ship with dist/');
    assert.deepEqual(
      files.filter((f) => !/\.(js|sql)$/.test(f) || f.startsWith('e2e/')),
      [],
    );
    for (const f of files.filter((x) => x.endsWith('.js')))
      for (const spec of importsOf(readFileSync(join(app, 'dist', f), 'utf8')))
        assert.ok(!spec.endsWith('.ts'), `${f} imports ${spec}: .ts extension not rewritten`);
  });

  // jose, express and ajv stay installed: the MCP SDK depends on them itself.
  it('the environment really lacks devDependencies (tsx, esbuild, typescript, the A2A SDK)', () => {
    for (const name of ['tsx', 'esbuild', 'typescript', '@a2a-js/sdk', 'kubernetes-models']) {
      const r = node(['--input-type=module', '-e', `await import(${JSON.stringify(name)})`]);
      assert.notEqual(r.status, 0, `${name} resolves`);
      assert.match(r.stderr, /ERR_MODULE_NOT_FOUND|Cannot find package/);
    }
  });

  it('every compiled module loads', () => {
    const mods = readdirSync(join(app, 'dist'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.js') && f !== 'cli/main.js')
      .map((f) => `./dist/${f}`);
    assert.ok(mods.length > 50);
    const r = node(['--input-type=module', '-e', `for (const m of ${JSON.stringify(mods)}) await import(m);`]);
    assert.equal(r.status, 0, r.stderr);
  });

  it('bin runs dist/: --help exits 0 with the usage', () => {
    assert.ok(!existsSync(join(app, 'cli')), 'no TypeScript sources next to the shim');
    const r = node(['bin/fgentic-retrieval.mjs', '--help']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout + r.stderr, /fgentic-retrieval <command>/);
  });

  it('render -f examples prints the same objects as the source checkout', () => {
    const compiled = node(['bin/fgentic-retrieval.mjs', 'render', '-f', 'examples']);
    assert.equal(compiled.status, 0, compiled.stderr);
    const source = spawnSync(process.execPath, [join(repo, 'bin/fgentic-retrieval.mjs'), 'render', '-f', 'examples'], {
      cwd: repo,
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(source.status, 0, source.stderr);
    assert.ok(compiled.stdout.length > 10_000);
    assert.equal(compiled.stdout, source.stdout);
  });

  it('admission check -f examples passes (the image README command)', () => {
    const r = node(['bin/fgentic-retrieval.mjs', 'admission', 'check', '-f', 'examples']);
    assert.equal(r.status, 0, r.stderr);
  });

  /** The same command in the checkout (TypeScript through tsx), for comparison. */
  const checkout = (args: string[]) =>
    spawnSync(process.execPath, [join(repo, 'bin/fgentic-retrieval.mjs'), ...args], {
      cwd: repo,
      encoding: 'utf8',
      timeout: 120_000,
      env: { PATH: process.env.PATH ?? '', HOME: app, FGENTIC_LOG_LEVEL: 'silent' },
    });

  it('--version prints the package version, as the checkout does', () => {
    const r = node(['bin/fgentic-retrieval.mjs', '--version']);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, `fgentic-retrieval ${(pkg as unknown as { version: string }).version}\n`);
    assert.equal(r.stdout, checkout(['--version']).stdout);
  });

  it('--help and help COMMAND print what the checkout prints', () => {
    for (const args of [['--help'], ['help', 'serve', 'retrieval'], ['migrate', '--help']]) {
      const r = node(['bin/fgentic-retrieval.mjs', ...args]);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, checkout(args).stdout, args.join(' '));
    }
  });

  it("migrate --data-dir migrates the embedded database with the checkout's migrations", () => {
    const r = node(['bin/fgentic-retrieval.mjs', 'migrate', '--data-dir', join(app, 'data')]);
    assert.equal(r.status, 0, r.stderr);
    const result = JSON.parse(r.stdout) as { applied: number[] };
    // Every migration of the source tree ran, none else.
    assert.deepEqual(
      [...result.applied].sort((a, b) => a - b),
      loadMigrations().map((m) => m.version),
    );
    assert.ok(result.applied.length > 0);
  });

  /** The configuration files `render -f examples` writes into the two ConfigMaps. */
  function renderedConfigs(): { projector: string; retrieval: string } {
    const out = node(['bin/fgentic-retrieval.mjs', 'render', '-f', 'examples']);
    assert.equal(out.status, 0, out.stderr);
    const docs = parseAllDocuments(out.stdout).map(
      (d) => d.toJS() as { metadata?: { name?: string }; data?: Record<string, string> },
    );
    const data = (name: string, key: string) => {
      const text = docs.find((d) => d?.metadata?.name === name)?.data?.[key];
      assert.ok(text, `${name} ${key} rendered`);
      return text;
    };
    const dir = join(app, 'config');
    mkdirSync(dir, { recursive: true });
    const projector = join(dir, 'projector.json');
    const retrieval = join(dir, 'retrieval.json');
    writeFileSync(projector, data('fgentic-projector-config', 'projector.json'));
    writeFileSync(retrieval, data('fgentic-retrieval-config', 'retrieval.json'));
    return { projector, retrieval };
  }

  /** Starts a server from `bin` (compiled, in app/) or the checkout; resolves with its base URL once /readyz is 200. */
  async function serve(where: 'compiled' | 'checkout', args: string[]) {
    const port = await freePort();
    const bin = where === 'compiled' ? join(app, 'bin/fgentic-retrieval.mjs') : join(repo, 'bin/fgentic-retrieval.mjs');
    const svc = startProcess(process.execPath, [bin, ...args, '--port', String(port), '--host', '127.0.0.1'], {
      cwd: where === 'compiled' ? app : repo,
      env: { PATH: process.env.PATH ?? '', HOME: app, FGENTIC_LOG_LEVEL: 'silent', DATABASE_URL: '' },
      ready: ({ stdout, stderr }) => /listening on/.test(stdout + stderr),
    });
    await svc.ready;
    const base = `http://127.0.0.1:${port}`;
    await waitFor(`${where} ${args[1]} ready`, async () => (await fetch(`${base}/readyz`)).status === 200, 60_000);
    return { base, svc };
  }

  it('serve projector with the rendered projector.json: ready, and it decides as the checkout does', async () => {
    const { projector } = renderedConfigs();
    const check = async (base: string) => {
      const r = await fetch(`${base}/api/a2a/kagent/knowledge-agent`, { method: 'POST' });
      return `${r.status} ${await r.text()}`;
    };
    const compiled = await serve('compiled', ['serve', 'projector', '--config', projector]);
    const source = await serve('checkout', ['serve', 'projector', '--config', projector]);
    try {
      const verdict = await check(compiled.base);
      assert.match(verdict, /^403 /);
      assert.equal(verdict, await check(source.base));
    } finally {
      await compiled.svc.stop();
      await source.svc.stop();
    }
  });

  it("serve retrieval with the rendered retrieval.json: ready, and MCP discovery lists the checkout's tool", async () => {
    const { retrieval } = renderedConfigs();
    const compiled = await serve('compiled', [
      'serve',
      'retrieval',
      '--config',
      retrieval,
      '--data-dir',
      join(app, 'data'),
    ]);
    try {
      const r = await fetch(`${compiled.base}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-11-25',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      assert.equal(r.status, 200);
      const listed = (await r.json()) as { result: { tools: unknown[] } };
      assert.deepEqual(listed.result.tools, [JSON.parse(JSON.stringify(TOOL))]);
    } finally {
      await compiled.svc.stop();
    }
  });

  it('snapshot digest reproduces the contract vector', () => {
    const vector = JSON.parse(readFileSync(join(repo, 'contract/vectors/snapshot.json'), 'utf8')).cases[0];
    const r = node(['bin/fgentic-retrieval.mjs', 'snapshot', 'digest'], JSON.stringify(vector.snapshot));
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), vector.state_sha256);
  });
});
