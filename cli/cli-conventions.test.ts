/**
 * The command line as an operator meets it, through the real binary (bin/fgentic-retrieval.mjs) as
 * a child process: help and version, usage errors that name the flag, `render` output safety, and
 * `serve` errors that say which configuration they tried.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { makeSelfSignedCert } from '../common/dev-tls.ts';
import { type RunResult, runCli } from '../testkit/common/index.ts';

const repo = new URL('..', import.meta.url).pathname;
const examples = join(repo, 'examples');
const work = mkdtempSync(join(tmpdir(), 'fgentic-cli-'));
after(() => rmSync(work, { recursive: true, force: true }));

function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<RunResult> {
  return runCli(args, { cwd: work, env });
}

const COMMANDS = [
  'start',
  'serve projector',
  'serve retrieval',
  'serve webhook',
  'serve controller',
  'render',
  'admission check',
  'ingest',
  'projection decode',
  'snapshot digest',
];

describe('help, version and usage errors', () => {
  test('--help, -h and help print the command list on stdout and exit 0', async () => {
    for (const args of [['--help'], ['-h'], ['help']]) {
      const r = await cli(args);
      assert.equal(r.code, 0, args.join(' '));
      assert.equal(r.stderr, '');
      for (const c of COMMANDS) assert.ok(r.stdout.includes(`  ${c} `), `${args.join(' ')} lists ${c}`);
    }
  });

  test('no arguments print usage on stderr and exit 2', async () => {
    const r = await cli([]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^usage: fgentic-retrieval <command>/);
  });

  test('--version prints the package version', async () => {
    const r = await cli(['--version']);
    assert.equal(r.code, 0);
    const { version } = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8'));
    assert.equal(r.stdout, `fgentic-retrieval ${version}\n`);
  });

  // One `help COMMAND` per command, shared by the tests below (each spawn costs a TypeScript start).
  let helps: Promise<RunResult[]> | undefined;
  const helpOf = () => {
    helps ??= Promise.all(COMMANDS.map((c) => cli(['help', ...c.split(' ')])));
    return helps;
  };

  test('help COMMAND and COMMAND --help / -h print that command’s usage on stdout and exit 0', async () => {
    const [viaHelp, viaFlag, viaShort] = await Promise.all([
      helpOf(),
      Promise.all(COMMANDS.map((c) => cli([...c.split(' '), '--help']))),
      Promise.all(['render', 'ingest', 'serve retrieval'].map((c) => cli([...c.split(' '), '-h']))),
    ]);
    COMMANDS.forEach((c, i) => {
      for (const r of [viaHelp[i]!, viaFlag[i]!]) {
        assert.equal(r.code, 0, c);
        assert.ok(r.stdout.startsWith(`usage: fgentic-retrieval ${c}`), `${c}: ${r.stdout}`);
        assert.equal(r.stderr, '');
      }
      assert.equal(viaFlag[i]!.stdout, viaHelp[i]!.stdout);
    });
    for (const r of viaShort) assert.equal(r.code, 0);
  });

  test('every flag a command documents is in the README', async () => {
    const readme = readFileSync(join(repo, 'README.md'), 'utf8');
    (await helpOf()).forEach((r, i) => {
      const flags = new Set(r.stdout.match(/--[a-z][a-z-]+/g) ?? []);
      assert.ok(flags.size > 0 || COMMANDS[i] === 'snapshot digest');
      for (const f of flags) assert.ok(readme.includes(f), `README mentions ${COMMANDS[i]} ${f}`);
    });
  });

  test('unknown flags are named, with the usage line, exit 2; values are never echoed', async () => {
    const cases: [string[], string][] = [
      [['render', '-f', examples, '--frobnicate=s3cret'], 'render: unknown flag --frobnicate'],
      [['ingest', '--jsonl', 'x', '--bogus'], 'ingest: unknown flag --bogus'],
      [['serve', 'retrieval', '--prot', '1'], 'serve retrieval: unknown flag --prot'],
      [['projection', 'decode', '--agnet', 'a/b'], 'projection decode: unknown flag --agnet'],
      [['ingest', '--jsonl'], 'ingest: flag --jsonl needs a value'],
    ];
    const results = await Promise.all(cases.map(([args]) => cli(args)));
    results.forEach((r, i) => {
      const [args, expected] = cases[i]!;
      assert.equal(r.code, 2, args.join(' '));
      assert.ok(r.stderr.startsWith(expected), `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /\nusage: fgentic-retrieval /);
      assert.doesNotMatch(r.stderr, /s3cret/);
    });
  });

  test('unknown commands and incomplete command groups exit 2 with the command list', async () => {
    const [unknown, group] = await Promise.all([cli(['frobnicate']), cli(['serve'])]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /^unknown command "frobnicate"/);
    assert.equal(group.code, 2);
    assert.match(group.stderr, /^serve needs one of: projector, retrieval, webhook, controller/);
  });
});

describe('render output', () => {
  test('-o refuses a non-empty directory; --replace overwrites and removes files no longer rendered', async () => {
    const out = join(work, 'rendered');
    let r = await cli(['render', '-f', examples, '-o', out]);
    assert.equal(r.code, 0, r.stderr);
    const first = readdirSync(out).sort();
    assert.ok(first.includes('agent-kagent-knowledge-agent.yaml'));

    r = await cli(['render', '-f', examples, '-o', out]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /is not empty; pass --replace/);

    // A room removed from the input: its rendered objects must go; a foreign file stays.
    const input = join(work, 'fewer');
    mkdirSync(input);
    for (const f of readdirSync(examples)) writeFileSync(join(input, f), readFileSync(join(examples, f)));
    const rooms = readFileSync(join(input, 'rooms.yaml'), 'utf8').split(/^---$/m);
    writeFileSync(join(input, 'rooms.yaml'), rooms.filter((d) => !/org-a-general/.test(d)).join('---'));
    writeFileSync(join(out, 'kustomization.yaml'), 'resources: []\n');
    // A stale file from an earlier render under another name, carrying the managed labels.
    writeFileSync(
      join(out, 'agent-kagent-retired.yaml'),
      readFileSync(join(out, 'agent-kagent-knowledge-agent.yaml'), 'utf8').replace(
        /name: knowledge-agent/,
        'name: retired',
      ),
    );
    r = await cli(['render', '-f', input, '-o', out, '--replace']);
    assert.equal(r.code, 0, r.stderr);
    const second = readdirSync(out).sort();
    assert.ok(!second.includes('agent-kagent-retired.yaml'), 'orphaned rendered file removed');
    assert.ok(second.includes('kustomization.yaml'), 'a file render did not write is kept');
    assert.ok(second.includes('agent-kagent-knowledge-agent.yaml'));
    assert.doesNotMatch(
      readdirSync(out)
        .map((f) => readFileSync(join(out, f), 'utf8'))
        .join('\n'),
      /!room:org-a\.example/,
      'the removed room appears in no rendered file',
    );
  });

  test('a conflict writes nothing to stdout or the output directory', async () => {
    const dup = join(work, 'dup');
    mkdirSync(dup);
    writeFileSync(
      join(dup, 'dup.yaml'),
      "apiVersion: retrieval.fgentic.dev/v1alpha1\nkind: RetrievalRoom\nmetadata: {name: dup}\nspec: {roomId: '!room:org-a.example'}\n",
    );
    const out = join(work, 'conflict-out');
    const [toStdout, toDir] = await Promise.all([
      cli(['render', '-f', examples, dup]),
      cli(['render', '-f', examples, dup, '-o', out]),
    ]);
    for (const r of [toStdout, toDir]) {
      assert.equal(r.code, 1);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, /conflict: RetrievalRoom dup: DuplicateRoom/);
    }
    assert.equal(existsSync(out), false);
  });

  test('a registry beyond one ConfigMap renders as shards instead of failing', async () => {
    // 20,000 rooms once exceeded the single ConfigMap (RegistryTooLarge); they now go to registry
    // shards (projector/registry.ts). A conflict still writes nothing (the test above).
    const items = Array.from({ length: 20_000 }, (_, i) => ({
      apiVersion: 'retrieval.fgentic.dev/v1alpha1',
      kind: 'RetrievalRoom',
      metadata: { name: `r${i}` },
      spec: { roomId: `!r${i}abcdefghijklmnopq:org-a.example`, allowedClassifications: ['public'] },
    }));
    const file = join(work, 'many-rooms.json');
    writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
    const r = await cli(['render', '-f', examples, file]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /name: fgentic-projector-registry-000/);
    assert.doesNotMatch(r.stderr, /RegistryTooLarge/);
  });

  test('no resources: `no resources found`, exit 1; malformed YAML: line and column, no content', async () => {
    const empty = join(work, 'empty');
    mkdirSync(empty);
    writeFileSync(join(empty, 'other.yaml'), 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n');
    const bad = join(work, 'bad.yaml');
    writeFileSync(bad, 'apiVersion: v1\nkind: Secret\nstringData: [s3cret-value\nmetadata: {name: x}\n');
    const [none, malformed] = await Promise.all([cli(['render', '-f', empty]), cli(['render', '-f', bad])]);
    assert.equal(none.code, 1);
    assert.equal(none.stdout, '');
    assert.match(none.stderr, /render: no resources found/);
    assert.equal(malformed.code, 2);
    assert.match(malformed.stderr, /bad\.yaml: .* at line \d+, column \d+/);
    assert.doesNotMatch(malformed.stderr, /s3cret/);
  });
});

describe('serve errors', () => {
  test('serve retrieval names the configuration path it tried, including the default', async () => {
    const invalid = join(work, 'retrieval.json');
    writeFileSync(invalid, JSON.stringify({ version: 1, agents: [], embeddings: { profile: 'local-hash-1024-v1' } }));
    const [dflt, given] = await Promise.all([
      cli(['serve', 'retrieval']),
      cli(['serve', 'retrieval', '--config', invalid]),
    ]);
    assert.equal(dflt.code, 2);
    assert.match(
      dflt.stderr,
      /serve retrieval: config \/etc\/fgentic\/retrieval\.json \(the default; pass --config FILE\): does not exist/,
    );
    assert.equal(given.code, 2);
    assert.ok(
      given.stderr.includes(`config ${invalid}: agents: must list at least one agent [required]`),
      given.stderr,
    );
  });

  test('serve controller without a usable kubeconfig exits at once, naming what it tried', async () => {
    const home = join(work, 'home');
    mkdirSync(home, { recursive: true });
    const r = await cli(['serve', 'controller', '--port', '0'], { HOME: home, KUBECONFIG: '' });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /serve controller: no kubeconfig: tried --kubeconfig \(not given\), KUBECONFIG \(unset\)/);
    const kc = join(work, 'kubeconfig.yaml');
    // A cluster on a closed loopback port: refused at once.
    writeFileSync(
      kc,
      'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n',
    );
    const unreachable = await cli(['serve', 'controller', '--kubeconfig', kc, '--port', '0']);
    assert.equal(unreachable.code, 1);
    assert.match(unreachable.stderr, /cannot reach the API server https:\/\/127\.0\.0\.1:1 .*connection refused/);
  });

  test('serve webhook names the certificate file it needs before it starts anything', async () => {
    const certs = join(work, 'webhook-tls');
    mkdirSync(certs, { recursive: true });
    const [dflt, given] = await Promise.all([
      cli(['serve', 'webhook'], { HOME: join(work, 'home'), KUBECONFIG: '' }),
      cli(['serve', 'webhook', '--cert-dir', certs], { HOME: join(work, 'home'), KUBECONFIG: '' }),
    ]);
    assert.equal(dflt.code, 1);
    assert.match(
      dflt.stderr,
      /^serve webhook: certificate \/etc\/fgentic\/webhook-tls\/tls\.crt: does not exist \(the default; pass --cert-dir DIR\)\n$/,
    );
    assert.equal(given.code, 1);
    assert.equal(given.stderr, `serve webhook: certificate ${join(certs, 'tls.crt')}: does not exist\n`);
    // Not a certificate: said without echoing the bytes.
    writeFileSync(join(certs, 'tls.crt'), 'not-a-certificate-s3cret\n');
    writeFileSync(join(certs, 'tls.key'), 'not-a-key-s3cret\n');
    const garbage = await cli(['serve', 'webhook', '--cert-dir', certs], {
      HOME: join(work, 'home'),
      KUBECONFIG: '',
    });
    assert.equal(garbage.code, 1);
    assert.match(garbage.stderr, /tls\.crt and tls\.key are not a PEM certificate and private key/);
    assert.doesNotMatch(garbage.stderr, /s3cret/);
    // A good certificate but no cluster: exits naming what it tried, instead of watching localhost forever.
    makeSelfSignedCert(certs);
    const noCluster = await cli(['serve', 'webhook', '--cert-dir', certs, '--port', '0'], {
      HOME: join(work, 'home'),
      KUBECONFIG: '',
    });
    assert.equal(noCluster.code, 1);
    assert.match(
      noCluster.stderr,
      /^serve webhook: no kubeconfig: tried --kubeconfig \(not given\), KUBECONFIG \(unset\)/,
    );
  });

  test('admission check and render name the missing input path', async () => {
    const missing = join(work, 'no-such-dir', 'agent.yaml');
    const [check, rendered] = await Promise.all([
      cli(['admission', 'check', '-f', missing]),
      cli(['render', '-f', missing]),
    ]);
    assert.equal(check.code, 2);
    assert.equal(check.stderr, `admission check: ${missing}: does not exist\n`);
    assert.equal(rendered.code, 2);
    assert.equal(rendered.stderr, `render: ${missing}: does not exist\n`);
  });
});

describe('ingest input errors', () => {
  test('a bad record is reported with its number and rule before any database is opened or created', async () => {
    const dataDir = join(work, 'ingest-never-opened');
    const file = join(work, 'bad-records.jsonl');
    const good = {
      content: 'the hunter2 paragraph',
      metadata: {
        source: { id: 'docs/a' },
        classification: 'public',
        allowed_principals: [{ kind: 'matrix', principal: '@alice:org-a.example' }],
        allowed_groups: [],
      },
    };
    // Finite as a double, infinite once stored as float4.
    const embedding = Array.from({ length: 1024 }, (_, i) => (i === 3 ? 1e39 : 0.01));
    writeFileSync(file, `${JSON.stringify(good)}\n${JSON.stringify({ ...good, embedding })}\n`);
    const r = await cli(['ingest', '--jsonl', file, '--data-dir', dataDir]);
    assert.equal(r.code, 1);
    assert.equal(
      r.stderr,
      'ingest: record 2: embedding: must be 1024 numbers finite as float4, not all zero (or omitted)\n',
    );
    assert.equal(existsSync(dataDir), false, 'the data directory was not created');
  });
});
