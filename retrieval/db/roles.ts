/**
 * Database roles and how a pool acts as one of them.
 *
 * The origin's knowledge database has one login role per job (docs/upstream.md#origin-knowledge-store-placement):
 * `knowledge_owner` runs migrations, `knowledge_ingestion` writes chunks, `knowledge_retrieval` reads
 * them for the origin's own search functions. This project adds two roles of its own:
 * `fgentic_retrieval`, which the retrieval server serves as (EXECUTE on the project's search
 * functions, nothing on any table), and `knowledge_projector`, the projector's role in
 * capability-ledger mode (record and purge ledger entries only, docs/ledger.md). The origin's
 * `knowledge_retrieval` keeps exactly the grants the origin gives it. In production each process
 * logs in as its own role. `asRole` additionally makes every
 * transaction of a pool run under `SET LOCAL ROLE <role>`: a no-op when the login role is that role,
 * a drop of privileges when it is a member with more rights, and the only way to separate roles on
 * the embedded PGlite, which serves every socket connection from one shared session (a session-level
 * `SET ROLE` there would leak to all connections; pglite-socket holds the other connections while one
 * is inside a transaction, so a transaction-local role does not).
 */
import type pg from 'pg';

export const OWNER_ROLE = 'knowledge_owner';
/** The role the retrieval server serves as: the project's own. */
export const RETRIEVAL_ROLE = 'fgentic_retrieval';
export const INGESTION_ROLE = 'knowledge_ingestion';
/** The projector's role in ledger mode: records and purges capability-ledger entries only. */
export const PROJECTOR_ROLE = 'knowledge_projector';
/** The origin's own reader, which the origin's search functions run as; never used by this project. */
export const ORIGIN_READER_ROLE = 'knowledge_retrieval';
export type DbRole = typeof OWNER_ROLE | typeof RETRIEVAL_ROLE | typeof INGESTION_ROLE | typeof PROJECTOR_ROLE;
export const ROLES: readonly DbRole[] = [OWNER_ROLE, RETRIEVAL_ROLE, INGESTION_ROLE, PROJECTOR_ROLE];

/** Runs after the role is set, inside every transaction (e.g. the ingestion lease check). */
export type TransactionGuard = (client: pg.PoolClient) => Promise<void>;

const BEGIN = /^\s*(BEGIN|START\s+TRANSACTION)\b/i;
// `ROLLBACK TO [SAVEPOINT] x` stays inside the transaction: it must not count as its end, or every
// later statement would be wrapped (and committed) on its own.
const END = /^\s*(COMMIT|ROLLBACK(?!\s+TO\b)|END|ABORT)\b/i;
const SET_ROLE = "SELECT set_config('role', $1, true)";

/** How `asRole` treats its connections. */
export interface RoleOptions {
  /**
   * The pool reaches the database through a pooler in transaction mode (retrieval/db/pool.ts,
   * PoolOptions.pooler): consecutive transactions of one client may run in different server
   * sessions, so nothing is read or kept per session. Every statement runs in an explicit
   * transaction that sets the role and this statement timeout (ms) locally, in the message that
   * opens it, and no statement is prepared under a name.
   */
  readonly transactionPooler?: {
    readonly statementTimeoutMs: number;
    /** Every transaction read-only, as a serving pool's startup options make it on a direct connection. */
    readonly readOnly?: boolean;
  };
}

/** `set_config` calls for the transaction's local settings, in one SELECT list; values checked here. */
function localSettings(role: DbRole, options: RoleOptions | undefined): string {
  if (!/^[a-z_]+$/.test(role)) throw new RangeError('role');
  const pooled = options?.transactionPooler;
  if (pooled === undefined) return `set_config('role', '${role}', true)`;
  const timeout = pooled.statementTimeoutMs;
  if (!Number.isSafeInteger(timeout) || timeout < 0) throw new RangeError('statement timeout');
  return (
    `set_config('role', '${role}', true), set_config('statement_timeout', '${timeout}', true)` +
    (pooled.readOnly ? ", set_config('transaction_read_only', 'on', true)" : '')
  );
}

async function enter(
  client: pg.PoolClient,
  role: DbRole,
  guard?: TransactionGuard,
  options?: RoleOptions,
): Promise<void> {
  if (options?.transactionPooler) await client.query(`SELECT ${localSettings(role, options)}`);
  else await client.query(SET_ROLE, [role]);
  if (guard) await guard(client);
}

/**
 * Opens a transaction with `begin` (a parameterless BEGIN statement) and switches to `role` in it. Without
 * a guard both go in one simple-protocol message: one round trip instead of two, which on the
 * embedded database (where every search is wrapped) is a fifth of a small search. The role is one
 * of this file's constants, checked again here because it is written into the statement.
 */
async function beginAs(
  client: pg.PoolClient,
  begin: string,
  role: DbRole,
  guard?: TransactionGuard,
  options?: RoleOptions,
): Promise<pg.QueryResult> {
  if (guard !== undefined || !/^[a-z_]+$/.test(role)) {
    const r = await client.query(begin);
    await enter(client, role, guard, options);
    return r;
  }
  // Two statements in one message: node-postgres answers with one result per statement.
  const r = (await client.query(`${begin}; SELECT ${localSettings(role, options)}`)) as unknown;
  return (Array.isArray(r) ? r[0] : r) as pg.QueryResult;
}

/** What a connection runs as outside any transaction, read once per connection. */
export interface SessionState {
  /** current_user: the login, or the role the connection started as (PoolOptions.session). */
  readonly role: string;
  /** default_transaction_read_only: every transaction this connection starts is read-only. */
  readonly readOnly: boolean;
}

const sessions = new WeakMap<pg.PoolClient, SessionState>();
const SESSION = Symbol('fgentic session');

/**
 * The session state of a pooled connection, read on its first checkout. Nothing this project runs
 * changes either setting at session level on a pooled connection (roles are switched per transaction,
 * settings with set_config(…, true)), so the first reading holds for the connection's life.
 */
async function sessionOf(client: pg.PoolClient): Promise<SessionState> {
  let s = sessions.get(client);
  if (s === undefined) {
    const r = await client.query(
      "SELECT current_user AS role, current_setting('default_transaction_read_only') = 'on' AS ro",
    );
    const row = r.rows[0] as { role: string; ro: boolean };
    s = { role: row.role, readOnly: row.ro === true };
    sessions.set(client, s);
  }
  return s;
}

/**
 * The session state of a client from `asRole(…).connect()` (undefined for any other client): a
 * caller may rely on `readOnly` to skip its own `BEGIN READ ONLY`, since an autocommit statement on
 * such a connection runs in a read-only transaction of its own.
 */
export function sessionState(client: pg.PoolClient): SessionState | undefined {
  return (client as unknown as { [SESSION]?: SessionState })[SESSION];
}

interface PreparedStatement {
  readonly name: string;
  readonly text: string;
  readonly values?: unknown[];
}

function isPrepared(x: unknown): x is PreparedStatement {
  return (
    typeof x === 'object' &&
    x !== null &&
    typeof (x as PreparedStatement).name === 'string' &&
    typeof (x as PreparedStatement).text === 'string'
  );
}

/**
 * A client whose transactions all run as `role`. A statement issued outside an explicit transaction
 * is wrapped in one, so no statement ever runs with the login (or embedded superuser) privileges;
 * unless the connection itself runs as `role` (it started that way) and no guard is set, where the
 * statement is sent as it is: one round trip instead of four.
 */
function roleClient(
  client: pg.PoolClient,
  role: DbRole,
  session: SessionState,
  guard?: TransactionGuard,
  options?: RoleOptions,
): pg.PoolClient {
  let inTx = false;
  const direct = guard === undefined && session.role === role && options?.transactionPooler === undefined;
  const query = async (arg: unknown, values?: unknown) => {
    // A prepared statement ({ name, text, values }; retrieval/ledger.ts, preparedName) is kept by the
    // session, so it goes out as one only on a connection that runs as the role by itself; anywhere
    // else its text goes unnamed (the embedded database's one session serves every connection, and
    // two connections preparing one name there would collide).
    const prepared = isPrepared(arg) ? arg : undefined;
    const text = prepared ? prepared.text : arg;
    if (typeof text !== 'string') throw new TypeError('role-bound clients take SQL text or a prepared statement');
    const args = prepared ? prepared.values : (values as unknown[] | undefined);
    if (BEGIN.test(text)) {
      inTx = true;
      // A connection that runs as the role needs no switch (and, without a guard, nothing else).
      if (direct) return client.query(text);
      return beginAs(client, text, role, guard, options);
    }
    if (END.test(text)) {
      inTx = false;
      return client.query(text);
    }
    if (direct && prepared) return client.query({ name: prepared.name, text, values: args ?? [] });
    if (inTx || direct) return client.query(text, args);
    try {
      await beginAs(client, 'BEGIN', role, guard, options);
      const r = await client.query(text, args);
      await client.query('COMMIT');
      return r;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  };
  return new Proxy(client, {
    get(target, prop) {
      if (prop === 'query') return query;
      if (prop === SESSION) return session;
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** What a connection through a pooler in transaction mode is taken to be: nothing known, nothing kept. */
const POOLED_SESSION: SessionState = { role: '', readOnly: false };

/** A view of `pool` whose every statement runs inside a transaction as `role`. */
export function asRole(pool: pg.Pool, role: DbRole, guard?: TransactionGuard, options?: RoleOptions): pg.Pool {
  const connect = async () => {
    const client = await pool.connect();
    try {
      const session = options?.transactionPooler ? POOLED_SESSION : await sessionOf(client);
      return roleClient(client, role, session, guard, options);
    } catch (err) {
      client.release(true);
      throw err;
    }
  };
  const query = async (text: unknown, values?: unknown) => {
    const client = await connect();
    let failed = false;
    try {
      return await client.query(text as string, values as unknown[]);
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      client.release(failed ? true : undefined);
    }
  };
  return new Proxy(pool, {
    get(target, prop) {
      if (prop === 'connect') return connect;
      if (prop === 'query') return query;
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** The serving role can reach chunks other than through the search functions, or cannot call them. */
export class ServingPrivilegeError extends Error {
  constructor() {
    super('the serving role must hold EXECUTE on the search functions and nothing on knowledge.chunks; run migrate');
    this.name = 'ServingPrivilegeError';
  }
}

/**
 * Refuse to serve unless the serving role can reach chunks only through the search functions: no
 * privilege on the origin's table or any of its columns (its own or inherited), none on the derived
 * table, and EXECUTE on both functions.
 */
export async function assertServingPrivileges(servingPool: pg.Pool): Promise<void> {
  // By oid from the catalog: the serving role may not even look up names in the origin's schemas.
  const r = await servingPool.query(
    `SELECT coalesce(bool_or(has_table_privilege(c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
                  OR has_any_column_privilege(c.oid, 'SELECT, INSERT, UPDATE, REFERENCES')), true) AS table_access,
            (SELECT count(*) = 2 AND bool_and(has_function_privilege(p.oid, 'EXECUTE'))
               FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
              WHERE n.nspname = 'fgentic' AND p.proname IN ('search_matrix_v1', 'search_groups_v1')) AS functions
       FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE (n.nspname, c.relname) IN (('knowledge', 'chunks'), ('fgentic', 'chunks'))`,
  );
  const row = r.rows[0] as { table_access?: boolean; functions?: boolean } | undefined;
  if (row?.table_access !== false || row?.functions !== true) throw new ServingPrivilegeError();
}

/**
 * Prepare an empty database the way the origin's cluster does before its schema Job runs (roles,
 * the vector extension, the database owned by knowledge_owner). Needs a superuser; used for the
 * embedded database and by `migrate --bootstrap`. Roles are created NOLOGIN here: login roles and
 * their passwords belong to the cluster (CNPG DatabaseRole), not to this project.
 */
export async function bootstrapDatabase(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    for (const role of ROLES) {
      const exists = await client.query('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [role]);
      // Role names are constants of this module, never input.
      if (exists.rowCount === 0) await client.query(`CREATE ROLE ${role} NOLOGIN NOINHERIT`);
    }
    await client.query('CREATE EXTENSION IF NOT EXISTS vector');
    const db = await client.query('SELECT current_database() AS name');
    await client.query(`ALTER DATABASE ${quoteIdent(String(db.rows[0]?.name))} OWNER TO ${OWNER_ROLE}`);
    // A schema a superuser created before the roles existed (an embedded data directory from an
    // earlier version) is handed to the owner, so the owner can migrate it; a no-op otherwise.
    await client.query(`DO $bootstrap$
      DECLARE
        r record;
      BEGIN
        IF to_regnamespace('knowledge') IS NULL THEN
          RETURN;
        END IF;
        ALTER SCHEMA knowledge OWNER TO ${OWNER_ROLE};
        FOR r IN
          SELECT c.oid::regclass AS obj FROM pg_catalog.pg_class c
          WHERE c.relnamespace = 'knowledge'::regnamespace AND c.relkind IN ('r', 'p')
            AND c.relowner <> '${OWNER_ROLE}'::regrole
        LOOP
          EXECUTE format('ALTER TABLE %s OWNER TO ${OWNER_ROLE}', r.obj);
        END LOOP;
        FOR r IN
          SELECT p.oid::regprocedure AS fn FROM pg_catalog.pg_proc p
          WHERE p.pronamespace = 'knowledge'::regnamespace AND p.proowner <> '${OWNER_ROLE}'::regrole
        LOOP
          EXECUTE format('ALTER FUNCTION %s OWNER TO ${OWNER_ROLE}', r.fn);
        END LOOP;
      END
    $bootstrap$`);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

function quoteIdent(s: string): string {
  return `"${s.replaceAll('"', '""')}"`;
}
