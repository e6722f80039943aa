/**
 * Test fixtures shared by the retrieval test files: an embedded database started once per file,
 * projection builders (always passed through the contract's encode/decode), seeded vectors.
 * Not used by production code paths.
 */
import type pg from 'pg';
import {
  type AllowedClassifications,
  type ChunkMetadata,
  comparePrincipals,
  decodeProjection,
  encodeProjection,
  type MatrixPrincipal,
  type Projection,
} from '../contract/index.ts';
import { startEmbeddedDatabase } from '../retrieval/db/embedded.ts';
import { migrate } from '../retrieval/db/migrate.ts';
import { createPool } from '../retrieval/db/pool.ts';
import {
  asRole,
  bootstrapDatabase,
  type DbRole,
  INGESTION_ROLE,
  OWNER_ROLE,
  RETRIEVAL_ROLE,
} from '../retrieval/db/roles.ts';
import type { Embedder } from '../retrieval/embeddings/types.ts';
import { seedCorpus } from '../retrieval/index.ts';
import type { IngestRecord, IngestStats } from '../retrieval/ingest/jsonl.ts';
import { type Cluster, clusterFromEnv, createDatabase } from './common/postgres.ts';

export const AGENT = { namespace: 'kagent', name: 'knowledge-agent' } as const;
export const NOW = 1_784_116_900;

/**
 * The database engine this test process runs on: `pglite` (the embedded PGlite, always) or `postgres`
 * (a database on the throwaway PostgreSQL + pgvector cluster the test runner started,
 * scripts/run-tests.ts). A file that takes its database from `startTestDatabase` or
 * `startEmptyTestDatabase` runs on both.
 */
export type Engine = 'pglite' | 'postgres';
export const ENGINE: Engine = process.env['FGENTIC_TEST_ENGINE'] === 'postgres' ? 'postgres' : 'pglite';

/** node:test `skip` for a test that only means something on one engine (false: run it). */
export function onlyOn(engine: Engine, why: string): false | string {
  return ENGINE === engine ? false : `${engine} only: ${why}`;
}

/** A database of the engine under test, before this project's bootstrap and migrations. */
export interface EmptyTestDatabase {
  readonly engine: Engine;
  /** The superuser's URL (fixtures) and the pool size that fits the engine. */
  readonly url: string;
  readonly poolSize: number;
  /**
   * A URL that logs in as `role`: on PostgreSQL that login role with its password (the cluster's
   * roles are LOGIN NOINHERIT, as the origin's cluster makes them); on PGlite, which has one session
   * for every connection, the same URL as `url` (roles are then switched per transaction, asRole).
   */
  urlAs(role: string): string;
  /** PostgreSQL: the cluster, for tests that stop or restart the server. */
  readonly cluster?: Cluster;
  /** The database's name (PostgreSQL) or 'postgres' (PGlite). */
  readonly name: string;
  close(): Promise<void>;
}

export interface TestDatabase {
  readonly db: EmptyTestDatabase;
  /** The superuser session: fixtures only. */
  readonly pool: pg.Pool;
  /** The same database as knowledge_retrieval, as the server uses it. */
  readonly retrieval: pg.Pool;
  /** The same database as knowledge_ingestion. */
  readonly ingestion: pg.Pool;
  close(): Promise<void>;
}

function callerFile(): string {
  const line = (new Error().stack ?? '').split('\n').find((l) => l.includes('.test.ts'));
  return /([\w.-]+)\.test\.ts/.exec(line ?? '')?.[1] ?? 'test';
}

/** A database of the engine under test with nothing in it but what the engine brings. */
export async function startEmptyTestDatabase(): Promise<EmptyTestDatabase> {
  if (ENGINE === 'pglite') {
    const db = await startEmbeddedDatabase();
    return {
      engine: 'pglite',
      url: db.url,
      poolSize: db.poolSize,
      urlAs: () => db.url,
      name: 'postgres',
      close: () => db.close(),
    };
  }
  const cluster = clusterFromEnv();
  if (cluster === undefined) {
    throw new Error('FGENTIC_TEST_ENGINE=postgres without a cluster: run the tests through npm test');
  }
  const database = await createDatabase(cluster, callerFile());
  return {
    engine: 'postgres',
    url: cluster.url(database.name),
    poolSize: 8,
    urlAs: (role) => cluster.url(database.name, role),
    cluster,
    name: database.name,
    close: () => database.drop(),
  };
}

/** A client's query as the wrappers below see it; `name` marks a prepared statement. */
export type QueryFn = (text: string, values?: unknown[], name?: string) => Promise<pg.QueryResult>;

/** The pool, with each checked-out client's `query` replaced by `wrap(the client's own query)`. */
export function wrappedQueryPool(pool: pg.Pool, wrap: (query: QueryFn) => QueryFn): pg.Pool {
  return new Proxy(pool, {
    get(target, prop) {
      if (prop !== 'connect') return Reflect.get(target, prop, target);
      return async () => {
        const client = await target.connect();
        const query = wrap((text, values, name) =>
          name === undefined ? client.query(text, values) : client.query({ name, text, values: values ?? [] }),
        );
        const entry = (arg: string | { name: string; text: string; values?: unknown[] }, values?: unknown[]) =>
          typeof arg === 'string' ? query(arg, values) : query(arg.text, arg.values, arg.name);
        return new Proxy(client, {
          get(c, p) {
            if (p === 'query') return entry;
            const v = Reflect.get(c, p, c);
            return typeof v === 'function' ? v.bind(c) : v;
          },
        });
      };
    },
  }) as pg.Pool;
}

/**
 * The pool, with every statement its clients run passed to `on` first: `on` may record it, refuse
 * it with an error (a dropped connection or a full disk, as the real server would report), or give
 * other SQL to run in its place (so that the server itself fails the statement and aborts the
 * transaction, as it would).
 */
export function interceptingPool(pool: pg.Pool, on: (text: string) => Error | string | undefined): pg.Pool {
  return wrappedQueryPool(pool, (query) => (text, values, name) => {
    const refused = on(text);
    if (typeof refused === 'string') return query(refused);
    return refused ? Promise.reject(refused) : query(text, values, name);
  });
}

/**
 * A 1024-d vector a·e_i + b·e_j. Rows built as axisVector(0, a, j, b) on different odd axes j have
 * bit-identical distances to e_0, which is how the tie tests make exact ties. Odd, because pgvector
 * on PostgreSQL sums squares in SIMD lanes with fused multiply-add: a j in the same lane as axis 0
 * (j a multiple of the lane count, 4 to 16) adds b² to a² in one rounding instead of two, and its
 * distance differs in the last bit.
 */
export function axisVector(i: number, a: number, j: number, b: number): number[] {
  const v = new Array<number>(1024).fill(0);
  v[i] = a;
  v[j] = (v[j] ?? 0) + b;
  return v;
}

/**
 * Four rows `near-0` … `near-3` on axes 900–903, strictly closer to e_0 than the copies the duplicate
 * tests place at axisVector(0, 0.9, 1000, 0.43), in that order.
 */
export function nearRows(metadata: ChunkMetadata) {
  return Array.from({ length: 4 }, (_, i) => ({
    chunk_id: `near-${i}`,
    content: `near ${i}`,
    embedding: axisVector(0, 1, 900 + i, 0.1 * (i + 1)),
    metadata,
  }));
}

/**
 * A project-first database of the engine under test: bootstrap (roles, vector, owner) and this
 * project's migrations. On PostgreSQL the migrations run logged in as knowledge_owner and the
 * `retrieval`/`ingestion` pools log in as their roles; on PGlite every pool shares the one session.
 */
export async function startTestDatabase(): Promise<TestDatabase> {
  const db = await startEmptyTestDatabase();
  const pool = createPool({ connectionString: db.url, max: db.poolSize });
  const rolePool = (role: DbRole) =>
    db.engine === 'pglite' ? pool : createPool({ connectionString: db.urlAs(role), max: 4 });
  const own = new Set<pg.Pool>();
  const login = (role: DbRole) => {
    const p = rolePool(role);
    if (p !== pool) own.add(p);
    return p;
  };
  try {
    await bootstrapDatabase(pool);
    const owner = login(OWNER_ROLE);
    // Small graph parameters keep inserts fast in tests (docs/upstream.md#deps-pglite); the ledger's
    // grants are given so ledger-mode servers can run on any test database.
    await migrate(owner, { hnsw: { m: 8, efConstruction: 32 }, capability: 'ledger' });
  } catch (err) {
    for (const p of own) await p.end().catch(() => {});
    await pool.end().catch(() => {});
    await db.close();
    throw err;
  }
  return {
    db,
    pool,
    retrieval: asRole(login(RETRIEVAL_ROLE), RETRIEVAL_ROLE),
    ingestion: asRole(login(INGESTION_ROLE), INGESTION_ROLE),
    async close() {
      for (const p of own) await p.end().catch(() => {});
      await pool.end().catch(() => {});
      await db.close();
    },
  };
}

/**
 * Makes every connection of `pools` publish its pending statistics (pg_stat_* views), so that a test
 * counting index or table reads sees what the searches it ran did. PostgreSQL keeps each backend's
 * counts local until the backend reports them (at most once a second, or when idle), and the
 * searches run on the serving role's own connections; PGlite's one session reports on the next
 * statement. Each pool's connections are all checked out at once, so every one of them is reached.
 */
export async function flushStatistics(...pools: pg.Pool[]): Promise<void> {
  for (const pool of pools) {
    const clients = await Promise.all(Array.from({ length: Math.max(1, pool.totalCount) }, () => pool.connect()));
    try {
      for (const c of clients) await c.query('SELECT pg_catalog.pg_stat_force_next_flush()');
    } finally {
      for (const c of clients) c.release();
    }
  }
}

/**
 * What a test's retrieval server connects with: the serving role's own login on PostgreSQL (its
 * startup options then make it read-only, as in production); the one session on PGlite.
 */
export function servingUrl(t: TestDatabase): string {
  return t.db.urlAs(RETRIEVAL_ROLE);
}

/** Writes records as the ingestion role under the lease (what `ingest` does), claiming the profile. */
export function seedTestCorpus(
  t: TestDatabase,
  records: readonly IngestRecord[],
  embedder?: Embedder,
): Promise<IngestStats> {
  return seedCorpus(t.db.urlAs(INGESTION_ROLE), records, embedder);
}

/** Deterministic PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A random unit vector, rounded to float32 like pgvector stores it. */
export function randomVector(rand: () => number, dims = 1024): number[] {
  const v = Array.from({ length: dims }, () => rand() * 2 - 1);
  const n = Math.hypot(...v);
  return Array.from(new Float32Array(v.map((x) => x / n)));
}

export function cosineDistance(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  return 1 - dot / Math.sqrt(na * nb);
}

const HEX = 'a'.repeat(64);

export interface MatrixFixture {
  caller: MatrixPrincipal;
  audience: readonly MatrixPrincipal[];
  classifications?: AllowedClassifications;
  iat?: number;
  exp?: number;
  agent?: { namespace: string; name: string };
  roomId?: string;
}

export function matrixHeader(opts: MatrixFixture): string {
  const enc = encodeProjection(matrixObject(opts));
  if (!enc.ok) throw new Error(`fixture projection invalid: ${enc.reason} ${enc.path ?? ''}`);
  return enc.value;
}

export function matrixObject(opts: MatrixFixture): Projection {
  const audience = [...opts.audience].sort(comparePrincipals);
  const iat = opts.iat ?? NOW - 60;
  const p = {
    agent: opts.agent ?? AGENT,
    allowed_classifications: opts.classifications ?? ['public'],
    audience,
    delegation_id: HEX,
    exp: opts.exp ?? iat + 600,
    groups: [],
    iat,
    kind: opts.caller.kind,
    ...(opts.caller.kind === 'bridged_matrix' ? { network: opts.caller.network } : {}),
    principal: opts.caller.principal,
    room: {
      event_id: '$event',
      history_visibility: 'joined',
      id: opts.roomId ?? '!room:org-a.example',
      join_rule: 'invite',
      state_sha256: 'b'.repeat(64),
    },
    v: 1,
  } as unknown as Projection;
  return p;
}

export function oauthHeader(opts: {
  policy: string;
  groups: readonly string[];
  classifications?: AllowedClassifications;
  iat?: number;
  exp?: number;
  agent?: { namespace: string; name: string };
}): string {
  const iat = opts.iat ?? NOW - 60;
  const p = {
    agent: opts.agent ?? AGENT,
    allowed_classifications: opts.classifications ?? ['public'],
    client: {
      audience: 'fgentic-a2a',
      azp: `${opts.policy}-a2a`,
      issuer: 'https://issuer.example',
      policy_id: opts.policy,
    },
    delegation_id: HEX,
    exp: opts.exp ?? iat + 600,
    groups: [...opts.groups].sort(),
    iat,
    kind: 'oidc_client',
    v: 1,
  } as unknown as Projection;
  const enc = encodeProjection(p);
  if (!enc.ok) throw new Error(`fixture projection invalid: ${enc.reason} ${enc.path ?? ''}`);
  return enc.value;
}

export function decodeFixture(header: string, now = NOW): Projection {
  const v = decodeProjection(header, { now, agents: [AGENT] });
  if (!v.ok) throw new Error(`fixture decode failed: ${v.reason}`);
  return v.value;
}

export function meta(opts: {
  source?: string;
  classification?: ChunkMetadata['classification'];
  principals?: readonly MatrixPrincipal[];
  groups?: readonly string[];
}): ChunkMetadata {
  return {
    source: { id: opts.source ?? 'docs/a.md', title: 'A' },
    classification: opts.classification ?? 'public',
    allowed_principals: [...(opts.principals ?? [])],
    allowed_groups: [...(opts.groups ?? [])],
  };
}

export const P = {
  alice: { kind: 'matrix', principal: '@alice:org-a.example' },
  bob: { kind: 'matrix', principal: '@bob:org-a.example' },
  carol: { kind: 'matrix', principal: '@carol:org-b.example' },
  slackBob: { kind: 'bridged_matrix', network: 'slack', principal: '@slack-bob:org-a.example' },
  ircBob: { kind: 'bridged_matrix', network: 'irc', principal: '@slack-bob:org-a.example' },
  slackAlice: { kind: 'bridged_matrix', network: 'slack', principal: '@alice:org-a.example' },
} as const satisfies Record<string, MatrixPrincipal>;
