/**
 * The projector's configuration stores (I/O): a fixed configuration for tests and embedded stacks, and
 * a file store that reloads projector.json (and the registry shards beside it) atomically. Parsing,
 * assembly and validation are pure (config.ts, registry.ts); kube-store.ts reads the same objects
 * through the Kubernetes API.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { errorFields } from '../common/error-fields.ts';
import { watchConfigFile } from '../common/file-watch.ts';
import type { ConfigResult, ProjectorConfig } from './config.ts';
import { createAssembler, REGISTRY_SHARD_PREFIX } from './registry.ts';

/** Snapshot of the store: a valid configuration, or deny-all with a content-free error. */
export type ConfigState =
  | { readonly ready: true; readonly config: ProjectorConfig; readonly generation: number }
  | {
      readonly ready: false;
      readonly error: string;
      readonly generation: number;
      /** Set when the registry is stale (no API contact, or no controller heartbeat within the bound). */
      readonly reason?: 'registry_stale';
    };

export interface ConfigStore {
  current(): ConfigState;
  close(): void;
}

/** A store over a fixed, already validated (or invalid) configuration: tests and embedded stacks. */
export function staticConfigStore(result: ConfigResult): ConfigStore {
  const state: ConfigState = result.ok
    ? { ready: true, config: result.config, generation: 1 }
    : { ready: false, error: result.error, generation: 1 };
  return { current: () => state, close: () => {} };
}

export interface FileStoreOptions {
  /** Polling interval in ms (fallback for file systems where fs.watch misses ConfigMap swaps). */
  readonly pollMs?: number;
  /** How long the last good registry serves while shards and manifest disagree (default 30 s). */
  readonly maxStalenessMs?: number;
  readonly onChange?: (state: ConfigState) => void;
}

/**
 * Load the file now and again whenever it changes. Each load replaces the whole state in one
 * assignment; an unreadable or invalid file means deny-all until a valid one is seen.
 */
export function fileConfigStore(path: string, options: FileStoreOptions = {}): ConfigStore {
  const maxStaleness = options.maxStalenessMs ?? 30_000;
  let lastText: string | undefined | null = null; // null: never read
  let generation = 0;
  let state: ConfigState = { ready: false, error: 'not loaded', generation };
  let lastGood: ConfigState | undefined;
  let inconsistentSince: number | undefined;
  const publish = (next: ConfigState) => {
    state = next;
    options.onChange?.(state);
  };
  const readShards = () => readShardsBeside(path);
  const assemble = createAssembler();
  const reload = () => {
    let text: string | undefined;
    let unreadable = '';
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      // ENOENT (not written yet) and EACCES alike deny everything below; the code says which.
      text = undefined;
      unreadable = errorFields(err).code ?? errorFields(err).error;
    }
    const shards = text?.includes('"registry"') ? readShards() : new Map<string, string>();
    const fingerprint = text === undefined ? undefined : [text, ...[...shards].flat()].join('\u0000');
    if (fingerprint === lastText) {
      if (inconsistentSince !== undefined && Date.now() - inconsistentSince > maxStaleness && state.ready) {
        generation += 1;
        publish({ ready: false, error: 'registry shards inconsistent with the manifest', generation });
      }
      return;
    }
    lastText = fingerprint;
    if (text === undefined) {
      generation += 1;
      lastGood = undefined;
      inconsistentSince = undefined;
      publish({
        ready: false,
        error: `configuration file missing or unreadable (${unreadable})`,
        generation,
      });
      return;
    }
    const result = assemble(text, shards);
    if (!result.ok && 'inconsistent' in result) {
      // Shards and manifest written one after the other: the last good registry serves, bounded.
      inconsistentSince ??= Date.now();
      if (lastGood === undefined || Date.now() - inconsistentSince > maxStaleness) {
        generation += 1;
        publish({ ready: false, error: result.error, generation });
      }
      return;
    }
    inconsistentSince = undefined;
    generation += 1;
    if (result.ok) {
      lastGood = { ready: true, config: result.config, generation };
      publish(lastGood);
    } else {
      lastGood = undefined;
      publish({ ready: false, error: result.error, generation });
    }
  };
  reload();
  const stop = watchConfigFile(path, reload, {
    ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
    alsoOn: (f) => f.startsWith(REGISTRY_SHARD_PREFIX),
  });
  return {
    current: () => state,
    close: stop,
  };
}

/** Registry shards beside a projector.json, as `fgentic-projector-registry-NNN.json` (file mode). */
export function readShardsBeside(path: string): Map<string, string> {
  const dir = dirname(path);
  const shards = new Map<string, string>();
  let names: string[] = [];
  try {
    names = readdirSync(dir);
  } catch {
    return shards;
  }
  for (const f of names) {
    if (!f.startsWith(REGISTRY_SHARD_PREFIX) || !f.endsWith('.json')) continue;
    try {
      shards.set(f.slice(0, -'.json'.length), readFileSync(join(dir, f), 'utf8'));
    } catch {
      // A shard that vanished between listing and reading is missing: the manifest check says so.
    }
  }
  return shards;
}
