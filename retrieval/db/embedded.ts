/**
 * Embedded Postgres for the local default and tests: PGlite 0.5.14 (Postgres 18 in WASM) with
 * pgvector, served on 127.0.0.1 by pglite-socket so the server still talks through `pg` — one code
 * path (docs/upstream.md#deps-pglite-socket). PGlite runs one query at a time; pglite-socket queues queries
 * across connections and holds other connections while one is inside a transaction, so a small pool
 * is safe. maxConnections defaults to 1 upstream, hence the explicit value.
 *
 * A persisted data directory belongs to one process. PGlite keeps its working state in memory and
 * writes it back to the directory, so a second process opening the same directory works on its own
 * copy and one of the two silently loses its writes. The opener therefore takes `<dir>.lock` (created
 * exclusively, holding its PID, host and, once listening, its postgres:// URL); another process gets
 * DatabaseInUseError naming the holder and the URL to write through instead. A lock whose PID is dead
 * on this host is stale and is taken over.
 */
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import type { Server, Socket } from 'node:net';
import { hostname } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { intarray } from '@electric-sql/pglite/contrib/intarray';
import { vector } from '@electric-sql/pglite-pgvector';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

export interface EmbeddedDatabase {
  /** A postgres:// URL for `pg`. */
  readonly url: string;
  /** Sockets the server has accepted and not yet closed (undefined: not trackable, see trackSockets). */
  readonly sockets?: ReadonlySet<Socket> | undefined;
  /** Pool size that fits under the socket server's connection limit. */
  readonly poolSize: number;
  close(): Promise<void>;
}

export interface EmbeddedOptions {
  /** Directory to persist to; omit for an in-memory database. */
  readonly dataDir?: string;
  readonly port?: number;
  readonly maxConnections?: number;
  /** Bound on each step of `close()` (default CLOSE_STEP_MS). */
  readonly closeStepMs?: number;
}

export const DEFAULT_DATA_DIR = './data/pglite';

/**
 * Bound on each step of `close()`. pglite-socket 0.2.17's `stop()` starts every handler's detach
 * without awaiting it and then waits for the listening server to close, which Node delays until every
 * accepted socket has closed; a handler still holding a reset connection's transaction never gets to
 * close its socket, and that wait (and the process) would last for ever.
 */
export const CLOSE_STEP_MS = 5_000;

/** Resolves when `p` settles or after `ms`, whichever is first; true if `p` settled. */
function settledWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  return Promise.race([
    p.then(
      () => true,
      () => true,
    ),
    bound,
  ]).finally(() => clearTimeout(timer));
}

/**
 * The accepted sockets of a started PGLiteSocketServer, so `close()` can end the ones its `stop()`
 * leaves open. The listening server is a private field of the pinned version; `undefined` when it is
 * not there (another version), which `retrieval/db/embedded-close.test.ts` turns into a failure.
 */
export function trackSockets(server: PGLiteSocketServer): Set<Socket> | undefined {
  const net = (server as unknown as { server?: Server | null }).server;
  if (!net || typeof net.on !== 'function') return undefined;
  const sockets = new Set<Socket>();
  net.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  return sockets;
}

/** What the lock file records about the process that holds a data directory. */
export interface LockHolder {
  readonly pid: number;
  readonly host: string;
  /** The holder's loopback postgres:// URL, present once its socket server listens. */
  readonly url?: string;
}

export class DatabaseInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holder: LockHolder,
  ) {
    const via = holder.url
      ? `; ingest through the running stack with \`fgentic-retrieval ingest --database-url ${holder.url} …\``
      : '; stop it first or connect to it through its database URL';
    super(
      holder.pid === 0
        ? `database ${dataDir} is locked by ${lockPath(dataDir)}, which cannot be read; remove it if no process uses the directory`
        : `database ${dataDir} in use by PID ${holder.pid}${holder.host === hostname() ? '' : ` on ${holder.host}`}${via}`,
    );
    this.name = 'DatabaseInUseError';
  }
}

/** The lock file path of a data directory: a sibling, so PGlite's own directory stays untouched. */
export function lockPath(dataDir: string): string {
  const abs = resolve(dataDir);
  return join(dirname(abs), `${basename(abs)}.lock`);
}

function parseHolder(text: string): LockHolder | undefined {
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    if (!Number.isSafeInteger(v['pid']) || typeof v['host'] !== 'string') return undefined;
    return {
      pid: v['pid'] as number,
      host: v['host'],
      ...(typeof v['url'] === 'string' ? { url: v['url'] } : {}),
    };
  } catch {
    return undefined;
  }
}

/** Lock files this process holds, so a PID reused after a container restart is not mistaken for us. */
const held = new Set<string>();

function alive(pid: number): boolean {
  if (pid === process.pid) return false; // we hold nothing under this path (checked by the caller)
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists but belongs to another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The live holder of a data directory's lock, or undefined when it is free or stale. A lock from
 * another host cannot be checked and counts as live; an unreadable one (being written) counts as
 * live too, so a racing opener never takes over a lock in its first microseconds.
 */
export function readLock(dataDir: string): LockHolder | undefined {
  const path = lockPath(dataDir);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    // Only an absent lock means free; one we cannot read (EACCES, EISDIR, EIO) counts as held.
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    return { pid: 0, host: 'unknown' };
  }
  if (held.has(path)) return parseHolder(text) ?? { pid: process.pid, host: hostname() };
  const holder = parseHolder(text);
  if (holder === undefined) return { pid: 0, host: 'unknown' };
  if (holder.host === hostname() && !alive(holder.pid)) return undefined;
  return holder;
}

function writeLockFile(path: string, holder: LockHolder, exclusive: boolean): void {
  const body = `${JSON.stringify(holder)}\n`;
  if (exclusive) {
    const fd = openSync(path, 'wx', 0o600);
    try {
      writeSync(fd, body);
    } finally {
      closeSync(fd);
    }
    return;
  }
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, body);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

interface Lock {
  setUrl(url: string): void;
  release(): void;
}

export function acquireLock(dataDir: string): Lock {
  const path = lockPath(dataDir);
  const me: LockHolder = { pid: process.pid, host: hostname() };
  for (let attempt = 0; ; attempt++) {
    try {
      writeLockFile(path, me, true);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = readLock(dataDir);
      if (holder !== undefined || attempt > 0) throw new DatabaseInUseError(dataDir, holder ?? me);
      // Stale: its process is gone. Remove it and try the exclusive create once more, so of two
      // racing openers only one wins.
      rmSync(path, { force: true });
    }
  }
  held.add(path);
  const onExit = () => release();
  let current = me;
  function release() {
    if (!held.delete(path)) return;
    process.removeListener('exit', onExit);
    const now = (() => {
      try {
        return parseHolder(readFileSync(path, 'utf8'));
      } catch {
        // Gone or unreadable: not provably ours, so it is left alone below.
        return undefined;
      }
    })();
    // Never remove a lock another process has taken over.
    if (now?.pid === process.pid && now.host === me.host) rmSync(path, { force: true });
  }
  // A crash that still runs exit handlers leaves no lock behind; SIGKILL does, and is detected as stale.
  process.on('exit', onExit);
  return {
    setUrl(url) {
      current = { ...current, url };
      writeLockFile(path, current, false);
    },
    release,
  };
}

export async function startEmbeddedDatabase(options: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  let lock: Lock | undefined;
  if (options.dataDir !== undefined) {
    mkdirSync(dirname(resolve(options.dataDir)), { recursive: true });
    lock = acquireLock(options.dataDir);
    mkdirSync(options.dataDir, { recursive: true });
  }
  let db: PGlite;
  try {
    // intarray: the integer ACL index of migration 0007.
    db = await PGlite.create(options.dataDir, { extensions: { vector, intarray } });
  } catch (err) {
    lock?.release();
    throw err;
  }
  const maxConnections = options.maxConnections ?? 8;
  const server = new PGLiteSocketServer({
    db,
    host: '127.0.0.1',
    port: options.port ?? 0,
    maxConnections,
  });
  try {
    await server.start();
  } catch (err) {
    await db.close().catch(() => {});
    lock?.release();
    throw err;
  }
  const sockets = trackSockets(server);
  const stepMs = options.closeStepMs ?? CLOSE_STEP_MS;
  const conn = server.getServerConn();
  const url = `postgres://postgres@${conn}/postgres?sslmode=disable`;
  lock?.setUrl(url);
  let closed = false;
  return {
    url,
    poolSize: Math.max(1, maxConnections - 2),
    sockets,
    async close() {
      if (closed) return;
      closed = true;
      // Every step runs and none waits longer than its bound: a stuck connection must not keep the
      // process alive, and the lock is released whatever happened before.
      try {
        const stopping = server.stop();
        if (!(await settledWithin(stopping, stepMs)) || (sockets?.size ?? 0) > 0) {
          for (const socket of sockets ?? []) socket.destroy();
          await settledWithin(stopping, stepMs);
        }
        await settledWithin(db.close(), stepMs);
      } finally {
        lock?.release();
      }
    },
  };
}
