/**
 * `fgentic-retrieval serve projector [--config FILE] [--port N] [--host ADDR]`: runs until SIGTERM or
 * SIGINT, then shuts down gracefully (common/shutdown.ts: not ready, drain in-flight checks) and
 * resolves 0. An invalid or missing configuration file does not stop the
 * server: it denies every check and reports not ready until a valid file appears.
 */
import { parseArgs } from 'node:util';
import { shutdownTimingFromEnv, waitForStopSignal } from '../common/shutdown.ts';
import { startProjector } from './index.ts';

export const DEFAULT_CONFIG_PATH = '/etc/fgentic/projector.json';

export async function serveProjector(argv: string[]): Promise<number> {
  let values: { config?: string; port?: string; host?: string };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { config: { type: 'string' }, port: { type: 'string' }, host: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    process.stderr.write(`serve projector: ${(e as Error).message}\n`);
    return 2;
  }
  const port = values.port === undefined ? 8080 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    process.stderr.write('serve projector: --port must be 0–65535\n');
    return 2;
  }
  let running: Awaited<ReturnType<typeof startProjector>>;
  try {
    running = await startProjector({
      configPath: values.config ?? DEFAULT_CONFIG_PATH,
      port,
      host: values.host ?? '0.0.0.0',
    });
  } catch (e) {
    process.stderr.write(`serve projector: cannot listen: ${(e as NodeJS.ErrnoException).code ?? 'error'}\n`);
    return 1;
  }
  process.stderr.write(`projector listening on ${running.url}\n`);
  await waitForStopSignal();
  await running.shutdown(shutdownTimingFromEnv());
  return 0;
}
