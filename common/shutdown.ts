/**
 * Graceful shutdown shared by the projector, retrieval and webhook servers.
 *
 * On SIGTERM a server first reports not ready (so the Service stops routing to it), keeps serving for
 * `delayMs` while endpoints propagate, then stops accepting, lets in-flight requests finish, and after
 * `timeoutMs` cuts whatever is left. The defaults (2 s + 20 s) stay below the 30 s
 * `terminationGracePeriodSeconds` of deploy/base, after which the kubelet sends SIGKILL.
 */
import type { Server } from 'node:http';

/** What the drain needs; node:http and node:https servers both provide it. */
export type DrainableServer = Pick<Server, 'close' | 'closeIdleConnections' | 'closeAllConnections'>;

export interface ShutdownTiming {
  /** Time between turning not-ready and closing the listener. */
  readonly delayMs: number;
  /** Longest wait for in-flight requests once the listener is closed. */
  readonly timeoutMs: number;
}

export const DEFAULT_SHUTDOWN: ShutdownTiming = { delayMs: 2_000, timeoutMs: 20_000 };
/** delay + timeout must leave room under a 30 s grace period for process exit. */
export const MAX_SHUTDOWN_MS = 25_000;

function envMs(value: string | undefined, fallback: number): number {
  // Digits only: Number() would read '' or ' ' as 0 and '1e3' as 1000.
  if (value === undefined || !/^\d{1,5}$/.test(value)) return fallback;
  const n = Number(value);
  return n <= MAX_SHUTDOWN_MS ? n : fallback;
}

/**
 * `FGENTIC_SHUTDOWN_DELAY_MS` and `FGENTIC_SHUTDOWN_TIMEOUT_MS` (integers, 0–25000; anything else
 * falls back to the default). The sum is capped at 25 s by shortening the timeout.
 */
export function shutdownTimingFromEnv(env: NodeJS.ProcessEnv = process.env): ShutdownTiming {
  const delayMs = envMs(env['FGENTIC_SHUTDOWN_DELAY_MS'], DEFAULT_SHUTDOWN.delayMs);
  const timeoutMs = Math.min(
    envMs(env['FGENTIC_SHUTDOWN_TIMEOUT_MS'], DEFAULT_SHUTDOWN.timeoutMs),
    MAX_SHUTDOWN_MS - delayMs,
  );
  return { delayMs, timeoutMs };
}

/**
 * Stop accepting connections and wait for in-flight requests. Keep-alive connections are closed as
 * soon as they are idle (also those that finish a response during the drain, which Node would
 * otherwise keep open until their keep-alive timeout). Resolves `forced: true` when the timeout
 * expired and the remaining connections were destroyed.
 */
export async function drainHttpServer(server: DrainableServer, timeoutMs: number): Promise<{ forced: boolean }> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const sweep = setInterval(() => server.closeIdleConnections(), 20);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    const result = await Promise.race([closed.then(() => 'closed' as const), expired]);
    if (result === 'closed') return { forced: false };
    server.closeAllConnections();
    await closed;
    return { forced: true };
  } finally {
    clearInterval(sweep);
    clearTimeout(timer);
  }
}

/** Resolves on the first SIGTERM or SIGINT (then removes both listeners). */
export function waitForStopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const stop = (signal: NodeJS.Signals) => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      resolve(signal);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
