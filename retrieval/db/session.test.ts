/**
 * One statement per search on a connection that starts as the retrieval role with read-only
 * transactions (PoolOptions.session), the usual wrapping on any other. On PostgreSQL each state is a
 * real connection: the role's own login with the startup options the server's pool sends. PGlite
 * drops startup options, so there the states are made with session-level settings on the one
 * session every connection shares (a database of this file's own).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import {
  decodeFixture,
  ENGINE,
  interceptingPool,
  matrixHeader,
  meta,
  onlyOn,
  P,
  prng,
  randomVector,
  startTestDatabase,
  type TestDatabase,
  wrappedQueryPool,
} from '../../testkit/retrieval.ts';
import { writeChunks } from '../ingest/store.ts';
import { runUnderCheck } from '../ledger.ts';
import { DEFAULT_PLANNER, searchStatement } from '../planner.ts';
import { searchArguments } from '../predicate.ts';
import { searchKnowledge } from '../search.ts';
import { createPool, sessionOptions, toVectorBinary } from './pool.ts';
import { asRole, INGESTION_ROLE, RETRIEVAL_ROLE, sessionState } from './roles.ts';

const PgPool = pg.Pool;
let t: TestDatabase;
const rand = prng(2_017);
const projection = decodeFixture(matrixHeader({ caller: P.alice, audience: [P.alice] }));

before(async () => {
  t = await startTestDatabase();
  await writeChunks(t.pool, {
    chunks: Array.from({ length: 30 }, (_, i) => ({
      chunk_id: `s-${i}`,
      content: `row ${i}`,
      embedding: randomVector(rand),
      metadata: meta({ principals: [P.alice] }),
    })),
  });
});
after(async () => {
  await t?.close();
});

/** The pool, recording the start of every statement its clients send. */
const recording = (pool: pg.Pool, into: string[]): pg.Pool =>
  interceptingPool(pool, (text) => {
    into.push(text.replace(/\s+/g, ' ').trim().slice(0, 48));
    return undefined;
  });

/** A pool whose connections start in one state, and the prepared searches its session holds. */
interface StartedAs {
  readonly pool: pg.Pool;
  preparedSearches(): Promise<number>;
  close(): Promise<void>;
}

/**
 * Connections that start as `role` (null: the superuser) with or without read-only transactions:
 * on PostgreSQL one connection of that login with the server's startup options (one, so that the
 * prepared statements counted are the search's own session's); on PGlite the one session, set so.
 */
async function startAs(role: string | null, readOnly: boolean): Promise<StartedAs> {
  const count = async (pool: pg.Pool) =>
    (await pool.query("SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'fgentic\\_%'")).rows[0]
      ?.n as number;
  if (ENGINE === 'postgres') {
    const options = [
      ...(role === null ? [] : [`-c role=${role}`]),
      ...(readOnly ? ['-c default_transaction_read_only=on'] : []),
    ].join(' ');
    const pool = new PgPool({
      connectionString: role === null ? t.db.url : t.db.urlAs(role),
      max: 1,
      ...(options ? { options } : {}),
    });
    return { pool, preparedSearches: () => count(pool), close: () => pool.end() };
  }
  const reset = async () => {
    await t.pool.query('RESET ROLE');
    await t.pool.query('SET default_transaction_read_only = off');
  };
  await t.pool.query(role === null ? 'RESET ROLE' : `SET ROLE ${role}`);
  await t.pool.query(`SET default_transaction_read_only = ${readOnly ? 'on' : 'off'}`);
  return { pool: t.pool, preparedSearches: () => count(t.pool), close: reset };
}

async function statementsOfOneSearch(pool: pg.Pool): Promise<string[]> {
  const sent: string[] = [];
  // A fresh role-bound view: the first checkout reads the session state; only the search is kept.
  const serving = asRole(recording(pool, sent), RETRIEVAL_ROLE);
  const r = await searchKnowledge(serving, { projection, embedding: randomVector(rand), maxResults: 5 });
  assert.equal(r.hits.length, 5);
  return sent.filter((s) => !s.startsWith('SELECT current_user'));
}

describe('search statements per connection state', () => {
  test('startup options: the role and read-only transactions, role names checked', () => {
    assert.equal(
      sessionOptions({ role: RETRIEVAL_ROLE, readOnly: true }),
      '-c role=fgentic_retrieval -c default_transaction_read_only=on',
    );
    assert.throws(() => sessionOptions({ role: 'x -c foo=1', readOnly: true }), RangeError);
  });

  test('a connection that started as the retrieval role, read-only: the search is one statement', async () => {
    const c = await startAs(RETRIEVAL_ROLE, true);
    try {
      const before = await c.preparedSearches();
      const sent = await statementsOfOneSearch(c.pool);
      assert.deepEqual(sent, ['SELECT list, ord, plan, chunk_id, content, metad']);
      // Sent as a prepared statement the session keeps: parsed and planned once per connection.
      assert.equal((await c.preparedSearches()) - before, 1);
      // And the server itself keeps such a statement from writing.
      await assert.rejects(c.pool.query('CREATE TEMP TABLE fgentic_probe (a int)'), (err: { code?: string }) =>
        ['25006', '42501'].includes(String(err.code)),
      );
    } finally {
      await c.close();
    }
  });

  test('a prepared search the session does not hold, or holds already, is sent again unnamed', async () => {
    const c = await startAs(RETRIEVAL_ROLE, true);
    // Two connections: on PGlite they share the one session, which is what makes 42P05 happen.
    const pair =
      ENGINE === 'postgres'
        ? new PgPool({
            connectionString: t.db.urlAs(RETRIEVAL_ROLE),
            max: 2,
            options: sessionOptions({ role: RETRIEVAL_ROLE, readOnly: true }),
          })
        : c.pool;
    const serving = asRole(pair, RETRIEVAL_ROLE);
    const a = await serving.connect();
    const b = await serving.connect();
    try {
      await a.query('DEALLOCATE ALL');
      const st = searchStatement(
        searchArguments(projection),
        toVectorBinary(randomVector(rand)),
        5,
        null,
        DEFAULT_PLANNER,
      );
      const prepared = async () =>
        (await a.query("SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'fgentic\\_%'")).rows[0]
          ?.n as number;
      const first = await runUnderCheck(a, st, undefined, true);
      assert.equal(first.length, 5);
      assert.equal(await prepared(), 1);
      // PGlite: 42P05, the one session already holds it, prepared through connection a. PostgreSQL:
      // b's own session prepares it.
      assert.deepEqual(await runUnderCheck(b, st, undefined, true), first);
      // 26000: what a pooler in transaction mode does to a prepared statement (another session answers).
      await a.query('DEALLOCATE ALL');
      assert.deepEqual(await runUnderCheck(a, st, undefined, true), first);
      // Anything else still fails the search.
      await assert.rejects(
        runUnderCheck(a, { text: `${st.text} LIMIT 'x'`, values: st.values }, undefined, true),
        (err: { code?: string }) => err.code === '22P02',
      );
    } finally {
      a.release(true);
      b.release();
      if (pair !== c.pool) await pair.end();
      if (ENGINE === 'pglite') await t.pool.query('DEALLOCATE ALL');
      await c.close();
    }
  });

  test('the retrieval role without read-only transactions: BEGIN READ ONLY around the search', async () => {
    const c = await startAs(RETRIEVAL_ROLE, false);
    try {
      const before = await c.preparedSearches();
      assert.deepEqual(await statementsOfOneSearch(c.pool), [
        'BEGIN READ ONLY',
        'SELECT list, ord, plan, chunk_id, content, metad',
        'COMMIT',
      ]);
      // Prepared only on the one-statement path.
      assert.equal(await c.preparedSearches(), before);
    } finally {
      await c.close();
    }
  });

  test('read-only but another role: the role is still switched, inside a transaction', async () => {
    const c = await startAs(null, true);
    try {
      // The role switch travels with BEGIN, in one message.
      assert.deepEqual(await statementsOfOneSearch(c.pool), [
        "BEGIN; SELECT set_config('role', 'fgentic_retrie",
        'SELECT list, ord, plan, chunk_id, content, metad',
        'COMMIT',
      ]);
    } finally {
      await c.close();
    }
  });

  test('the embedded superuser session: BEGIN READ ONLY with the role switch in one message, the statement, COMMIT', async () => {
    assert.deepEqual(await statementsOfOneSearch(t.pool), [
      "BEGIN READ ONLY; SELECT set_config('role', 'fgen",
      'SELECT list, ord, plan, chunk_id, content, metad',
      'COMMIT',
    ]);
  });

  test('a guarded role-bound pool always wraps, the guard after the role switch, whatever the session runs as', async () => {
    const c = await startAs(INGESTION_ROLE, false);
    try {
      const sent: string[] = [];
      let guarded = 0;
      const pool = asRole(recording(c.pool, sent), INGESTION_ROLE, async () => {
        guarded += 1;
      });
      const client = await pool.connect();
      try {
        assert.deepEqual(sessionState(client), { role: INGESTION_ROLE, readOnly: false });
        await client.query('SELECT 1');
      } finally {
        client.release();
      }
      assert.equal(guarded, 1);
      assert.deepEqual(
        sent.filter((s) => !s.startsWith('SELECT current_user')),
        ['BEGIN', "SELECT set_config('role', $1, true)", 'SELECT 1', 'COMMIT'],
      );
    } finally {
      await c.close();
    }
  });
  test('the caller has the rows before the COMMIT of its read-only transaction; the connection returns after it', async () => {
    // COMMIT held until `open` is called, then answered by the server or refused as a dropped
    // connection would be.
    const held = (outcome: 'commit' | 'fail') => {
      let open = () => {};
      const gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      let commits = 0;
      const pool = wrappedQueryPool(t.pool, (query) => async (text, values) => {
        if (text !== 'COMMIT') return query(text, values);
        commits += 1;
        await gate;
        if (outcome === 'fail') throw Object.assign(new Error('connection lost'), { code: '08006' });
        return query(text);
      });
      return { pool, open: () => open(), commits: () => commits };
    };
    const checkedOut = () => t.pool.totalCount - t.pool.idleCount;
    for (const outcome of ['commit', 'fail'] as const) {
      const h = held(outcome);
      const before = t.pool.totalCount;
      try {
        let timer: NodeJS.Timeout | undefined;
        const r = await Promise.race([
          searchKnowledge(asRole(h.pool, RETRIEVAL_ROLE), {
            projection,
            embedding: randomVector(rand),
            maxResults: 5,
          }),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error('the search waited for its COMMIT')), 3_000);
          }),
        ]).finally(() => clearTimeout(timer));
        assert.equal(r.hits.length, 5, outcome);
        assert.equal(h.commits(), 1, 'the COMMIT was sent');
        // Still checked out: nobody else may use the connection inside the open transaction.
        assert.equal(checkedOut(), 1, outcome);
      } finally {
        h.open();
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(checkedOut(), 0, `${outcome}: released`);
      if (outcome === 'fail')
        assert.equal(t.pool.totalCount, before - 1, 'a connection whose COMMIT failed is discarded');
    }
    // The embedded session is usable afterwards, outside any transaction.
    const r = await t.pool.query("SELECT current_setting('transaction_read_only') AS ro");
    assert.equal(r.rows[0]?.ro, 'off');
  });

  // Last: the embedded session cannot undo SET SESSION AUTHORIZATION on its own (RESET below does).
  // On PostgreSQL the same state is the ingestion role's own login.
  test('a role switch the session may not make fails the statement and leaves no transaction open', async () => {
    const login = ENGINE === 'postgres' ? new PgPool({ connectionString: t.db.urlAs(INGESTION_ROLE), max: 1 }) : t.pool;
    if (ENGINE === 'pglite') await t.pool.query(`SET SESSION AUTHORIZATION ${INGESTION_ROLE}`);
    try {
      const sent: string[] = [];
      const serving = asRole(recording(login, sent), RETRIEVAL_ROLE);
      await assert.rejects(serving.query('SELECT 1'), (err: { code?: string }) => err.code === '42501');
      assert.equal(sent.at(-1), 'ROLLBACK');
      const r = await login.query('SELECT 1 AS one');
      assert.equal(r.rows[0]?.one, 1);
    } finally {
      if (ENGINE === 'pglite') await t.pool.query('RESET SESSION AUTHORIZATION');
      else await login.end();
    }
  });
});

describe('the serving pool on PostgreSQL', {
  skip: onlyOn('postgres', 'PGlite drops startup options'),
}, () => {
  test('the retrieval login starts as itself, read-only, and a search is one prepared statement', async () => {
    const pool = createPool({
      connectionString: t.db.urlAs(RETRIEVAL_ROLE),
      max: 1,
      session: { role: RETRIEVAL_ROLE, readOnly: true },
    });
    try {
      const r = await pool.query(
        "SELECT current_user AS u, session_user AS s, current_setting('default_transaction_read_only') AS ro",
      );
      assert.deepEqual(r.rows[0], { u: RETRIEVAL_ROLE, s: RETRIEVAL_ROLE, ro: 'on' });
      assert.deepEqual(await statementsOfOneSearch(pool), ['SELECT list, ord, plan, chunk_id, content, metad']);
    } finally {
      await pool.end();
    }
  });

  test('startup options cannot take a role the login is not a member of', async () => {
    const pool = createPool({
      connectionString: t.db.urlAs(RETRIEVAL_ROLE),
      max: 1,
      session: { role: INGESTION_ROLE, readOnly: true },
    });
    try {
      await assert.rejects(pool.query('SELECT 1'), (err: { code?: string }) => err.code === '42501');
    } finally {
      await pool.end();
    }
  });
});
