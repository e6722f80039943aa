/**
 * One transaction around `fn`: BEGIN (with the isolation level and access mode asked for), COMMIT
 * when `fn` resolves, ROLLBACK when it throws, and the error rethrown. A failed ROLLBACK is ignored:
 * the error that matters is `fn`'s, and the caller decides whether the connection is reused.
 */

/** What the helper needs of a connection: `pg.PoolClient`, `pg.Client` and PGlite all provide it. */
export interface TransactionClient {
  query(text: string): Promise<unknown>;
}

export type IsolationLevel = 'read committed' | 'repeatable read' | 'serializable';

export interface TransactionOptions {
  readonly isolation?: IsolationLevel;
  readonly readOnly?: boolean;
}

const ISOLATION: Record<IsolationLevel, string> = {
  'read committed': 'ISOLATION LEVEL READ COMMITTED',
  'repeatable read': 'ISOLATION LEVEL REPEATABLE READ',
  serializable: 'ISOLATION LEVEL SERIALIZABLE',
};

/** The BEGIN statement for `o` (a fixed text: nothing of the caller's is spliced in). */
export function beginStatement(o: TransactionOptions = {}): string {
  const modes = [...(o.isolation !== undefined ? [ISOLATION[o.isolation]] : []), ...(o.readOnly ? ['READ ONLY'] : [])];
  return modes.length === 0 ? 'BEGIN' : `BEGIN ${modes.join(', ')}`;
}

export async function withTransaction<C extends TransactionClient, T>(
  client: C,
  fn: (client: C) => Promise<T>,
  o: TransactionOptions = {},
): Promise<T> {
  await client.query(beginStatement(o));
  let result: T;
  try {
    result = await fn(client);
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
  await client.query('COMMIT');
  return result;
}

/** A connection `onConnection` can give back: `pg.PoolClient` is one. */
export interface PooledClient extends TransactionClient {
  release(destroy?: boolean): void;
}

/**
 * Runs `work` on one connection from `connect` (e.g. `() => pool.connect()`) that may open and end
 * transactions of its own. When `work` throws, whatever transaction it left open is rolled back (a
 * failed ROLLBACK is ignored) and the connection is discarded rather than returned to the pool in an
 * unknown state.
 */
export async function onConnection<C extends PooledClient, T>(
  connect: () => Promise<C>,
  work: (client: C) => Promise<T>,
): Promise<T> {
  const client = await connect();
  let failed = false;
  try {
    return await work(client);
  } catch (err) {
    failed = true;
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release(failed ? true : undefined);
  }
}
