/**
 * Throwaway PostgreSQL clusters on loopback for the tests and benchmarks that run on the production
 * engine. A cluster lives in a temporary directory (data, socket, log), listens on 127.0.0.1 on a free
 * port, requires a password for every TCP login (scram-sha-256, as a managed cluster does), and is
 * removed by `stop()`. The test runner starts one per `npm test` (scripts/run-tests.ts) and hands it to
 * the test processes through the environment (`clusterFromEnv`); `bench/pg-local.sh` uses the same code
 * through this module's command line. Tests only: nothing the CLI reaches imports this file.
 *
 * `initdb` and `postgres` refuse to run as root, so as root every server command runs as the packaged
 * `postgres` account (runuser), which owns the directory.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/** A PostgreSQL installation with the pgvector extension available to it. */
export interface PostgresInstall {
  /** The server's bin directory (initdb, pg_ctl, pg_basebackup). */
  readonly bin: string;
  /** `postgres --version`'s number, e.g. "15.18". */
  readonly version: string;
  /** pgvector's default version from its control file, e.g. "0.8.6". */
  readonly vector: string;
}

/**
 * The newest /usr/lib/postgresql/N whose share directory holds vector.control (or PG_MAJOR's), or a
 * sentence saying what is missing.
 */
export function findPostgres(): { install: PostgresInstall } | { missing: string } {
  const root = '/usr/lib/postgresql';
  const majors = process.env['PG_MAJOR']
    ? [process.env['PG_MAJOR']]
    : existsSync(root)
      ? readdirSync(root)
          .filter((d) => /^\d+$/.test(d))
          .sort((a, b) => Number(b) - Number(a))
      : [];
  if (majors.length === 0) return { missing: `no PostgreSQL server under ${root}` };
  for (const major of majors) {
    const bin = join(root, major, 'bin');
    if (!existsSync(join(bin, 'initdb'))) continue;
    const share = execFileSync(join(bin, 'pg_config'), ['--sharedir'], { encoding: 'utf8' }).trim();
    const control = join(share, 'extension', 'vector.control');
    if (!existsSync(control)) {
      return {
        missing: `PostgreSQL ${major} is installed but pgvector is not (${control} is absent; .ci/run builds it from ../shared/vendor)`,
      };
    }
    const vector = /default_version\s*=\s*'([^']+)'/.exec(readFileSync(control, 'utf8'))?.[1];
    const version = /(\d+\.\d+)/.exec(execFileSync(join(bin, 'postgres'), ['--version'], { encoding: 'utf8' }))?.[1];
    return { install: { bin, version: version ?? major, vector: vector ?? 'unknown' } };
  }
  return { missing: `no PostgreSQL server binaries (initdb) under ${root}` };
}

/** Login roles every test cluster has, each LOGIN NOINHERIT with the cluster's password. */
export const CLUSTER_ROLES = [
  'knowledge_owner',
  'knowledge_retrieval',
  'knowledge_ingestion',
  'knowledge_connector',
  'knowledge_projector',
  'fgentic_retrieval',
] as const;

/** What a running cluster is, as far as a client needs to know (it travels through the environment). */
export interface ClusterInfo {
  readonly port: number;
  /** The superuser's and every CLUSTER_ROLES login's password. */
  readonly password: string;
  readonly install: PostgresInstall;
  /** Its directory: `data/`, the Unix socket and `server.log`. */
  readonly dir: string;
}

export interface Cluster extends ClusterInfo {
  /** postgres://ROLE:PASSWORD@127.0.0.1:PORT/DATABASE (ROLE defaults to the superuser `postgres`). */
  url(database: string, role?: string): string;
  /** Stops the server (fast shutdown) and starts it again on the same port. */
  restart(): Promise<void>;
  stopServer(): void;
  startServer(): void;
  /** Stops the server and removes its directory; safe to call twice. */
  stop(): void;
}

const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** The packaged `postgres` account's ids, which own a cluster started as root. */
function postgresAccount(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

function run(bin: string, args: readonly string[], env?: Readonly<Record<string, string>>): void {
  const [cmd, argv] = asRoot ? ['runuser', ['-u', 'postgres', '--', bin, ...args]] : [bin, args];
  const r = spawnSync(cmd, argv, { encoding: 'utf8', ...(env ? { env: { ...process.env, ...env } } : {}) });
  if (r.status !== 0) {
    throw new Error(`${bin.split('/').pop()} failed (exit ${r.status ?? r.signal}): ${r.stderr.trim()}`);
  }
}

function freePortSync(): number {
  const out = execFileSync(
    process.execPath,
    [
      '-e',
      "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{process.stdout.write(String(s.address().port));s.close()})",
    ],
    { encoding: 'utf8' },
  );
  return Number(out);
}

export interface ClusterOptions {
  /** Extra server settings (`-c name=value`), e.g. shared_buffers for benchmarks. */
  readonly settings?: Readonly<Record<string, string | number>>;
  /** Parent of the cluster's temporary directory (default the OS temp dir). */
  readonly parent?: string;
}

/** Server settings every test cluster runs with; durability is not what the tests are about. */
const TEST_SETTINGS: Readonly<Record<string, string | number>> = {
  fsync: 'off',
  full_page_writes: 'off',
  synchronous_commit: 'off',
  max_connections: 200,
  shared_buffers: '128MB',
  // Autovacuum acts within a second or two, so a test sees the statistics it would see in production.
  autovacuum_naptime: '1s',
};

function bind(info: ClusterInfo, settings: Readonly<Record<string, string | number>>): Cluster {
  const data = join(info.dir, 'data');
  const bin = (name: string) => join(info.install.bin, name);
  const opts = () =>
    Object.entries({
      listen_addresses: '127.0.0.1',
      port: info.port,
      unix_socket_directories: info.dir,
      ...TEST_SETTINGS,
      ...settings,
    })
      .map(([k, v]) => `-c ${k}=${v}`)
      .join(' ');
  let stopped = false;
  const cluster: Cluster = {
    ...info,
    url: (database, role = 'postgres') =>
      `postgres://${role}:${encodeURIComponent(info.password)}@127.0.0.1:${info.port}/${database}`,
    startServer() {
      run(bin('pg_ctl'), ['-D', data, '-l', join(info.dir, 'server.log'), '-w', '-t', '60', '-o', opts(), 'start']);
    },
    stopServer() {
      run(bin('pg_ctl'), ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']);
    },
    async restart() {
      cluster.stopServer();
      cluster.startServer();
    },
    stop() {
      if (stopped) return;
      stopped = true;
      if (existsSync(join(data, 'postmaster.pid'))) {
        try {
          run(bin('pg_ctl'), ['-D', data, '-m', 'immediate', '-w', '-t', '30', 'stop']);
        } catch {
          // Already down; the directory goes either way.
        }
      }
      rmSync(info.dir, { recursive: true, force: true });
    },
  };
  return cluster;
}

/** initdb + start on a free loopback port; creates CLUSTER_ROLES. */
export async function startCluster(install: PostgresInstall, options: ClusterOptions = {}): Promise<Cluster> {
  const dir = mkdtempSync(join(options.parent ?? tmpdir(), 'fgentic-pg-'));
  const password = randomBytes(18).toString('base64url');
  try {
    chmodSync(dir, 0o700);
    const pwfile = join(dir, 'pwfile');
    writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
    if (asRoot) {
      const { uid, gid } = postgresAccount();
      chownSync(dir, uid, gid);
      chownSync(pwfile, uid, gid);
    }
    run(join(install.bin, 'initdb'), [
      '-D',
      join(dir, 'data'),
      '-U',
      'postgres',
      '--auth-local=trust',
      '--auth-host=scram-sha-256',
      `--pwfile=${pwfile}`,
      '-E',
      'UTF8',
      '--locale=C',
    ]);
    rmSync(pwfile);
    let cluster: Cluster | undefined;
    let lastError: unknown;
    // A port found free can be taken before the server binds it; draw again.
    for (let attempt = 0; attempt < 5 && cluster === undefined; attempt++) {
      const candidate = bind({ port: freePortSync(), password, install, dir }, options.settings ?? {});
      try {
        candidate.startServer();
        cluster = candidate;
      } catch (err) {
        lastError = err;
      }
    }
    if (cluster === undefined) throw lastError;
    const admin = new pg.Client({ connectionString: cluster.url('postgres') });
    await admin.connect();
    try {
      for (const role of CLUSTER_ROLES) {
        // Role names are this module's constants; the password is a parameter-free literal built here.
        await admin.query(
          `CREATE ROLE ${role} LOGIN NOINHERIT PASSWORD ${pg.Client.prototype.escapeLiteral(password)}`,
        );
      }
    } finally {
      await admin.end();
    }
    return cluster;
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** A private directory for a server run by the `postgres` account (as root) or by this user. */
function serverDir(parent: string | undefined, prefix: string): string {
  const dir = mkdtempSync(join(parent ?? tmpdir(), prefix));
  chmodSync(dir, 0o700);
  if (asRoot) {
    const { uid, gid } = postgresAccount();
    chownSync(dir, uid, gid);
  }
  return dir;
}

/**
 * A streaming replica of `primary`: `pg_basebackup -R` (the standby signal and `primary_conninfo`
 * with the superuser's password) from the running primary over TCP, started as a hot standby on a
 * free loopback port. Its logins and passwords are the primary's (replicated). `stop()` removes it
 * (an immediate stop first: a kill, as far as its clients can tell).
 */
export async function startReplica(primary: ClusterInfo, options: ClusterOptions = {}): Promise<Cluster> {
  const dir = serverDir(options.parent, 'fgentic-pg-replica-');
  try {
    run(
      join(primary.install.bin, 'pg_basebackup'),
      [
        '-D',
        join(dir, 'data'),
        '-R',
        '-X',
        'stream',
        '--checkpoint=fast',
        '-h',
        '127.0.0.1',
        '-p',
        String(primary.port),
        '-U',
        'postgres',
        '-w',
      ],
      { PGPASSWORD: primary.password },
    );
    let replica: Cluster | undefined;
    let lastError: unknown;
    for (let attempt = 0; attempt < 5 && replica === undefined; attempt++) {
      const candidate = bind(
        { port: freePortSync(), password: primary.password, install: primary.install, dir },
        { hot_standby: 'on', ...options.settings },
      );
      try {
        candidate.startServer();
        replica = candidate;
      } catch (err) {
        lastError = err;
      }
    }
    if (replica === undefined) throw lastError;
    return replica;
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/** A running PgBouncer. */
export interface PgBouncer {
  readonly port: number;
  /** postgres://ROLE:PASSWORD@127.0.0.1:PORT/DATABASE through the pooler (ROLE defaults to postgres). */
  url(database: string, role?: string): string;
  /** Stops it (SIGINT: at once) and removes its directory; safe to call twice. */
  stop(): void;
}

export const PGBOUNCER = '/usr/sbin/pgbouncer';

/**
 * PgBouncer in transaction mode in front of `target`, as operators deploy it: every database of the
 * target by name, SCRAM for clients and for the server (the logins' passwords in its auth file), no
 * `ignore_startup_parameters`, on a free loopback port. Runs as the `postgres` account when this
 * process is root (PgBouncer refuses root).
 */
export async function startPgBouncer(
  target: Pick<ClusterInfo, 'port' | 'password'>,
  options: { readonly parent?: string; readonly poolSize?: number; readonly bin?: string } = {},
): Promise<PgBouncer> {
  const bin = options.bin ?? PGBOUNCER;
  if (!existsSync(bin)) throw new Error(`PgBouncer is not installed (${bin}; scripts/install-postgres.sh)`);
  const dir = serverDir(options.parent, 'fgentic-pgbouncer-');
  const quote = (v: string) => `"${v.replaceAll('"', '""')}"`;
  const owned = (path: string, text: string) => {
    writeFileSync(path, text, { mode: 0o600 });
    if (asRoot) {
      const { uid, gid } = postgresAccount();
      chownSync(path, uid, gid);
    }
  };
  owned(
    join(dir, 'userlist.txt'),
    `${['postgres', ...CLUSTER_ROLES].map((r) => `${quote(r)} ${quote(target.password)}`).join('\n')}\n`,
  );
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    const pidFile = join(dir, 'pgbouncer.pid');
    if (existsSync(pidFile)) {
      const pid = Number(readFileSync(pidFile, 'utf8').trim());
      try {
        if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGINT');
      } catch {
        // Already gone.
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  let lastError: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = freePortSync();
    owned(
      join(dir, 'pgbouncer.ini'),
      [
        '[databases]',
        `* = host=127.0.0.1 port=${target.port}`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = scram-sha-256',
        `auth_file = ${join(dir, 'userlist.txt')}`,
        'pool_mode = transaction',
        'max_client_conn = 500',
        `default_pool_size = ${options.poolSize ?? 20}`,
        `logfile = ${join(dir, 'pgbouncer.log')}`,
        `pidfile = ${join(dir, 'pgbouncer.pid')}`,
        '',
      ].join('\n'),
    );
    try {
      run(bin, ['-d', join(dir, 'pgbouncer.ini')]);
      const bouncer: PgBouncer = {
        port,
        url: (database, role = 'postgres') =>
          `postgres://${role}:${encodeURIComponent(target.password)}@127.0.0.1:${port}/${database}`,
        stop,
      };
      // Ready once it answers a login (it daemonizes before it listens).
      for (let i = 0; ; i++) {
        const c = new pg.Client({
          connectionString: bouncer.url('postgres'),
          connectionTimeoutMillis: 2_000,
        });
        try {
          await c.connect();
          await c.query('SELECT 1');
          await c.end();
          break;
        } catch (err) {
          await c.end().catch(() => {});
          if (i >= 50) throw err;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      return bouncer;
    } catch (err) {
      lastError = err;
      const pidFile = join(dir, 'pgbouncer.pid');
      if (existsSync(pidFile)) {
        try {
          process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 'SIGINT');
        } catch {
          // Not running.
        }
        rmSync(pidFile, { force: true });
      }
    }
  }
  stop();
  throw lastError;
}

const ENV = 'FGENTIC_TEST_PG';

/** The environment entry that hands a running cluster to child processes. */
export function clusterEnv(cluster: ClusterInfo): Record<string, string> {
  const { port, password, install, dir } = cluster;
  return { [ENV]: JSON.stringify({ port, password, install, dir }) };
}

/**
 * The cluster the runner started for this test process, or undefined when none was (a plain
 * `node --test FILE`, or a machine without PostgreSQL + pgvector). `stop()` on it only forgets it:
 * the runner owns its lifetime.
 */
export function clusterFromEnv(env: NodeJS.ProcessEnv = process.env): Cluster | undefined {
  const text = env[ENV];
  if (!text) return undefined;
  const info = JSON.parse(text) as ClusterInfo;
  const c = bind(info, {});
  return { ...c, stop() {} };
}

/**
 * A fresh database on the cluster, owned by the superuser, named after `label`; dropped (with any
 * connection still open to it) by the returned function.
 */
export async function createDatabase(
  cluster: Cluster,
  label: string,
): Promise<{ name: string; drop(): Promise<void> }> {
  const name = `t_${label
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .slice(0, 40)}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: cluster.url('postgres') });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return {
    name,
    async drop() {
      const c = new pg.Client({ connectionString: cluster.url('postgres') });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** `start` prints the superuser URL and keeps the cluster; `stop DIR` removes it. For bench/pg-local.sh. */
async function main(argv: string[]): Promise<number> {
  const [command, arg] = argv;
  if (command === 'start') {
    const found = findPostgres();
    if ('missing' in found) {
      console.error(found.missing);
      return 1;
    }
    const settings = Object.fromEntries(
      (arg ?? '')
        .split(/\s+/)
        .filter(Boolean)
        .map((kv) => kv.split('=') as [string, string]),
    );
    const c = await startCluster(found.install, {
      settings: { fsync: 'on', full_page_writes: 'on', synchronous_commit: 'on', ...settings },
    });
    writeFileSync(join(c.dir, 'cluster.json'), clusterEnv(c)[ENV] ?? '');
    console.log(c.dir);
    console.log(c.url('postgres'));
    return 0;
  }
  if (command === 'stop' && arg) {
    const file = join(arg, 'cluster.json');
    const info = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Partial<ClusterInfo>) : {};
    if (!info.install) {
      console.error(`${arg} holds no cluster.json`);
      return 1;
    }
    bind(info as ClusterInfo, {}).stop();
    return 0;
  }
  console.error('usage: postgres.ts start ["name=value …"] | stop DIR');
  return 2;
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  process.exitCode = await main(process.argv.slice(2));
}
