/**
 * Re-reading a mounted configuration file when it may have changed: a directory watch (Kubernetes
 * swaps ConfigMap contents through a `..data` symlink rename, so the file's own inode never changes)
 * plus a poll, because a watch can miss events or fail (inotify limits, some volume types). The poll
 * alone bounds how stale the file can get; the watch only makes most changes faster.
 */
import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname } from 'node:path';

export interface FileWatchOptions {
  /** Poll interval (default 1 s). */
  readonly pollMs?: number;
  /** Other names in the directory whose change also means "reload" (e.g. shards beside the file). */
  readonly alsoOn?: (name: string) => boolean;
}

/** Calls `reload` on a change near `path` and every poll interval; the returned function stops both. */
export function watchConfigFile(path: string, reload: () => void, options: FileWatchOptions = {}): () => void {
  const name = basename(path);
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dirname(path), { persistent: false }, (_event, file) => {
      const f = file === null ? null : String(file);
      if (f === null || f === name || f.startsWith('..') || options.alsoOn?.(f)) reload();
    });
    // A failed watch leaves the poll, which alone keeps the bound.
    watcher.on('error', () => {
      watcher?.close();
      watcher = undefined;
    });
  } catch {
    // No watch on this file system (ENOSPC, ENOSYS): the poll keeps the bound.
    watcher = undefined;
  }
  const timer = setInterval(reload, options.pollMs ?? 1000);
  timer.unref();
  return () => {
    clearInterval(timer);
    watcher?.close();
  };
}
