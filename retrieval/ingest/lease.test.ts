/**
 * The single-writer ingestion lease and the ingestion role: a held lease blocks a second writer, an
 * expired one is taken over, a writer whose lease was taken over cannot write, and the ingestion role
 * cannot do what is not its job.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { meta, P, prng, randomVector, startTestDatabase, type TestDatabase } from '../../testkit/retrieval.ts';
import { INGESTION_ROLE } from '../db/roles.ts';
import { acquireLease, LEASE_NAME, LeaseBusyError, LeaseLostError, withIngestionLease } from './lease.ts';
import { writeChunks } from './store.ts';

let t: TestDatabase;
before(async () => {
  t = await startTestDatabase();
});
after(async () => {
  await t?.close();
});

const chunk = (id: string) => ({
  chunk_id: id,
  content: `content ${id}`,
  metadata: meta({ principals: [P.alice] }),
  embedding: randomVector(prng(id.length)),
});

const leaseRows = async () =>
  (await t.pool.query('SELECT holder::text AS holder FROM knowledge.ingestion_leases')).rows.map(
    (r) => r.holder as string,
  );

describe('ingestion lease', () => {
  test('a held lease makes a second writer fail before it writes anything', async () => {
    const first = await acquireLease(t.ingestion, 60);
    try {
      await assert.rejects(
        withIngestionLease(t.pool, (w) => writeChunks(w, { chunks: [chunk('blocked')] })),
        LeaseBusyError,
      );
      const n = await t.pool.query("SELECT count(*)::int AS n FROM knowledge.chunks WHERE chunk_id = 'blocked'");
      assert.equal(n.rows[0]?.n, 0);
    } finally {
      await first.release();
    }
    assert.deepEqual(await leaseRows(), []);
  });

  test('an expired lease is taken over', async () => {
    const stale = await acquireLease(t.ingestion, 60);
    await t.pool.query("UPDATE knowledge.ingestion_leases SET expires_at = now() - interval '1 second'");
    const stats = await withIngestionLease(t.pool, (w) => writeChunks(w, { chunks: [chunk('taken-over')] }));
    assert.equal(stats.upserted, 1);
    // The stale holder's release does not remove someone else's lease.
    const next = await acquireLease(t.ingestion, 60);
    await stale.release();
    assert.deepEqual(await leaseRows(), [next.holder]);
    await next.release();
  });

  test('a writer whose lease was taken over cannot write (checked inside each write transaction)', async () => {
    await assert.rejects(
      withIngestionLease(t.pool, async (w) => {
        // Another writer reclaims the row after ours "expired".
        await t.pool.query(
          "UPDATE knowledge.ingestion_leases SET holder = gen_random_uuid(), expires_at = now() + interval '1 hour' WHERE name = $1",
          [LEASE_NAME],
        );
        return writeChunks(w, { chunks: [chunk('lost')] });
      }),
      LeaseLostError,
    );
    const n = await t.pool.query("SELECT count(*)::int AS n FROM knowledge.chunks WHERE chunk_id = 'lost'");
    assert.equal(n.rows[0]?.n, 0);
    await t.pool.query('DELETE FROM knowledge.ingestion_leases');
  });
});

describe('the ingestion role does only its job', () => {
  test('it writes chunks but cannot change the schema, the grants, or the migrations record', async () => {
    assert.equal((await t.ingestion.query('SELECT current_user AS u')).rows[0]?.u, INGESTION_ROLE);
    const denied = (err: unknown) => (err as { code?: string }).code === '42501';
    await assert.rejects(t.ingestion.query('DROP TABLE knowledge.chunks'), denied);
    // Without the grant option PostgreSQL only warns ("no privileges were granted"); nothing changes.
    await t.ingestion.query('GRANT SELECT ON knowledge.chunks TO fgentic_retrieval');
    const granted = await t.pool.query(
      "SELECT has_table_privilege('fgentic_retrieval', 'knowledge.chunks', 'SELECT') AS g",
    );
    assert.equal(granted.rows[0]?.g, false);
    await assert.rejects(t.ingestion.query('DELETE FROM fgentic.migrations'), denied);
    await assert.rejects(t.ingestion.query('DELETE FROM fgentic.embedding_profile'), denied);
  });
});
