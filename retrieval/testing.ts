/**
 * Test fixtures shared by the retrieval test files: an embedded database started once per file,
 * projection builders (always passed through the contract's encode/decode), seeded vectors.
 * Not used by production code paths.
 */
import { readFileSync } from 'node:fs';
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
import { type EmbeddedDatabase, startEmbeddedDatabase } from './db/embedded.ts';
import { migrate } from './db/migrate.ts';
import { createPool } from './db/pool.ts';
import { asRole, bootstrapDatabase, INGESTION_ROLE, RETRIEVAL_ROLE } from './db/roles.ts';

export const AGENT = { namespace: 'kagent', name: 'knowledge-agent' } as const;
export const NOW = 1_784_116_900;

export interface TestDatabase {
  readonly db: EmbeddedDatabase;
  /** The embedded superuser session: fixtures only. */
  readonly pool: pg.Pool;
  /** The same database as knowledge_retrieval, as the server uses it. */
  readonly retrieval: pg.Pool;
  /** The same database as knowledge_ingestion. */
  readonly ingestion: pg.Pool;
  close(): Promise<void>;
}

/**
 * The `CREATE OR REPLACE FUNCTION <schema.name>(` statement of a migration file, as that migration
 * defined it (callers rename it to install it beside the current definition).
 */
export function migrationFunction(file: string, qualifiedName: string): string {
  const sql = readFileSync(new URL(`./db/migrations/${file}`, import.meta.url), 'utf8');
  const start = sql.indexOf(`CREATE OR REPLACE FUNCTION ${qualifiedName}(`);
  if (start < 0) throw new Error(`${file} defines no ${qualifiedName}`);
  const end = sql.indexOf('$$;', sql.indexOf('$$', start) + 2);
  return sql.slice(start, end + 3);
}

/**
 * Installs earlier migrations' definitions of `functions` ([migration file, qualified name]) under
 * the schema `fgentic_old`, for tests that compare them with the current ones. `calls`: 'old' renames
 * every reference to the function's schema, so old definitions call each other; 'current' renames
 * the declaration only, so they call the current definitions of anything else.
 */
export async function installOldFunctions(
  pool: pg.Pool,
  functions: readonly (readonly [file: string, qualifiedName: string])[],
  calls: 'old' | 'current',
): Promise<void> {
  await pool.query('CREATE SCHEMA IF NOT EXISTS fgentic_old');
  for (const [file, qualifiedName] of functions) {
    const sql = migrationFunction(file, qualifiedName);
    const schema = qualifiedName.slice(0, qualifiedName.indexOf('.') + 1);
    const name = qualifiedName.slice(schema.length);
    await pool.query(
      calls === 'old'
        ? sql.replaceAll(schema, 'fgentic_old.')
        : sql.replace(`FUNCTION ${qualifiedName}(`, `FUNCTION fgentic_old.${name}(`),
    );
  }
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
          name === undefined
            ? client.query(text, values)
            : client.query({ name, text, values: values ?? [] }),
        );
        const entry = (
          arg: string | { name: string; text: string; values?: unknown[] },
          values?: unknown[],
        ) => (typeof arg === 'string' ? query(arg, values) : query(arg.text, arg.values, arg.name));
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
 * A 1024-d vector a·e_i + b·e_j: rows built this way on different axes j have bit-identical distances
 * to e_0 (the same two non-zero terms), which is how the tie tests make exact ties.
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

/** A project-first database: bootstrap (roles, vector, owner) and this project's migrations. */
export async function startTestDatabase(): Promise<TestDatabase> {
  const db = await startEmbeddedDatabase();
  const pool = createPool({ connectionString: db.url, max: db.poolSize });
  await bootstrapDatabase(pool);
  await migrate(pool);
  // Small graph parameters keep inserts fast in tests (docs/upstream.md#deps-pglite).
  await pool.query('DROP INDEX knowledge.chunks_embedding_hnsw_idx');
  await pool.query(
    'CREATE INDEX chunks_embedding_hnsw_idx ON knowledge.chunks USING hnsw (embedding vector_cosine_ops) WITH (m = 8, ef_construction = 32)',
  );
  return {
    db,
    pool,
    retrieval: asRole(pool, RETRIEVAL_ROLE),
    ingestion: asRole(pool, INGESTION_ROLE),
    async close() {
      await pool.end().catch(() => {});
      await db.close();
    },
  };
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
