/**
 * The projector's configuration stores (I/O): a fixed configuration for tests and embedded stacks, and
 * a file store that reloads projector.json atomically. Parsing and validation are pure (config.ts).
 */
import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import { type ConfigResult, type ProjectorConfig, parseConfig } from './config.ts';

/** Snapshot of the store: a valid configuration, or deny-all with a content-free error. */
export type ConfigState =
  | { readonly ready: true; readonly config: ProjectorConfig; readonly generation: number }
  | { readonly ready: false; readonly error: string; readonly generation: number };

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
  readonly onChange?: (state: ConfigState) => void;
}

/**
 * Load the file now and again whenever it changes. Each load replaces the whole state in one
 * assignment; an unreadable or invalid file means deny-all until a valid one is seen.
 */
export function fileConfigStore(path: string, options: FileStoreOptions = {}): ConfigStore {
  let lastText: string | undefined | null = null; // null: never read
  let generation = 0;
  let state: ConfigState = { ready: false, error: 'not loaded', generation };
  const reload = () => {
    let text: string | undefined;
    try {
      text = readFileSync(path, 'utf8');
    } catch {
      text = undefined;
    }
    if (text === lastText) return;
    lastText = text;
    generation += 1;
    if (text === undefined) {
      state = { ready: false, error: 'configuration file missing or unreadable', generation };
    } else {
      const result = parseConfig(text);
      state = result.ok
        ? { ready: true, config: result.config, generation }
        : { ready: false, error: result.error, generation };
    }
    options.onChange?.(state);
  };
  reload();
  let watcher: FSWatcher | undefined;
  try {
    // Watch the directory: Kubernetes swaps ConfigMap contents through a `..data` symlink rename.
    const name = basename(path);
    watcher = watch(dirname(path), { persistent: false }, (_event, file) => {
      if (file === null || file === name || String(file).startsWith('..')) reload();
    });
    watcher.on('error', () => {
      watcher?.close();
      watcher = undefined;
    });
  } catch {
    watcher = undefined;
  }
  const timer = setInterval(reload, options.pollMs ?? 1000);
  timer.unref();
  return {
    current: () => state,
    close: () => {
      clearInterval(timer);
      watcher?.close();
    },
  };
}
