/**
 * fgentic-retrieval CLI: command wiring and the conventions every command shares. Each command calls
 * one component entry point, loaded lazily so that `projection decode` does not pay for the database
 * or Kubernetes clients. Conventions (kubectl's): `--help`/`-h`/`help [COMMAND]` print usage on stdout
 * and exit 0; no arguments print usage on stderr and exit 2; usage errors exit 2 and name the flag;
 * `--version` prints the package version.
 */

import { IDENTITY_HEADER_NAME } from '../rules/wire.ts';
import { packageInfo } from './package-info.ts';

type Run = (argv: string[]) => Promise<number>;

interface Command {
  /** One line: the synopsis after `fgentic-retrieval`. */
  readonly synopsis: string;
  readonly summary: string;
  /** Flag lines and notes printed by `help COMMAND`. */
  readonly details: string;
  readonly run: Run;
}

const commands: Record<string, Command> = {
  start: {
    synopsis: 'start [--data-dir DIR] [--port-base N] [--no-webhook] [--capability plain|ledger]',
    summary: 'local stack on embedded defaults (what `npm start` runs)',
    details: `  --data-dir DIR   corpus, certificates and stack.json (default ./data)
  --port-base N    first of the loopback ports: N, N+1, N+10, N+20, N+30, N+363 (default 18080)
  --no-webhook     do not start the local admission webhook
  --capability M   plain or ledger: overrides RetrievalPlatform.spec.capability (docs/ledger.md)
Needs a source checkout (npm install). One stack per data directory: a second start on the same
directory is refused; ingest into a running stack with \`ingest --data-dir DIR/pglite\`.`,
    run: async (argv) => {
      // The local stack runs the gateway and kagent doubles from local/, which a container image omits.
      let mod: typeof import('../local/start.ts');
      try {
        mod = await import('../local/start.ts');
      } catch (err) {
        const { devDependencies, startLoadFailure } = await import('./load-error.ts');
        const failure = startLoadFailure(err, devDependencies());
        process.stderr.write(`${failure.message}\n`);
        return failure.exitCode;
      }
      return mod.startCommand(argv);
    },
  },
  'serve projector': {
    synopsis: 'serve projector [--config FILE] [--port N] [--host ADDR]',
    summary: 'agentgateway HTTP ext-auth server',
    details: `  --config FILE    projector.json (default /etc/fgentic/projector.json; reloaded on change)
  --port N         listen port (default 8080)
  --host ADDR      listen address (default 0.0.0.0)`,
    run: async (argv) => (await import('../projector/cli.ts')).serveProjector(argv),
  },
  'serve retrieval': {
    synopsis:
      'serve retrieval [--config FILE | --config-source kubernetes [--namespace NS] [--max-staleness S]] [--port N] [--host ADDR] [--data-dir DIR] [--no-migrate] [--replica-url URL]... [--max-replica-lag MS] [--pooler transaction]',
    summary: 'MCP retrieval server',
    details: `  --config FILE    retrieval.json (default /etc/fgentic/retrieval.json; reloaded on change)
  --config-source file|kubernetes
                   kubernetes: watch ConfigMap fgentic-retrieval-config through the API (default file)
  --namespace NS   its namespace (default POD_NAMESPACE, else the service account's)
  --max-staleness S  seconds without API contact before every call is refused (default 30)
  --port N         listen port (default 8080)
  --host ADDR      listen address (default 0.0.0.0 with DATABASE_URL, else 127.0.0.1)
  --data-dir DIR   embedded database directory when DATABASE_URL is unset (default ./data/pglite)
  --no-migrate     do not apply schema migrations at start
  --replica-url URL  a read replica of DATABASE_URL for searches (repeatable; also DATABASE_REPLICA_URLS)
  --max-replica-lag MS  revocation bound on replicas: older ones serve no search (default 1000)
  --pooler transaction  every database URL is PgBouncer in transaction mode (also DATABASE_POOLER)
Environment: DATABASE_URL, DATABASE_REPLICA_URLS, DATABASE_POOLER, DATABASE_CA_FILE, DATABASE_TLS=require.`,
    run: async (argv) => (await import('../retrieval/cli.ts')).serveRetrieval(argv),
  },
  'serve webhook': {
    synopsis: 'serve webhook [--config FILE] [--cert-dir DIR] [--port N]',
    summary: 'admission webhook (HTTPS)',
    details: `  --config FILE    JSON: {"port", "certDir", "controllerUser", "deleteUsers", "offlineObjects"}
  --cert-dir DIR   directory holding tls.crt and tls.key (default /etc/fgentic/webhook-tls)
  --port N         HTTPS port (default 8443)`,
    run: async (argv) => (await import('../webhook/cli.ts')).serveWebhook(argv),
  },
  'serve controller': {
    synopsis: 'serve controller [--kubeconfig FILE] [--port N] [--namespace NS] [--identity ID]',
    summary: 'reconciler with leader election',
    details: `  --kubeconfig FILE  kubeconfig (default: KUBECONFIG, ~/.kube/config, or the in-cluster account)
  --config FILE      same as --kubeconfig
  --port N           /healthz, /readyz, /metrics port (default PORT or 8080)
  --namespace NS     namespace of the leader-election Lease (default POD_NAMESPACE or fgentic-system)
  --identity ID      leader-election identity (default HOSTNAME-PID)`,
    run: async (argv) => (await import('../controller/cli.ts')).serveController(argv),
  },
  render: {
    synopsis: 'render -f PATH... [-o DIR [--replace]]',
    summary: 'custom resources -> every rendered manifest (multi-document YAML)',
    details: `  -f, --file PATH  file or directory of *.yaml, *.yml, *.json (repeatable; more paths may follow)
  -o, --output DIR one file per object in DIR instead of YAML on stdout
  --replace        let -o write into a non-empty DIR, removing the files it no longer renders
Exit 0 when rendered, 1 on a conflict or when no resources were found (nothing is written), 2 on
usage or unreadable input.`,
    run: async (argv) => (await import('../controller/render-command.ts')).renderCommand(argv),
  },
  'admission check': {
    synopsis: 'admission check -f PATH... [--user NAME | --as-controller] [--json]',
    summary: 'offline webhook verdicts (exit 1 if any denied)',
    details: `  -f, --filename PATH  file or directory (repeatable; multi-document YAML)
  --user NAME          review as this user (default fgentic-admission-check, not the controller)
  --as-controller      review as the reconciler (for its rendered output, e.g. a Flux pre-check)
  --json               one JSON object per line instead of text`,
    run: async (argv) => (await import('../webhook/cli.ts')).admissionCheck(argv),
  },
  ingest: {
    synopsis: 'ingest (--jsonl FILE | --bundle DIR) [--database-url URL | --data-dir DIR] [--config FILE]',
    summary: 'load knowledge chunks (formats: retrieval/README.md)',
    details: `  --jsonl FILE        chunk records, one JSON object per line
  --bundle DIR        Markdown files with .fgentic/knowledge-acl.json
  --database-url URL  Postgres (default DATABASE_URL; else the embedded database)
  --data-dir DIR      embedded database directory (default ./data/pglite); when a running stack or
                      server holds it, the ingest writes through that process
  --config FILE       retrieval.json whose embeddings settings to use (default: local embedder)
Prints {records, upserted, aclOnly, unchanged, embedded, deleted} as JSON on stdout; progress on
stderr. Exit 1 on invalid input or an unreachable database (nothing is written), 2 on usage.`,
    run: async (argv) => (await import('../retrieval/store-commands.ts')).ingestCommand(argv),
  },
  'projection decode': {
    synopsis: 'projection decode [--now UNIX] [--agent NS/NAME]',
    summary: `validate an ${IDENTITY_HEADER_NAME} value read from stdin`,
    details: `  --now UNIX       clock for the expiry check (default: now)
  --agent NS/NAME  require the projection to be bound to this agent
Canonical JSON on stdout and exit 0, or \`denied: <reason-code>\` on stderr and exit 1.`,
    run: async (argv) => (await import('./contract-commands.ts')).projectionDecodeCommand(argv),
  },
  'snapshot digest': {
    synopsis: 'snapshot digest',
    summary: 'room-state snapshot JSON on stdin -> state_sha256',
    details: '  (no flags)',
    run: async (argv) => (await import('./contract-commands.ts')).snapshotDigestCommand(argv),
  },
  migrate: {
    synopsis:
      'migrate [--database-url URL | --data-dir DIR] [--bootstrap] [--capability plain|ledger] [--subgraph-budget MIB]',
    summary: "apply the project's schema migrations as the owner role (a separate step from serving)",
    details: `  --database-url URL  Postgres (default DATABASE_URL; else the embedded database)
  --data-dir DIR      embedded database directory (default ./data/pglite)
  --bootstrap         first create the roles and the vector extension a bare database lacks (superuser)
  --capability MODE   plain (default) or ledger: grant the capability ledger's functions, or revoke them
  --subgraph-budget MIB  what the filtered subgraphs may take together (default: the whole graph's
                      size; 0 drops them all; docs/filtered-search.md)
Changes no object of the origin's. Syncs the derived search data afterwards (progress on stderr), then
builds or drops filtered subgraphs as the ACL ids' shares require.
Prints {"applied":[...],"synced":N,"vectorIndexBuilt":bool,"subgraphs":{...}} on stdout. Exit 1 naming what is missing
or wrong (a role to create, a changed migration), 2 on usage.`,
    run: async (argv) => (await import('../retrieval/store-commands.ts')).migrateCommand(argv),
  },
  sync: {
    synopsis: 'sync [--database-url URL | --data-dir DIR] [--subgraph-budget MIB]',
    summary: "bring the derived search data up to date with rows the origin's own writers changed",
    details: `  --database-url URL  Postgres (default DATABASE_URL; else the embedded database)
  --data-dir DIR      embedded database directory (default ./data/pglite)
  --subgraph-budget MIB  as for migrate; used when the login owns the table
Runs as knowledge_ingestion or knowledge_owner, in short statements (progress on stderr); rows the
origin changed are not searched until a sync has taken them. Under the owner's login it also builds
or drops filtered subgraphs. Prints {"synced":N,"subgraphs":...} on stdout.`,
    run: async (argv) => (await import('../retrieval/store-commands.ts')).syncCommand(argv),
  },
  explain: {
    synopsis:
      'explain (--room ROOM_ID [--snapshot FILE] | --partner POLICY_ID [--azp AZP]) (--chunk ID | --source ID | --summary)',
    summary: 'why a room or partner cannot see a chunk, and who narrows a room (operator side only)',
    details: `  --room ROOM_ID         the room; its audience from --snapshot FILE (the bridge's snapshot JSON) or,
                         without it, from the homeserver through the projector's live-check settings
  --partner POLICY_ID    the partner (groups and ceiling from the projector registry); --azp picks
                         one client when the policy has several
  --chunk ID | --source ID   the chunks to explain; --summary counts what the audience can retrieve,
                         what each single reader blocks, and by classification
  --config FILE          projector.json with the registry (default /etc/fgentic/projector.json)
  --json                 JSON instead of a table; --titles also prints source titles (never content)
  --limit N              at most N chunks in a detail report (default 1000)
  --database-url URL | --data-dir DIR   the database, as for ingest
Exit 0 with a report, 1 when it cannot be made, 2 on usage.`,
    run: async (argv) => (await import('../explain/command.ts')).explainCommand(argv),
  },
};

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((k) => k.length));
  const lines = Object.entries(commands).map(([k, c]) => `  ${k.padEnd(width)}  ${c.summary}`);
  return `usage: fgentic-retrieval <command> [flags]

Commands:
${lines.join('\n')}

Run 'fgentic-retrieval help <command>' or 'fgentic-retrieval <command> --help' for its flags.
'fgentic-retrieval --version' prints the version.
`;
}

function commandHelp(name: string): string {
  const c = commands[name]!;
  return `usage: fgentic-retrieval ${c.synopsis}\n\n${c.summary}\n\n${c.details}\n`;
}

/** The version of the package.json found from this module (source checkout and compiled build alike). */
function version(): string | undefined {
  return packageInfo()?.version;
}

/** Echo a word the user typed only when it looks like a command word, never arbitrary input. */
const word = (s: string) => (/^[a-z][a-z-]{0,30}$/.test(s) ? `"${s}"` : '(unprintable)');

/** The command named by the leading words of argv (two-word names first), and its word count. */
function lookup(argv: string[]): { name: string; words: number } | undefined {
  for (const words of [2, 1]) {
    const name = argv.slice(0, words).join(' ');
    if (argv.length >= words && commands[name]) return { name, words };
  }
  return undefined;
}

function unknown(argv: string[]): number {
  const group = Object.keys(commands)
    .filter((k) => k.startsWith(`${argv[0]} `))
    .map((k) => k.split(' ')[1]);
  process.stderr.write(
    group.length > 0
      ? `${argv[0]} needs one of: ${group.join(', ')}${argv[1] !== undefined ? ` (not ${word(argv[1])})` : ''}\n\n${usage()}`
      : `unknown command ${word(argv[0] ?? '')}\n\n${usage()}`,
  );
  return 2;
}

export async function main(argv: string[]): Promise<number> {
  if (argv.length === 0) {
    process.stderr.write(usage());
    return 2;
  }
  const first = argv[0];
  if (first === '--help' || first === '-h' || (first === 'help' && argv.length === 1)) {
    process.stdout.write(usage());
    return 0;
  }
  if (first === '--version') {
    const v = version();
    if (v === undefined) {
      process.stderr.write('fgentic-retrieval: no package.json of fgentic-retrieval above the CLI; version unknown\n');
      return 1;
    }
    process.stdout.write(`fgentic-retrieval ${v}\n`);
    return 0;
  }
  if (first === 'help') {
    const found = lookup(argv.slice(1));
    if (!found || found.words !== argv.length - 1) return unknown(argv.slice(1));
    process.stdout.write(commandHelp(found.name));
    return 0;
  }
  const found = lookup(argv);
  if (!found) return unknown(argv);
  const rest = argv.slice(found.words);
  // `--help` anywhere before a `--` asks for help, whatever else the line holds.
  const end = rest.indexOf('--');
  const flags = end === -1 ? rest : rest.slice(0, end);
  if (flags.includes('--help') || flags.includes('-h')) {
    process.stdout.write(commandHelp(found.name));
    return 0;
  }
  return commands[found.name]!.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // A fault no command anticipated: its class, never its message (which may quote input).
    process.stderr.write(`error: unexpected failure (${err instanceof Error ? err.name : 'unknown'})\n`);
    process.exitCode = 1;
  },
);
