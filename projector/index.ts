/**
 * Projector entry point for programmatic use (the end-to-end stack) and the CLI.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '../common/log.ts';
import { drainHttpServer, type ShutdownTiming, sleep } from '../common/shutdown.ts';
import type { ProjectorConfig } from './config.ts';
import { type ConfigStore, fileConfigStore, staticConfigStore } from './config-store.ts';
import type { RoomStateReader } from './homeserver.ts';
import { createProjectorHandler } from './http.ts';
import type { CapabilityLedger } from './ledger.ts';

export type { ProjectorConfig } from './config.ts';
export { parseConfig, validateConfig } from './config.ts';
export type { RawRoomState, RoomStateReader } from './homeserver.ts';
export { createProjectorHandler } from './http.ts';

const log = createLogger('projector');

export interface StartProjectorOptions {
  /** projector.json to load and watch. Exactly one of configPath / config. */
  readonly configPath?: string;
  /** An already validated configuration (embedded stacks, tests); not watched. */
  readonly config?: ProjectorConfig;
  /** A ready-made store (the Kubernetes list+watch store of kube-store.ts). */
  readonly store?: ConfigStore;
  readonly port?: number;
  readonly host?: string;
  /** Current Unix time in seconds. */
  readonly now?: () => number;
  readonly randomBytes?: (n: number) => Uint8Array;
  /** Live room-state reader override; default: matrix-js-sdk per liveRoomCheck in the configuration. */
  readonly homeserver?: RoomStateReader;
  /** Config polling interval (ms) for configPath. */
  readonly pollMs?: number;
  /** The capability ledger for `capability: "ledger"` (closed with the projector). */
  readonly ledger?: CapabilityLedger;
}

export interface RunningProjector {
  readonly url: string;
  readonly server: Server;
  readonly store: ConfigStore;
  /** Stop at once: every connection is cut. */
  close(): Promise<void>;
  /** SIGTERM path: not ready, keep serving for delayMs, then drain in-flight checks (common/shutdown.ts). */
  shutdown(timing: ShutdownTiming): Promise<{ forced: boolean }>;
}

export async function startProjector(options: StartProjectorOptions): Promise<RunningProjector> {
  const sources = [options.configPath, options.config, options.store].filter((x) => x !== undefined);
  if (sources.length !== 1)
    throw new TypeError('startProjector needs exactly one of configPath, config or store');
  const store =
    options.store !== undefined
      ? options.store
      : options.configPath !== undefined
        ? fileConfigStore(options.configPath, {
            ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
            onChange: (s) =>
              s.ready
                ? log.info('configuration loaded', { path: options.configPath, generation: s.generation })
                : log.error('configuration rejected: denying every check', {
                    path: options.configPath,
                    generation: s.generation,
                    error: s.error,
                  }),
          })
        : staticConfigStore({ ok: true, config: options.config! });
  let draining = false;
  const handler = createProjectorHandler({
    store,
    draining: () => draining,
    ...(options.now ? { now: options.now } : {}),
    ...(options.randomBytes ? { randomBytes: options.randomBytes } : {}),
    ...(options.homeserver ? { homeserver: options.homeserver } : {}),
    ...(options.ledger ? { ledger: options.ledger } : {}),
  });
  const server = createServer(
    { keepAliveTimeout: 65_000, requestTimeout: 10_000, headersTimeout: 5_000 },
    handler,
  );
  const host = options.host ?? '127.0.0.1';
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (e) {
    store.close();
    throw e;
  }
  const address = server.address() as AddressInfo;
  const urlHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${urlHost}:${address.port}`,
    server,
    store,
    close: () =>
      new Promise<void>((resolve) => {
        store.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }).then(() => options.ledger?.close()),
    async shutdown(timing) {
      draining = true;
      log.info('shutting down: not ready, draining', {
        delay_ms: timing.delayMs,
        timeout_ms: timing.timeoutMs,
      });
      await sleep(timing.delayMs);
      const result = await drainHttpServer(server, timing.timeoutMs);
      store.close();
      await options.ledger?.close();
      log.info('stopped', { forced: result.forced });
      return result;
    },
  };
}
