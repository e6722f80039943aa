/**
 * `migrate` runs online on the origin's database: while it installs the project on a populated
 * origin table (20,000 rows by default; FGENTIC_ONLINE_ROWS for a larger run), the origin's own
 * searches (knowledge.search_authorized_matrix as knowledge_retrieval) and writes (upserts as
 * knowledge_ingestion) go on in a loop, each on its own login. A sampler watches their backends in
 * pg_stat_activity every 20 ms: the longest time either spent waiting for a lock is the stall
 * `migrate` caused, and it must stay under a second (the slowest operation of each loop is printed
 * too: on a busy machine it also counts CPU shared with `migrate`'s graph build). PostgreSQL only:
 * PGlite runs one statement at a time, so nothing there can run beside `migrate`.
 *
 * The fixture builds the origin's rows server-side and leaves out the origin's HNSW index (its
 * searches rank exactly and never use it); neither changes what `migrate` locks.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { applyOriginSchema, ORIGIN_SKIP } from '../../testkit/origin-fixture.ts';
import { type EmptyTestDatabase, onlyOn, startEmptyTestDatabase } from '../../testkit/retrieval.ts';
import { migrate } from './migrate.ts';
import { createPool } from './pool.ts';
import { INGESTION_ROLE, ORIGIN_READER_ROLE, OWNER_ROLE } from './roles.ts';

const ROWS = Number(process.env['FGENTIC_ONLINE_ROWS'] ?? 20_000);
const skip = onlyOn('postgres', 'PGlite runs one statement at a time') || ORIGIN_SKIP;
let db: EmptyTestDatabase;
let admin: pg.Pool;

before(async () => {
  if (skip) return;
  db = await startEmptyTestDatabase();
  admin = createPool({ connectionString: db.url, max: 2 });
  await applyOriginSchema(admin, [1, 2, 3], db.urlAs(OWNER_ROLE));
  await admin.query('DROP INDEX knowledge.chunks_embedding_hnsw_idx');
  // Rows as the origin's ingestion writes them; 1 in 50 readable by alice, the rest by others.
  await admin.query("SELECT set_config('statement_timeout', '0', false)");
  await admin.query(
    `INSERT INTO knowledge.chunks (chunk_id, content, embedding, metadata)
     SELECT 'row-' || i, 'origin content ' || i,
       (SELECT array_agg(random() - 0.5)::real[] FROM generate_series(1, 1024) WHERE i > 0)::public.vector,
       jsonb_build_object('source', jsonb_build_object('id', 'docs/' || (i % 500) || '.md'),
         'classification', 'public',
         'allowed_principals', jsonb_build_array(jsonb_build_object('kind', 'matrix',
           'principal', CASE WHEN i % 50 = 0 THEN '@alice:org-a.example' ELSE '@user' || (i % 97) || ':org-a.example' END)),
         'allowed_groups', '[]'::jsonb)
     FROM generate_series(1, $1) AS i`,
    [ROWS],
  );
  await admin.query('ANALYZE knowledge.chunks');
});
after(async () => {
  await admin?.end().catch(() => {});
  await db?.close();
});

interface Loop {
  readonly pid: Promise<number>;
  readonly done: Promise<void>;
  readonly longest: () => number;
  readonly count: () => number;
  stop(): void;
}

/** Runs `op` back to back on its own connection until stopped; records the longest run. */
function loop(url: string, op: (c: pg.Client, i: number) => Promise<unknown>): Loop {
  let running = true;
  let longest = 0;
  let n = 0;
  let pid: (n: number) => void = () => {};
  const pidKnown = new Promise<number>((resolve) => {
    pid = resolve;
  });
  const done = (async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    pid(Number((await c.query('SELECT pg_backend_pid() AS p')).rows[0]?.p));
    try {
      while (running) {
        const t0 = performance.now();
        await op(c, n);
        longest = Math.max(longest, performance.now() - t0);
        n += 1;
      }
    } finally {
      await c.end();
    }
  })();
  return { pid: pidKnown, done, longest: () => longest, count: () => n, stop: () => (running = false) };
}

test(`migrate on a ${ROWS.toLocaleString('en')}-row origin table: the origin's searches and writes never wait`, {
  skip,
  timeout: 30 * 60_000,
}, async () => {
  const query = `(SELECT array_agg(random() - 0.5)::real[] FROM generate_series(1, 1024))::public.vector`;
  const searches = loop(db.urlAs(ORIGIN_READER_ROLE), (c) =>
    c.query(
      `SELECT count(*) FROM knowledge.search_authorized_matrix(${query}, ARRAY['public'],
         '[{"kind":"matrix","principal":"@alice:org-a.example"}]', 10)`,
    ),
  );
  const writes = loop(db.urlAs(INGESTION_ROLE), (c, i) =>
    c.query(
      `INSERT INTO knowledge.chunks (chunk_id, content, embedding, metadata)
       VALUES ('live-' || ($1::int % 200), 'written during migrate ' || $1::int, ${query},
         '{"source":{"id":"docs/live.md"},"classification":"public","allowed_principals":[{"kind":"matrix","principal":"@alice:org-a.example"}],"allowed_groups":[]}')
       ON CONFLICT (chunk_id) DO UPDATE SET content = EXCLUDED.content, embedding = EXCLUDED.embedding`,
      [i],
    ),
  );
  // Both loops running before migrate starts, and their quiet-time latency for the record.
  while (searches.count() < 3 || writes.count() < 3) await new Promise((r) => setTimeout(r, 20));
  const quiet = { search: searches.longest(), write: writes.longest() };
  // The sampler: per backend, how long it has been waiting for a lock without a break.
  const pids = await Promise.all([searches.pid, writes.pid]);
  let sampling = true;
  let longestLockWait = 0;
  const sampler = (async () => {
    const since = new Map<number, number>();
    while (sampling) {
      const r = await admin.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE pid = ANY ($1) AND wait_event_type = 'Lock'",
        [pids],
      );
      const now = performance.now();
      const waiting = new Set(r.rows.map((x) => x.pid));
      for (const p of pids) {
        if (!waiting.has(p)) since.delete(p);
        else if (!since.has(p)) since.set(p, now);
        else longestLockWait = Math.max(longestLockWait, now - (since.get(p) as number));
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  const owner = createPool({ connectionString: db.urlAs(OWNER_ROLE), max: 1, statementTimeoutMs: 0 });
  const t0 = performance.now();
  let result: Awaited<ReturnType<typeof migrate>>;
  try {
    result = await migrate(owner);
  } finally {
    await owner.end();
    searches.stop();
    writes.stop();
    sampling = false;
    await Promise.all([searches.done, writes.done, sampler]);
  }
  const seconds = (performance.now() - t0) / 1000;
  console.log(
    `# online migrate, ${ROWS} rows: ${seconds.toFixed(1)} s; longest lock wait of an origin search or write ${Math.round(longestLockWait)} ms; longest origin search ${Math.round(searches.longest())} ms (${searches.count()} run, ${Math.round(quiet.search)} ms before), longest origin write ${Math.round(writes.longest())} ms (${writes.count()} run, ${Math.round(quiet.write)} ms before)`,
  );
  assert.ok(result.synced >= ROWS, `the derived rows were written (${result.synced})`);
  assert.equal(result.vectorIndexBuilt, true);
  assert.ok(searches.count() > 10 && writes.count() > 10, 'the loops ran during migrate');
  assert.ok(longestLockWait < 1_000, `an origin search or write waited ${Math.round(longestLockWait)} ms for a lock`);
});
