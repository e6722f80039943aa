/**
 * fgentic-retrieval CLI: command wiring only. Each command calls one component entry point, loaded
 * lazily so that `projection decode` does not pay for the database or Kubernetes clients.
 */
import { parseArgs } from 'node:util';

const USAGE = `fgentic-retrieval <command>

  start                                          local stack on embedded defaults
  serve projector|retrieval|webhook|controller [--config FILE]
  render -f PATH... [-o DIR]                     custom resources -> rendered manifests
  admission check -f PATH...                     offline webhook verdicts (exit 1 if any denied)
  ingest --jsonl FILE | --bundle DIR [--database-url URL]
  explain --room ROOM_ID [--snapshot FILE] | --partner POLICY_ID  --chunk ID | --source ID | --summary
  projection decode [--now UNIX] [--agent NS/NAME]   header value on stdin
  snapshot digest                                snapshot JSON on stdin -> state_sha256
`;

type Command = (argv: string[]) => Promise<number>;

const commands: Record<string, Command> = {
  'projection decode': async (argv) => {
    const { values } = parseArgs({
      args: argv,
      options: { now: { type: 'string' }, agent: { type: 'string' } },
    });
    const { projectionDecode } = await import('./contract-commands.ts');
    return projectionDecode({
      ...(values.now !== undefined ? { now: values.now } : {}),
      ...(values.agent !== undefined ? { agent: values.agent } : {}),
    });
  },
  'snapshot digest': async () => {
    const { snapshotDigest } = await import('./contract-commands.ts');
    return snapshotDigest();
  },
  start: async (argv) => {
    // The local stack runs the gateway and kagent doubles from e2e/, which a container image omits.
    let mod: typeof import('../e2e/start.ts');
    try {
      mod = await import('../e2e/start.ts');
    } catch {
      process.stderr.write(
        'start: the local stack needs a source checkout with dev dependencies (npm install)\n',
      );
      return 2;
    }
    return mod.startCommand(argv);
  },
  'serve projector': async (argv) => (await import('../projector/cli.ts')).serveProjector(argv),
  'serve retrieval': async (argv) => (await import('../retrieval/cli.ts')).serveRetrieval(argv),
  'serve webhook': async (argv) => (await import('../webhook/cli.ts')).serveWebhook(argv),
  'serve controller': async (argv) => (await import('../controller/cli.ts')).serveController(argv),
  render: async (argv) => (await import('../controller/render-command.ts')).renderCommand(argv),
  'admission check': async (argv) => (await import('../webhook/cli.ts')).admissionCheck(argv),
  ingest: async (argv) => (await import('../retrieval/cli.ts')).ingestCommand(argv),
  explain: async (argv) => (await import('../retrieval/explain/command.ts')).explainCommand(argv),
};

export async function main(argv: string[]): Promise<number> {
  for (const words of [2, 1]) {
    const key = argv.slice(0, words).join(' ');
    const command = commands[key];
    if (command && argv.length >= words) return command(argv.slice(words));
  }
  process.stderr.write(
    argv.length === 0 || argv[0] === '--help' || argv[0] === 'help' ? USAGE : `unknown command\n\n${USAGE}`,
  );
  return argv.length === 0 || argv[0] === '--help' || argv[0] === 'help' ? 0 : 2;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`error: ${err instanceof Error ? err.message : 'unexpected failure'}\n`);
    process.exitCode = 2;
  },
);
