/**
 * The embedding profile recorded in knowledge.embedding_profile (docs/decisions.md#d7-origin-schema). Vectors from
 * different profiles are not comparable, so a mismatch means: refuse to serve, /readyz false.
 */
import type pg from 'pg';
import { BGE_M3_PROFILE } from './openai.ts';

export type ProfileState =
  | { readonly ok: true; readonly profile: string }
  | {
      readonly ok: false;
      readonly reason: 'profile_mismatch' | 'profile_unrecorded';
      readonly stored?: string;
    };

/** Through the function of migration 0003, which both the retrieval and the ingestion role may call. */
export async function readProfile(db: pg.Pool | pg.PoolClient): Promise<string | undefined> {
  const r = await db.query('SELECT knowledge.fgentic_embedding_profile_v1() AS profile');
  return (r.rows[0]?.profile as string | null | undefined) ?? undefined;
}

/**
 * Check the database profile against ours. With `claim`, an unrecorded profile is recorded — but
 * only when no chunks exist yet, or when ours is the origin's `bge-m3-1024-v1` (an origin database
 * predates the profile table and holds BGE-M3 vectors). Claiming writes, so it runs as the ingestion
 * role; the serving role only checks.
 */
export async function ensureProfile(pool: pg.Pool, profile: string, claim: boolean): Promise<ProfileState> {
  const stored = await readProfile(pool);
  if (stored !== undefined) {
    return stored === profile ? { ok: true, profile } : { ok: false, reason: 'profile_mismatch', stored };
  }
  if (!claim) return { ok: false, reason: 'profile_unrecorded' };
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // Serializes claimers without a table lock (which would need more than INSERT on the table).
    await client.query("SELECT pg_advisory_xact_lock(hashtextextended('fgentic:embedding-profile', 0))");
    const again = await readProfile(client);
    if (again === undefined) {
      const any = await client.query('SELECT 1 FROM knowledge.chunks LIMIT 1');
      if (any.rowCount !== 0 && profile !== BGE_M3_PROFILE) {
        await client.query('ROLLBACK');
        return { ok: false, reason: 'profile_mismatch' };
      }
      await client.query(
        'INSERT INTO knowledge.embedding_profile (profile, dimensions) VALUES ($1, 1024) ON CONFLICT (singleton) DO NOTHING',
        [profile],
      );
    }
    const final = again ?? (await readProfile(client)) ?? profile;
    await client.query('COMMIT');
    return final === profile
      ? { ok: true, profile }
      : { ok: false, reason: 'profile_mismatch', stored: final };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
