/**
 * Test plumbing shared by every suite: polling a condition, finding free loopback ports, and running
 * the CLI as a child process. Tests only: nothing the CLI reaches imports this folder, so the build
 * never ships it (`testkit/common/not-shipped.test.ts` keeps it that way).
 *
 * Deadlines here are generous failure bounds, never expectations: a test waits for a state, not for
 * a time, so a loaded machine makes it slower but not red.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';

/** The repository's binary shim (tsx in a checkout, dist/ otherwise). */
export const BIN = new URL('../../bin/fgentic-retrieval.mjs', import.meta.url).pathname;

/** The environment children get unless a test says otherwise: quiet logs, no ambient database. */
export const CHILD_ENV: Readonly<Record<string, string | undefined>> = {
  ...process.env,
  FGENTIC_LOG_LEVEL: 'silent',
  DATABASE_URL: '',
};

export interface WaitOptions {
  /** Upper bound before the wait fails, naming what it waited for. */
  readonly timeoutMs?: number;
  /** Pause between probes. */
  readonly intervalMs?: number;
  /** Context added to the timeout message (e.g. a child's stderr), read only on timeout. */
  readonly detail?: () => string;
}

/**
 * Polls `probe` until it returns a truthy value, and returns that. A probe that throws counts as
 * "not yet" (a server still starting refuses connections); the last error is named in the timeout
 * message so a real fault is not hidden behind the timeout. A number is the timeout in milliseconds.
 */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: WaitOptions | number = {},
): Promise<T> {
  const {
    timeoutMs = 30_000,
    intervalMs = 20,
    detail,
  } = typeof options === 'number' ? ({ timeoutMs: options } as WaitOptions) : options;
  const deadline = performance.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (performance.now() >= deadline) {
      const cause = last instanceof Error ? ` (last error: ${last.name}${errCode(last)}: ${last.message})` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${cause}${detail ? `: ${detail()}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Waits for `p` at most `ms`; on expiry throws an error naming `what`. Teardown steps use it so a
 * stuck close becomes a named failure instead of a process that never exits. The timer is cleared
 * either way, so the bound itself keeps nothing alive.
 */
export async function within<T>(what: string, p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** Handle kinds that keep a process alive and that a test creates: sockets, servers, children. */
const IO_HANDLES = new Set(['TCPSocketWrap', 'TCPServerWrap', 'TCPWRAP', 'ProcessWrap', 'UDPWrap']);

/** The sockets, listening servers and child processes still open in this process, by kind. */
export function liveIoHandles(): string[] {
  return process.getActiveResourcesInfo().filter((kind) => IO_HANDLES.has(kind));
}

/**
 * Waits until no socket, server or child process is left (each close is asynchronous), and fails
 * naming the kinds still open. A test file that ends with this cannot hang on a leaked handle.
 */
export async function assertNoLiveIo(timeoutMs = 10_000): Promise<void> {
  try {
    await waitFor('every socket, server and child process to close', () => liveIoHandles().length === 0, {
      timeoutMs,
    });
  } catch {
    throw new Error(`still open after ${timeoutMs} ms: ${liveIoHandles().join(', ')}`);
  }
}

/**
 * How long a negative check watches for something that must not happen (a write, a leader change, a
 * state flip). No event marks "it did not happen", so the check needs time; this bound is long enough
 * for the double-backed loops of the suites to act several times over (their debounce and retry
 * intervals are tens of milliseconds), and short enough to keep each check cheap. A loaded machine
 * can only make such a check weaker, never red.
 */
export const QUIET_MS = 400;

/**
 * Watches `holds` for `ms` (default QUIET_MS) and fails at the first probe where it does not hold,
 * naming `what`. Use it where a test must show that something does not happen.
 */
export async function staysTrue(what: string, holds: () => boolean, ms = QUIET_MS, intervalMs = 20): Promise<void> {
  const end = performance.now() + ms;
  for (;;) {
    if (!holds()) throw new Error(`${what}: no longer true`);
    if (performance.now() >= end) return;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Resolves once `progress()` (a counter such as requests seen) has not moved for `ms` (default
 * QUIET_MS), running `step` (e.g. "wait until idle") before each round. For a test that collects
 * everything a change caused when the last effect has no end marker of its own.
 */
export async function quietFor(
  what: string,
  progress: () => number,
  options: { ms?: number; intervalMs?: number; timeoutMs?: number; step?: () => Promise<void> } = {},
): Promise<void> {
  const { ms = QUIET_MS, intervalMs = 20, timeoutMs = 30_000, step } = options;
  const deadline = performance.now() + timeoutMs;
  let seen = progress();
  let quietSince = performance.now();
  for (;;) {
    await step?.();
    await new Promise((r) => setTimeout(r, intervalMs));
    const now = performance.now();
    const current = progress();
    if (current !== seen) {
      seen = current;
      quietSince = now;
    } else if (now - quietSince >= ms) return;
    if (now >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} to go quiet`);
  }
}

function errCode(err: Error): string {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? ` ${code}` : '';
}

/** Whether `host:port` can be bound right now (released again at once). */
function listenOnce(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A port the kernel just handed out on `host` (bind to 0, read it back, release it). */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ port: 0, host }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => (port > 0 ? resolve(port) : reject(new Error('no port assigned'))));
    });
  });
}

/**
 * A base N such that N + each offset is free on loopback right now, for commands that take a port
 * base (`start --port-base`). Bases are drawn at random from the unprivileged range below the usual
 * ephemeral range, so parallel runs on one machine rarely meet; a taken port draws again.
 */
export async function freePortBase(offsets: readonly number[], host = '127.0.0.1'): Promise<number> {
  const span = Math.max(...offsets);
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * (32_000 - 20_000 - span));
    let free = true;
    for (const off of offsets) {
      if (!(await listenOnce(base + off, host))) {
        free = false;
        break;
      }
    }
    if (free) return base;
  }
  throw new Error(`no free port base for offsets ${offsets.join(',')}`);
}

/** The loopback ports `start --port-base N` binds, as offsets from N (see `fgentic-retrieval help start`). */
export const START_PORT_OFFSETS = [0, 1, 10, 20, 30, 363] as const;

export interface RunResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ChildOptions {
  readonly cwd?: string;
  readonly env?: Record<string, string | undefined>;
  /** Text written to the child's stdin, which is then closed. */
  readonly input?: string;
}

/** Runs `fgentic-retrieval ARGS` to completion and collects its output. */
export function runCli(args: readonly string[], options: ChildOptions = {}): Promise<RunResult> {
  return runProcess(process.execPath, [BIN, ...args], options);
}

/** Runs any command to completion and collects its output. */
export function runProcess(command: string, args: readonly string[], options: ChildOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: { ...CHILD_ENV, ...options.env },
      stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.once('error', reject);
    // 'close' rather than 'exit': the pipes are drained, so the output is complete.
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}

export interface ServiceOptions extends ChildOptions {
  /** True once the collected output (stdout then stderr) shows the process is ready. */
  readonly ready: (output: { stdout: string; stderr: string }) => boolean;
  /** Upper bound for readiness; on expiry the child is killed and `ready` rejects. */
  readonly readyTimeoutMs?: number;
}

export interface Service {
  readonly child: ChildProcess;
  /** Resolves when ready; rejects (and the child is gone) if it exits first or never gets ready. */
  readonly ready: Promise<void>;
  /** The exit code, or the signal's name when a signal ended the process (so a failure says which). */
  readonly stopped: Promise<number | string | null>;
  readonly stdout: () => string;
  readonly stderr: () => string;
  /** Sends `signal` if the child still runs and waits for its exit. */
  stop(signal?: NodeJS.Signals): Promise<number | string | null>;
}

/** Starts `fgentic-retrieval ARGS` as a long-running process and watches its output for readiness. */
export function startCli(args: readonly string[], options: ServiceOptions): Service {
  return startProcess(process.execPath, [BIN, ...args], options);
}

/** Starts any long-running command and watches its output for readiness. */
export function startProcess(command: string, args: readonly string[], options: ServiceOptions): Service {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: { ...CHILD_ENV, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let exited = false;
  const stopped = new Promise<number | string | null>((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      resolve(code ?? signal);
    }),
  );
  const ready = new Promise<void>((resolve, reject) => {
    let done = false;
    const settle = (err?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve();
    };
    const check = () => {
      if (options.ready({ stdout, stderr })) settle();
    };
    child.stdout?.on('data', (c: Buffer) => {
      stdout += c.toString();
      check();
    });
    child.stderr?.on('data', (c: Buffer) => {
      stderr += c.toString();
      check();
    });
    const timeoutMs = options.readyTimeoutMs ?? 120_000;
    const timer = setTimeout(() => {
      // A process that never got ready must not outlive the test that started it.
      child.kill('SIGKILL');
      settle(new Error(`not ready after ${timeoutMs} ms:\n${stderr}`));
    }, timeoutMs);
    child.once('exit', (code, signal) => settle(new Error(`exited ${code ?? signal} before ready:\n${stderr}`)));
    child.once('error', (err) => settle(err));
  });
  // A caller that only awaits `stopped` (a start expected to be refused) must not see an unhandled rejection.
  ready.catch(() => {});
  return {
    child,
    ready,
    stopped,
    stdout: () => stdout,
    stderr: () => stderr,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (!exited) child.kill(signal);
      return stopped;
    },
  };
}

/**
 * Reference material that cannot live in the repository (the origin platform's schema SQL is its
 * code, not ours to copy) is read from a folder beside the checkout. Tests that need it skip when it
 * is absent, so a plain clone tests green; CI sets FGENTIC_REQUIRE_SHARED=1 (.ci/run), and then an
 * absent folder is a failure, never a silent skip.
 */
export const requireShared = process.env['FGENTIC_REQUIRE_SHARED'] === '1';

/** The node:test `skip` value for tests that need `dir`: false (run) when present or required. */
export function sharedSkip(dir: string, what: string): false | string {
  if (existsSync(dir) || requireShared) return false;
  return `skipped: ${dir} (${what}) is absent; FGENTIC_REQUIRE_SHARED=1 makes this a failure`;
}
