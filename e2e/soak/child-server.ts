/**
 * One server of the stack (`fgentic-retrieval serve …`) in its own process on a fixed loopback port,
 * so that it can be stopped the way Kubernetes stops a container (SIGTERM, then SIGKILL after the
 * grace period) or crash (SIGKILL at once) and come back on the same address.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../../testkit/common/index.ts';

const CLI = fileURLToPath(new URL('../../cli/main.ts', import.meta.url));

/** A free loopback port (bound and released; the child binds it again right after). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export class ChildServer {
  private proc: ChildProcess | undefined;
  private exited: Promise<number | null> | undefined;
  /** Exit codes of processes that ended, in order (a failed start shows up here). */
  readonly exits: (number | string | null)[] = [];

  constructor(
    readonly name: string,
    readonly port: number,
    private readonly args: (port: number) => string[],
    private readonly env: Record<string, string>,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /** Resident set size of the current process in bytes (Linux /proc), if running. */
  rss(): number | undefined {
    if (!this.proc?.pid || this.proc.exitCode !== null) return undefined;
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${this.proc.pid}/status`, 'utf8'));
      return m ? Number(m[1]) * 1024 : undefined;
    } catch {
      return undefined;
    }
  }

  /** Why the last `start()` returned false: the exit, or the readiness timeout and its last error. */
  startFailure: string | undefined;

  /** Start and wait until /readyz answers 200; false if the process exits or the wait times out. */
  async start(readyTimeoutMs = 60_000): Promise<boolean> {
    // Warnings and errors (content-free JSON lines) go to <name>.log when a log directory is set.
    const logDir = process.env['SOAK_LOG_DIR'];
    const log = logDir ? openSync(join(logDir, `${this.name}.log`), 'a') : 'ignore';
    const proc = spawn(process.execPath, ['--import', 'tsx', CLI, ...this.args(this.port)], {
      stdio: ['ignore', 'ignore', log],
      env: { ...process.env, FGENTIC_LOG_LEVEL: logDir ? 'warn' : 'silent', ...this.env },
    });
    if (typeof log === 'number') closeSync(log);
    this.proc = proc;
    this.exited = new Promise((resolve) =>
      proc.once('exit', (code, signal) => {
        this.exits.push(code ?? signal);
        resolve(code);
      }),
    );
    // The probe's fetch errors (refused while starting) are retried; the last one's class is in the
    // timeout message kept in `startFailure`.
    try {
      const state = await waitFor(
        `${this.name} /readyz to answer 200`,
        async () => {
          if (proc.exitCode !== null || proc.signalCode !== null) return 'exited';
          const r = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(1000) });
          await r.body?.cancel();
          return r.status === 200 ? 'ready' : undefined;
        },
        { timeoutMs: readyTimeoutMs, intervalMs: 100 },
      );
      this.startFailure = state === 'ready' ? undefined : `exited (${proc.exitCode ?? proc.signalCode})`;
      return state === 'ready';
    } catch (e) {
      this.startFailure = e instanceof Error ? e.message : String(e);
      return false;
    }
  }

  /** SIGTERM, then SIGKILL if still running after graceMs (the kubelet's sequence). */
  async stop(graceMs: number): Promise<'exited' | 'killed'> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return 'exited';
    proc.kill('SIGTERM');
    const done = await Promise.race([
      this.exited!.then(() => 'exited' as const),
      new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), graceMs)),
    ]);
    if (done === 'exited') return 'exited';
    proc.kill('SIGKILL');
    await this.exited;
    return 'killed';
  }

  /** A crash: SIGKILL with requests in flight. */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    proc.kill('SIGKILL');
    await this.exited;
  }
}
