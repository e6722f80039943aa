/**
 * CLI entry points of the webhook component:
 *   fgentic-retrieval admission check -f PATH... [--user NAME | --as-controller] [--json]
 *   fgentic-retrieval serve webhook [--config FILE] [--cert-dir DIR] [--port N]
 *
 * `admission check` treats every object as a CREATE by `--user` (default: a non-controller user) with the
 * whole file set as the cluster. Manifests rendered by the reconciler (retrieval Agents, the retrieval
 * RemoteMCPServer) are only admitted for the controller: pass `--as-controller` in a Flux pre-check of
 * rendered output. Exit 0 when nothing is denied, 1 when something is denied or unreadable, 2 on usage.
 */
import { parseArgs } from 'node:util';
import { fsErrorPath, fsProblem } from '../common/fs-problem.ts';
import { loadManifests } from './manifests.ts';
import { checkManifests } from './offline.ts';
import { CONTROLLER_USER } from './rules/types.ts';

export const DEFAULT_OFFLINE_USER = 'fgentic-admission-check';

const CHECK_USAGE = `usage: fgentic-retrieval admission check -f PATH... [--user NAME | --as-controller] [--json]
  -f, --filename PATH   file or directory of *.yaml, *.yml, *.json (repeatable; multi-document YAML)
  --user NAME           review as this user (default ${DEFAULT_OFFLINE_USER}, not the controller)
  --as-controller       review as ${CONTROLLER_USER}
                        (use for the reconciler's rendered output, e.g. a Flux pre-check)
  --json                one JSON object per line instead of text
`;

export async function admissionCheck(argv: string[]): Promise<number> {
  let values: {
    filename?: string[];
    user?: string;
    'as-controller'?: boolean;
    json?: boolean;
    help?: boolean;
  };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: argv,
      options: {
        filename: { type: 'string', short: 'f', multiple: true },
        user: { type: 'string' },
        'as-controller': { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      // `-f a b c` (the CLI contract's form) and `-f a -f b` both work: positionals are more paths.
      allowPositionals: true,
    }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${CHECK_USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(CHECK_USAGE);
    return 0;
  }
  const paths = [...(values.filename ?? []), ...(values.filename ? positionals : [])];
  if (positionals.length > 0 && !values.filename) {
    process.stderr.write(CHECK_USAGE);
    return 2;
  }
  if (paths.length === 0 || (values.user !== undefined && values['as-controller'])) {
    process.stderr.write(CHECK_USAGE);
    return 2;
  }
  const user = values['as-controller'] ? CONTROLLER_USER : (values.user ?? DEFAULT_OFFLINE_USER);
  let manifests: ReturnType<typeof loadManifests>;
  try {
    manifests = loadManifests(paths);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    process.stderr.write(
      `admission check: ${e.code ? `${fsErrorPath(e) ?? paths.join(', ')}: ${fsProblem(e)}` : e.message}\n`,
    );
    return 2;
  }
  const results = checkManifests(manifests, user);
  let failed = 0;
  for (const r of results) {
    if (r.verdict === 'denied' || r.verdict === 'error') failed++;
    if (values.json) {
      process.stdout.write(`${JSON.stringify(r)}\n`);
      continue;
    }
    const who = r.kind ? `${r.kind} ${r.namespace ? `${r.namespace}/` : ''}${r.name}` : '-';
    const tag = { allowed: 'ALLOW', denied: 'DENY ', skipped: 'SKIP ', error: 'ERROR' }[r.verdict];
    const detail = r.verdict === 'allowed' || r.verdict === 'skipped' ? '' : `: ${r.message}`;
    process.stdout.write(`${tag} ${who} (${r.source}#${r.index})${detail}\n`);
    for (const w of r.warnings) process.stdout.write(`  warning: ${w}\n`);
  }
  if (!values.json) {
    const count = (v: string) => results.filter((r) => r.verdict === v).length;
    process.stdout.write(
      `${results.length} objects: ${count('allowed')} allowed, ${count('denied')} denied, ${count('error')} errors, ${count('skipped')} skipped\n`,
    );
  }
  return failed > 0 ? 1 : 0;
}

const SERVE_USAGE = `usage: fgentic-retrieval serve webhook [--config FILE] [--cert-dir DIR] [--port N]
  --config FILE    JSON: {"port", "certDir", "controllerUser", "deleteUsers", "offlineObjects"}
  --cert-dir DIR   directory holding tls.crt and tls.key (default /etc/fgentic/webhook-tls)
  --port N         HTTPS port (default 8443)
`;

export async function serveWebhook(argv: string[]): Promise<number> {
  let values: { config?: string; 'cert-dir'?: string; port?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        config: { type: 'string' },
        'cert-dir': { type: 'string' },
        port: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${SERVE_USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(SERVE_USAGE);
    return 0;
  }
  const { runWebhookServer } = await import('./main.ts');
  return runWebhookServer({
    ...(values.config !== undefined ? { configFile: values.config } : {}),
    ...(values['cert-dir'] !== undefined ? { certDir: values['cert-dir'] } : {}),
    ...(values.port !== undefined ? { port: values.port } : {}),
  });
}
