/**
 * Projector entry point for programmatic use (the end-to-end stack) and the CLI.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '../common/log.ts';
import { listen, Readiness, stopGracefully, urlOf } from '../common/server.ts';
import type { ShutdownTiming } from '../common/shutdown.ts';
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
  if (sources.length !== 1) throw new TypeError('startProjector needs exactly one of configPath, config or store');
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
  const readiness = new Readiness();
  const handler = createProjectorHandler({
    store,
    draining: () => readiness.draining,
    ...(options.now ? { now: options.now } : {}),
    ...(options.randomBytes ? { randomBytes: options.randomBytes } : {}),
    ...(options.homeserver ? { homeserver: options.homeserver } : {}),
    ...(options.ledger ? { ledger: options.ledger } : {}),
  });
  const server = createServer({ keepAliveTimeout: 65_000, requestTimeout: 10_000, headersTimeout: 5_000 }, handler);
  let address: AddressInfo;
  try {
    address = await listen(server, options.port ?? 0, options.host ?? '127.0.0.1');
  } catch (e) {
    store.close();
    throw e;
  }
  return {
    url: urlOf(address),
    server,
    store,
    close: () =>
      new Promise<void>((resolve) => {
        store.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }).then(() => options.ledger?.close()),
    shutdown: (timing) =>
      stopGracefully(
        {
          server,
          readiness,
          log,
          afterDrain: async () => {
            store.close();
            await options.ledger?.close();
          },
        },
        timing,
      ),
  };
}
